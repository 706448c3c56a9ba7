/**
 * SMART App Launch on the front door (spec: Authentication; ARCHITECTURE.md, "A request's way"): with
 * `--smart`, a caller is known by its bearer token. The front door resolves a token it has verified before
 * from memory (`Tokens.cached`: a map lookup, so the fast handlers keep answering); a token it has not seen
 * leaves the caller `Unresolved`, and the Effect edge verifies it (`settle`) before anything answers. A
 * request with no token is refused 401 with `WWW-Authenticate: Bearer`, except on the paths that must stay
 * open: the authorization server, the discovery documents and `/fhir/metadata` (the probes never reach the
 * door). An address that sent `auth_failures_per_minute` unknown tokens this minute has its next unknown
 * tokens refused without a lookup until the minute ends. The authorization server's decisions go to the audit
 * trail through the `SecurityEvents` the services hold (src/governance/audit/SecurityEvents.ts).
 */
import { Context, Duration, Effect, Layer, Option, Schedule } from "effect"
import type { SmartSecretValues } from "./SmartSecrets.ts"
import { bearerToken } from "./secrets.ts"
import type { AppConfig } from "../config/AppConfig.ts"
import type { AdmissionPolicy, Refusal } from "../http/FrontDoor.ts"
import type { Authorized, Principal, PrincipalResolver } from "../http/Principal.ts"
import type { RootHandler } from "../http/RootRoutes.ts"
import { fhirBase, type Route } from "../http/Route.ts"
import { authFailures } from "../governance/RateLimit.ts"
import { none as noSecurityEvents, SecurityEvents } from "../governance/audit/SecurityEvents.ts"
import type { AccessClaims } from "./Grant.ts"
import { reasons } from "./accessToken.ts"
import { SyncTokens } from "../sync/SyncTokens.ts"
import * as AuthServer from "./AuthServer.ts"
import * as Authorizations from "./Authorizations.ts"
import * as Clients from "./Clients.ts"
import { authUrls, type AuthUrls } from "./Discovery.ts"
import * as Keys from "./Keys.ts"
import * as Tokens from "./Tokens.ts"
import * as Oidc from "./oidc/Upstream.ts"
import { CatalogService } from "../catalog/CatalogService.ts"
import { Database } from "../db/Database.ts"
import * as Search from "../search/Search.ts"


/** How long a signing key signs before a new one takes over (the old one verifies for a token lifetime more). */
export const signingKeyLifetime = Duration.days(30)
/** How often each server checks the signing key's age. */
export const renewCheckEvery = Duration.hours(1)

/** What SMART adds to a started server: the front door's resolver, the edge's verifier, a policy, the routes. */
export interface SmartFront {
  readonly urls: AuthUrls
  readonly resolve: PrincipalResolver
  /** Verifies the token of an `Unresolved` caller: the caller it names, or the refusal to answer. */
  readonly settle: (principal: Principal, route: Route, url: string) => Effect.Effect<Principal | Refusal>
  readonly policies: ReadonlyArray<AdmissionPolicy>
  readonly routes: Readonly<Record<string, RootHandler<unknown, AuthServer.AuthEnv>>>
  /** The tokens a `/sync` connection is given in its `auth` message, and checked again while it is open. */
  readonly syncTokens: SyncTokens["Type"]
}

/** The bearer token of an `Authorization` header; `""` when it is not a bearer token (answered `invalid_request`). */
const tokenOf = (header: string): string => bearerToken(header) ?? ""

/**
 * The `/sync` upgrade, which a browser cannot give an Authorization header: admitted without a token, it takes
 * one in its first message (src/sync/SyncSockets.ts) and serves nothing before.
 */
const isSyncUpgrade = (url: string, route: Route): boolean =>
  route.interaction === "root-endpoint" && (url === "/sync" || url.startsWith("/sync?"))

/** Paths open without a token under `--smart`. */
export const isOpenPath = (url: string, route: Route): boolean =>
  route.interaction === "capabilities" ||
  url.startsWith("/auth/") ||
  url.startsWith("/.well-known/") ||
  url.startsWith(`${fhirBase}/.well-known/`)

