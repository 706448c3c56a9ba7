/**
 * The access token's content (JWT Profile for OAuth 2.0 Access Tokens, RFC 9068 2.2, with SMART App Launch
 * 2.2's launch context): the claims written for a grant, the claims read back from a verified token, and
 * the reason a token is refused, in words a client may be shown.
 */
import type { JWTPayload } from "jose"
import type { AccessClaims, Grant } from "./Grant.ts"

/** The `typ` header of an access token (RFC 9068 2.1). */
export const accessTokenType = "at+jwt"

/** Where the token is valid: `iss` (the server's origin) and `aud` (the FHIR base URL). */
export interface Audience {
  readonly issuer: string
  readonly audience: string
}

/** `fhirUser` as OpenID Connect and introspection give it: an absolute URL under the FHIR base. */
export const absoluteFhirUser = (fhirBase: string, fhirUser: string): string =>
  /^[a-z][a-z0-9+.-]*:/i.test(fhirUser) ? fhirUser : `${fhirBase}/${fhirUser}`

/** `fhirUser` as the grant and the principal hold it: relative to the FHIR base when under it. */
const relativeFhirUser = (fhirBase: string, fhirUser: string): string =>
  fhirUser.startsWith(`${fhirBase}/`) ? fhirUser.slice(fhirBase.length + 1) : fhirUser

/**
 * The claims of an access token for `grant`. `sub` is the user, or the client itself for a grant without
 * one (client_credentials: RFC 9068 2.2); read back, a `sub` equal to `client_id` is therefore no user.
 */
export const accessPayload = (where: Audience, grant: Grant, jti: string, iat: number, exp: number): JWTPayload => ({
  iss: where.issuer,
  aud: where.audience,
  sub: grant.subject ?? grant.clientId,
  client_id: grant.clientId,
  scope: grant.scopes.join(" "),
  ...(grant.patient === undefined ? {} : { patient: grant.patient }),
  ...(grant.encounter === undefined ? {} : { encounter: grant.encounter }),
  ...(grant.fhirUser === undefined ? {} : { fhirUser: absoluteFhirUser(where.audience, grant.fhirUser) }),
  jti,
  iat,
  exp
})

const text = (value: unknown): string | undefined => typeof value === "string" && value !== "" ? value : undefined
const seconds = (value: unknown): number | undefined => typeof value === "number" && Number.isFinite(value) ? value : undefined

/** The claims of a verified token, or undefined when one svc requires is missing or of the wrong type. */
export const claimsOf = (where: Audience, payload: JWTPayload): AccessClaims | undefined => {
  const jti = text(payload.jti)
  const clientId = text(payload["client_id"])
  const sub = text(payload.sub)
  const scope = payload["scope"]
  const exp = seconds(payload.exp)
  const iat = seconds(payload.iat)
  if (jti === undefined || clientId === undefined || sub === undefined || typeof scope !== "string" || exp === undefined || iat === undefined) {
    return undefined
  }
  const fhirUser = text(payload["fhirUser"])
  return {
    jti,
    clientId,
    scopes: scope.split(" ").filter((s) => s !== ""),
    subject: sub === clientId ? undefined : sub,
    fhirUser: fhirUser === undefined ? undefined : relativeFhirUser(where.audience, fhirUser),
    patient: text(payload["patient"]),
    encounter: text(payload["encounter"]),
    exp,
    iat
  }
}

/** Why a token is refused, as a client may read it (no part of the token in it). */
export const reasons = {
  malformed: "the token is not a well-formed access token of this server",
  algorithm: "the token is not signed with RS256",
  unknownKey: "the token is signed with a key this server does not know",
  signature: "the token's signature does not verify",
  expired: "the token has expired",
  notYetValid: "the token is not valid yet",
  notForUs: "the token is not for this server",
  notAccess: "the token is not an access token",
  revoked: "the token was revoked"
} as const

/** The reason for one of jose's verification errors (by its stable `code`). */
export const reasonOfJoseError = (error: unknown): string => {
  const code = typeof error === "object" && error !== null && "code" in error ? error.code : undefined
  const claim = typeof error === "object" && error !== null && "claim" in error ? error.claim : undefined
  switch (code) {
    case "ERR_JWT_EXPIRED":
      return reasons.expired
    case "ERR_JWS_SIGNATURE_VERIFICATION_FAILED":
      return reasons.signature
    case "ERR_JOSE_ALG_NOT_ALLOWED":
      return reasons.algorithm
    case "ERR_JWT_CLAIM_VALIDATION_FAILED":
      switch (claim) {
        case "nbf":
          return reasons.notYetValid
        case "iss":
        case "aud":
          return reasons.notForUs
        case "typ":
          return reasons.notAccess
        default:
          return reasons.malformed
      }
    default:
      return reasons.malformed
  }
}
