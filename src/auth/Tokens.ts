/**
 * The tokens of the authorization server (SMART App Launch 2.2, "Obtain access token", "Refresh access
 * token", "Token introspection"; docs/smart.md, Tokens):
 *
 * - access tokens: RS256 JWTs (RFC 9068) signed by the SigningKeys, for the FHIR base as audience, verified
 *   against the Effect Clock; a verified token is remembered in a bounded map, so that the front door can
 *   resolve it synchronously (`cached`) on every later request;
 * - id tokens (OpenID Connect Core 2) for the client;
 * - refresh tokens: opaque, hashed at rest, rotated on every use, a reused one revoking its family
 *   (refreshStore.ts);
 * - revocation (RFC 7009) and introspection (RFC 7662, with SMART's required fields).
 *
 * A revoked access token's jti is kept in `svc_auth_revoked` until the token expires, and in memory: read at
 * start and again every `revokedReloadEvery`, so that a revocation made by another server takes effect here
 * within that time.
 */
import { Clock, Context, Duration, Effect, Layer, Schedule, Schema, type Scope } from "effect"
import { decodeProtectedHeader, jwtVerify, type JWTPayload, SignJWT } from "jose"
import { randomBytes } from "node:crypto"
import { Database } from "../db/Database.ts"
import { causeText } from "../db/errors.ts"
import { Writer } from "../db/Writer.ts"
import { absoluteFhirUser, accessPayload, accessTokenType, claimsOf, reasonOfJoseError, reasons } from "./accessToken.ts"
import type { AccessClaims, Grant } from "./Grant.ts"
import { signingAlgorithm, SigningKeys } from "./Keys.ts"
import * as RefreshStore from "./refreshStore.ts"

/** An access token refused, with the reason a client may see (`error_description` of a 401). */
export class InvalidToken extends Schema.TaggedError<InvalidToken>()("InvalidToken", {
  reason: Schema.String
}) {
  override get message(): string {
    return this.reason
  }
}

/** A refresh token refused (RFC 6749 5.2 `invalid_grant`). */
export class InvalidGrant extends Schema.TaggedError<InvalidGrant>()("InvalidGrant", {
  reason: Schema.String
}) {
  override get message(): string {
    return this.reason
  }
}

/** A refresh asked for a scope the grant does not hold (RFC 6749 5.2 `invalid_scope`). */
export class InvalidScope extends Schema.TaggedError<InvalidScope>()("InvalidScope", {
  reason: Schema.String
}) {
  override get message(): string {
    return this.reason
  }
}

/** The token tables could not be read or written: the request may be tried again. */
export class TokenStoreError extends Schema.TaggedError<TokenStoreError>()("TokenStoreError", {
  reason: Schema.String
}) {
  override get message(): string {
    return `the token store could not be read or written: ${this.reason}`
  }
}

export interface TokenSettings {
  /** `iss`: the server's public origin (`http://127.0.0.1:8080`); OpenID discovery is at its root. */
  readonly issuer: string
  /** `aud` of access tokens: the FHIR base URL (`<origin>/fhir`). */
  readonly audience: string
  /**
   * Access tokens: 1 hour by default. This and the id token's lifetime may not exceed the SigningKeys'
   * `maxTokenLifetime` (a retired key would be deleted while its tokens are valid): the layer dies if they do.
   */
  readonly accessLifetime?: Duration.DurationInput
  /** Id tokens: 1 hour by default. */
  readonly idTokenLifetime?: Duration.DurationInput
  /** Refresh tokens of `online_access`, from the authorization (rotation keeps the end): 8 hours by default. */
  readonly onlineRefreshLifetime?: Duration.DurationInput
  /** Verified access tokens remembered for `cached`: 10,000 by default, the oldest forgotten first. */
  readonly cacheSize?: number
  /** How often the revoked jtis are read again (revocations by other servers): 30 seconds by default. */
  readonly revokedReloadEvery?: Duration.DurationInput
}

/** The settings for a server whose public URL is `publicUrl`: issuer that URL, audience its `/fhir`. */
export const tokenSettings = (publicUrl: string, rest: Omit<TokenSettings, "issuer" | "audience"> = {}): TokenSettings => {
  const issuer = publicUrl.replace(/\/+$/, "")
  return { ...rest, issuer, audience: `${issuer}/fhir` }
}

