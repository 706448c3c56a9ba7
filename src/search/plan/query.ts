/**
 * A parsed search as SQL: the WHERE condition of one resource type's search (its order is sort.ts and
 * cursor.ts), and the matches of a conditional interaction. One statement per page; nothing is filtered in memory.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Statement } from "@effect/sql"
import { Clock, Effect } from "effect"
import type { SearchRequest } from "../parse/SearchRequest.ts"
import type { Reach } from "./criteria.ts"
import { filteredCondition } from "./filter.ts"

/** The condition on `r` for the current, undeleted resources the request matches; `driver` and `reach` as in criteriaCondition (criteria.ts). */
export const whereCondition = (sql: SqlClient.SqlClient, request: SearchRequest, now: number, driver?: Statement.Fragment, reach?: Reach): Statement.Fragment =>
  filteredCondition(sql, request.type, [...request.clauses, ...request.links], request.filters, now, [], driver, reach)

/**
 * A row limit written into the statement's text rather than bound: SQLite reads a bound LIMIT while planning,
 * so that every new binding (each execution) prepares the statement again, a third of a search page's time.
 */
export const limitOf = (sql: SqlClient.SqlClient, rows: number): Statement.Fragment => sql.literal(String(Math.max(0, Math.trunc(rows))))

export interface Match {
  readonly rkey: number
  readonly id: string
  readonly version: number
}

/** What a caller may match of the type (`matches`) and of what a chain reaches (`reach`): its restriction. */
export interface MatchRestriction {
  readonly matches: Statement.Fragment | undefined
  readonly reach: Reach | undefined
}

/**
 * At most `limit` current resources the request matches (ids and versions only), in row-key order; with a
 * `restriction`, only those the caller may reach (any other is as if it did not exist).
 */
export const findMatches = (sql: SqlClient.SqlClient, request: SearchRequest, limit: number, restriction?: MatchRestriction) =>
  Effect.flatMap(Clock.currentTimeMillis, (now) =>
    sql<{ readonly rkey: number | string; readonly id: string; readonly version: number | string }>`
      SELECT r.rkey, r.id, r.version FROM resources r WHERE ${
      restriction === undefined
        ? whereCondition(sql, request, now)
        : sql.and([whereCondition(sql, request, now, undefined, restriction.reach), ...(restriction.matches === undefined ? [] : [restriction.matches])])
    } ORDER BY r.rkey LIMIT ${limitOf(sql, limit)}`.pipe(
      Effect.map((rows): ReadonlyArray<Match> => rows.map((row) => ({ rkey: Number(row.rkey), id: row.id, version: Number(row.version) })))
    ))
