/**
 * Keyset cursors for paging (https://hl7.org/fhir/R4/http.html#paging leaves the form of page links to the
 * server): a `next` or `previous` link names the row the page ends or starts at by the values of its order
 * keys (a search's `_sort` values and row key, a history's commit time, row key and version), so the page
 * after it is read from there by an index range, whatever its depth, instead of counting rows from the
 * first as `_offset` does. docs/search.md, "Paging", gives the decisions.
 *
 * A cursor is `<payload>.<check>`, both base64url: the payload is `[direction, ...values]` as JSON, the
 * check a SHA-256 digest of the payload and of the request it belongs to (its path and the parameters that
 * choose and order the rows). A cursor that does not decode, does not fit its order keys, or was made for
 * another request is refused. It gives access to nothing a client could not ask for in its own query, so
 * the check is a digest rather than a keyed signature: it catches edited and mixed-up cursors.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Statement } from "@effect/sql"
import { createHash } from "node:crypto"

type Fragment = Statement.Fragment

export type CursorValue = string | number | null

export interface Cursor {
  /** `after`: the rows that follow the named one in the page order (a `next` link); `before`: those that precede it. */
  readonly direction: "after" | "before"
  readonly values: ReadonlyArray<CursorValue>
}

/** One key of a page's order: a column of the page's rows, compared as text byte by byte when `text`. */
export interface OrderKey {
  readonly column: Fragment
  readonly descending: boolean
  /** Whether it can be NULL (a `_sort` value a resource lacks): NULLs sort last in the page order. */
  readonly nullable: boolean
  readonly text: boolean
}

/** The longest cursor read: the values of a few `_sort` keys, far below any URL limit. */
const maxCursorLength = 4096
const base64url = /^[A-Za-z0-9_-]+$/

const digest = (payload: string, belongsTo: string): string =>
  createHash("sha256").update(belongsTo).update("\n").update(payload).digest("base64url").slice(0, 22)

/** The cursor as URL-safe text, checked against `belongsTo` (the request it is made for). */
export const encodeCursor = (cursor: Cursor, belongsTo: string): string => {
  const payload = Buffer.from(JSON.stringify([cursor.direction === "after" ? 1 : 0, ...cursor.values]), "utf8").toString("base64url")
  return `${payload}.${digest(payload, belongsTo)}`
}

/** The cursor `text` names, with `size` values, or why it cannot be used. */
export const decodeCursor = (text: string, belongsTo: string, size: number): Cursor | string => {
  const dot = text.indexOf(".")
  const payload = text.slice(0, dot)
  if (text.length > maxCursorLength || dot < 1 || !base64url.test(payload) || !base64url.test(text.slice(dot + 1))) {
    return "it is not a cursor this server made"
  }
  if (digest(payload, belongsTo) !== text.slice(dot + 1)) {
    return "it was changed, or made for another search: follow the links of the search's own pages"
  }
  let read: unknown
  try {
    read = JSON.parse(Buffer.from(payload, "base64url").toString("utf8"))
  } catch {
    return "it is not a cursor this server made"
  }
  if (!Array.isArray(read) || read.length !== size + 1 || (read[0] !== 0 && read[0] !== 1)) return "it does not fit this search's order"
  const values = read.slice(1)
  const fits = values.every((value) => value === null || typeof value === "string" || (typeof value === "number" && Number.isFinite(value)))
  return fits ? { direction: read[0] === 1 ? "after" : "before", values: values as Array<CursorValue> } : "it does not fit this search's order"
}

/** A value read from the database as a cursor value (Postgres gives 64-bit integers and numerics as text). */
export const cursorValue = (value: unknown): CursorValue =>
  value === null || value === undefined ? null : typeof value === "number" || typeof value === "string" ? value : String(value)

const collated = (sql: SqlClient.SqlClient, key: OrderKey): Fragment =>
  key.text ? sql.onDialectOrElse({ pg: () => sql`${key.column} COLLATE "C"`, orElse: () => key.column }) : key.column

/** The keys read backwards (a `previous` page is read from its end): each direction turned, NULLs first. */
const turned = (keys: ReadonlyArray<OrderKey>, backwards: boolean) => keys.map((key) => ({ key, descending: key.descending !== backwards, nullsLast: !backwards }))

/** ORDER BY `keys`, read forwards or backwards. */
export const orderByKeys = (sql: SqlClient.SqlClient, keys: ReadonlyArray<OrderKey>, backwards = false): Fragment =>
  sql.join(", ", false)(turned(keys, backwards).map(({ key, descending, nullsLast }) => {
    const direction = descending ? sql`DESC` : sql`ASC`
    return key.nullable ? sql`${collated(sql, key)} ${direction} ${nullsLast ? sql`NULLS LAST` : sql`NULLS FIRST`}` : sql`${collated(sql, key)} ${direction}`
  }))

/**
 * The rows past the cursor in the order of `keys` (read backwards for a `before` cursor): those that follow
 * it on some key and equal it on every key before that one. The first key also gets a plain range, which
 * an index on it can seek to.
 */
export const pastCursor = (sql: SqlClient.SqlClient, keys: ReadonlyArray<OrderKey>, cursor: Cursor): Fragment => {
  const order = turned(keys, cursor.direction === "before")
  const equal = (key: OrderKey, value: CursorValue) => value === null ? sql`${key.column} IS NULL` : sql`${collated(sql, key)} = ${value}`
  const follows = (key: OrderKey, descending: boolean, nullsLast: boolean, value: CursorValue): Fragment | undefined => {
    if (value === null) return nullsLast || !key.nullable ? undefined : sql`${key.column} IS NOT NULL`
    const beyond = descending ? sql`${collated(sql, key)} < ${value}` : sql`${collated(sql, key)} > ${value}`
    return key.nullable && nullsLast ? sql`(${beyond} OR ${key.column} IS NULL)` : beyond
  }
  const alternatives: Array<Fragment> = []
  order.forEach(({ key, descending, nullsLast }, i) => {
    const step = follows(key, descending, nullsLast, cursor.values[i] ?? null)
    if (step !== undefined) alternatives.push(sql.and([...order.slice(0, i).map((earlier, j) => equal(earlier.key, cursor.values[j] ?? null)), step]))
  })
  if (alternatives.length === 0) return sql`1 = 0`
  const [first] = order
  const firstValue = cursor.values[0] ?? null
  const seek = first !== undefined && !first.key.nullable && firstValue !== null
    ? [first.descending ? sql`${collated(sql, first.key)} <= ${firstValue}` : sql`${collated(sql, first.key)} >= ${firstValue}`]
    : []
  return sql.and([...seek, sql.or(alternatives)])
}
