/**
 * Who may read the governance endpoints (spec: Authentication 2, Endpoints "Governance endpoints"): anyone
 * without `--smart`; under it, a caller whose token grants reading AuditEvent at the system level, SMART's
 * `system/AuditEvent.read` (v1) or a v2 scope with `r` among its permissions (`system/AuditEvent.rs`), or the
 * same on every type (`system/*.read`, `system/*.rs`).
 */
import type { HttpServerResponse } from "@effect/platform"
import { outcomeResponse } from "../http/OperationOutcome.ts"
import type { Principal } from "../http/Principal.ts"

/** Whether `scope` grants reading `type` at the system level. */
export const grantsSystemRead = (scope: string, type: string): boolean => {
  const match = /^system\/([A-Za-z]+|\*)\.([a-z*]+)(\?.*)?$/.exec(scope)
  if (match === null) return false
  const [, target, permissions, query] = match
  if (target !== type && target !== "*") return false
  // A v2 scope limited by a query reads part of the type only: not the whole trail.
  if (query !== undefined) return false
  if (permissions === "read" || permissions === "*") return true
  return /^c?r?u?d?s?$/.test(permissions!) && permissions!.includes("r")
}

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
