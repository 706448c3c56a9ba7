/**
 * search (https://hl7.org/fhir/R4/search.html and the spec's Search rules): `GET [base]/{type}?...` and
 * `POST [base]/{type}/_search` on one resource type; across types and in compartments (see `scope`)
 * through the same searchset. One SQL statement per page over the index tables, and a few per
 * `_include`/`_revinclude` rule (src/search/plan/include.ts); unreadable values are a 400 unless
 * `Prefer: handling=lenient`.
 */
import type { Statement } from "@effect/sql"
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Effect, Either, Option } from "effect"
import { Backfill } from "../search/Backfill.ts"
import type { Catalog } from "../catalog/Catalog.ts"
import { Database } from "../db/Database.ts"
import { type Issue, operationOutcome } from "../http/OperationOutcome.ts"
import { parseScoped, type SearchScope } from "../search/parse/parseScope.ts"
import { parameterType, type Problem, type SearchRequest } from "../search/parse/SearchRequest.ts"
import type { IncludedResource } from "../search/plan/include.ts"
import { type Cursor, cursorValue, decodeCursor, type OrderKey, orderByKeys, pastCursor } from "../search/plan/cursor.ts"
import { boundedPage, type BoundedColumns, isKept } from "../search/plan/page.ts"
import { limitOf } from "../search/plan/query.ts"
import { chainedPage, maxChainTargets, orderedPage, scopeCondition, scopeSortValues } from "../search/plan/scope.ts"
import { unsortable } from "../search/plan/sort.ts"
import { bundleText } from "./bundleText.ts"
import { fail, type FhirError } from "./FhirError.ts"
import { type FhirRequest, header } from "./FhirRequest.ts"
import { largeBody } from "./largeBody.ts"
import { atPage, cursorOwner, type PageAt, pageLinks as linksOf } from "./paging.ts"
import { pageIncludes } from "./pageIncludes.ts"
import { shapeFor, shapeText } from "./shape.ts"

/** The request's own parameters less those set aside: what page links repeat. */
export const linkParams = (params: URLSearchParams, request: { readonly ignored: ReadonlyArray<Problem> }): URLSearchParams => {
  // A `_filter` set aside names its whole expression: only that occurrence leaves the links.
  const ignored = new Set(request.ignored.filter((problem) => problem.parameter !== "_filter").map((problem) => problem.parameter))
  const ignoredFilters = new Set(request.ignored.filter((problem) => problem.parameter === "_filter").map((problem) => problem.value))
  const out = new URLSearchParams()
  for (const [name, value] of params) {
    if (ignored.has(name) || ignored.has(name.split(":")[0]!)) continue
    if (name === "_filter" && ignoredFilters.has(value)) continue
    out.append(name, value)
  }
  return out
}

/** The query string of a page link: the request's own parameters, less those set aside, at `at`. */
export const pageParams = (params: URLSearchParams, request: { readonly ignored: ReadonlyArray<Problem> }, at: PageAt): string =>
  atPage(linkParams(params, request), at)

/** What a search needs besides the database: the catalog, `[base]` for fullUrls and links, the query. */
export interface SearchContext {
  readonly catalog: Catalog
  readonly base: string
  readonly params: URLSearchParams
  readonly lenient: boolean
  /** Said in the outcome entry (search.mode `outcome`) with the warnings of what `lenient` set aside. */
  readonly warnings?: ReadonlyArray<string>
  /** A further condition on `r` (the resources table), ANDed with the query's: a compartment, a token's restriction. */
  readonly condition?: Statement.Fragment
  /** The path under `[base]` that page links repeat: the type searched by default, e.g. `Patient/1/Observation`. */
  readonly path?: string
  /** `server.max_page_bytes`: the most bytes of resources one page holds (`defaultMaxPageBytes` when left out). */
  readonly maxPageBytes?: number
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
  readonly size: number | string
  readonly [sortValue: `s${number}`]: unknown
}

