/**
 * The plan of a search (https://hl7.org/fhir/R4/search.html and the spec's Search rules) on one type, across
 * types or in a compartment: one SQL statement per page over the index tables (bounded in bytes,
 * src/search/plan/page.ts), one for the total, and the rules `_include`/`_revinclude` follow from the page's
 * matches. Running the statements is left to the caller (`Search.run` through @effect/sql; the fast search of
 * src/rest/fastSearch.ts on its own connection), and `rows` turns what they read into `SearchRows`, so that
 * both answer alike.
 */
import type { Statement } from "@effect/sql"
import type * as SqlClient from "@effect/sql/SqlClient"
import { Either } from "effect"
import type { Catalog } from "../../catalog/Catalog.ts"
import { parseScoped, type ScopedSearch, type SearchScope } from "../parse/parseScope.ts"
import { parameterType, type SearchRequest } from "../parse/SearchRequest.ts"
import { cursorOwner, linkParams, pageLinks } from "../paging.ts"
import { SearchError, type SearchIssue, type SearchRow, type SearchRows } from "../SearchRows.ts"
import { type Cursor, cursorValue, decodeCursor, type OrderKey, orderByKeys, pastCursor } from "./cursor.ts"
import type { IncludedResource } from "./include.ts"
import { boundedPage, type BoundedColumns, isKept } from "./page.ts"
import { limitOf } from "./query.ts"
import { chainedPage, maxChainTargets, orderedPage, scopeCondition, scopeSortValues } from "./scope.ts"
import { unsortable } from "./sort.ts"

/** What a search reads besides the database: the catalog and the query, and what its caller adds. */
export interface SearchInput {
  readonly catalog: Catalog
  readonly params: URLSearchParams
  /** `Prefer: handling=lenient`: parameters that cannot be used are set aside (with a warning) instead of refusing the search. */
  readonly lenient: boolean
  /** Said in the outcome (as `informational` warnings) after the warnings of what `lenient` set aside. */
  readonly warnings?: ReadonlyArray<string>
  /** A further condition on `r` (the resources table), ANDed with the query's: a compartment, a token's restriction. */
  readonly condition?: Statement.Fragment
  /** The path under `[base]` that page links repeat and cursors belong to: the type searched by default, e.g. `Patient/1/Observation`. */
  readonly path?: string
  /** `server.max_page_bytes`: the most bytes of resources one page holds (`defaultMaxPageBytes` when left out). */
  readonly maxPageBytes?: number
  /** What the caller may see (src/auth/access/): applied inside the statements, so that pages and totals stay right. */
  readonly restriction?: SearchRestriction | undefined
}

/**
 * A caller's restriction, as conditions on `r` (the resources table); each undefined where nothing is
 * restricted. docs/smart.md, "Scopes" says what they hold.
 */
export interface SearchRestriction {
  /** What every match of a search of `types` (undefined: every type) meets, ANDed with the query's condition. */
  readonly matches: (types: ReadonlyArray<string> | undefined) => Statement.Fragment | undefined
  /** What every resource `_include` and `_revinclude` add meets (spec Search rule 9); asked for only when there are such rules. */
  readonly included: () => Statement.Fragment | undefined
  /** What a resource of `type` that a chain, `_has` or `_filter` path reaches meets to count. */
  readonly reach: (type: string) => Statement.Fragment | undefined
}

/**
 * `server.max_page_bytes` by default, 4 MiB: a page's reading, assembling and writing hold the event loop for
 * tens of milliseconds rather than the quarter of a second 16 MiB took. A larger resource still comes back alone.
 */
export const defaultMaxPageBytes = 4_194_304

/**
 * A row of a search page: the resource's key, its `_sort` values (`s0`, `s1`, ...), the size of its current
 * content, and whether the page holds it (src/search/plan/page.ts), with its content then.
 */
export interface PageRow extends BoundedColumns {
  readonly rkey: number | string
  readonly type: string
  readonly id: string
  readonly version: number | string
  readonly size: number | string
  readonly [sortValue: `s${number}`]: unknown
}

