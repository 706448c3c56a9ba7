/**
 * `GET /fhir/{type}?...` as JSON answered from the Node request itself, next to the fast read
 * (src/rest/fastRead.ts on a SQLite file, on its connection; src/rest/fastPg.ts on Postgres, on the
 * server's pool): the searchset is planned by `planSearchset` exactly as the general path plans it
 * (`planFastSearch`), its statements are compiled to SQL text and run as prepared statements, and the Bundle is
 * made by the plan. Through the Effect HTTP stack the same search costs about twice as much CPU.
 *
 * It answers only what the general path would answer with the same status, headers and body (the Bundle's
 * id and meta.lastUpdated aside, which differ between any two answers); anything else is declined: a
 * `Prefer` header, a body, a format other than plain JSON (`_format`, `_pretty`, `Accept`), a type the
 * catalog does not know, a search the plan refuses (the general path says why), `_include`/`_revinclude`, a
 * caller whose token restricts what the search may match or reach (the general path applies the restriction),
 * a search index being rebuilt (its answers carry a warning), or a database error.
 */
import type Sqlite from "better-sqlite3"
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Statement } from "@effect/sql"
import { Either } from "effect"
import { accessOf } from "../auth/access/Access.ts"
import type { Principal } from "../http/Principal.ts"
import type { IncomingMessage } from "node:http"
import type { Catalog } from "../catalog/Catalog.ts"
import { contentTypeOf, negotiate } from "./Format.ts"
import { basePath, baseUrl } from "./Rest.ts"
import { type PageRow, pageStatement, planSearchset, type SearchsetPlan } from "./search.ts"
import { urlTextProblem } from "../validation/fhirText.ts"

const searchPath = new RegExp(`^${basePath}/([A-Z][A-Za-z]{0,63})$`)
const jsonType = contentTypeOf("json")

/** Prepared statements kept per SQL text; a search's text depends on its shape, not its values. */
export const preparedLimit = 256

/** What planning a fast search needs. */
export interface FastSearchPlanning {
  /** Builds the statements (never runs them): an SQL client of the server's database, for its dialect. */
  readonly sql: SqlClient.SqlClient
  readonly publicUrl: string | undefined
  /** `server.max_page_bytes`. */
  readonly maxPageBytes: number
  readonly catalog: () => Catalog
  /** Whether the background backfill is rebuilding a search index now. */
  readonly indexing: () => boolean
  readonly nowMillis: () => number
}

export interface FastSearchOptions extends FastSearchPlanning {
  readonly db: Sqlite.Database
}

/** What the fast search answers for `principal`: the Bundle's text, or undefined when it declines. */
export type FastSearch = (request: IncomingMessage, principal: Principal) => string | undefined

/**
 * The plan of `GET /fhir/{type}?...` when the fast search may answer it exactly as the general path would;
 * undefined otherwise (see above).
 */
export const planFastSearch = (options: FastSearchPlanning, request: IncomingMessage, principal: Principal): SearchsetPlan | undefined => {
  if (request.method !== "GET") return undefined
  const url = request.url ?? ""
  const queryAt = url.indexOf("?")
  const match = searchPath.exec(queryAt === -1 ? url : url.slice(0, queryAt))
  if (match === null) return undefined
  const headers = request.headers
  if (headers["prefer"] !== undefined) return undefined
  if (headers["transfer-encoding"] !== undefined || (headers["content-length"] !== undefined && headers["content-length"] !== "0")) return undefined
  // A query the general path refuses as unreadable text (src/validation/fhirText.ts) is its to answer.
  if (queryAt !== -1 && urlTextProblem(url.slice(queryAt + 1)) !== undefined) return undefined
  const params = new URLSearchParams(queryAt === -1 ? "" : url.slice(queryAt + 1))
  const negotiated = negotiate(params, headers["accept"])
  if (!("format" in negotiated) || negotiated.format !== "json" || negotiated.pretty) return undefined
  const type = match[1]!
  const catalog = options.catalog()
  if (!catalog.isResourceType(type) || options.indexing()) return undefined
  // A caller known by a token is answered here only when it may search every resource of the type, and
  // every resource a chain, `_has` or `_filter` path may reach (docs/smart.md, "Scopes").
  let reachRestricted = false
  if (principal._tag === "Authorized") {
    const access = accessOf(principal)
    if (access.rule(catalog, type, "s")._tag !== "All") return undefined
    reachRestricted = !access.wholly("s")
  }
  const ctx = { catalog, base: baseUrl(options.publicUrl, headers["host"]), params, lenient: false, maxPageBytes: options.maxPageBytes }
  const plan = planSearchset(options.sql, ctx, type, options.nowMillis())
  if (Either.isLeft(plan)) return undefined
  const { include, revinclude } = plan.right
  if (include.length > 0 || revinclude.length > 0) return undefined
  if (reachRestricted && plan.right.request.requests.some((one) => one.links.length > 0 || one.filters.length > 0)) return undefined
  return plan.right
}