export interface IssuedAccess {
  readonly accessToken: string
  /** Seconds (the token response's `expires_in`). */
  readonly expiresIn: number
  readonly claims: AccessClaims
}

/** OpenID Connect standard claims of the `profile` and `email` scopes, added to an id_token when given. */
export interface IdProfile {
  readonly name?: string | undefined
  readonly given_name?: string | undefined
  readonly family_name?: string | undefined
  readonly preferred_username?: string | undefined
  readonly email?: string | undefined
  readonly email_verified?: boolean | undefined
}

export type RefreshKind = "offline" | "online"

/** An RFC 7662 introspection response. */
export type Introspection =
  | { readonly active: false }
  | {
    readonly active: true
    readonly token_type: "Bearer"
    readonly scope: string
    readonly client_id: string
    readonly sub: string
    readonly exp: number
    readonly iat: number
    readonly iss: string
    readonly aud: string
    readonly jti: string
    readonly patient?: string
    readonly encounter?: string
    readonly fhirUser?: string
  }
  | {
    readonly active: true
    readonly token_type: "refresh_token"
    readonly scope: string
    readonly client_id: string
    readonly sub: string
    readonly exp?: number
  }

export class Tokens extends Context.Tag("svc/auth/Tokens")<Tokens, {
  /** A signed access token for `grant`. */
  readonly issueAccess: (grant: Grant) => Effect.Effect<IssuedAccess>
  /**
   * An id_token for `clientId`: iss, sub, aud, iat, exp, auth_time and nonce when the grant has them,
   * fhirUser (absolute) when the grant has one and holds the `fhirUser` scope, and the `profile` claims given.
   */
  readonly issueIdToken: (grant: Grant, clientId: string, profile?: IdProfile) => Effect.Effect<string>
  /** The claims of a valid access token of this server, or why it is not one. */
  readonly verifyAccess: (token: string) => Effect.Effect<AccessClaims, InvalidToken>
  /** The claims of a token verified before, if it is neither expired at `nowMillis` nor revoked: no waiting. */
  readonly cached: (token: string, nowMillis: number) => AccessClaims | undefined
  /**
   * Whether the claims of a token verified before are still good at `nowMillis`: not expired, not revoked. For a
   * caller that keeps verified claims of its own (the front door), without a lookup by the whole token.
   */
  readonly current: (claims: AccessClaims, nowMillis: number) => boolean
  /** A new refresh token for `grant` (of `family`, or a new family). */
  readonly issueRefresh: (grant: Grant, kind: RefreshKind, family?: string) => Effect.Effect<string, TokenStoreError>
  /**
   * Redeems a refresh token of `clientId`: the grant it renews (its scopes narrowed to `scope` when given, a
   * subset of the granted ones) and the refresh token that replaces it, for the grant as first given.
   */
  readonly redeemRefresh: (
    token: string,
    clientId: string,
    scope?: ReadonlyArray<string>
  ) => Effect.Effect<{ readonly grant: Grant; readonly refreshToken: string }, InvalidGrant | InvalidScope | TokenStoreError>
  /** RFC 7009: revokes `clientId`'s token (a refresh token's whole family); anything else is left alone. */
  readonly revoke: (token: string, clientId: string) => Effect.Effect<void, TokenStoreError>
  /** RFC 7662: what `token` is, if it is active now. */
  readonly introspect: (token: string) => Effect.Effect<Introspection, TokenStoreError>
  /**
   * The client a refresh token was issued to, whether or not it may still be used (undefined when unknown):
   * the token endpoint finds a public client's refresh request this way, so that a reused token still revokes
   * its family.
   */
  readonly refreshClient: (token: string) => Effect.Effect<string | undefined, TokenStoreError>
  /** Deletes refresh tokens and revoked jtis that can no longer matter (done at start). */
  readonly purge: Effect.Effect<void, TokenStoreError>
}>() {}

const storeError = (error: unknown): TokenStoreError => new TokenStoreError({ reason: causeText(error) })

