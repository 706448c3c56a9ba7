/**
 * A parsed search as SQL: the WHERE condition and ORDER BY of one resource type's search, and the
 * matches of a conditional interaction. One statement per page; nothing is filtered in memory.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Statement } from "@effect/sql"
import { Effect } from "effect"
import { parameterType, type SearchRequest } from "../parse/SearchRequest.ts"
import { clauseCondition, narrowsToType } from "./conditions.ts"
import { sortKey } from "./sort.ts"

/** The condition on `r` (the resources table) for the current, undeleted resources the request matches. */
export const whereCondition = (sql: SqlClient.SqlClient, request: SearchRequest, now: number = Date.now()): Statement.Fragment =>
  sql.and([
    // An index subquery already keeps to the type; leaving `r.type` out then lets the database start from
    // the subquery's rows instead of every resource of the type.
    ...(request.clauses.some(narrowsToType) ? [] : [sql`r.type = ${request.type}`]),
    sql`NOT r.deleted`,
    ...request.clauses.map((clause) => clauseCondition(sql, request.type, clause, parameterType(clause.param), now))
  ])

/** `_sort` as ORDER BY (see sort.ts), always ending in the row key so that pages are stable. */
export const orderBy = (sql: SqlClient.SqlClient, request: SearchRequest): Statement.Fragment =>
  sql.join(", ", false)([...request.result.sort.map((key) => sortKey(sql, request.type, key)), sql`r.rkey ASC`])

export interface Match {
  readonly rkey: number
  readonly id: string
  readonly version: number
}

/** At most `limit` current resources the request matches (ids and versions only), in row-key order. */
export const findMatches = (sql: SqlClient.SqlClient, request: SearchRequest, limit: number) =>
  sql<{ readonly rkey: number | string; readonly id: string; readonly version: number | string }>`
    SELECT r.rkey, r.id, r.version FROM resources r WHERE ${whereCondition(sql, request)} ORDER BY r.rkey LIMIT ${limit}`.pipe(
    Effect.map((rows): ReadonlyArray<Match> => rows.map((row) => ({ rkey: Number(row.rkey), id: row.id, version: Number(row.version) })))
  )