/** Runs a planned search with `all` (a statement's rows) and makes its Bundle: the chain's targets first, then the page and the total. */
export const answerPlan = (plan: SearchsetPlan, all: <A>(statement: Statement.Statement<A>) => ReadonlyArray<A>): string => {
  const { page, chained, total, finish } = plan
  const statement = chained === undefined ? page : pageStatement(plan, all(chained.targets).map((target) => target.id))
  const rows: ReadonlyArray<PageRow> = statement === undefined ? [] : all(statement)
  const counted = total === undefined ? undefined : Number(all(total)[0]?.n ?? 0)
  return finish(rows, counted, [])
}

/** The same on a database that answers later (Postgres): `all` gives a promise of a statement's rows. */
export const answerPlanLater = async (plan: SearchsetPlan, all: <A>(statement: Statement.Statement<A>) => Promise<ReadonlyArray<A>>): Promise<string> => {
  const { page, chained, total, finish } = plan
  const statement = chained === undefined ? page : pageStatement(plan, (await all(chained.targets)).map((target) => target.id))
  const rows: ReadonlyArray<PageRow> = statement === undefined ? [] : await all(statement)
  const counted = total === undefined ? undefined : Number((await all(total))[0]?.n ?? 0)
  return finish(rows, counted, [])
}

/** The SQLite fast search, on the fast read's connection `db`. */
export const makeFastSearch = (options: FastSearchOptions): FastSearch => {
  // Kept by a hash of the text (FNV-1a) and checked against the statement's own text: a text just compiled is
  // a string of many pieces, and a Map keyed by it joins and hashes them at every lookup, which cost a chained
  // search of ten targets (a text of 1.3 KB) some 15 µs against 5 µs this way.
  const prepared = new Map<number, Sqlite.Statement>()
  const prepare = (text: string): Sqlite.Statement => {
    const hash = textHash(text)
    const hit = prepared.get(hash)
    if (hit !== undefined && hit.source === text) return hit
    if (prepared.size >= preparedLimit) prepared.clear()
    const statement = options.db.prepare(text)
    prepared.set(hash, statement)
    return statement
  }
  const all = <A>(statement: Statement.Statement<A>): ReadonlyArray<A> => {
    const [text, params] = statement.compile()
    return prepare(text).all(...params) as ReadonlyArray<A>
  }

  return (request, principal) => {
    const plan = planFastSearch(options, request, principal)
    if (plan === undefined) return undefined
    try {
      return answerPlan(plan, all)
    } catch {
      return undefined
    }
  }
}

/** FNV-1a of a statement's text: what prepared statements are kept by. */
export const textHash = (text: string): number => {
  let hash = 0x811c9dc5
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 16777619)
  return hash
}

/** The headers of a searchset answer, in the order the general path sends them. */
export const searchHeaders = (bytes: number, requestId: string): Record<string, string | number> => ({
  vary: "Prefer",
  "content-type": jsonType,
  "content-length": bytes,
  "x-request-id": requestId
})