const seconds = (duration: Duration.DurationInput): number => Math.floor(Duration.toSeconds(duration))

const isJwt = (token: string): boolean => token.split(".").length === 3

export const make = (settings: TokenSettings): Effect.Effect<Tokens["Type"], TokenStoreError, SigningKeys | Database | Writer | Scope.Scope> =>
  Effect.gen(function*() {
    const keys = yield* SigningKeys
    const db = yield* Database
    const writer = yield* Writer
    const context = Context.make(Database, db).pipe(Context.add(Writer, writer))
    const where = { issuer: settings.issuer, audience: settings.audience }
    const accessSeconds = seconds(settings.accessLifetime ?? "1 hour")
    const idTokenSeconds = seconds(settings.idTokenLifetime ?? "1 hour")
    const onlineMs = Duration.toMillis(settings.onlineRefreshLifetime ?? "8 hours")
    const cacheSize = Math.max(1, settings.cacheSize ?? 10_000)
    const longest = Math.max(accessSeconds, idTokenSeconds)
    if (longest > Duration.toSeconds(keys.maxTokenLifetime)) {
      // A retired key would be deleted while tokens it signed are still valid.
      return yield* Effect.dieMessage(
        `token lifetimes (${longest} s) exceed the signing keys' maxTokenLifetime (${Duration.format(keys.maxTokenLifetime)})`
      )
    }

    /** Verified tokens in the order first seen (a Map keeps it): the oldest is forgotten first. */
    const cache = new Map<string, AccessClaims>()
    /** Revoked jtis, with the time (ms) their token expires. */
    const revoked = new Map<string, number>()

    const remember = (token: string, claims: AccessClaims) => {
      if (cache.size >= cacheSize && !cache.has(token)) {
        const oldest = cache.keys().next()
        if (oldest.done !== true) cache.delete(oldest.value)
      }
      cache.set(token, claims)
    }

    const current = (claims: AccessClaims, nowMillis: number): boolean => claims.exp * 1000 > nowMillis && !revoked.has(claims.jti)

    const cached = (token: string, nowMillis: number): AccessClaims | undefined => {
      const claims = cache.get(token)
      if (claims === undefined) return undefined
      if (!current(claims, nowMillis)) {
        cache.delete(token)
        return undefined
      }
      return claims
    }

    const readRevoked = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const rows = yield* db.withReader((sql) =>
        sql<{ jti: string; expires_at: number | string }>`SELECT jti, expires_at FROM svc_auth_revoked WHERE expires_at > ${now}`
      )
      for (const row of rows) revoked.set(row.jti, Number(row.expires_at))
      for (const [jti, expiresAt] of revoked) if (expiresAt <= now) revoked.delete(jti)
    })

    const purge = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const refresh = yield* RefreshStore.purge(now)
      const { value: jtis } = yield* writer.commit(() =>
        db.writer<{ jti: string }>`DELETE FROM svc_auth_revoked WHERE expires_at <= ${now} RETURNING jti`
      )
      if (refresh + jtis.length > 0) yield* Effect.logDebug("expired token rows deleted", { refresh, revoked: jtis.length })
    }).pipe(Effect.provide(context), Effect.mapError(storeError))

    yield* purge
    yield* readRevoked.pipe(Effect.mapError(storeError))
    yield* readRevoked.pipe(
      Effect.catchAll((error) => Effect.logWarning("revoked tokens could not be read again", { error: causeText(error) })),
      Effect.repeat(Schedule.spaced(settings.revokedReloadEvery ?? "30 seconds")),
      Effect.delay(settings.revokedReloadEvery ?? "30 seconds"),
      Effect.forkScoped
    )

    const sign = (payload: JWTPayload, typ: string) =>
      Effect.flatMap(keys.current, (key) =>
        Effect.promise(() => new SignJWT(payload).setProtectedHeader({ alg: signingAlgorithm, kid: key.kid, typ }).sign(key.privateKey)))

    const issueAccess = (grant: Grant): Effect.Effect<IssuedAccess> =>
      Effect.gen(function*() {
        const iat = Math.floor((yield* Clock.currentTimeMillis) / 1000)
        const exp = iat + accessSeconds
        const payload = accessPayload(where, grant, randomBytes(16).toString("base64url"), iat, exp)
        const accessToken = yield* sign(payload, accessTokenType)
        const claims = claimsOf(where, payload)!
        remember(accessToken, claims)
        return { accessToken, expiresIn: accessSeconds, claims }
      })

    const issueIdToken = (grant: Grant, clientId: string, profile: IdProfile = {}): Effect.Effect<string> =>
      Effect.gen(function*() {
        const iat = Math.floor((yield* Clock.currentTimeMillis) / 1000)
        const given = Object.fromEntries(Object.entries(profile).filter(([, value]) => value !== undefined))
        const withFhirUser = grant.fhirUser !== undefined && grant.scopes.includes("fhirUser")
        return yield* sign({
          ...given,
          iss: settings.issuer,
          sub: grant.subject ?? clientId,
          aud: clientId,
          iat,
          exp: iat + idTokenSeconds,
          ...(grant.authTime === undefined ? {} : { auth_time: grant.authTime }),
          ...(grant.nonce === undefined ? {} : { nonce: grant.nonce }),
          ...(withFhirUser ? { fhirUser: absoluteFhirUser(settings.audience, grant.fhirUser!) } : {})
        }, "JWT")
      })

    /** Signature, issuer, audience, type and time; not revocation. */
    const verifySigned = (token: string, now: number): Effect.Effect<AccessClaims, InvalidToken> =>
      Effect.gen(function*() {
        const header = yield* Effect.try({ try: () => decodeProtectedHeader(token), catch: () => new InvalidToken({ reason: reasons.malformed }) })
        if (header.alg !== signingAlgorithm) return yield* new InvalidToken({ reason: reasons.algorithm })
        const key = typeof header.kid === "string" ? yield* keys.keyFor(header.kid) : undefined
        if (key === undefined) return yield* new InvalidToken({ reason: reasons.unknownKey })
        const { payload } = yield* Effect.tryPromise({
          try: () =>
            jwtVerify(token, key, {
              algorithms: [signingAlgorithm],
              issuer: settings.issuer,
              audience: settings.audience,
              typ: accessTokenType,
              requiredClaims: ["exp", "iat", "jti", "sub"],
              currentDate: new Date(now)
            }),
          catch: (error) => new InvalidToken({ reason: reasonOfJoseError(error) })
        })
        const claims = claimsOf(where, payload)
        if (claims === undefined) return yield* new InvalidToken({ reason: reasons.malformed })
        return claims
      })

    const verifyAccess = (token: string): Effect.Effect<AccessClaims, InvalidToken> =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const known = cached(token, now)
        if (known !== undefined) return known
        const claims = yield* verifySigned(token, now)
        if (revoked.has(claims.jti)) return yield* new InvalidToken({ reason: reasons.revoked })
        remember(token, claims)
        return claims
      })

    const issueRefresh = (grant: Grant, kind: RefreshKind, family?: string): Effect.Effect<string, TokenStoreError> =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        return yield* RefreshStore.issue(grant, now, kind === "offline" ? null : now + onlineMs, family)
      }).pipe(Effect.provide(context), Effect.mapError(storeError))

    const redeemRefresh = (token: string, clientId: string, scope?: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const asked = scope === undefined || scope.length === 0 ? undefined : new Set(scope)
        const notGranted = (granted: ReadonlyArray<string>) => asked === undefined ? [] : [...asked].filter((s) => !granted.includes(s))
        const outcome = yield* RefreshStore.redeem(token, clientId, now, (row) => {
          const extra = notGranted(row.grant.scopes)
          return extra.length === 0 ? undefined : `the scope asked for was not granted: ${extra.join(" ")}`
        }).pipe(Effect.provide(context), Effect.mapError(storeError))
        switch (outcome._tag) {
          case "Redeemed": {
            const grant = outcome.row.grant
            const scopes = asked === undefined ? grant.scopes : grant.scopes.filter((s) => asked.has(s))
            return { grant: { ...grant, scopes }, refreshToken: outcome.refreshToken }
          }
          case "Refused":
            return yield* new InvalidScope({ reason: outcome.reason })
          case "Unknown":
            return yield* new InvalidGrant({ reason: "the refresh token is not known" })
          case "OtherClient":
            return yield* new InvalidGrant({ reason: "the refresh token was not issued to this client" })
          case "Revoked":
            return yield* new InvalidGrant({ reason: "the refresh token was revoked" })
          case "Expired":
            return yield* new InvalidGrant({ reason: "the refresh token has expired" })
          case "Reused":
            yield* Effect.logWarning("a refresh token was used twice: its family is revoked", { client_id: clientId, family: outcome.family })
            return yield* new InvalidGrant({ reason: "the refresh token was already used: every token of its authorization is now revoked" })
        }
      })

    const revokeAccess = (token: string, clientId: string) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const verified = yield* Effect.either(verifySigned(token, now))
        // Not ours, not valid any more, or another client's: nothing to do (RFC 7009 2.2 answers 200 still).
        if (verified._tag === "Left" || verified.right.clientId !== clientId) return
        const { exp, jti } = verified.right
        yield* writer.commit(() =>
          db.writer`INSERT INTO svc_auth_revoked ${db.writer.insert({ jti, expires_at: exp * 1000 })} ON CONFLICT (jti) DO NOTHING`
        ).pipe(Effect.mapError(storeError))
        revoked.set(jti, exp * 1000)
        cache.delete(token)
        yield* Effect.logInfo("access token revoked", { client_id: clientId, jti })
      })

    const revoke = (token: string, clientId: string): Effect.Effect<void, TokenStoreError> => {
      if (isJwt(token)) return revokeAccess(token, clientId)
      return Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const done = yield* RefreshStore.revokeFamily(token, clientId, now)
        if (done) yield* Effect.logInfo("refresh token revoked with its family", { client_id: clientId })
      }).pipe(Effect.provide(context), Effect.mapError(storeError))
    }

    const introspectRefresh = (token: string) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const row = yield* RefreshStore.read(token)
        const live = row !== undefined && row.usedAt === null && row.revokedAt === null && (row.expiresAt === null || row.expiresAt > now)
        if (!live) return { active: false } as const
        return {
          active: true,
          token_type: "refresh_token",
          scope: row.grant.scopes.join(" "),
          client_id: row.clientId,
          sub: row.grant.subject ?? row.clientId,
          ...(row.expiresAt === null ? {} : { exp: Math.floor(row.expiresAt / 1000) })
        } as const
      }).pipe(Effect.provide(context), Effect.mapError(storeError))

    const introspect = (token: string): Effect.Effect<Introspection, TokenStoreError> => {
      if (!isJwt(token)) return introspectRefresh(token)
      return verifyAccess(token).pipe(
        Effect.map((claims): Introspection => ({
          active: true,
          token_type: "Bearer",
          scope: claims.scopes.join(" "),
          client_id: claims.clientId,
          sub: claims.subject ?? claims.clientId,
          exp: claims.exp,
          iat: claims.iat,
          iss: settings.issuer,
          aud: settings.audience,
          jti: claims.jti,
          ...(claims.patient === undefined ? {} : { patient: claims.patient }),
          ...(claims.encounter === undefined ? {} : { encounter: claims.encounter }),
          ...(claims.fhirUser === undefined ? {} : { fhirUser: absoluteFhirUser(settings.audience, claims.fhirUser) })
        })),
        Effect.catchAll(() => Effect.succeed<Introspection>({ active: false }))
      )
    }

    const refreshClient = (token: string): Effect.Effect<string | undefined, TokenStoreError> =>
      isJwt(token)
        ? Effect.succeed(undefined)
        : RefreshStore.read(token).pipe(Effect.map((row) => row?.clientId), Effect.provide(context), Effect.mapError(storeError))

    return Tokens.of({
      refreshClient,
      issueAccess,
      issueIdToken,
      verifyAccess,
      cached,
      current,
      issueRefresh,
      redeemRefresh,
      revoke,
      introspect,
      purge
    })
  })

/** The tokens of the server described by `settings`. */
export const layer = (settings: TokenSettings): Layer.Layer<Tokens, TokenStoreError, SigningKeys | Database | Writer> =>
  Layer.scoped(Tokens, make(settings))
