/**
 * `GET /_requests` (spec: Endpoints, "Governance endpoints"; docs/governance.md, "Request log"): the stored
 * request-log rows, newest first, filtered and paged by a keyset cursor on (time, id), so that a page
 * neither skips nor repeats rows however many are added while a caller pages. The rows still in the
 * store's buffer are written before the answer, so that a caller sees its own recent requests. With
 * `request_log.store = false` nothing is stored and the endpoint answers 404.
 */
import { HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { controlCharacter } from "../db/text.ts"
import { outcomeResponse } from "../http/OperationOutcome.ts"
import type { RootHandler } from "../http/RootRoutes.ts"
import { governanceRefusal } from "./access.ts"
import { type GovernanceRules, GovernanceSettings } from "./Governance.ts"
import { make, type RequestLogFilter, type RequestLogRow, type RequestLogStore } from "./RequestLogStore.ts"

export const path = "/_requests"

/** Rows per page unless `_count` says otherwise, and the most `_count` may ask. */
export const defaultCount = 100
export const maxCount = 1000

const parameters = new Set(["client", "caller", "status", "method", "path", "request_id", "since", "until", "_count", "_cursor"])

class BadParameter {
  constructor(readonly name: string, readonly reason: string) {}
}

const bad = (name: string, reason: string): never => {
  throw new BadParameter(name, reason)
}

const instantPattern = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2}))?$/

/** An instant: a date (midnight UTC) or a date-time with its zone. */
export const parseInstant = (name: string, value: string): number => {
  const millis = instantPattern.test(value) ? Date.parse(value) : NaN
  return Number.isFinite(millis) ? millis : bad(name, `${JSON.stringify(value)} is not an instant (2024-05-01 or 2024-05-01T12:00:00Z)`)
}

/** The cursor of a page's last row, opaque to callers. */
export const cursorOf = (row: { readonly time: number; readonly id: number }): string =>
  Buffer.from(`${row.time}.${row.id}`).toString("base64url")

const parseCursor = (value: string): { readonly time: number; readonly id: number } => {
  const match = /^(\d{1,16})\.(\d{1,19})$/.exec(Buffer.from(value, "base64url").toString())
  return match === null ? bad("_cursor", "is not a cursor this endpoint gave") : { time: Number(match[1]), id: Number(match[2]) }
}

const parseStatus = (value: string): { readonly low: number; readonly high: number } => {
  if (/^[1-5]\d\d$/.test(value)) return { low: Number(value), high: Number(value) }
  if (/^[1-5]xx$/i.test(value)) return { low: Number(value[0]) * 100, high: Number(value[0]) * 100 + 99 }
  return bad("status", `${JSON.stringify(value)} is not a status (404) or a class of statuses (4xx)`)
}

const parseCount = (value: string): number => {
  if (!/^\d{1,7}$/.test(value) || Number(value) < 1) return bad("_count", `${JSON.stringify(value)} is not a whole number of at least 1`)
  return Math.min(Number(value), maxCount)
}

/** The filter a query asks for; throws `BadParameter` naming what cannot be read. */
export const parseFilter = (query: URLSearchParams): RequestLogFilter => {
  const seen = new Set<string>()
  for (const name of query.keys()) {
    if (!parameters.has(name)) bad(name, `is not a parameter of ${path} (${[...parameters].join(", ")})`)
    if (seen.has(name)) bad(name, "is given more than once")
    seen.add(name)
  }
  const text = (name: string): string | undefined => {
    const value = query.get(name)
    if (value !== null && controlCharacter.test(value)) bad(name, "holds a control character, which no stored value does")
    return value === null ? undefined : value === "" ? bad(name, "is empty") : value
  }
  const method = text("method")
  if (method !== undefined && !/^[A-Za-z]+$/.test(method)) bad("method", `${JSON.stringify(method)} is not an HTTP method`)
  const status = text("status")
  const since = text("since")
  const until = text("until")
  const count = text("_count")
  const cursor = text("_cursor")
  return {
    client: text("client"),
    caller: text("caller"),
    status: status === undefined ? undefined : parseStatus(status),
    method: method?.toUpperCase(),
    pathPrefix: text("path"),
    requestId: text("request_id"),
    since: since === undefined ? undefined : parseInstant("since", since),
    until: until === undefined ? undefined : parseInstant("until", until),
    after: cursor === undefined ? undefined : parseCursor(cursor),
    count: count === undefined ? defaultCount : parseCount(count)
  }
}

/** A row as the endpoint serves it. */
export const rowJson = (row: RequestLogRow) => ({
  time: new Date(row.time).toISOString(),
  request_id: row.requestId,
  method: row.method,
  path: row.path,
  status: row.status,
  duration_ms: row.durationMs,
  client: row.client,
  caller: row.caller,
  interaction: row.interaction,
  resource_type: row.resourceType,
  cost: row.cost,
  bytes_in: row.bytesIn,
  bytes_out: row.bytesOut,
  aborted: row.aborted
})

/** The link to the page after `last`: the same query with its cursor, relative to the server's root. */
const nextLink = (query: URLSearchParams, last: RequestLogRow): string => {
  const next = new URLSearchParams(query)
  next.set("_cursor", cursorOf(last))
  return `${path}?${next.toString()}`
}

export const handler = (store: RequestLogStore, smart: boolean): RootHandler => (request) =>
  Effect.gen(function*() {
    const refusal = governanceRefusal(request.principal, smart)
    if (refusal !== undefined) return refusal
    const query = new URL(request.http.url, "http://localhost").searchParams
    let filter: RequestLogFilter
    try {
      filter = parseFilter(query)
    } catch (error) {
      if (error instanceof BadParameter) return outcomeResponse("invalid", `parameter ${error.name}: ${error.reason}`, { status: 400 })
      throw error
    }
    yield* store.flush
    const page = yield* store.query(filter).pipe(Effect.either)
    if (page._tag === "Left") {
      yield* Effect.logError("the request log could not be read", page.left)
      return outcomeResponse("exception", "the request log could not be read", { status: 500 })
    }
    const { rows, more } = page.right
    const body = {
      rows: rows.map(rowJson),
      ...(more ? { next: nextLink(query, rows[rows.length - 1]!) } : {}),
      not_stored: store.notStored()
    }
    return HttpServerResponse.text(JSON.stringify(body), { contentType: "application/json" })
  })

/** `/_requests` when nothing is stored. */
export const notStoredHandler = (smart: boolean): RootHandler => (request) =>
  Effect.succeed(
    governanceRefusal(request.principal, smart) ??
      outcomeResponse("not-found", "the request log is not stored: request_log.store = false", { status: 404 })
  )

/**
 * The part: the listener and the endpoint when `request_log.store` is on (the log line is the front
 * door's, written either way); the endpoint's 404 alone when it is off.
 */
export const rules = Effect.gen(function*() {
  const settings = yield* GovernanceSettings
  const { requestLog, smart } = settings
  if (!requestLog.store) {
    return { policies: [], listeners: [], routes: { [path]: notStoredHandler(smart) } } satisfies GovernanceRules
  }
  const store = yield* make({ retentionHours: requestLog.retention_hours, refusedPerSecond: requestLog.refused_per_second, smart })
  return { policies: [], listeners: [store.listener], routes: { [path]: handler(store, smart) } } satisfies GovernanceRules
})
