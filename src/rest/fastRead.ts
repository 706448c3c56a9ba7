/**
 * The hottest interaction, `GET /fhir/{type}/{id}` of a current version as JSON, answered from the Node
 * request itself: one prepared statement on a read-only SQLite connection of its own, and the stored
 * text written as it is. Through the Effect HTTP stack the same read costs several times more.
 *
 * It answers only what it can answer exactly as the general path would, with the same status, headers
 * and body (the front door writes the request log line for both); anything else is declined and takes the general path: another method, a
 * query string, conditional headers, a request body, an `Accept` that is not JSON, a type the catalog
 * does not know, a resource that is missing or deleted, a caller whose token restricts what it may read of
 * the type (the general path applies the restriction), or a database error. Searches of one type
 * (`GET /fhir/{type}?...`) are answered on the same connection by src/rest/fastSearch.ts.
 */
import Sqlite from "better-sqlite3"
import type * as SqlClient from "@effect/sql/SqlClient"
import { type Clock, Effect, Option, Scope, Stream } from "effect"
import type { IncomingMessage, ServerResponse } from "node:http"
import type { Catalog } from "../catalog/Catalog.ts"
import { CatalogService } from "../catalog/CatalogService.ts"
import { accessOf } from "../auth/access/Access.ts"
import type { Admission } from "../http/FrontDoor.ts"
import type { FastHandler, FastSlot } from "../http/Server.ts"
import { contentTypeOf, negotiate } from "./Format.ts"
import { fastCacheKib } from "../db/sqliteOpen.ts"
import { Backfill } from "../search/Backfill.ts"
import { makeFastSearch, searchHeaders } from "./fastSearch.ts"
import { basePath } from "./Rest.ts"
import { etag, httpDate } from "./respond.ts"

const readPath = new RegExp(`^${basePath}/([A-Z][A-Za-z]{0,63})/([A-Za-z0-9\\-.]{1,64})$`)
const noParams = new URLSearchParams()
const jsonType = contentTypeOf("json")

interface Row {
  readonly version: number
  readonly commit_ts: number
  readonly content: string | null
}

/** Whether `Accept` asks for plain JSON (absent, `*\/*`, `application/fhir+json`...), as negotiation would read it. */
const acceptsJson = (accept: string | undefined): boolean => {
  if (accept === undefined) return true
  const negotiated = negotiate(noParams, accept)
  return "format" in negotiated && negotiated.format === "json" && !negotiated.pretty
}

/**
 * The type and id of `GET /fhir/{type}/{id}` when a fast read may answer it exactly as the general path would
 * (no query string, no conditional headers, no body, JSON asked for, a type the catalog knows, a caller who may
 * read every resource of the type: docs/smart.md, "Scopes"); undefined otherwise. Shared by the SQLite and the
 * Postgres fast reads (fastPg.ts).
 */
export const fastReadTarget = (request: IncomingMessage, admission: Admission, catalog: Catalog): { readonly type: string; readonly id: string } | undefined => {
  if (request.method !== "GET") return undefined
  const match = readPath.exec(request.url ?? "")
  if (match === null) return undefined
  const headers = request.headers
  if (headers["if-none-match"] !== undefined || headers["if-modified-since"] !== undefined) return undefined
  if (headers["transfer-encoding"] !== undefined || (headers["content-length"] !== undefined && headers["content-length"] !== "0")) return undefined
  if (!acceptsJson(headers["accept"])) return undefined
  const type = match[1]!
  if (!catalog.isResourceType(type)) return undefined
  const principal = admission.principal
  if (principal._tag === "Authorized" && accessOf(principal).rule(catalog, type, "r")._tag !== "All") return undefined
  return { type, id: match[2]! }
}

/** A 200 with `headers` and `content`; its status and bytes go to the admission, for the front door's log line. */
const answer = (response: ServerResponse, admission: Admission, content: string, headers: (bytes: number, requestId: string) => Record<string, string | number>) => {
  const bytes = Buffer.byteLength(content)
  admission.status = 200
  admission.bytesOut = bytes
  response.writeHead(200, headers(bytes, admission.requestId))
  response.end(content)
  return true
}

/** The answer to a search: its Bundle's text, with the headers the general path gives. */
export const answerSearch = (response: ServerResponse, admission: Admission, text: string) => answer(response, admission, text, searchHeaders)

/** The answer to a read of the current version `row`, with the headers the general path gives (rest/read.ts). */
export const answerRead = (response: ServerResponse, admission: Admission, row: { readonly version: number; readonly commit_ts: number | string; readonly content: string }) =>
  answer(response, admission, row.content, (bytes, requestId) => ({
    etag: etag(row.version),
    "last-modified": httpDate(Number(row.commit_ts)),
    "content-type": jsonType,
    "content-length": bytes,
    "x-request-id": requestId
  }))

