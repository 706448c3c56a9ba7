/**
 * How svc talks to the provider's endpoints and reads their failures (docs/smart-oidc.md, "Plain http on
 * loopback only" and "Errors"): a network failure makes the provider unavailable; a protocol failure refuses
 * the sign-in. Only error messages are kept, never the errors' cause objects, which may hold the callback's
 * parameters (the code).
 */
import { Duration } from "effect"
import * as oidc from "openid-client"
import { refused, UpstreamUnavailable } from "./errors.ts"
import { isLoopbackHost } from "../../config/Setting.ts"
import { networkFailure } from "../../http/networkFailure.ts"

/** 127.0.0.0/8, ::1 and localhost: a provider on this machine (the same rule as a loopback bind). */
export { isLoopbackHost }

/** Refused by the loopback guard: an http endpoint on another host, named by a loopback provider. */
class InsecureEndpoint extends Error {}

const causeOf = (error: unknown): unknown => (error instanceof Error ? error.cause : undefined)

/** A network failure's reason in words (no answer, refused, timed out), or undefined for a protocol error. */
export const networkReason = (error: unknown, timeout: Duration.Duration): string | undefined => {
  let failedFetch: string | undefined
  for (let e: unknown = error, depth = 0; e !== undefined && depth < 5; e = causeOf(e), depth++) {
    if (e instanceof InsecureEndpoint) return e.message
    if (e instanceof oidc.ClientError && (e.code === "OAUTH_TIMEOUT" || e.code === "OAUTH_ABORT")) {
      return `no answer within ${Duration.format(timeout)}`
    }
    if (e instanceof oidc.ClientError && e.code === "OAUTH_RESPONSE_IS_NOT_CONFORM") {
      const response = e.cause
      return response instanceof Response ? `answered HTTP ${response.status}` : "answered with an unexpected HTTP status"
    }
    const known = networkFailure(e)
    if (known !== undefined) return known
    if (e instanceof TypeError && e.message === "fetch failed") {
      const inner = causeOf(e)
      failedFetch = inner instanceof Error ? inner.message : "the request failed"
    }
  }
  return failedFetch
}

/** An error's messages down its causes, never the cause objects (they may hold the callback's parameters). */
export const messages = (error: unknown): string => {
  const parts: Array<string> = []
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 3; e = e.cause, depth++) parts.push(e.message)
  return parts.join(": ")
}

/** Why a failed step of `complete` failed: the provider is unavailable, or the sign-in is refused. */
export const completionFailure = (issuer: string, timeout: Duration.Duration, step: string) => (error: unknown) => {
  const reason = networkReason(error, timeout)
  if (reason !== undefined) return new UpstreamUnavailable({ issuer, reason })
  if (error instanceof oidc.AuthorizationResponseError) {
    const description = error.error_description === undefined ? "" : `: ${error.error_description}`
    return refused("provider_error", `the provider ended the sign-in with ${error.error}${description}`)
  }
  if (error instanceof oidc.ResponseBodyError) {
    const description = error.error_description === undefined ? "" : `: ${error.error_description}`
    return refused("invalid_response", `${step}: the provider answered HTTP ${error.status} ${error.error}${description}`)
  }
  return refused("invalid_response", `${step}: ${messages(error)}`)
}

/**
 * The fetch for a loopback issuer, for which openid-client's https-only rule is lifted: every endpoint the
 * provider names must still be https or on loopback, so no code or secret crosses the network in the clear.
 */
export const loopbackGuard: oidc.CustomFetch = (url, init) => {
  const target = new URL(url)
  return target.protocol === "http:" && !isLoopbackHost(target.hostname)
    ? Promise.reject(new InsecureEndpoint(`the provider named an http endpoint off this machine (${target.origin})`))
    : fetch(url, init as RequestInit)
}
