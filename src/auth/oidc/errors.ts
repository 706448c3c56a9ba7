/**
 * The errors of the sign-in through an OpenID Connect provider (docs/smart-oidc.md, "Errors"). `message` is
 * what the sign-in page may show the user; `detail` is for the server log only. Neither ever holds a secret
 * (client secret, code, token).
 */
import { Schema } from "effect"

/**
 * The provider cannot be used: its discovery document or one of its endpoints did not answer (connection
 * refused, host not found, timeout) or did not answer as an OpenID provider. The server keeps running; the
 * next sign-in tries again.
 */
export class UpstreamUnavailable extends Schema.TaggedError<UpstreamUnavailable>()("UpstreamUnavailable", {
  issuer: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `the sign-in provider ${this.issuer} is unavailable: ${this.reason}`
  }
}

/**
 * Why a sign-in was refused:
 * - `not_allowed`: the user signed in at the provider but the allowlist (claims, e-mail domain) excludes them;
 * - `provider_error`: the provider ended the sign-in with an error (the user cancelled, access denied);
 * - `invalid_response`: the callback or the provider's answers did not check out (state, nonce, PKCE,
 *   id_token signature, issuer, audience, times);
 * - `unbound`: the user could not be linked to one FHIR resource (a malformed fhirUser claim, an ambiguous
 *   lookup).
 */
export const RefusalReason = Schema.Literal("not_allowed", "provider_error", "invalid_response", "unbound")
export type RefusalReason = typeof RefusalReason.Type

export class SignInRefused extends Schema.TaggedError<SignInRefused>()("SignInRefused", {
  reason: RefusalReason,
  /** What the user may read. */
  message: Schema.String,
  /** What the server log gets: the claim, value or check at fault. */
  detail: Schema.String
}) {}

/** The messages a user may read, one per refusal reason. */
export const refusalMessages: Readonly<Record<RefusalReason, string>> = {
  not_allowed: "your account is not allowed to sign in here",
  provider_error: "the sign-in was not completed at the sign-in provider",
  invalid_response: "the sign-in could not be completed; start again from the application",
  unbound: "your account could not be linked to a single person on this server"
}

export const refused = (reason: RefusalReason, detail: string): SignInRefused =>
  new SignInRefused({ reason, message: refusalMessages[reason], detail })
