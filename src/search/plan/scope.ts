/**
 * A search over one type or several (parse/parseScope.ts) as the WHERE condition and ORDER BY of one
 * statement on `r` (the resources table). One type is planned as `whereCondition` plans it. Several
 * types whose criteria are all common parameters (which read alike on every type) share one condition
 * with the types as an `IN` list; otherwise each type's condition is ORed. A `condition` on `r` (a
 * compartment, a token's restriction) is ANDed with the whole and drives: it is the list the database
 * starts from, every criterion being checked per candidate (SQLite, which has no statistics here, would
 * otherwise start from every resource of the type).
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Statement } from "@effect/sql"
import type { ScopedSearch } from "../parse/parseScope.ts"
import { type Clause, isCommonCode, parameterType, type SearchRequest } from "../parse/SearchRequest.ts"
import { clauseCondition, orderedLookup } from "./conditions.ts"
import { chainTarget, pickDriver, type Reach } from "./criteria.ts"
import { limitOf, whereCondition } from "./query.ts"
import { type SortValue, sortValue } from "./sort.ts"

type Fragment = Statement.Fragment

/** Whether the request's criteria are all plain clauses on common parameters. */
const commonOnly = (request: SearchRequest): boolean =>
  request.links.length === 0 && request.filters.length === 0 && request.clauses.every((clause) => clause.code === "_id" || isCommonCode(clause.code))

/** `_list` on any type: the resource is an item of one of the Lists named. */
const listCondition = (sql: SqlClient.SqlClient, clause: Clause): Fragment => {
  const lists = clause.values.flatMap((value) => (value.kind === "string" ? [value.value] : []))
  const condition = sql`EXISTS (SELECT 1 FROM search_reference i JOIN resources l ON l.rkey = i.rkey
    WHERE i.type = 'List' AND i.param = 'item' AND i.target_type = r.type AND i.target_id = r.id
    AND l.type = 'List' AND NOT l.deleted AND ${sql.in("l.id", lists)})`
  return clause.exclude ? sql`NOT ${condition}` : condition
}

/** A common parameter's clause without naming a type: checked per candidate. */
const anyTypeCondition = (sql: SqlClient.SqlClient, clause: Clause, now: number): Fragment =>
  clause.code === "_list" ? listCondition(sql, clause) : clauseCondition(sql, "", clause, parameterType(clause.param), now, false)

export const scopeCondition = (sql: SqlClient.SqlClient, search: ScopedSearch, now: number, condition?: Fragment, reach?: Reach): Fragment => {
  const { types, requests } = search
  const [first] = requests
  if (first === undefined) return sql`1 = 0`
  if (types?.length === 1) return whereCondition(sql, first, now, condition, reach)
  if (types === undefined || requests.every(commonOnly)) {
    return sql.and([
      ...(condition === undefined ? [] : [condition]),
      ...(types === undefined ? [] : [sql.in("r.type", types)]),
      sql`NOT r.deleted`,
      ...first.clauses.map((clause) => anyTypeCondition(sql, clause, now))
    ])
  }
  if (condition === undefined) return sql.or(requests.map((request) => sql.and([sql`r.type = ${request.type}`, whereCondition(sql, request, now, undefined, reach)])))
  return sql.and([condition, sql.or(requests.map((request) => whereCondition(sql, request, now, sql`r.type = ${request.type}`, reach)))])
}

/** The values `_sort` orders the search by, key by key (the row key, which ends every order, aside). */
export const scopeSortValues = (sql: SqlClient.SqlClient, search: ScopedSearch): ReadonlyArray<SortValue> => {
  const [first] = search.requests
  const type = search.types?.length === 1 && first !== undefined ? first.type : undefined
  return search.result.sort.map((key) => sortValue(sql, type, key))
}

/** The one request of a one-type search without a given condition, `_sort` or `_filter`: what a page read in row-key order from its driver needs. */
const plainOneType = (search: ScopedSearch, condition: Fragment | undefined): SearchRequest | undefined => {
  const [request, ...others] = search.requests
  if (request === undefined || others.length > 0 || search.types?.length !== 1 || condition !== undefined) return undefined
  return request.result.sort.length > 0 || request.filters.length > 0 ? undefined : request
}

/**
 * A page of one type's search read by walking the driving clause's index rows in row-key order (see
 * `orderedLookup`), stopping at the page's end: `FROM (rows) d JOIN resources r ... GROUP BY d.rkey ORDER BY
 * d.rkey`, every other criterion checked per candidate. SQLite reads `r.rkey IN (subquery)` by collecting every
 * match into a temporary index first, which costs as much as the matches are many; Postgres merged the matches
 * with a walk over every resource in key order (the catalog's thousands first). Undefined (plan the page with
 * `scopeCondition`) for several types, a given condition, `_sort`, `_filter`, or a driver whose rows do not
 * come in row-key order.
 */
export const orderedPage = (
  sql: SqlClient.SqlClient,
  search: ScopedSearch,
  now: number,
  condition?: Fragment,
  reach?: Reach
): { readonly rows: Fragment; readonly where: Fragment } | undefined => {
  const request = plainOneType(search, condition)
  if (request === undefined) return undefined
  const driver = pickDriver([...request.clauses, ...request.links])
  if (driver === undefined || "kind" in driver) return undefined
  const rows = orderedLookup(sql, request.type, driver, parameterType(driver.param))
  if (rows === undefined) return undefined
  const rest = { ...request, clauses: request.clauses.filter((clause) => clause !== driver) }
  return { rows, where: whereCondition(sql, rest, now, sql`r.type = ${request.type}`, reach) }
}