const principalOf = (claims: AccessClaims, address: string): Authorized => ({
  _tag: "Authorized",
  address,
  clientId: claims.clientId,
  user: claims.subject === claims.clientId ? undefined : claims.subject,
  scopes: claims.scopes,
  patient: claims.patient,
  fhirUser: claims.fhirUser,
  encounter: claims.encounter,
  tokenId: claims.jti,
  expiresAt: claims.exp * 1000
})

/** A token's caller as the front door keeps it, with the whole `Authorization` header it came in. */
interface Seen {
  readonly header: string
  readonly claims: AccessClaims
  readonly principal: Authorized
}

/** How many callers the front door keeps (as many as the verified tokens `Tokens.cached` remembers), the oldest forgotten first. */
const seenLimit = 10_000

/** The characters at the end of an `Authorization` header the front door finds its caller by: the token's signature. */
const seenKeyLength = 32

const unauthorized = (diagnostics: string, error?: string): Refusal => ({
  _tag: "Refused",
  status: 401,
  code: "login",
  diagnostics,
  headers: { "www-authenticate": error === undefined ? "Bearer realm=\"svc\"" : `Bearer realm="svc", error="${error}", error_description="${diagnostics}"` }
})

export const make = (config: AppConfig, publicUrl: string, secrets: SmartSecretValues) =>
  Effect.gen(function*() {
    const urls = authUrls(publicUrl)
    const clock = yield* Effect.clock
    // The audit trail's recorder of the decisions below (src/governance/): nothing when `audit.enabled` is false.
    const audit = Option.getOrElse(yield* Effect.serviceOption(SecurityEvents), () => noSecurityEvents)
    const context = yield* Layer.build(
      Layer.mergeAll(Tokens.layer(Tokens.tokenSettings(urls.issuer)), Clients.layer({
        dcrToken: secrets.dcrToken,
        confidentialSecret: secrets.confidentialSecret,
        tokenEndpoint: urls.token,
        publicOrigin: urls.issuer,
        audit
      }), Authorizations.layer).pipe(Layer.provideMerge(Keys.layer()))
    )
    const keys = Context.get(context, Keys.SigningKeys)
    // The signing key is renewed when it is older than `signingKeyLifetime`, by whichever server looks first.
    yield* Effect.forkScoped(
      keys.renew(signingKeyLifetime).pipe(
        Effect.catchAll((error) => Effect.logWarning("the signing key could not be renewed; the current one stays", { reason: error.reason })),
        Effect.repeat(Schedule.spaced(renewCheckEvery)),
        Effect.delay(renewCheckEvery)
      )
    )
    const tokens = Context.get(context, Tokens.Tokens)
    const clients = Context.get(context, Clients.Clients)
    const authorizations = Context.get(context, Authorizations.Authorizations)
    const oidc = config.smart.oidc
    const services = yield* Effect.context<Database | CatalogService>()
    // A user without a fhirUser claim is bound by a search of the store (`smart.oidc.fhir_user_lookup`).
    const lookup: Oidc.FhirUserLookup<unknown> = (type, system, value) =>
      Effect.gen(function*() {
        const db = yield* Database
        const catalog = yield* Effect.flatMap(CatalogService, (service) => service.get)
        const params = new URLSearchParams({ identifier: `${system.replace(/([\\,$|])/g, "\\$1")}|${value.replace(/([\\,$|])/g, "\\$1")}`, _count: "2" })
        const rows = yield* db.withReader((sql) => Search.run(sql, { catalog, params, lenient: false }, type))
        return rows.matches.map((row) => row.id)
      }).pipe(Effect.provide(services))
    const upstream = oidc.issuer === undefined || oidc.client_id === undefined
      ? undefined
      : yield* Oidc.make({ settings: oidc, clientSecret: secrets.oidcClientSecret, callbackUrl: urls.loginCallback, lookup })
    if (config.smart.demo_login) {
      yield* Effect.logWarning("smart.demo_login is on: anyone can sign in with any username, and nothing is verified; for testing only")
    }
    const failures = authFailures(config.rate_limit.auth_failures_per_minute ?? 20, clock)

    // The callers of tokens seen lately, found by the last characters of the Authorization header they came in.
    // Each request brings its header as a new string: a map keyed by all of it (a JWT of some 740 characters)
    // hashes all of it at every lookup, and the pattern that takes the token out reads all of it, together about
    // 1.5 µs of a fast read's 55. A hit is compared whole, so a header that only ends the same is not taken for another's.
    const seen = new Map<string, Seen>()
    const remember = (key: string, entry: Seen) => {
      if (seen.size >= seenLimit && !seen.has(key)) seen.delete(seen.keys().next().value!)
      seen.set(key, entry)
    }
    const resolve: PrincipalResolver = (headers, address) => {
      const header = headers["authorization"]
      if (header === undefined) return { _tag: "Anonymous", address }
      const now = clock.unsafeCurrentTimeMillis()
      const key = header.slice(-seenKeyLength)
      const hit = seen.get(key)
      if (hit !== undefined && hit.header === header) {
        // The same object while the address stays the same, so that what it may do is read once (Access.ts).
        if (tokens.current(hit.claims, now)) {
          if (hit.principal.address === address) return hit.principal
          const principal = principalOf(hit.claims, address)
          remember(key, { header, claims: hit.claims, principal })
          return principal
        }
        seen.delete(key)
      }
      const token = tokenOf(header)
      const claims = tokens.cached(token, now)
      if (claims === undefined) return { _tag: "Unresolved", address, token }
      const principal = principalOf(claims, address)
      remember(key, { header, claims, principal })
      return principal
    }

    /** The caller of an access token from `address`; a token not taken counts against the address (`auth_failures_per_minute`). */
    const verify = (token: string, address: string) =>
      tokens.verifyAccess(token).pipe(
        Effect.map((claims) => principalOf(claims, address)),
        Effect.tapError(() => Effect.sync(() => failures.note(address)))
      )

    const settle = (principal: Principal, route: Route, url: string): Effect.Effect<Principal | Refusal> => {
      if (principal._tag !== "Unresolved") return Effect.succeed(principal)
      // The authorization server's own bearer tokens (the DCR token) are not access tokens: its paths check them.
      if (isOpenPath(url, route)) return Effect.succeed({ _tag: "Anonymous", address: principal.address })
      if (principal.token === "") return Effect.succeed(unauthorized("the Authorization header is not a bearer token", "invalid_request"))
      return verify(principal.token, principal.address).pipe(
        Effect.catchAll((invalid) => Effect.succeed(unauthorized(invalid.reason, "invalid_token")))
      )
    }

    const policy: AdmissionPolicy = (route, principal, request) => {
      if (isOpenPath(request.url ?? "/", route)) return undefined
      switch (principal._tag) {
        case "Anonymous":
          return isSyncUpgrade(request.url ?? "/", route) ? undefined : unauthorized("this server needs a bearer token (SMART App Launch); see /.well-known/smart-configuration")
        case "Unresolved":
          return failures.exceeded(principal.address)
            ? {
              _tag: "Refused",
              status: 429,
              code: "throttled",
              diagnostics: "too many unknown tokens from this address; try again after the minute ends",
              headers: { "retry-after": String(60 - Math.floor(clock.unsafeCurrentTimeMillis() / 1000) % 60) }
            }
            : undefined
        case "Authorized":
          return undefined
      }
    }

    const routes = AuthServer.make({
      urls,
      demoLogin: config.smart.demo_login,
      demoPatient: config.smart.patient,
      demoEncounter: config.smart.encounter,
      demoFhirUser: config.smart.fhir_user,
      dcrToken: secrets.dcrToken
    }, { keys, tokens, clients, authorizations, upstream, audit })
    const withRegister = { ...routes, "/auth/register": clients.registerHandler }
    const syncTokens = SyncTokens.of({
      verify: (token, address) =>
        Effect.suspend(() => {
          if (failures.exceeded(address)) return Effect.fail({ code: "Unauthorized", reason: "too many unknown tokens from this address; try again after the minute ends" })
          return verify(token, address).pipe(
            Effect.mapError((invalid) => ({
              code: invalid.reason === reasons.expired ? "TokenExpired" as const : invalid.reason === reasons.revoked ? "TokenRevoked" as const : "Unauthorized" as const,
              reason: invalid.reason
            }))
          )
        })
    })
    const front: SmartFront = { urls, resolve, settle, policies: [policy], routes: withRegister, syncTokens }
    return front
  })
