/**
 * Who is asking (ARCHITECTURE.md, "A request's way"). Without authorization every caller is anonymous and
 * known by its client address; the authorization layer adds callers known by a token (client, user, scopes,
 * patient compartment). A token the front door cannot resolve synchronously (not in memory) leaves the caller
 * `Unresolved`: a fast handler then declines, and the Effect edge resolves it.
 */
import { Context } from "effect"
import type { IncomingHttpHeaders } from "node:http"

/** A caller with no token, limited and metered by its address. */
export interface Anonymous {
  readonly _tag: "Anonymous"
  readonly address: string
}

/** A caller known by a token: the client, the user it acts for, its scopes and its patient compartment. */
export interface Authorized {
  readonly _tag: "Authorized"
  readonly address: string
  readonly clientId: string
  readonly user: string | undefined
  readonly scopes: ReadonlyArray<string>
  /** The patient whose compartment bounds what the caller sees (a patient launch). */
  readonly patient: string | undefined
  /** The user as a FHIR resource (`Practitioner/123`), when the token names one. */
  readonly fhirUser?: string | undefined
  /** The launch encounter, when the token carries one. */
  readonly encounter?: string | undefined
  /** The access token's id (`jti`), for the audit trail. */
  readonly tokenId?: string | undefined
  /** When the token expires, in milliseconds since the epoch (a `/sync` connection closes its queries then). */
  readonly expiresAt?: number | undefined
}

/** A token the front door could not resolve without waiting (not in memory): the Effect edge resolves it. */
export interface Unresolved {
  readonly _tag: "Unresolved"
  readonly address: string
  readonly token: string
}

export type Principal = Anonymous | Authorized | Unresolved

/** The caller of the request being answered, as the Effect side reads it (the front door's admission). */
export const Principal = Context.GenericTag<Principal>("svc/http/Principal")

export const anonymous = (address: string): Principal => ({ _tag: "Anonymous", address })

/**
 * The caller's key, one for limits, quotas, metering, audit and the change feed's `actor`: `client:<id>`
 * (with `/user:<user>` when the token names one) for a caller known by a token, `address:<address>` otherwise.
 */
export const callerKey = (principal: Principal): string =>
  principal._tag === "Authorized"
    ? `client:${principal.clientId}${principal.user === undefined ? "" : `/user:${principal.user}`}`
    : `address:${principal.address}`

/** Whether the caller is known without waiting: only then may a fast handler answer. */
export const isResolved = (principal: Principal): boolean => principal._tag !== "Unresolved"

/**
 * Resolves the caller synchronously from the request's headers and client address. It may not wait: a
 * token it cannot resolve in memory gives `Unresolved`.
 */
export type PrincipalResolver = (headers: IncomingHttpHeaders, address: string) => Principal

/** Every caller anonymous, by address: the server without an authorization layer. */
export const anonymousResolver: PrincipalResolver = (_headers, address) => anonymous(address)