/**
 * A searchset planned: the statements to run, the `_include`/`_revinclude` rules for the page's matches, and
 * the Bundle made of what they read. Running it is left to the caller (`searchset` through @effect/sql; the
 * fast search of src/rest/fastSearch.ts on its own connection), so that both answer alike.
 */
export interface SearchsetPlan {
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
  readonly include: SearchRequest["result"]["include"]
  readonly revinclude: SearchRequest["result"]["revinclude"]
  /**
   * The Bundle's text from the rows the page statement read, the total and the included resources; `keep`
   * (what the included resources leave room for) makes the page its first `keep` matches.
   */
  readonly finish: (rows: ReadonlyArray<PageRow>, total: number | undefined, included: ReadonlyArray<IncludedResource>, keep?: number) => string
}

/** The page's statement once a chain's target ids are read (`SearchsetPlan.chained`): ordered ranges for a few targets, else `page`. */
export const pageStatement = (plan: SearchsetPlan, ids: ReadonlyArray<string>): Statement.Statement<PageRow> | undefined =>
  plan.chained !== undefined && ids.length > 0 && ids.length <= maxChainTargets ? plan.chained.page(ids) : plan.page

/** The rows of a page the statement read: those it keeps, in the order read. */
export const keptRows = (rows: ReadonlyArray<PageRow>): ReadonlyArray<PageRow> => rows.filter(isKept)

