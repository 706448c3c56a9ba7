/**
 * Who may read the governance endpoints (spec: Authentication 2, Endpoints "Governance endpoints"): anyone
 * without `--smart`; under it, a caller whose token grants reading AuditEvent at the system level, SMART's
 * `system/AuditEvent.read` (v1) or a v2 scope with `r` among its permissions (`system/AuditEvent.rs`), or the
 * same on every type (`system/*.read`, `system/*.rs`).
 */
import type { HttpServerResponse } from "@effect/platform"
import { grants, parseScope } from "../auth/scopes.ts"
import { outcomeResponse } from "../http/OperationOutcome.ts"
import type { Principal } from "../http/Principal.ts"

/** Whether `scope` grants reading every `type` resource at the system level (a query-narrowed scope does not). */
export const grantsSystemRead = (scope: string, type: string): boolean => grants(parseScope(scope), "system", type, "r")

/** The scope the governance endpoints need, as the spec names it. */
export const governanceScope = "system/AuditEvent.read"

/**
 * The refusal of a governance endpoint for `principal`, undefined when it may read: 401 without a token
 * (with `WWW-Authenticate`), 403 when the token lacks the scope.
 */
export const governanceRefusal = (principal: Principal, smart: boolean): HttpServerResponse.HttpServerResponse | undefined => {
  if (!smart) return undefined
  if (principal._tag !== "Authorized") {
    return outcomeResponse("login", `this endpoint needs a bearer token with scope ${governanceScope}`, {
      status: 401,
      headers: { "www-authenticate": `Bearer scope="${governanceScope}"` }
    })
  }
  if (principal.scopes.some((scope) => grantsSystemRead(scope, "AuditEvent"))) return undefined
  return outcomeResponse("forbidden", `this endpoint needs scope ${governanceScope}`, { status: 403 })
}
