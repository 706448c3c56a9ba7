/**
 * `_sort` (https://hl7.org/fhir/R4/search.html#sort) as the values a page is ordered by, read from the index
 * tables of migration 0003 (the page's ORDER BY and its cursors are cursor.ts).
 *
 * A resource can have several values for a parameter: ascending it sorts by its smallest (the earliest
 * start of a date), descending by its largest (the latest end of a date). A resource with no value sorts
 * last in both directions. Text compares byte by byte (`COLLATE "C"` on Postgres, SQLite's BINARY), so both
 * stores give the same order. Text is read whole (the `_full` column where the indexed key is cut, ../indexKey.ts).
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Statement } from "@effect/sql"
import { parameterType, type SortKey } from "../parse/SearchRequest.ts"

type Fragment = Statement.Fragment

/** The parameter types `_sort` cannot order by: a composite has no single value, `near` needs a point. */
export const unsortable = (key: SortKey): boolean => {
  const type = parameterType(key.param)
  return type === "composite" || type === "special"
}

const text = (sql: SqlClient.SqlClient, column: Fragment): Fragment =>
  sql.onDialectOrElse({ pg: () => sql`${column} COLLATE "C"`, orElse: () => column })

/** The columns of the index row a key reads: the smallest of `low` ascending, the largest of `high` descending. */
const columns = (sql: SqlClient.SqlClient, key: SortKey): { readonly table: string; readonly low: Fragment; readonly high: Fragment } | undefined => {
  switch (parameterType(key.param)) {
    case "string": {
      const normalized = text(sql, sql`coalesce(i.normalized_full, i.normalized)`)
      return { table: "search_string", low: normalized, high: normalized }
    }
    case "token": {
      const value = text(sql, sql`coalesce(i.value_full, i.value)`)
      return { table: "search_token", low: value, high: value }
    }
    case "uri": {
      const value = text(sql, sql`coalesce(i.value_full, i.value)`)
      return { table: "search_uri", low: value, high: value }
    }
    case "date":
      return { table: "search_date", low: sql`i.low`, high: sql`i.high` }
    case "number":
      return { table: "search_number", low: sql`i.value`, high: sql`i.value` }
    case "quantity": {
      // In UCUM base units where the unit is known, so that 900 mg sorts before 1 g.
      const value = sql`coalesce(i.canonical_value, i.value)`
      return { table: "search_quantity", low: value, high: value }
    }
    case "reference": {
      const target = text(sql, sql`coalesce(i.target_type || '/' || i.target_id, i.url)`)
      return { table: "search_reference", low: target, high: target }
    }
    default:
      return undefined
  }
}

/** A `_sort` key's value for `r` (the resources table): NULL for a resource without one. */
export interface SortValue {
  readonly value: Fragment
  readonly descending: boolean
  readonly nullable: boolean
  /** Compared byte by byte as text. */
  readonly text: boolean
}

/** The value one key sorts `r` by; `type` undefined in a search across types. */
export const sortValue = (sql: SqlClient.SqlClient, type: string | undefined, key: SortKey): SortValue => {
  const descending = key.direction === "desc"
  if (key.code === "_id") return { value: text(sql, sql`r.id`), descending, nullable: false, text: true }
  if (key.code === "_lastUpdated") return { value: sql`r.commit_ts`, descending, nullable: false, text: false }
  const read = columns(sql, key)
  if (read === undefined) return { value: sql`r.rkey`, descending: false, nullable: false, text: false }
  const value = descending ? sql`max(${read.high})` : sql`min(${read.low})`
  const ofType = type === undefined ? sql`i.type = r.type` : sql`i.type = ${type}`
  const isText = read.table === "search_string" || read.table === "search_token" || read.table === "search_uri" || read.table === "search_reference"
  return { value: sql`(SELECT ${value} FROM ${sql(read.table)} i WHERE i.rkey = r.rkey AND ${ofType} AND i.param = ${key.code})`, descending, nullable: true, text: isText }
}