/** A search planned: the statements to run, the `_include`/`_revinclude` rules, and the rows made of what they read. */
export interface SearchPlan {
  readonly request: ScopedSearch
  /** The page: `_count` rows and one more, those of the page marked `kept` (absent for `_summary=count`). */
  readonly page: Statement.Statement<PageRow> | undefined
  /**
   * A page driven by a chain (`chainedPage`): the targets' ids are read first and, when there are some and not
   * too many, `page(ids)` reads the page instead of `page` above (see `pageStatement`).
   */
  readonly chained?: {
    readonly targets: Statement.Statement<{ readonly id: string }>
    readonly page: (ids: ReadonlyArray<string>) => Statement.Statement<PageRow>
  } | undefined
  /** The total's `count(*)` as `n`, when the total is asked for. */
  readonly total: Statement.Statement<{ readonly n: number | string }> | undefined
  /** `_count`: the page's matches are its first rows. */
  readonly pageSize: number
  /** `server.max_page_bytes`. */
  readonly maxPageBytes: number
  /** What every included resource meets besides the rules (the caller's restriction), if anything. */
  readonly restrict?: Statement.Fragment | undefined
  readonly include: SearchRequest["result"]["include"]
  readonly revinclude: SearchRequest["result"]["revinclude"]
  /**
   * The rows of the search from those the page statement read, the total and the included resources; `keep`
   * (what the included resources leave room for) makes the page its first `keep` matches.
   */
  readonly rows: (rows: ReadonlyArray<PageRow>, total: number | undefined, included: ReadonlyArray<IncludedResource>, keep?: number) => SearchRows
}

/** The page's statement once a chain's target ids are read (`SearchPlan.chained`): ordered ranges for a few targets, else `page`. */
export const pageStatement = (plan: SearchPlan, ids: ReadonlyArray<string>): Statement.Statement<PageRow> | undefined =>
  plan.chained !== undefined && ids.length > 0 && ids.length <= maxChainTargets ? plan.chained.page(ids) : plan.page

/** The rows of a page the statement read: those it keeps, in the order read. */
export const keptRows = (rows: ReadonlyArray<PageRow>): ReadonlyArray<PageRow> => rows.filter(isKept)

const refuse = (code: SearchError["code"], diagnostics: string) => Either.left(new SearchError({ code, diagnostics }))

