/**
 * A multi-row INSERT whose text is kept per row count: the same text each time, so the driver prepares it
 * once, and the values go as one flat list rather than through @effect/sql's general statement builder, which
 * for a batch of hundreds of rows costs more per value than the rows themselves (the request log and the audit
 * trail write a row per request this way).
 */
import type { Dialect } from "./Database.ts"

/** Rows one statement inserts at most; a larger batch takes several statements. */
export const rowsPerStatement = 100

/** The statement text inserting `rows` rows of `columns` into `table`, with the dialect's placeholders. */
export const multiRowInsert = (table: string, columns: ReadonlyArray<string>) => {
  const texts = new Map<string, string>()
  return (dialect: Dialect, rows: number): string => {
    const id = `${dialect}:${rows}`
    let text = texts.get(id)
    if (text === undefined) {
      let n = 0
      const tuples = Array.from({ length: rows }, () => `(${columns.map(() => (dialect === "pg" ? `$${++n}` : "?")).join(",")})`)
      text = `INSERT INTO ${table} (${columns.join(", ")}) VALUES ${tuples.join(",")}`
      texts.set(id, text)
    }
    return text
  }
}
