/**
 * Rows given as one flat list of values, inserted without @effect/sql's general statement builder, which for a
 * batch of hundreds of rows costs more per value than the rows themselves (the request log and the audit trail
 * write a row per request this way). On SQLite a multi-row INSERT whose text is kept per row count (the same
 * text each time, so the driver prepares it once); on Postgres one array per column (unnest.ts).
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import type { Dialect } from "./Database.ts"
import { insertUnnestedParts, type Then, unnestedRowsPerStatement } from "./unnest.ts"

/** Rows one SQLite statement inserts at most; a larger batch takes several statements. */
const rowsPerStatement = 100

/** The statement text inserting `rows` rows of `columns` into `table`, with the dialect's placeholders. */
const multiRowInsert = (table: string, columns: ReadonlyArray<string>) => {
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

export type FlatValue = string | number | null

/**
 * The inserter of rows of `columns` into `table`: `values` holds the rows one after the other, each with a value
 * per column in the order of `columns`. `then` runs after the rows: on Postgres in the last insert's statement
 * (`Then`), on SQLite as a statement of its own (its placeholders `?`).
 */
export const flatInsert = (table: string, columns: ReadonlyArray<string>) => {
  const width = columns.length
  const textOf = multiRowInsert(table, columns)
  return (sql: SqlClient.SqlClient, dialect: Dialect, values: ReadonlyArray<FlatValue>, then?: Then): Effect.Effect<void, SqlError> => {
    const count = Math.floor(values.length / width)
    const perStatement = dialect === "pg" ? unnestedRowsPerStatement : rowsPerStatement
    const statements: Array<Effect.Effect<unknown, SqlError>> = []
    for (let from = 0; from < count; from += perStatement) {
      const rows = Math.min(count, from + perStatement) - from
      const last = from + perStatement >= count
      statements.push(
        dialect === "pg"
          ? insertUnnestedParts(sql, [{ table, columns, count: rows, valueAt: (row, column) => values[(from + row) * width + column] }], last ? then : undefined)
          : sql.unsafe(textOf(dialect, rows), values.slice(from * width, (from + rows) * width))
      )
    }
    if (then !== undefined && (dialect !== "pg" || count === 0)) {
      statements.push(dialect === "pg" ? insertUnnestedParts(sql, [], then) : sql.unsafe(then.text(() => "?"), then.values))
    }
    return Effect.all(statements, { discard: true })
  }
}
