/**
 * `_filter` expressions (https://hl7.org/fhir/R4/search_filter.html) as conditions on `r`, the resources
 * table. A comparison read as a criterion is planned as plain search plans it; `and`, `or` and `not` combine
 * them; the comparisons plain search has no words for (`compare`) and filtered chains are planned here.
 * docs/search.md ("_filter") gives the semantics.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Statement } from "@effect/sql"
import { normalize } from "../extract/values.ts"
import { indexKey, isLong } from "../indexKey.ts"
import type { Criterion, FilterCompare, FilterExpr } from "../parse/SearchRequest.ts"
import { escapeLike } from "./conditions.ts"
import { criteriaCondition, criterionCondition, type Reach, reached } from "./criteria.ts"

type Fragment = Statement.Fragment

/** The conjuncts of an expression: `a and (b and c)` is a, b, c. */
const conjuncts = (expr: FilterExpr): ReadonlyArray<FilterExpr> => (expr.kind === "and" ? expr.operands.flatMap(conjuncts) : [expr])

/**
 * The condition on `r` for current resources of `type` meeting every criterion and every filter. A filter's
 * top-level conjuncts that are plain criteria join the criteria, so that one of them can drive the search.
 */
export const filteredCondition = (
  sql: SqlClient.SqlClient,
  type: string,
  criteria: ReadonlyArray<Criterion>,
  filters: ReadonlyArray<FilterExpr>,
  now: number,
  extra: ReadonlyArray<Fragment> = [],
  /** A condition that drives instead of the most selective criterion (see criteriaCondition). */
  driver?: Fragment,
  /** What a resource a chain, `_has` or path reaches must meet (see criteria.ts). */
  reach?: Reach
): Fragment => {
  const parts = filters.flatMap(conjuncts)
  const tests = parts.flatMap((part) => (part.kind === "test" ? [part.criterion] : []))
  const others = parts.filter((part) => part.kind !== "test").map((part) => filterCondition(sql, type, part, now, reach))
  return criteriaCondition(sql, type, [...criteria, ...tests], now, [...extra, ...others], driver, reach)
}

/** The condition one expression puts on `r`, a resource of `type`. */
export const filterCondition = (sql: SqlClient.SqlClient, type: string, expr: FilterExpr, now: number, reach?: Reach): Fragment => {
  switch (expr.kind) {
    case "and":
      return sql.and(expr.operands.map((operand) => filterCondition(sql, type, operand, now, reach)))
    case "or":
      return sql.or(expr.operands.map((operand) => filterCondition(sql, type, operand, now, reach)))
    case "not":
      // Unknown (a NULL from `x IN (... NULL ...)`) counts as false before it is negated: a resource without
      // a value for the parameter meets `not(x eq 1)`.
      return sql`NOT COALESCE(${filterCondition(sql, type, expr.operand, now, reach)}, FALSE)`
    case "test":
      return criterionCondition(sql, type, expr.criterion, now, false, reach)
    case "compare":
      return compareCondition(sql, type, expr)
    case "chain": {
      // The references of `type` through the parameter whose target is a current resource meeting its expression.
      const targets = expr.targets.map(({ type: target, inner }) =>
        sql`(i.target_type = ${target} AND i.target_id IN (SELECT r.id FROM resources r WHERE ${
          filteredCondition(sql, target, [], [inner], now, [sql`r.type = ${target}`, ...reached(reach, target)], undefined, reach)
        }))`)
      return sql`r.rkey IN (SELECT i.rkey FROM search_reference i WHERE i.type = ${type} AND i.param = ${expr.param.code} AND ${sql.or(targets)})`
    }
  }
}

/** Text compared code point by code point on both stores (SQLite's BINARY; Postgres told `COLLATE "C"`). */
const binary = (sql: SqlClient.SqlClient, column: Fragment): Fragment =>
  sql.onDialectOrElse({ pg: () => sql`${column} COLLATE "C"`, orElse: () => column })

/**
 * A `compare` as `r.rkey IN (index rows of the type and parameter that meet it)`. Strings compare their
 * normalised form (case, accents and repeated whitespace aside), as plain search does.
 */
const compareCondition = (sql: SqlClient.SqlClient, type: string, expr: FilterCompare): Fragment => {
  const { value, operator } = expr
  if (value.kind === "date" && expr.code === "_lastUpdated") {
    // The commit time in µs: a point, [commit_ts, commit_ts + 1).
    const low = value.low * 1000
    const high = value.high * 1000
    return operator === "co" ? sql`(r.commit_ts <= ${low} AND r.commit_ts + 1 >= ${high})` : sql`(r.commit_ts < ${high} AND r.commit_ts + 1 > ${low})`
  }
  const rows = (table: string, condition: Fragment) =>
    sql`r.rkey IN (SELECT rkey FROM ${sql(table)} WHERE type = ${type} AND param = ${expr.code} AND ${condition})`
  switch (value.kind) {
    case "string": {
      const normalized = normalize(value.value)
      // The indexed column holds a bounded key (../indexKey.ts). A key orders against a value no longer than a
      // key as its whole text does, so such a comparison keeps to the index; a longer value reads the whole.
      const whole = sql`coalesce(normalized_full, normalized)`
      const column = binary(sql, isLong(normalized) ? whole : sql`normalized`)
      switch (operator) {
        case "ew":
          return rows("search_string", sql`${whole} LIKE ${`%${escapeLike(normalized)}`} ESCAPE '\\'`)
        case "gt":
          return rows("search_string", sql`${column} > ${normalized}`)
        case "lt":
          return rows("search_string", sql`${column} < ${normalized}`)
        case "ge":
          return rows("search_string", sql`${column} >= ${normalized}`)
        case "le":
          return rows("search_string", sql`${column} <= ${normalized}`)
        default:
          return rows("search_string", isLong(normalized)
            ? sql`(normalized = ${indexKey(normalized)} AND normalized_full = ${normalized})`
            : sql`normalized = ${normalized}`)
      }
    }
    case "number":
      // `co`: the value's implicit range (its significant figures) holds the number given.
      return rows("search_number", sql`(low <= ${value.value} AND high > ${value.value})`)
    case "date":
      // `co`: the resource's range holds the one given; `po`: the two overlap.
      return operator === "co"
        ? rows("search_date", sql`(low <= ${value.low} AND high >= ${value.high})`)
        : rows("search_date", sql`(low < ${value.high} AND high > ${value.low})`)
  }
}
