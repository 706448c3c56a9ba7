/**
 * The authorization server's decisions as the audit trail records them (src/governance/audit/SecurityEvents.ts;
 * docs/governance.md, "Audit of the authorization server"). Each is made from what the endpoint decided on:
 * the client id, the user, the scopes, the launch context, the reason the client is told. Never from a
 * credential: a token, code, secret, assertion, code_verifier, cookie or csrf value is not passed here.
 */
import type { SecurityDecision } from "../governance/audit/SecurityEvents.ts"
import { peekAssertion } from "./clientAssertion.ts"
import { basicCredentials, type Client, type RequestHeaders } from "./Clients.ts"
import type { Grant } from "./Grant.ts"

/** The client ids a request names, authenticated or not: the form's `client_id`, the Basic user, an assertion's `iss`. */
export const claimedClient = (headers: RequestHeaders, form: URLSearchParams): string | undefined => {
  const named = form.get("client_id")
  if (named !== null && named !== "") return named
  const header = headers["authorization"]
  const authorization = typeof header === "string" ? header : header?.[0]
  if (authorization !== undefined && /^basic(\s|$)/i.test(authorization)) {
    const credentials = basicCredentials(authorization)
    return typeof credentials === "string" ? undefined : credentials.id
  }
  const assertion = form.get("client_assertion")
  if (assertion === null) return undefined
  const peeked = peekAssertion(assertion)
  return typeof peeked === "string" ? undefined : peeked.issuer
}

/** Whether the client proved who it is (a public client gives only its id). */
export const authenticatedClient = (client: Client): boolean => client.metadata.token_endpoint_auth_method !== "none"

/** A token issued for `grant` by the grant type asked. */
export const tokenIssued = (client: Client, grant: Grant, grantType: string): SecurityDecision => ({
  kind: "token",
  outcome: "success",
  known: authenticatedClient(client) || grant.subject !== undefined,
  client: grant.clientId,
  user: grant.subject,
  fhirUser: grant.fhirUser,
  patient: grant.patient,
  encounter: grant.encounter,
  scopes: grant.scopes,
  details: { grant_type: grantType }
})

/** A token request of an authenticated client refused with an OAuth `error` (RFC 6749, 5.2). */
export const tokenRefused = (client: Client, grantType: string | null, error: string, description: string, scope: string | null): SecurityDecision => ({
  kind: "token",
  outcome: "refused",
  reason: `${error}: ${description}`,
  known: authenticatedClient(client),
  client: client.clientId,
  scopes: scope === null ? undefined : scope.split(" ").filter((s) => s !== ""),
  details: { grant_type: grantType ?? undefined }
})

/** The sign-in that failed at the upstream provider's callback: refused (the provider, the allowlist) or failed (unreachable). */
export const signInFailed = (clientId: string, failure: unknown): SecurityDecision => {
  const tag = typeof failure === "object" && failure !== null && "_tag" in failure ? failure._tag : undefined
  if (tag === "SignInRefused") {
    const refusal = failure as { readonly reason: string; readonly message: string }
    return { kind: "sign-in", outcome: "refused", known: false, client: clientId, reason: `${refusal.reason}: ${refusal.message}`, details: { method: "upstream" } }
  }
  return {
    kind: "sign-in",
    outcome: "failed",
    known: false,
    client: clientId,
    reason: tag === "UpstreamUnavailable" ? "the sign-in provider is unavailable" : "the sign-in could not be completed",
    details: { method: "upstream" }
  }
}

/** `token_type_hint` when it is one of RFC 7009's (anything else is not repeated). */
export const tokenTypeHint = (form: URLSearchParams): string | undefined => {
  const hint = form.get("token_type_hint")
  return hint === "access_token" || hint === "refresh_token" ? hint : undefined
}