/** The plan of the searchset of `type?params` (or of `scope`) at `now`, or why the request is refused. */
export const planSearchset = (sql: SqlClient.SqlClient, ctx: SearchContext, scope: string | SearchScope, now: number): Either.Either<SearchsetPlan, FhirError> => {
  const parsed = parseScoped(typeof scope === "string" ? { types: [scope], typeParameter: false } : scope, ctx.params, ctx.catalog, { lenient: ctx.lenient })
  if (Either.isLeft(parsed)) {
    const problems = parsed.left
    // What this server does not support is refused like what cannot be read (R4 search.html, handling=strict): a 400.
    const code = problems.some((problem) => problem.status === 400) ? "invalid" : "not-supported"
    return Either.left(fail(code, problems.map((problem) => problem.message).join("; "), 400))
  }
  const query = parsed.right
  const unsorted = query.result.sort.find(unsortable)
  if (unsorted !== undefined) return Either.left(fail("not-supported", `_sort on the ${parameterType(unsorted.param)} parameter '${unsorted.code}' is not supported: a ${parameterType(unsorted.param)} parameter has no single value to order by`, 400))
  const summary = query.result.summary
  const shape = shapeFor(summary, query.result.elements)
  if (Either.isLeft(shape)) return Either.left(fail("invalid", shape.left, 400))

  const count = query.result.count
  const offset = query.result.offset ?? 0
  const maxPageBytes = ctx.maxPageBytes ?? defaultMaxPageBytes
  const path = ctx.path ?? (typeof scope === "string" ? scope : "")
  const links = linkParams(ctx.params, query)
  const owner = cursorOwner(path, links)
  const sortValues = scopeSortValues(sql, query)
  // The page's order: the `_sort` values (columns s0, s1, ...), then the row key.
  const keysOn = (alias: string): ReadonlyArray<OrderKey> => [
    ...sortValues.map((value, i) => ({ column: sql.literal(`${alias}.s${i}`), descending: value.descending, nullable: value.nullable, text: value.text })),
    { column: sql.literal(`${alias}.rkey`), descending: false, nullable: false, text: false }
  ]
  let cursor: Cursor | undefined
  if (query.result.cursor !== undefined) {
    if (query.result.offset !== undefined) return Either.left(fail("invalid", "_cursor and _offset cannot be used together: a cursor names where its page starts", 400))
    const read = decodeCursor(query.result.cursor, owner, sortValues.length + 1)
    if (typeof read === "string") return Either.left(fail("invalid", `The value of _cursor cannot be used: ${read}`, 400))
    cursor = read
  }
  const backwards = cursor?.direction === "before"
  const past = (alias: string) => (cursor === undefined ? [] : [pastCursor(sql, keysOn(alias), cursor)])
  const direction = backwards ? sql`DESC` : sql`ASC`
  const limit = sql`LIMIT ${limitOf(sql, count + 1)} OFFSET ${offset}`
  const bounded = (rows: Statement.Fragment) => sql<PageRow>`${boundedPage(sql, rows, keysOn, count, maxPageBytes, backwards)}`

  const wantTotal = summary === "count" || query.result.total === "accurate" || query.result.total === "estimate"
  const where = scopeCondition(sql, query, now, ctx.condition)
  const ordered = orderedPage(sql, query, now, ctx.condition)
  const rows = sortValues.length > 0
    ? sql`SELECT x.* FROM (SELECT r.rkey, r.type, r.id, r.version, ${
      sql.join(", ", false)(sortValues.map((value, i) => sql`${value.value} AS ${sql.literal(`s${i}`)}`))
    } FROM resources r WHERE ${where}) x${cursor === undefined ? sql`` : sql` WHERE ${sql.and(past("x"))}`} ORDER BY ${orderByKeys(sql, keysOn("x"), backwards)} ${limit}`
    : ordered === undefined
    ? sql`SELECT r.rkey, r.type, r.id, r.version FROM resources r WHERE ${sql.and([where, ...past("r")])} ORDER BY r.rkey ${direction} ${limit}`
    : sql`SELECT r.rkey, r.type, r.id, r.version FROM (${ordered.rows}) d JOIN resources r ON r.rkey = d.rkey WHERE ${
      sql.and([ordered.where, ...past("d")])
    } GROUP BY d.rkey ORDER BY d.rkey ${direction} ${limit}`
  const page = summary === "count" ? undefined : bounded(rows)
  const total = wantTotal ? sql<{ readonly n: number | string }>`SELECT count(*) AS n FROM resources r WHERE ${where}` : undefined
  const chain = summary === "count" || ordered !== undefined ? undefined : chainedPage(sql, query, now, ctx.condition)
  const after = cursor === undefined ? undefined : (rkey: Statement.Fragment) => pastCursor(sql, [{ column: rkey, descending: false, nullable: false, text: false }], cursor)
  const chained = chain === undefined ? undefined : {
    targets: sql<{ readonly id: string }>`${chain.targets}`,
    page: (ids: ReadonlyArray<string>) =>
      bounded(sql`SELECT r.rkey, r.type, r.id, r.version FROM (${chain.rows(ids, after, backwards)}) d JOIN resources r ON r.rkey = d.rkey WHERE ${chain.where} ORDER BY d.rkey ${direction} ${limit}`)
  }

  const finish = (rows: ReadonlyArray<PageRow>, total: number | undefined, included: ReadonlyArray<IncludedResource>, keep?: number): string => {
    const read = keptRows(rows).slice(0, keep)
    const matches = backwards ? [...read].reverse() : read
    const pageLinks = linksOf({
      at: query.result.cursor === undefined ? { offset } : { cursor: query.result.cursor },
      backwards,
      count,
      rows: read,
      more: rows.length > read.length,
      keys: (row) => [...sortValues.map((_, i) => cursorValue(row[`s${i}`])), Number(row.rkey)],
      owner
    }).map(({ relation, at }) => ({ relation, url: `${ctx.base}${path === "" ? "" : `/${path}`}?${atPage(links, at)}` }))
    // Only the matches are shaped: included resources and the outcome entry stay whole.
    const entries = [
      ...matches.map((row) =>
        `{"fullUrl":${JSON.stringify(`${ctx.base}/${row.type}/${row.id}`)},"resource":${shapeText(row.content ?? "{}", row.type, ctx.catalog, shape.right)},"search":{"mode":"match"}}`),
      ...included.map((resource) =>
        `{"fullUrl":${JSON.stringify(`${ctx.base}/${resource.type}/${resource.id}`)},"resource":${resource.content},"search":{"mode":"include"}}`)
    ]
    const warnings: Array<Issue> = [
      ...query.ignored.map((problem) => ({ severity: "warning" as const, code: "invalid" as const, diagnostics: `${problem.message} (set aside)` })),
      ...(ctx.warnings ?? []).map((diagnostics) => ({ severity: "warning" as const, code: "informational" as const, diagnostics }))
    ]
    if (warnings.length > 0) entries.push(JSON.stringify({ resource: operationOutcome(warnings), search: { mode: "outcome" } }))
    return bundleText({ type: "searchset", total, link: pageLinks }, entries, now)
  }
  return Either.right({ page, chained, total, pageSize: count, maxPageBytes, include: query.result.include, revinclude: query.result.revinclude, finish })
}

