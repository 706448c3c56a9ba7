/**
 * Many rows into one Postgres table in one statement of one short text: each column's values as one array,
 * unnested into rows by the statement (`INSERT ... SELECT * FROM unnest($1::bigint[], $2::text[], ...)`). Its
 * text is the same for every batch of a table and it binds one value per column, where a multi-row VALUES list
 * of thousands of rows cost Postgres more to parse and bind than to insert, and Node more to build (a parameter
 * per value) than the values themselves (docs/performance.md). The arrays go in Postgres's binary form where the
 * column's type allows, as array text otherwise. The Writer's batched rows (WriteBatch.ts), the
 * request log and the audit trail (multiRowInsert.ts) go this way on Postgres.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import { withoutNul } from "./text.ts"

/** Whether `sql` speaks to Postgres. */
export const isPostgres = (sql: SqlClient.SqlClient): boolean => sql.onDialectOrElse({ pg: () => true, orElse: () => false })

/** Rows one statement inserts at most: a few megabytes of values. */
export const unnestedRowsPerStatement = 8192

/** The column types of a table (`format_type`), read once per client and table: what the arrays are cast to. */
const pgColumnTypes = new WeakMap<SqlClient.SqlClient, Map<string, ReadonlyMap<string, string>>>()

const columnTypesOf = (sql: SqlClient.SqlClient, table: string): Effect.Effect<ReadonlyMap<string, string>, SqlError> => {
  let tables = pgColumnTypes.get(sql)
  if (tables === undefined) {
    tables = new Map()
    pgColumnTypes.set(sql, tables)
  }
  const known = tables.get(table)
  if (known !== undefined) return Effect.succeed(known)
  return Effect.map(
    sql<{ readonly name: string; readonly type: string }>`
      SELECT attname AS name, format_type(atttypid, atttypmod) AS type
      FROM pg_attribute WHERE attrelid = ${table}::regclass AND attnum > 0 AND NOT attisdropped`,
    (rows) => {
      const types = new Map(rows.map((row) => [row.name, row.type]))
      tables.set(table, types)
      return types
    }
  )
}

