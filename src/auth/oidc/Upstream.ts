/**
 * Users sign in through an upstream OpenID Connect provider (spec: interface.md "Authentication" item 3,
 * settings `smart.oidc`; docs/smart-oidc.md). The authorization code flow of OpenID Connect Core 1.0,
 * section 3.1, with PKCE S256 (RFC 7636), a random state and nonce; the provider found by OpenID Connect
 * Discovery 1.0. openid-client does the protocol: discovery, the authorization URL, the code exchange, the
 * id_token's validation (signature, issuer, audience, times, nonce) and userinfo.
 *
 * `begin` gives the URL to send the browser to and a transaction (state, nonce, PKCE verifier) the caller
 * keeps with its pending authorization; `complete` takes the callback and that transaction and gives the
 * signed-in user, after the allowlist and the fhirUser binding (policy.ts).
 *
 * Discovery happens at the first `ready`, `begin` or `complete` and is kept once it succeeds; a failure is
 * not kept, so the next sign-in tries again, and the server runs meanwhile. Each request to the provider is
 * bounded by a timeout on the Clock. Plain http is allowed only for a loopback issuer (a provider on the same
 * machine, as in tests); every other issuer must be https.
 */
import { Duration, Effect, Redacted, Schema } from "effect"
import * as oidc from "openid-client"
import type { OidcSection } from "../../config/AppConfig.ts"
import { ConfigError } from "../../config/ConfigError.ts"
import { s256 } from "../pkce.ts"
import { refused, SignInRefused, UpstreamUnavailable } from "./errors.ts"
import { completionFailure, isLoopbackHost, loopbackGuard, messages, networkReason } from "./network.ts"
import { allowlistProblem, type Claims, displayName, patientOf, readFhirUser, userResourceTypes } from "./policy.ts"

export type OidcSettings = typeof OidcSection.Type

/** Where the provider sends the browser back to, under the server's public URL. */
export const callbackPath = "/auth/login/callback"

/** The callback URL under a public URL (`https://fhir.example.org` or one with a path prefix). */
export const callbackUrlFor = (publicUrl: string): string => `${publicUrl.replace(/\/+$/, "")}${callbackPath}`

/** What must be kept from `begin` until the callback: JSON, stored with the pending authorization. */
export const SignInTransaction = Schema.Struct({
  state: Schema.String,
  nonce: Schema.String,
  codeVerifier: Schema.String
})
export type SignInTransaction = typeof SignInTransaction.Type

/** The pending authorization's id carried in a state `begin` made (see `begin`); undefined for any other. */
export const pendingIdFromState = (state: string): string | undefined => {
  const dot = state.lastIndexOf(".")
  return dot <= 0 ? undefined : state.slice(0, dot)
}

export interface SignInStart {
  /** The provider's authorization URL, to redirect the browser to. */
  readonly url: string
  readonly transaction: SignInTransaction
}

export interface SignedInUser {
  /** `<issuer>|<sub>`: unique across providers, stable for the user at this one. */
  readonly subject: string
  /** The user's resource here, `Practitioner/123`, from the fhirUser claim or the lookup. */
  readonly fhirUser?: string | undefined
  /** The patient id, when `patient_from_fhir_user` is on and fhirUser is `Patient/<id>`. */
  readonly patient?: string | undefined
  readonly name?: string | undefined
  readonly email?: string | undefined
  /** When the user authenticated at the provider (`auth_time`), seconds since the epoch. */
  readonly authTime?: number | undefined
}

/**
 * Finds the ids of resources of `type` with `identifier=<system>|<value>`: how a user without a fhirUser claim
 * is bound (`smart.oidc.fhir_user_lookup`). The caller searches its store.
 */
export type FhirUserLookup<E> = (type: string, system: string, value: string) => Effect.Effect<ReadonlyArray<string>, E>

export interface UpstreamOptions<E> {
  readonly settings: OidcSettings
  /** `SVC_OIDC_CLIENT_SECRET`; without it the client is public (PKCE only, no client authentication). */
  readonly clientSecret: Redacted.Redacted<string> | undefined
  /** The absolute callback URL registered at the provider (`callbackUrlFor(public URL)`). */
  readonly callbackUrl: string
  /** Required when `settings.fhir_user_lookup` is set. */
  readonly lookup?: FhirUserLookup<E> | undefined
  /** How long one request to the provider may take; 10 seconds unless given. */
  readonly timeout?: Duration.DurationInput | undefined
}

export interface Upstream<E = never> {
  /** The configured issuer. */
  readonly issuer: string
  /** Discovers the provider if not done yet: to warm up at start, or to show the sign-in page's error early. */
  readonly ready: Effect.Effect<void, UpstreamUnavailable>
  /** The authorization URL for a sign-in on behalf of the pending authorization `pendingId`. */
  readonly begin: (pendingId: string) => Effect.Effect<SignInStart, UpstreamUnavailable>
  /** The signed-in user from the provider's callback (the full callback URL or just its query). */
  readonly complete: (
    callback: URL,
    transaction: SignInTransaction
  ) => Effect.Effect<SignedInUser, SignInRefused | UpstreamUnavailable | E>
}

