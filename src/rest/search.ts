/**
 * search (https://hl7.org/fhir/R4/search.html and the spec's Search rules): `GET [base]/{type}?...` and
 * `POST [base]/{type}/_search` on one resource type; across types and in compartments (see `scope`)
 * through the same searchset. `Search.run` (src/search/Search.ts) reads the rows; this module renders them
 * as the searchset Bundle, splicing the stored JSON text of each resource in as it is. Unreadable values are
 * a 400 unless `Prefer: handling=lenient`.
 */
import type { Statement } from "@effect/sql"
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Effect, Either } from "effect"
import { searchRestriction } from "../auth/access/conditions.ts"
import { searchGranted } from "../auth/access/enforce.ts"
import type { Catalog } from "../catalog/Catalog.ts"
import { Database } from "../db/Database.ts"
import { operationOutcome } from "../http/OperationOutcome.ts"
import type { SearchScope } from "../search/parse/parseScope.ts"
import { atPage } from "../search/paging.ts"
import type { IncludedResource } from "../search/plan/include.ts"
import { type PageRow, pageStatement, planSearch, type SearchInput, type SearchPlan } from "../search/plan/searchset.ts"
import * as Search from "../search/Search.ts"
import { bundleText } from "./bundleText.ts"
import { fail, type FhirError } from "../http/FhirError.ts"
import { type FhirRequest, header } from "./FhirRequest.ts"
import { largeBody } from "./largeBody.ts"
import { type Shape, shapeFor, shapeText } from "./shape.ts"

export { type PageRow, pageStatement }

/** What a search needs besides the database: what `Search.run` reads, and `[base]` for fullUrls and links. */
export interface SearchContext extends SearchInput {
  readonly base: string
}

/** A refused search as the REST API answers it: a 400 with the search's issue code. */
const refused = (error: Search.SearchError): FhirError => fail(error.code, error.diagnostics, 400)

/** The shape `_summary` and `_elements` give the matches (the search has refused the two together already). */
const shapeOf = ({ result }: Search.SearchRows["request"]): Either.Either<Shape | undefined, FhirError> =>
  Either.mapLeft(shapeFor(result.summary, result.elements), (reason) => fail("invalid", reason, 400))

/**
 * The searchset Bundle of `rows` as JSON text: the matches in `shape`, the included resources whole, an
 * outcome entry with the search's warnings, and the page links under `base`.
 */
export const searchsetText = (rows: Search.SearchRows, base: string, catalog: Catalog, shape: Shape | undefined): string => {
  const { path, params, links } = rows.paging
  const linkBase = `${base}${path === "" ? "" : `/${path}`}?`
  const link = links.map(({ relation, at }) => ({ relation, url: `${linkBase}${atPage(params, at)}` }))
  const entries = [
    ...rows.matches.map((row) =>
      `{"fullUrl":${JSON.stringify(`${base}/${row.type}/${row.id}`)},"resource":${shapeText(row.content, row.type, catalog, shape)},"search":{"mode":"match"}}`),
    ...rows.included.map((row) => `{"fullUrl":${JSON.stringify(`${base}/${row.type}/${row.id}`)},"resource":${row.content},"search":{"mode":"include"}}`)
  ]
  if (rows.outcome.length > 0) entries.push(JSON.stringify({ resource: operationOutcome(rows.outcome), search: { mode: "outcome" } }))
  return bundleText({ type: "searchset", total: rows.total, link }, entries, rows.searchedAt)
}

/**
 * A searchset planned for the fast search (src/rest/fastSearch.ts), which runs the statements on its own
 * connection: the search's plan, and `finish`, the Bundle's text from what the statements read.
 */
export interface SearchsetPlan extends SearchPlan {
  readonly finish: (rows: ReadonlyArray<PageRow>, total: number | undefined, included: ReadonlyArray<IncludedResource>, keep?: number) => string
}

/** The plan of the searchset of `type?params` (or of `scope`) at `now`, or why the request is refused. */
export const planSearchset = (sql: SqlClient.SqlClient, ctx: SearchContext, scope: string | SearchScope, now: number): Either.Either<SearchsetPlan, FhirError> => {
  const planned = planSearch(sql, ctx, scope, now)
  if (Either.isLeft(planned)) return Either.left(refused(planned.left))
  const plan = planned.right
  const shape = shapeOf(plan.request)
  if (Either.isLeft(shape)) return Either.left(shape.left)
  const finish: SearchsetPlan["finish"] = (rows, total, included, keep) =>
    searchsetText(plan.rows(rows, total, included, keep), ctx.base, ctx.catalog, shape.right)
  // Field by field: spreading the plan cost the fast search some 5 µs a request.
  const { request, page, chained, total, pageSize, maxPageBytes, restrict, include, revinclude, rows } = plan
  return Either.right({ request, page, chained, total, pageSize, maxPageBytes, restrict, include, revinclude, rows, finish })
}

/**
 * The searchset Bundle of `type?params` as JSON text, read with `sql`: a reader for `GET [base]/{type}`,
 * the Writer's connection for a search inside a batch or transaction (it sees the Bundle's own writes).
 * `scope` instead of a type searches several types, or every type.
 */
export const searchset = (sql: SqlClient.SqlClient, ctx: SearchContext, scope: string | SearchScope): Effect.Effect<string, FhirError | SqlError> =>
  Effect.gen(function*() {
    const rows = yield* Effect.catchTag(Search.run(sql, ctx, scope), "SearchError", (error) => Effect.fail(refused(error)))
    return searchsetText(rows, ctx.base, ctx.catalog, yield* shapeOf(rows.request))
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
    yield* searchGranted(request.access, request.catalog, scope, params)
    const lenient = /(^|[;,\s])handling\s*=\s*lenient/i.test(header(request, "prefer") ?? "")
    const db = yield* Database
    const warnings = yield* Search.indexWarnings(typeof scope === "string" ? scope : scope.types)
    const now = yield* Clock.currentTimeMillis
    const text = yield* db.withReader((sql) =>
      searchset(sql, {
        catalog: request.catalog,
        base: request.base,
        params,
        lenient,
        warnings,
        maxPageBytes: request.maxPageBytes,
        restriction: searchRestriction(sql, request.access, request.catalog, now),
        ...(options.condition === undefined ? {} : { condition: options.condition(sql) }),
        ...(options.path === undefined ? {} : { path: options.path })
      }, scope))
    const headers: Record<string, string> = { vary: "Prefer" }
    if (lenient) headers["preference-applied"] = "handling=lenient"
    return yield* largeBody(text, request.negotiated, request.catalog, { headers })
  })