/** A string from the catalog (a type, a parameter's code) as an SQL literal. */
const quoted = (sql: SqlClient.SqlClient, value: string): Fragment => sql.literal(`'${value.replaceAll("'", "''")}'`)

/** The most targets a chain's page is read for as ordered ranges (`chainedPage`); with more, the `IN` form. */
export const maxChainTargets = 32

/**
 * A page of one type's search driven by a chain (`patient.name=...`) with one target type, in two steps: the
 * ids of the targets (at most `maxChainTargets` + 1: with more, the caller plans the page with
 * `scopeCondition`), then the page read from one range of the reference index per target, each in row-key
 * order, merged by SQLite as a compound `UNION ... ORDER BY rkey` (which also drops a resource found twice)
 * and stopped at the page's end; on Postgres, each target's first rows up to the page's end, grouped. Read as
 * `r.rkey IN (...)`, the chain collects every reference to every target before the first row, which costs as
 * much as the targets have referrers. Undefined for several types, a given condition, `_sort`, `_filter`, and
 * when the driver is not such a chain.
 */
export const chainedPage = (
  sql: SqlClient.SqlClient,
  search: ScopedSearch,
  now: number,
  condition?: Fragment,
  reach?: Reach
): {
  readonly targets: Fragment
  /** The rows for the targets `ids`, those `after` allows (a cursor's condition on a row key column), in row-key order or `backwards`. */
  readonly rows: (ids: ReadonlyArray<string>, after: ((rkey: Fragment) => Fragment) | undefined, backwards: boolean) => Fragment
  readonly where: Fragment
} | undefined => {
  const request = plainOneType(search, condition)
  if (request === undefined) return undefined
  const driver = pickDriver([...request.clauses, ...request.links])
  if (driver === undefined || !("kind" in driver) || driver.kind !== "chain" || driver.targets.length !== 1) return undefined
  const { type: target, inner } = driver.targets[0]!
  const targets = sql`SELECT r.id FROM resources r WHERE ${chainTarget(sql, target, inner, now, reach)} LIMIT ${limitOf(sql, maxChainTargets + 1)}`
  const rest: SearchRequest = { ...request, links: request.links.filter((link) => link !== driver) }
  const where = whereCondition(sql, rest, now, sql`r.type = ${request.type}`, reach)
  // The type, parameter and target type are written into the text (from the catalog, quoted): one range
  // binds the target's id alone, which makes each range about a quarter cheaper on SQLite.
  const [type, param, targetType] = [quoted(sql, request.type), quoted(sql, driver.param.code), quoted(sql, target)]
  // Postgres: one statement whatever the number of targets (planning a UNION of ten ranges cost more than
  // running it), each target's first rows that meet the other criteria, at most as many as the pages up to
  // this one hold (LATERAL ... LIMIT), grouped to drop a resource found through two targets, and cut to as many
  // again before the page joins them to `resources` (without that cut Postgres joined every target's rows).
  const perTarget = (search.result.offset ?? 0) + search.result.count + 1
  // With no other criterion, a target's rows are read from the reference index alone: the index holds rows of
  // current versions only (a delete removes them) and of the type written in them; the page's own join to
  // `resources` checks the rows kept. Joining every target's rows to `resources` cost most of the statement at
  // 10x the data (ten targets of 21 rows each).
  const bare = rest.clauses.length === 0 && rest.links.length === 0 && reach === undefined
  const rows = (ids: ReadonlyArray<string>, after: ((rkey: Fragment) => Fragment) | undefined, backwards: boolean) => {
    const direction = backwards ? sql`DESC` : sql`ASC`
    const bound = (rkey: Fragment) => (after === undefined ? [] : [after(rkey)])
    return sql.onDialectOrElse({
      pg: () =>
        sql`SELECT x.rkey FROM json_array_elements_text(${JSON.stringify(ids)}::json) AS t(id) CROSS JOIN LATERAL (
          SELECT i.rkey FROM search_reference i${bare ? sql`` : sql` JOIN resources r ON r.rkey = i.rkey`}
          WHERE ${sql.and([sql`i.type = ${type} AND i.param = ${param} AND i.target_id = t.id AND i.target_type = ${targetType}`, ...bound(sql`i.rkey`), ...(bare ? [] : [where])])}
          ORDER BY i.rkey ${direction} LIMIT ${limitOf(sql, perTarget)}) x
          GROUP BY x.rkey ORDER BY x.rkey ${direction} LIMIT ${limitOf(sql, perTarget)}`,
      orElse: () =>
        sql`${
          sql.join(" UNION ", false)(ids.map((id) =>
            sql`SELECT rkey FROM search_reference WHERE ${
              sql.and([sql`type = ${type} AND param = ${param} AND target_id = ${id} AND target_type = ${targetType}`, ...bound(sql`rkey`)])
            }`))
        } ORDER BY rkey ${direction}`
    })
  }
  return { targets, rows, where }
}
