/**
 * One structured log line per request (spec: Events, Request log): time, request id, method, path,
 * status, duration, client address and response bytes. `X-Request-Id` is taken from the request when
 * it is a sensible token, otherwise generated, and returned on the response.
 */
import { HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Clock, Context, Effect, Option } from "effect"
import { randomUUID } from "node:crypto"
import { LogSink } from "../logging/Log.ts"
import { clientAddress, type TrustedProxies } from "./ClientAddress.ts"

export interface RequestLogOptions {
  readonly trusted: TrustedProxies
  /** `request_log.enabled`: write the line (the request id is returned either way). */
  readonly requestLog: boolean
}

/** Who is asking, for the modules behind the edge (limits, audit). */
export class RequestInfo extends Context.Tag("svc/http/RequestInfo")<RequestInfo, {
  readonly requestId: string
  readonly client: string
}>() {}

const requestIdPattern = /^[A-Za-z0-9._:@\-+=/]{1,128}$/

export const pickRequestId = (given: string | undefined): string =>
  given !== undefined && requestIdPattern.test(given) ? given : randomUUID()

/** The path of a request URL, without its query. */
export const pathOf = (url: string): string => {
  const query = url.indexOf("?")
  return query === -1 ? url : url.slice(0, query)
}

const bytesOf = (response: HttpServerResponse.HttpServerResponse): number | null => {
  const body = response.body
  switch (body._tag) {
    case "Uint8Array":
      return body.contentLength
    case "Empty":
      return 0
    default:
      return body.contentLength ?? null
  }
}

export const around = <R>(
  app: Effect.Effect<HttpServerResponse.HttpServerResponse, never, R>,
  options: RequestLogOptions
): Effect.Effect<HttpServerResponse.HttpServerResponse, never, Exclude<R, RequestInfo> | HttpServerRequest.HttpServerRequest | LogSink> =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const requestId = pickRequestId(request.headers["x-request-id"])
    const client = clientAddress(Option.getOrUndefined(request.remoteAddress), request.headers["x-forwarded-for"], options.trusted)
    const started = yield* Clock.currentTimeNanos
    const response = yield* Effect.provideService(app, RequestInfo, { requestId, client })
    if (options.requestLog) {
      const sink = yield* LogSink
      const ended = yield* Clock.currentTimeNanos
      const now = yield* Clock.currentTimeMillis
      sink.write(JSON.stringify({
        time: new Date(now).toISOString(),
        level: "info",
        message: "request",
        request_id: requestId,
        method: request.method,
        path: pathOf(request.url),
        status: response.status,
        duration_ms: Number(ended - started) / 1e6,
        client,
        bytes: bytesOf(response)
      }))
    }
    return HttpServerResponse.setHeader(response, "x-request-id", requestId)
  })
