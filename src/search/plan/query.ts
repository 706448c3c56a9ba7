/**
 * A parsed search as SQL: the WHERE condition and ORDER BY of one resource type's search, and the
 * matches of a conditional interaction. One statement per page; nothing is filtered in memory.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Statement } from "@effect/sql"
import { Clock, Effect } from "effect"
import { type Clause, parameterType, type SearchRequest } from "../parse/SearchRequest.ts"
import { clauseCondition, narrowsToType, selectivity } from "./conditions.ts"
import { sortKey } from "./sort.ts"

/**
 * The condition on `r` (the resources table) for the current, undeleted resources the request matches.
 * The most selective clause that keeps to the type drives (its index rows are the list the database starts
 * from, in row-key order); every other clause is checked per candidate. Without one, `r.type` drives.
 */
export const whereCondition = (sql: SqlClient.SqlClient, request: SearchRequest, now: number): Statement.Fragment => {
  let driver: Clause | undefined
  let best = Number.POSITIVE_INFINITY
  for (const clause of request.clauses) {
    if (!narrowsToType(clause)) continue
    const rank = selectivity(clause, parameterType(clause.param))
    if (rank < best) {
      best = rank
      driver = clause
    }
  }
  return sql.and([
    ...(driver === undefined ? [sql`r.type = ${request.type}`] : []),
    sql`NOT r.deleted`,
    ...request.clauses.map((clause) => clauseCondition(sql, request.type, clause, parameterType(clause.param), now, clause === driver))
  ])
}

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
  Effect.flatMap(Clock.currentTimeMillis, (now) =>
    sql<{ readonly rkey: number | string; readonly id: string; readonly version: number | string }>`
      SELECT r.rkey, r.id, r.version FROM resources r WHERE ${whereCondition(sql, request, now)} ORDER BY r.rkey LIMIT ${limit}`.pipe(
      Effect.map((rows): ReadonlyArray<Match> => rows.map((row) => ({ rkey: Number(row.rkey), id: row.id, version: Number(row.version) })))
    ))
