/**
 * `_sort` (https://hl7.org/fhir/R4/search.html#sort) as ORDER BY keys over the index tables of migration 0003.
 *
 * A resource can have several values for a parameter: ascending it sorts by its smallest (the earliest
 * start of a date), descending by its largest (the latest end of a date). A resource with no value sorts
 * last in both directions. Text compares byte by byte (`COLLATE "C"` on Postgres, SQLite's BINARY), so both
 * stores give the same order.
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
      const normalized = text(sql, sql`i.normalized`)
      return { table: "search_string", low: normalized, high: normalized }
    }
    case "token": {
      const value = text(sql, sql`i.value`)
      return { table: "search_token", low: value, high: value }
    }
    case "uri": {
      const value = text(sql, sql`i.value`)
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

/** One ORDER BY key on `r` (the resources table), missing values last; `type` undefined in a search across types. */
export const sortKey = (sql: SqlClient.SqlClient, type: string | undefined, key: SortKey): Fragment => {
  const direction = key.direction === "desc" ? sql`DESC` : sql`ASC`
  if (key.code === "_id") return sql`${text(sql, sql`r.id`)} ${direction}`
  if (key.code === "_lastUpdated") return sql`r.commit_ts ${direction}`
  const read = columns(sql, key)
  if (read === undefined) return sql`r.rkey ASC`
  const value = key.direction === "desc" ? sql`max(${read.high})` : sql`min(${read.low})`
  const ofType = type === undefined ? sql`i.type = r.type` : sql`i.type = ${type}`
  return sql`(SELECT ${value} FROM ${sql(read.table)} i WHERE i.rkey = r.rkey AND ${ofType} AND i.param = ${key.code}) ${direction} NULLS LAST`
}