/** The claims the allowlist and the binding read: when the id_token lacks one, userinfo is asked. */
const claimsNeeded = (settings: OidcSettings): ReadonlyArray<string> => [
  ...Object.keys(settings.allowed_claims ?? {}),
  ...(settings.allowed_email_domains === undefined ? [] : ["email", "email_verified"]),
  settings.fhir_user_claim,
  ...(settings.fhir_user_lookup === undefined ? [] : [settings.fhir_user_lookup.claim])
]

/** Validates the settings and builds the upstream; nothing is fetched until the first sign-in or `ready`. */
export const make = <E = never>(options: UpstreamOptions<E>): Effect.Effect<Upstream<E>, ConfigError> =>
  Effect.gen(function*() {
    const { settings } = options
    const configError = (message: string) => new ConfigError({ message })
    if (settings.issuer === undefined) {
      return yield* configError("smart.oidc.issuer is required to sign users in through an OpenID Connect provider")
    }
    if (settings.client_id === undefined) {
      return yield* configError("smart.oidc.client_id is required to sign users in through an OpenID Connect provider")
    }
    const issuer = settings.issuer
    const clientId = settings.client_id
    const issuerUrl = new URL(issuer)
    const insecure = issuerUrl.protocol === "http:"
    if (insecure && !isLoopbackHost(issuerUrl.hostname)) {
      return yield* configError(
        `smart.oidc.issuer: expected an https URL (http is allowed only for a provider on 127.0.0.1, [::1] or localhost), got ${issuer}`
      )
    }
    const lookupSettings = settings.fhir_user_lookup
    if (lookupSettings !== undefined) {
      if (!userResourceTypes.has(lookupSettings.resource_type)) {
        return yield* configError(
          `smart.oidc.fhir_user_lookup.resource_type: expected one of ${[...userResourceTypes].join(", ")}, got ${lookupSettings.resource_type}`
        )
      }
      if (lookupSettings.system === undefined) {
        return yield* configError(
          "smart.oidc.fhir_user_lookup.system is required: a search by identifier value alone could match another kind of identifier"
        )
      }
      if (options.lookup === undefined) return yield* Effect.dieMessage("fhir_user_lookup is set but no lookup was given")
    }
    const timeout = Duration.decode(options.timeout ?? Duration.seconds(10))
    /**
     * One request to the provider, bounded by `timeout` on the Clock. openid-client's own timeout, a second
     * later, ends the abandoned HTTP request.
     */
    const call = <A, Err>(run: () => Promise<A>, failure: (error: unknown) => Err) =>
      Effect.tryPromise({ try: run, catch: failure }).pipe(
        Effect.timeoutFail({
          duration: timeout,
          onTimeout: () => new UpstreamUnavailable({ issuer, reason: `no answer within ${Duration.format(timeout)}` })
        })
      )
    const libraryTimeoutSeconds = Math.ceil(Duration.toSeconds(timeout)) + 1
    const scope = [...new Set(["openid", ...settings.scopes])].join(" ")
    const callbackUrl = options.callbackUrl

    const clientAuth = options.clientSecret === undefined
      ? oidc.None()
      : oidc.ClientSecretBasic(Redacted.value(options.clientSecret))
    const discover = call(
      () =>
        oidc.discovery(issuerUrl, clientId, undefined, clientAuth, {
          timeout: libraryTimeoutSeconds,
          ...(insecure ? { execute: [oidc.allowInsecureRequests], [oidc.customFetch]: loopbackGuard } : {})
        }),
      (error) =>
        new UpstreamUnavailable({
          issuer,
          reason: networkReason(error, timeout) ?? `its discovery document was refused (${messages(error)})`
        })
    )

    /** The server log's account of a failed sign-in: the detail the user is not shown. */
    const logged = <A, Err, R>(effect: Effect.Effect<A, Err, R>): Effect.Effect<A, Err, R> =>
      Effect.tapError(effect, (error) =>
        error instanceof SignInRefused
          ? Effect.logWarning("sign-in refused", { issuer, reason: error.reason, detail: error.detail })
          : error instanceof UpstreamUnavailable
          ? Effect.logWarning("sign-in provider unavailable", { issuer, reason: error.reason })
          : Effect.void)

    const lock = yield* Effect.makeSemaphore(1)
    let discovered: oidc.Configuration | undefined
    const configuration: Effect.Effect<oidc.Configuration, UpstreamUnavailable> = Effect.suspend(() =>
      discovered !== undefined ? Effect.succeed(discovered) : lock.withPermits(1)(
        Effect.suspend(() =>
          discovered !== undefined ? Effect.succeed(discovered) : discover.pipe(
            Effect.tap((found) =>
              Effect.sync(() => void (discovered = found)).pipe(
                Effect.zipRight(Effect.logInfo("sign-in provider discovered", { issuer }))
              )
            )
          )
        )
      )
    )

    const begin = Effect.fn("OidcUpstream.begin")(function*(pendingId: string) {
      const config = yield* configuration
      const transaction: SignInTransaction = {
        state: `${pendingId}.${oidc.randomState()}`,
        nonce: oidc.randomNonce(),
        codeVerifier: oidc.randomPKCECodeVerifier()
      }
      const url = yield* Effect.try({
        try: () =>
          oidc.buildAuthorizationUrl(config, {
            response_type: "code",
            redirect_uri: callbackUrl,
            scope,
            state: transaction.state,
            nonce: transaction.nonce,
            code_challenge: s256(transaction.codeVerifier),
            code_challenge_method: "S256"
          }),
        catch: (error) => new UpstreamUnavailable({ issuer, reason: messages(error) })
      })
      return { url: url.href, transaction }
    }, logged)

    const bind = (claims: Claims): Effect.Effect<string | undefined, SignInRefused | E> => {
      const claimed = claims[settings.fhir_user_claim]
      if (claimed !== undefined && claimed !== null) {
        const read = readFhirUser(claimed)
        return read._tag === "Reference" ? Effect.succeed(read.reference) : Effect.fail(refused("unbound", read.problem))
      }
      if (lookupSettings === undefined || options.lookup === undefined || lookupSettings.system === undefined) {
        return Effect.succeed(undefined)
      }
      const { resource_type: type, claim, system } = lookupSettings
      const value = claims[claim]
      if (typeof value !== "string" && typeof value !== "number") {
        return Effect.logInfo("sign-in without fhirUser: the lookup claim is missing", { claim }).pipe(Effect.as(undefined))
      }
      return options.lookup(type, system, String(value)).pipe(
        Effect.flatMap((ids) => {
          if (ids.length === 1) return Effect.succeed(`${type}/${ids[0]}`)
          if (ids.length === 0) {
            return Effect.logInfo("sign-in without fhirUser: no resource has the identifier", { type, system, value: String(value) })
              .pipe(Effect.as(undefined))
          }
          return Effect.fail(
            refused("unbound", `${ids.length} ${type} resources have identifier ${system}|${String(value)}: ${ids.slice(0, 5).join(", ")}`)
          )
        })
      )
    }

    const complete = Effect.fn("OidcUpstream.complete")(function*(callback: URL, transaction: SignInTransaction) {
      const config = yield* configuration
      // The callback as registered, whatever host or proxy the request came through, with the provider's parameters.
      const current = new URL(callbackUrl)
      for (const [name, value] of callback.searchParams) current.searchParams.append(name, value)
      const tokens = yield* call(
        () =>
          oidc.authorizationCodeGrant(config, current, {
            expectedState: transaction.state,
            expectedNonce: transaction.nonce,
            pkceCodeVerifier: transaction.codeVerifier
          }),
        completionFailure(issuer, timeout, "code exchange")
      )
      const idToken = tokens.claims()
      if (idToken === undefined) return yield* refused("invalid_response", "the token response has no id_token")
      let claims: Claims = idToken
      const missing = claimsNeeded(settings).some((name) => idToken[name] === undefined)
      if (missing && config.serverMetadata().userinfo_endpoint !== undefined) {
        const userinfo = yield* call(
          () => oidc.fetchUserInfo(config, tokens.access_token, idToken.sub),
          completionFailure(issuer, timeout, "userinfo")
        )
        // The id_token is signed: its claims win over userinfo's.
        claims = { ...userinfo, ...idToken }
      }
      const problem = allowlistProblem(claims, {
        allowedClaims: settings.allowed_claims,
        allowedEmailDomains: settings.allowed_email_domains
      })
      if (problem !== undefined) return yield* refused("not_allowed", problem)
      const fhirUser = yield* bind(claims)
      const email = claims["email"]
      const user: SignedInUser = {
        subject: `${config.serverMetadata().issuer}|${idToken.sub}`,
        fhirUser,
        patient: settings.patient_from_fhir_user ? patientOf(fhirUser) : undefined,
        name: displayName(claims),
        email: typeof email === "string" ? email : undefined,
        authTime: idToken.auth_time
      }
      yield* Effect.logInfo("signed in through the provider", { subject: user.subject, fhirUser: user.fhirUser ?? null })
      return user
    }, logged)

    const upstream: Upstream<E> = { issuer, ready: logged(Effect.asVoid(configuration)), begin, complete }
    return upstream
  })
