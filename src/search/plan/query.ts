/**
 * A parsed search as SQL: the WHERE condition of one resource type's search (its order is sort.ts and
 * cursor.ts), and the matches of a conditional interaction. One statement per page; nothing is filtered in memory.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Statement } from "@effect/sql"
import { Clock, Effect } from "effect"
import { type Criterion, parameterType, type SearchRequest } from "../parse/SearchRequest.ts"
import { clauseCondition, narrowsToType, selectivity } from "./conditions.ts"
import { filteredCondition } from "./filter.ts"

/**
 * The condition on `r` (the resources table) for current resources of `type` that meet every criterion.
 * The most selective clause that keeps to the type drives (its index rows are the list the database starts
 * from, in row-key order); every other clause is checked per candidate. A chain keeps to the type too and
 * drives when no plain clause can. Without either, `r.type` drives. A `driver` given (a compartment, which
 * keeps to the type itself) drives instead, and every criterion is checked per candidate.
 */
export const criteriaCondition = (
  sql: SqlClient.SqlClient,
  type: string,
  criteria: ReadonlyArray<Criterion>,
  now: number,
  extra: ReadonlyArray<Statement.Fragment> = [],
  given?: Statement.Fragment
): Statement.Fragment => {
  const driver = given === undefined ? pickDriver(criteria) : undefined
  return sql.and([
    ...(given !== undefined ? [given] : driver === undefined ? [sql`r.type = ${type}`] : []),
    sql`NOT r.deleted`,
    ...criteria.map((criterion) => criterionCondition(sql, type, criterion, now, criterion === driver)),
    ...extra
  ])
}

/** The criterion that drives a search of `criteria` (see criteriaCondition); undefined when `r.type` drives. */
export const pickDriver = (criteria: ReadonlyArray<Criterion>): Criterion | undefined => {
  let driver: Criterion | undefined
  let best = Number.POSITIVE_INFINITY
  for (const criterion of criteria) {
    const rank = !("kind" in criterion)
      ? narrowsToType(criterion) ? selectivity(criterion, parameterType(criterion.param)) : undefined
      : criterion.kind === "chain" ? chainSelectivity : undefined
    if (rank !== undefined && rank < best) {
      best = rank
      driver = criterion
    }
  }
  return driver
}

/** A chain is read as the row keys of the references to its targets' matches: about as selective as a string. */
const chainSelectivity = 1.5

/** The condition on `r` for a current `target` resource that meets a chain's `inner` criterion. */
export const chainTarget = (sql: SqlClient.SqlClient, target: string, inner: Criterion, now: number): Statement.Fragment =>
  criteriaCondition(sql, target, [inner], now, [sql`r.type = ${target}`])

/** The condition one criterion puts on `r`, a resource of `type`. */
export const criterionCondition = (sql: SqlClient.SqlClient, type: string, criterion: Criterion, now: number, drive: boolean): Statement.Fragment => {
  if (!("kind" in criterion)) return clauseCondition(sql, type, criterion, parameterType(criterion.param), now, drive)
  if (criterion.kind === "chain") {
    // The references of `type` through the parameter whose target is a current match of the inner criterion.
    const targets = criterion.targets.map(({ type: target, inner }) =>
      sql`(i.target_type = ${target} AND i.target_id IN (SELECT r.id FROM resources r WHERE ${chainTarget(sql, target, inner, now)}))`)
    return sql`r.rkey IN (SELECT i.rkey FROM search_reference i WHERE i.type = ${type} AND i.param = ${criterion.param.code} AND ${sql.or(targets)})`
  }
  // `_has`: the ids of `type` that current matches of the source type refer to through the parameter.
  const source = criterion.sourceType
  return sql`r.id IN (SELECT i.target_id FROM search_reference i WHERE i.type = ${source} AND i.param = ${criterion.param.code}
    AND i.target_type = ${type} AND i.rkey IN (SELECT r.rkey FROM resources r WHERE ${criteriaCondition(sql, source, [criterion.inner], now)}))`
}

/** The condition on `r` for the current, undeleted resources the request matches; `driver` as in criteriaCondition. */
export const whereCondition = (sql: SqlClient.SqlClient, request: SearchRequest, now: number, driver?: Statement.Fragment): Statement.Fragment =>
  filteredCondition(sql, request.type, [...request.clauses, ...request.links], request.filters, now, [], driver)

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

/** At most `limit` current resources the request matches (ids and versions only), in row-key order. */
export const findMatches = (sql: SqlClient.SqlClient, request: SearchRequest, limit: number) =>
  Effect.flatMap(Clock.currentTimeMillis, (now) =>
    sql<{ readonly rkey: number | string; readonly id: string; readonly version: number | string }>`
      SELECT r.rkey, r.id, r.version FROM resources r WHERE ${whereCondition(sql, request, now)} ORDER BY r.rkey LIMIT ${limitOf(sql, limit)}`.pipe(
      Effect.map((rows): ReadonlyArray<Match> => rows.map((row) => ({ rkey: Number(row.rkey), id: row.id, version: Number(row.version) })))
    ))