/** How many requests the fast path has answered. */
export interface FastCounts {
  reads: number
  searches: number
}

export interface FastReadOptions {
  readonly sqlitePath: string
  readonly publicUrl: string | undefined
  /** `server.max_page_bytes`, for the fast search. */
  readonly maxPageBytes: number
  readonly clock: Clock.Clock
  /** The catalog being served now. */
  readonly catalog: () => Catalog
  /** Builds the fast search's statements (never runs them). */
  readonly sql: SqlClient.SqlClient
  /** Whether a search index is being rebuilt now. */
  readonly indexing: () => boolean
  /** Counted up for each answer. */
  readonly counts: FastCounts
}

export interface FastRead {
  readonly handler: FastHandler
  readonly close: () => void
}

/** Opens the fast read's own read-only connection to the SQLite file (in WAL mode, it never waits for the writer). */
export const openFastRead = (options: FastReadOptions): FastRead => {
  const db = new Sqlite(options.sqlitePath, { readonly: true, fileMustExist: true })
  db.pragma("busy_timeout = 5000")
  db.pragma(`cache_size = -${fastCacheKib}`) // KiB (src/db/sqliteOpen.ts)
  const statement = db.prepare<[string, string], Row>(
    `SELECT v.version, v.commit_ts, v.content
     FROM resources r JOIN resource_versions v ON v.rkey = r.rkey AND v.version = r.version
     WHERE r.type = ? AND r.id = ?`
  )
  const { clock } = options
  const search = makeFastSearch({ ...options, db, nowMillis: () => clock.unsafeCurrentTimeMillis() })

  const read = (response: ServerResponse, admission: Admission, target: { readonly type: string; readonly id: string }): boolean => {
    let row: Row | undefined
    try {
      row = statement.get(target.type, target.id)
    } catch {
      return false
    }
    if (row === undefined || row.content === null) return false
    options.counts.reads++
    return answerRead(response, admission, { version: row.version, commit_ts: row.commit_ts, content: row.content })
  }

  const handler = (request: IncomingMessage, response: ServerResponse, admission: Admission): boolean => {
    if (request.method !== "GET") return false
    const target = fastReadTarget(request, admission, options.catalog())
    if (target !== undefined) return read(response, admission, target)
    const found = search(request, admission.principal)
    if (found === undefined) return false
    options.counts.searches++
    return answerSearch(response, admission, found)
  }

  return { handler, close: () => db.close() }
}

/**
 * What a fast path follows while the server serves (until `scope` closes): the catalog as it is rebuilt, and
 * whether the backfill is rebuilding a search index now; `changed` is called after each new catalog and each
 * step of the backfill (what a search reads may have changed).
 */
export const followServed = (scope: Scope.Scope, changed: () => void = () => undefined) =>
  Effect.gen(function*() {
    const catalogs = yield* CatalogService
    const served = { catalog: yield* catalogs.get, indexing: false }
    yield* catalogs.changes.pipe(
      Stream.runForEach((catalog) => Effect.sync(() => {
        served.catalog = catalog
        changed()
      })),
      Effect.forkIn(scope)
    )
    const backfill = yield* Effect.serviceOption(Backfill)
    if (Option.isSome(backfill)) {
      yield* backfill.value.changes.pipe(
        Stream.runForEach((progress) => Effect.sync(() => {
          served.indexing = progress.running
          changed()
        })),
        Effect.forkIn(scope)
      )
    }
    return { catalog: (): Catalog => served.catalog, indexing: (): boolean => served.indexing }
  })

/**
 * Puts the fast read (and search) in `slot` while the server is serving a SQLite file, following the catalog
 * as it is rebuilt and the backfill's progress. Its connection closes with `scope` (the database's); the slot
 * is emptied first, when the current scope closes. When the connection cannot be opened, reads and searches
 * simply take the general path.
 */
export const installFastRead = (
  slot: FastSlot,
  options: Omit<FastReadOptions, "catalog" | "clock" | "indexing">,
  scope: Scope.Scope
) =>
  Effect.gen(function*() {
    const clock = yield* Effect.clock
    const served = yield* followServed(scope)
    const opened = yield* Effect.try(() => openFastRead({ ...options, clock, ...served })).pipe(
      Effect.tap((fast) => Scope.addFinalizer(scope, Effect.sync(fast.close))),
      Effect.tapError((error) => Effect.logWarning("reads take the general path: the fast read's connection did not open", { error: String(error.error) })),
      Effect.option
    )
    if (Option.isNone(opened)) return
    slot.current = opened.value.handler
    yield* Effect.addFinalizer(() => Effect.sync(() => void (slot.current = undefined)))
  })