const quoted = /[\\"]/
const toQuote = /[\\"]/g
/** A backslash that JSON wrote before anything but a quote or a backslash: an escape an array element reads otherwise. */
const otherEscape = /\\[^"\\]/

/**
 * A text holding quotes or backslashes as an array element: quoted, with a backslash before each. That is how
 * JSON quotes it too, unless it holds control characters or lone surrogates (which JSON writes as `\n`,
 * `\ud800`, where an array element wants them as they are): JSON's text is taken when it has no other escape,
 * in native code some two to three times faster than a replacement (the audit trail's rows are JSON texts,
 * every one with quotes).
 */
const escaped = (value: string): string => {
  const json = JSON.stringify(value)
  return otherEscape.test(json) ? `"${value.replace(toQuote, "\\$&")}"` : json
}

/**
 * The values `valueAt(0)` to `valueAt(count - 1)` as Postgres's array text (`{1,"a b",NULL}`), made in one pass:
 * what the driver would make of a JavaScript array, for less (it escapes every element with two replacements,
 * where most need none). Values other than strings, numbers and booleans (none of svc's batched rows has any) go
 * to the driver as an array.
 */
const arrayLiteral = (count: number, valueAt: (row: number) => unknown): string | ReadonlyArray<unknown> => {
  let text = "{"
  for (let i = 0; i < count; i++) {
    const value = valueAt(i)
    if (i > 0) text += ","
    if (value === null || value === undefined) text += "NULL"
    else if (typeof value === "string") {
      const kept = value.includes("\u0000") ? withoutNul(value) : value
      text += quoted.test(kept) ? escaped(kept) : `"${kept}"`
    }
    else if (typeof value === "number" || typeof value === "boolean") text += String(value)
    else return Array.from({ length: count }, (_, row) => valueAt(row) ?? null)
  }
  return text + "}"
}

/**
 * The element types (their oids) of the arrays sent in Postgres's binary form (`array_recv`), by the column's
 * type as `format_type` names it; a column of another type goes as array text.
 */
const elementOids: Readonly<Record<string, number>> = { bigint: 20, integer: 23, text: 25, "double precision": 701, boolean: 16 }

const twoTo32 = 2 ** 32

/** What `Buffer.prototype.write` calls for UTF-8 once it has read its arguments: the bytes written. */
type Utf8Writer = Buffer & { utf8Write(text: string, offset: number, length: number): number }

/**
 * The bytes of one statement's arrays, one after another in one buffer, grown as it fills: the arrays already
 * written stay views of the buffer they were written in, so that growing copies only the array being written.
 * Its first size is what the last statement took (most of a Writer's statements are alike), within bounds.
 */
class Bytes {
  private static hint = 64 * 1024
  buffer: Utf8Writer
  /** Where the array being written starts, and where the next byte goes. */
  start = 0
  at = 0
  /** The bytes of the arrays taken so far. */
  private taken = 0
  constructor() {
    this.buffer = Buffer.allocUnsafe(Bytes.hint) as Utf8Writer
  }
  room(bytes: number): Utf8Writer {
    if (this.at + bytes > this.buffer.length) {
      const used = this.at - this.start
      const bigger = Buffer.allocUnsafe(Math.max(this.buffer.length * 2, used + bytes)) as Utf8Writer
      this.buffer.copy(bigger, 0, this.start, this.at)
      this.buffer = bigger
      this.start = 0
      this.at = used
    }
    return this.buffer
  }
  int32(value: number): void {
    const buffer = this.room(4)
    const at = this.at
    buffer[at] = value >>> 24
    buffer[at + 1] = value >>> 16
    buffer[at + 2] = value >>> 8
    buffer[at + 3] = value
    this.at = at + 4
  }
  /** The array written since `start`, and the next one to start after it. */
  take(): Buffer {
    const array = this.buffer.subarray(this.start, this.at)
    this.taken += array.length
    this.start = this.at
    return array
  }
  /** Drops the array being written. */
  drop(): void {
    this.at = this.start
  }
  /** Remembers how much this statement took, for the next one's first size. */
  done(): void {
    Bytes.hint = Math.min(8 * 1024 * 1024, Math.max(64 * 1024, this.taken))
  }
}

/**
 * The values `valueAt(0)` to `valueAt(count - 1)` as a one-dimensional Postgres array in binary form (what
 * `array_recv` reads: dimensions, a flag for nulls, the element type, then each element's length and bytes), or
 * undefined where a value does not fit the element type (it then goes as array text, and Postgres says what
 * is wrong with it). The driver sends a buffer as it is, in binary: nothing is escaped or quoted, text is
 * written once as UTF-8 (where array text was built, escaped, measured and then encoded), and Postgres reads
 * numbers without parsing them.
 */
const binaryArray = (bytes: Bytes, count: number, oid: number, valueAt: (row: number) => unknown): Buffer | undefined => {
  bytes.int32(1)
  bytes.int32(0)
  bytes.int32(oid)
  bytes.int32(count)
  bytes.int32(1)
  let nulls = false
  for (let i = 0; i < count; i++) {
    let value = valueAt(i)
    if (value === null || value === undefined) {
      bytes.int32(-1)
      nulls = true
      continue
    }
    switch (oid) {
      case 25: {
        let text = typeof value === "string" ? value : typeof value === "number" || typeof value === "boolean" ? String(value) : undefined
        if (text === undefined) return drop(bytes)
        if (text.includes("\u0000")) text = withoutNul(text)
        const most = text.length * 3
        const buffer = bytes.room(4 + most)
        const at = bytes.at
        const written = most === 0 ? 0 : buffer.utf8Write(text, at + 4, most)
        bytes.int32(written)
        bytes.at = at + 4 + written
        break
      }
      case 20: {
        if (typeof value === "string" && /^-?[0-9]{1,15}$/.test(value)) value = Number(value)
        if (typeof value !== "number" || !Number.isSafeInteger(value)) return drop(bytes)
        const high = Math.floor(value / twoTo32)
        bytes.int32(8)
        bytes.int32(high)
        bytes.int32(value - high * twoTo32)
        break
      }
      case 23: {
        if (typeof value !== "number" || !Number.isInteger(value) || value < -(2 ** 31) || value >= 2 ** 31) return drop(bytes)
        bytes.int32(4)
        bytes.int32(value)
        break
      }
      case 701: {
        if (typeof value !== "number") return drop(bytes)
        bytes.int32(8)
        bytes.room(8).writeDoubleBE(value, bytes.at)
        bytes.at += 8
        break
      }
      case 16: {
        if (typeof value !== "boolean") return drop(bytes)
        bytes.int32(1)
        bytes.room(1)[bytes.at++] = value ? 1 : 0
        break
      }
      default:
        return drop(bytes)
    }
  }
  // The flags' place moves with the array when the buffer grew: it is 4 bytes after the array's start.
  if (nulls) bytes.buffer.writeInt32BE(1, bytes.start + 4)
  return bytes.take()
}

const drop = (bytes: Bytes): undefined => {
  bytes.drop()
  return undefined
}

/** A column's values as a statement parameter: binary where the element type allows (`binaryArray`), else array text. */
const arrayParameter = (bytes: Bytes, count: number, type: string, valueAt: (row: number) => unknown): Buffer | string | ReadonlyArray<unknown> => {
  const oid = elementOids[type]
  return (oid === undefined ? undefined : binaryArray(bytes, count, oid, valueAt)) ?? arrayLiteral(count, valueAt)
}

/**
 * A statement that ends the inserts' statement (`insertUnnestedParts`), after them: its text given the number of
 * its first parameter, and its values. What must follow the rows in the same transaction goes with them in one
 * round trip (the audit chain's head after its rows).
 */
export interface Then {
  /** Its text, `parameter(k)` giving the placeholder of its `k`th value (from 0) in the dialect's form. */
  readonly text: (parameter: (k: number) => string) => string
  readonly values: ReadonlyArray<string | number>
}

/** Rows of one table, one part of a statement (`insertUnnestedParts`). */
export interface TableRows {
  readonly table: string
  readonly columns: ReadonlyArray<string>
  readonly count: number
  /** The value of `columns[column]` in row `row`. */
  readonly valueAt: (row: number, column: number) => unknown
}

/**
 * Inserts the rows of `parts` (tables, or pieces of tables) on Postgres in one statement, each part's insert
 * but the last in a `WITH` of its own: a Writer's commit sends its rows of every table in one round trip rather
 * than one per table (a create touches five tables or more, a Synthea Bundle ten). The inserts of one statement
 * happen in no set order, which no table here minds (no row refers to another by a foreign key; each unique key
 * is one table's own). Each part's rows stay in their order.
 */
export const insertUnnestedParts = (sql: SqlClient.SqlClient, parts: ReadonlyArray<TableRows>, then?: Then): Effect.Effect<void, SqlError> => {
  if (parts.length === 0 && then === undefined) return Effect.void
  return Effect.flatMap(Effect.forEach(parts, (part) => columnTypesOf(sql, part.table)), (types) => {
    const values: Array<unknown> = []
    const bytes = new Bytes()
    const inserts = parts.map((part, p) => {
      const casts = part.columns.map((column, c) => {
        const type = types[p]!.get(column) ?? "text"
        values.push(arrayParameter(bytes, part.count, type, (row) => part.valueAt(row, c)))
        return `$${values.length}::${type}[]`
      })
      return `INSERT INTO ${part.table} (${part.columns.map((column) => `"${column}"`).join(", ")}) SELECT * FROM unnest(${casts.join(", ")})`
    })
    let last: string
    if (then === undefined) {
      last = inserts.pop()!
    } else {
      const first = values.length + 1
      last = then.text((k) => `$${first + k}`)
      values.push(...then.values)
    }
    bytes.done()
    const text = inserts.length === 0 ? last : `WITH ${inserts.map((insert, n) => `i${n} AS (${insert})`).join(", ")} ${last}`
    return Effect.asVoid(sql.unsafe(text, values))
  })
}
