/**
 * The pieces of the request log line (spec: Events, Request log), which the front door writes once per
 * request (FrontDoor.ts): time, request id, method, path, status, duration, client address and response
 * bytes. `X-Request-Id` is taken from the request when it is a sensible token, otherwise generated, and
 * returned on the response.
 */
import type { HttpServerResponse } from "@effect/platform"
import { Context } from "effect"
import { randomUUID } from "node:crypto"
import type { TrustedProxies } from "./ClientAddress.ts"

export interface RequestLogOptions {
  readonly trusted: TrustedProxies
  /** `request_log.enabled`: write the line (the request id is returned either way). */
  readonly requestLog: boolean
}

/** The request's id and client address, for the modules behind the edge; provided from the front door's admission. */
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

/** The body bytes of an Effect response: null when it is streamed without a known length. */
export const bytesOf = (response: HttpServerResponse.HttpServerResponse): number | null => {
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
