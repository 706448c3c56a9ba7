/**
 * Health probes (spec: Endpoints, Health probes): `/livez`, `/readyz`, `/healthz`. They read no
 * resource, are not logged, and answer in every phase of the process.
 */
import { HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, Option } from "effect"
import { Readiness, type Role } from "./Readiness.ts"

export type { Role }

export interface ProbeOptions {
  readonly role: Role
  /**
   * `/healthz?verbose=1` needs a token (spec: Authentication 2, under `--smart`): it is then not a probe but
   * a request like any other, admitted by the front door, and answered by the edge once its caller is known.
   */
  readonly verboseNeedsToken?: boolean
}

const json = (status: number, body: unknown) =>
  HttpServerResponse.unsafeJson(body, { status, headers: { "cache-control": "no-store" } })

const path = (request: HttpServerRequest.HttpServerRequest): string => {
  const query = request.url.indexOf("?")
  return query === -1 ? request.url : request.url.slice(0, query)
}

const verboseUrl = (url: string): boolean => {
  const query = url.indexOf("?")
  if (query === -1) return false
  const value = new URLSearchParams(url.slice(query + 1)).get("verbose")
  return value === "1" || value === "true"
}

const verbose = (request: HttpServerRequest.HttpServerRequest): boolean => verboseUrl(request.url)

const healthz = (request: HttpServerRequest.HttpServerRequest, options: ProbeOptions) =>
  Effect.gen(function*() {
    const readiness = yield* Readiness
    const ready = yield* readiness.check
    const phase = yield* readiness.phase
    const role = (yield* readiness.role) ?? options.role
    // A standby takes no traffic even when it could: the balancer must send it nothing.
    const ok = ready.status === "ok" && role !== "standby"
    const body: Record<string, unknown> = {
      status: ok ? "ok" : ready.status === "ok" ? "unavailable" : ready.status,
      role,
      ...(ready.reason ? { reason: ready.reason } : role === "standby" ? { reason: "standby takes no traffic" } : {})
    }
    // While starting, a step may say how far it has got (the search index backfill does).
    const details = phase._tag === "stopping" ? undefined : phase.details
    if (verbose(request) && details !== undefined) Object.assign(body, yield* details)
    return json(ok ? 200 : 503, body)
  })

/** Whether `url` is `path`, with or without a query; nothing is sliced (every request asks). */
const isPath = (url: string, path: string): boolean =>
  url.startsWith(path) && (url.length === path.length || url.charCodeAt(path.length) === 63 /* ? */)

/** Whether a request is for a probe (the front door neither admits nor logs it). */
export const isProbe = (method: string | undefined, url: string, options?: ProbeOptions): boolean =>
  (method === "GET" || method === "HEAD") &&
  (isPath(url, "/livez") || isPath(url, "/readyz") || (isPath(url, "/healthz") && !(options?.verboseNeedsToken === true && verboseUrl(url))))

/** `/healthz?verbose=1` when it needs a token: answered by the edge after admission (see `verboseNeedsToken`). */
export const isGuardedHealth = (method: string | undefined, url: string, options: ProbeOptions): boolean =>
  options.verboseNeedsToken === true && (method === "GET" || method === "HEAD") && isPath(url, "/healthz") && verboseUrl(url)

/** The probe's response when the request is for a probe. */
export const answer = (
  request: HttpServerRequest.HttpServerRequest,
  options: ProbeOptions
): Effect.Effect<Option.Option<HttpServerResponse.HttpServerResponse>, never, Readiness> => {
  if (request.method !== "GET" && request.method !== "HEAD") return Effect.succeedNone
  switch (path(request)) {
    case "/livez":
      return Effect.succeedSome(json(200, { status: "ok" }))
    case "/readyz":
      return Effect.map(Readiness, (readiness) => readiness.check).pipe(
        Effect.flatten,
        Effect.map((result) => Option.some(json(result.status === "ok" ? 200 : 503, result)))
      )
    case "/healthz":
      return Effect.map(healthz(request, options), Option.some)
    default:
      return Effect.succeedNone
  }
}
