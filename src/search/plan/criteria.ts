/**
 * The criteria of a search as conditions on `r`, the resources table: which criterion drives, and what each
 * one (a clause, a chain, a `_has`) puts on a candidate. query.ts and filter.ts build their conditions on these.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Statement } from "@effect/sql"
import { type Criterion, parameterType } from "../parse/SearchRequest.ts"
import { clauseCondition, narrowsToType, selectivity } from "./conditions.ts"

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
  given?: Statement.Fragment,
  reach?: Reach
): Statement.Fragment => {
  const driver = given === undefined ? pickDriver(criteria) : undefined
  return sql.and([
    ...(given !== undefined ? [given] : driver === undefined ? [sql`r.type = ${type}`] : []),
    sql`NOT r.deleted`,
    ...criteria.map((criterion) => criterionCondition(sql, type, criterion, now, criterion === driver, reach)),
    ...extra
  ])
}

/**
 * What a resource of a type that a chain, `_has` or `_filter` path reaches must meet to count: a caller's
 * restriction (src/auth/access/), so that a search matches only through resources the caller may search.
 */
export type Reach = (type: string) => Statement.Fragment | undefined

/** The conditions `reach` puts on a reached resource of `type`, as a list to spread. */
export const reached = (reach: Reach | undefined, type: string): ReadonlyArray<Statement.Fragment> => {
  const condition = reach?.(type)
  return condition === undefined ? [] : [condition]
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
export const chainTarget = (sql: SqlClient.SqlClient, target: string, inner: Criterion, now: number, reach?: Reach): Statement.Fragment =>
  criteriaCondition(sql, target, [inner], now, [sql`r.type = ${target}`, ...reached(reach, target)], undefined, reach)

/** The condition one criterion puts on `r`, a resource of `type`. */
export const criterionCondition = (
  sql: SqlClient.SqlClient,
  type: string,
  criterion: Criterion,
  now: number,
  drive: boolean,
  reach?: Reach
): Statement.Fragment => {
  if (!("kind" in criterion)) return clauseCondition(sql, type, criterion, parameterType(criterion.param), now, drive)
  if (criterion.kind === "chain") {
    // The references of `type` through the parameter whose target is a current match of the inner criterion.
    const targets = criterion.targets.map(({ type: target, inner }) =>
      sql`(i.target_type = ${target} AND i.target_id IN (SELECT r.id FROM resources r WHERE ${chainTarget(sql, target, inner, now, reach)}))`)
    return sql`r.rkey IN (SELECT i.rkey FROM search_reference i WHERE i.type = ${type} AND i.param = ${criterion.param.code} AND ${sql.or(targets)})`
  }
  // `_has`: the ids of `type` that current matches of the source type refer to through the parameter.
  const source = criterion.sourceType
  return sql`r.id IN (SELECT i.target_id FROM search_reference i WHERE i.type = ${source} AND i.param = ${criterion.param.code}
    AND i.target_type = ${type} AND i.rkey IN (SELECT r.rkey FROM resources r WHERE ${criteriaCondition(sql, source, [criterion.inner], now, reached(reach, source), undefined, reach)}))`
}