/** The rows of a page that `_include`/`_revinclude` start from: its matches, in the order read. */
export const pageKeys = (rows: ReadonlyArray<PageRow>) => rows.map((row) => ({ rkey: Number(row.rkey), type: row.type, id: row.id }))

/**
 * The searchset Bundle of `type?params` as JSON text, read with `sql`: a reader for `GET [base]/{type}`,
 * the Writer's connection for a search inside a batch or transaction (it sees the Bundle's own writes).
 * `scope` instead of a type searches several types, or every type.
 */
export const searchset = (sql: SqlClient.SqlClient, ctx: SearchContext, scope: string | SearchScope): Effect.Effect<string, FhirError | SqlError> =>
  Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const plan = yield* planSearchset(sql, ctx, scope, now)
    const [rows, total] = yield* Effect.all([
      plan.chained === undefined
        ? plan.page ?? Effect.succeed([])
        : Effect.flatMap(plan.chained.targets, (targets) => pageStatement(plan, targets.map((target) => target.id)) ?? Effect.succeed([])),
      plan.total === undefined ? Effect.succeed(undefined) : Effect.map(plan.total, (r) => Number(r[0]?.n ?? 0))
    ])
    const { included, keep } = yield* pageIncludes(sql, plan, keptRows(rows))
    return plan.finish(rows, total, included, keep)
  })

/**
 * While the backfill rebuilds the index of a type, a search on it may miss resources written before the
 * change: a warning for each type searched that is being rebuilt (`undefined`: every type).
 */
export const indexWarnings = (searched: string | ReadonlyArray<string> | undefined) =>
  Effect.gen(function*() {
    const backfill = yield* Effect.serviceOption(Backfill)
    if (Option.isNone(backfill)) return []
    const progress = yield* backfill.value.progress
    if (!progress.running) return []
    const types = searched === undefined ? progress.types : progress.types.filter((type) => typeof searched === "string" ? type === searched : searched.includes(type))
    const which = types.length === 1 ? types[0]! : types.length <= 6 ? types.join(", ") : `${types.slice(0, 6).join(", ")} and ${types.length - 6} more types`
    return types.length === 0 ? [] : [`The search index of ${which} is being rebuilt for changed search parameters (${progress.done} of ${progress.total} resources done): resources written before the change may be missing from these results`]
  })

/**
 * `GET [base]/{type}?...` and `POST [base]/{type}/_search`, on a reader; with a scope, a search across
 * types or in a compartment (`condition` and `path` as in SearchContext).
 */
export const search = (
  request: FhirRequest,
  scope: string | SearchScope,
  params: URLSearchParams,
  options: { readonly condition?: (sql: SqlClient.SqlClient) => Statement.Fragment; readonly path?: string } = {}
) =>
  Effect.gen(function*() {
    const lenient = /(^|[;,\s])handling\s*=\s*lenient/i.test(header(request, "prefer") ?? "")
    const db = yield* Database
    const warnings = yield* indexWarnings(typeof scope === "string" ? scope : scope.types)
    const text = yield* db.withReader((sql) =>
      searchset(sql, {
        catalog: request.catalog,
        base: request.base,
        params,
        lenient,
        warnings,
        maxPageBytes: request.maxPageBytes,
        ...(options.condition === undefined ? {} : { condition: options.condition(sql) }),
        ...(options.path === undefined ? {} : { path: options.path })
      }, scope))
    const headers: Record<string, string> = { vary: "Prefer" }
    if (lenient) headers["preference-applied"] = "handling=lenient"
    return yield* largeBody(text, request.negotiated, request.catalog, { headers })
  })