/** The plan of the search of `type?params` (or of `scope`) at `now`, or why the request is refused. */
export const planSearch = (sql: SqlClient.SqlClient, input: SearchInput, scope: string | SearchScope, now: number): Either.Either<SearchPlan, SearchError> => {
  const parsed = parseScoped(typeof scope === "string" ? { types: [scope], typeParameter: false } : scope, input.params, input.catalog, { lenient: input.lenient })
  if (Either.isLeft(parsed)) {
    const problems = parsed.left
    // What this server does not support is refused like what cannot be read (R4 search.html, handling=strict): a 400.
    return refuse(problems.some((problem) => problem.status === 400) ? "invalid" : "not-supported", problems.map((problem) => problem.message).join("; "))
  }
  const query = parsed.right
  const unsorted = query.result.sort.find(unsortable)
  if (unsorted !== undefined) {
    return refuse("not-supported", `_sort on the ${parameterType(unsorted.param)} parameter '${unsorted.code}' is not supported: a ${parameterType(unsorted.param)} parameter has no single value to order by`)
  }
  const summary = query.result.summary
  // R4 search.html#elements: `_elements` chooses the elements itself, a summary chooses them by its own rule.
  if (query.result.elements !== undefined && (summary === "true" || summary === "text" || summary === "data")) {
    return refuse("invalid", `_elements cannot be combined with _summary=${summary}: ask for one of them`)
  }

  const count = query.result.count
  const offset = query.result.offset ?? 0
  const maxPageBytes = input.maxPageBytes ?? defaultMaxPageBytes
  const path = input.path ?? (typeof scope === "string" ? scope : "")
  const links = linkParams(input.params, query)
  const owner = cursorOwner(path, links)
  const sortValues = scopeSortValues(sql, query)
  // The page's order: the `_sort` values (columns s0, s1, ...), then the row key.
  const keysOn = (alias: string): ReadonlyArray<OrderKey> => [
    ...sortValues.map((value, i) => ({ column: sql.literal(`${alias}.s${i}`), descending: value.descending, nullable: value.nullable, text: value.text })),
    { column: sql.literal(`${alias}.rkey`), descending: false, nullable: false, text: false }
  ]
  let cursor: Cursor | undefined
  if (query.result.cursor !== undefined) {
    if (query.result.offset !== undefined) return refuse("invalid", "_cursor and _offset cannot be used together: a cursor names where its page starts")
    const read = decodeCursor(query.result.cursor, owner, sortValues.length + 1)
    if (typeof read === "string") return refuse("invalid", `The value of _cursor cannot be used: ${read}`)
    cursor = read
  }
  const backwards = cursor?.direction === "before"
  const past = (alias: string) => (cursor === undefined ? [] : [pastCursor(sql, keysOn(alias), cursor)])
  const direction = backwards ? sql`DESC` : sql`ASC`
  const limit = sql`LIMIT ${limitOf(sql, count + 1)} OFFSET ${offset}`
  const bounded = (rows: Statement.Fragment) => sql<PageRow>`${boundedPage(sql, rows, keysOn, count, maxPageBytes, backwards)}`

  const wantTotal = summary === "count" || query.result.total === "accurate" || query.result.total === "estimate"
  const restricted = input.restriction?.matches(query.types)
  const condition = restricted === undefined ? input.condition : input.condition === undefined ? restricted : sql.and([input.condition, restricted])
  const reach = input.restriction?.reach
  const where = scopeCondition(sql, query, now, condition, reach)
  const ordered = orderedPage(sql, query, now, condition, reach)
  const rows = sortValues.length > 0
    ? sql`SELECT x.* FROM (SELECT r.rkey, r.type, r.id, r.version, ${
      sql.join(", ", false)(sortValues.map((value, i) => sql`${value.value} AS ${sql.literal(`s${i}`)}`))
    } FROM resources r WHERE ${where}) x${cursor === undefined ? sql`` : sql` WHERE ${sql.and(past("x"))}`} ORDER BY ${orderByKeys(sql, keysOn("x"), backwards)} ${limit}`
    : ordered === undefined
    ? sql`SELECT r.rkey, r.type, r.id, r.version FROM resources r WHERE ${sql.and([where, ...past("r")])} ORDER BY r.rkey ${direction} ${limit}`
    : sql.onDialectOrElse({
      // Postgres: the driver's row keys, distinct and in order straight from its lookup index, each resource
      // then looked up by its key and checked (LATERAL, kept from being turned into a join by OFFSET 0, which
      // Postgres would merge with a walk over every resource in key order, the catalog's first).
      pg: () =>
        sql`SELECT r.rkey, r.type, r.id, r.version FROM (SELECT DISTINCT u.rkey FROM (${ordered.rows}) u ORDER BY u.rkey ${direction}) d CROSS JOIN LATERAL (
          SELECT r.rkey, r.type, r.id, r.version FROM resources r WHERE r.rkey = d.rkey AND ${ordered.where} OFFSET 0) r${
          cursor === undefined ? sql`` : sql` WHERE ${sql.and(past("d"))}`
        } ORDER BY d.rkey ${direction} ${limit}`,
      orElse: () =>
        sql`SELECT r.rkey, r.type, r.id, r.version FROM (${ordered.rows}) d JOIN resources r ON r.rkey = d.rkey WHERE ${
          sql.and([ordered.where, ...past("d")])
        } GROUP BY d.rkey ORDER BY d.rkey ${direction} ${limit}`
    })
  const page = summary === "count" ? undefined : bounded(rows)
  const total = wantTotal ? sql<{ readonly n: number | string }>`SELECT count(*) AS n FROM resources r WHERE ${where}` : undefined
  const chain = summary === "count" || ordered !== undefined ? undefined : chainedPage(sql, query, now, condition, reach)
  const after = cursor === undefined ? undefined : (rkey: Statement.Fragment) => pastCursor(sql, [{ column: rkey, descending: false, nullable: false, text: false }], cursor)
  const chained = chain === undefined ? undefined : {
    targets: sql<{ readonly id: string }>`${chain.targets}`,
    page: (ids: ReadonlyArray<string>) =>
      bounded(sql`SELECT r.rkey, r.type, r.id, r.version FROM (${chain.rows(ids, after, backwards)}) d JOIN resources r ON r.rkey = d.rkey WHERE ${chain.where} ORDER BY d.rkey ${direction} ${limit}`)
  }

  const outcome: ReadonlyArray<SearchIssue> = [
    ...query.ignored.map((problem) => ({ severity: "warning" as const, code: "invalid" as const, diagnostics: `${problem.message} (set aside)` })),
    ...(input.warnings ?? []).map((diagnostics) => ({ severity: "warning" as const, code: "informational" as const, diagnostics }))
  ]
  const searchRows = (rows: ReadonlyArray<PageRow>, total: number | undefined, included: ReadonlyArray<IncludedResource>, keep?: number): SearchRows => {
    const read = keptRows(rows).slice(0, keep)
    const matches = backwards ? [...read].reverse() : read
    return {
      request: query,
      searchedAt: now,
      matches: matches.map((row): SearchRow => ({ type: row.type, id: row.id, version: Number(row.version), content: row.content ?? "{}", mode: "match" })),
      total,
      included: included.map((resource): SearchRow => ({ type: resource.type, id: resource.id, content: resource.content, mode: "include" })),
      outcome,
      paging: {
        path,
        params: links,
        links: pageLinks({
          at: query.result.cursor === undefined ? { offset } : { cursor: query.result.cursor },
          backwards,
          count,
          rows: read,
          more: rows.length > read.length,
          keys: (row) => [...sortValues.map((_, i) => cursorValue(row[`s${i}`])), Number(row.rkey)],
          owner
        })
      }
    }
  }
  return Either.right({
    request: query,
    page,
    chained,
    total,
    pageSize: count,
    maxPageBytes,
    restrict: query.result.include.length + query.result.revinclude.length === 0 ? undefined : input.restriction?.included(),
    include: query.result.include,
    revinclude: query.result.revinclude,
    rows: searchRows
  })
}
