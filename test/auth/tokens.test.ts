/**
 * The tokens (src/auth/Tokens.ts) on SQLite and Postgres, as a client, a resource server and an outside
 * verifier see them: access tokens that verify here and with jose against the published JWK Set, refused
 * when changed, for another audience, expired (TestClock) or revoked; rotation and restart; id tokens;
 * refresh tokens rotated on use, a reuse revoking the family; revocation; introspection; nothing secret in
 * the logs or the tables.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Scope, TestClock } from "effect"
import { createLocalJWKSet, decodeJwt, decodeProtectedHeader, jwtVerify, SignJWT } from "jose"
import { createHash } from "node:crypto"
import type { Grant } from "../../src/auth/Grant.ts"
import { tokenSettings } from "../../src/auth/Tokens.ts"
import { Database } from "../../src/db/Database.ts"
import { backends, freshDatabase } from "../support/backends.ts"
import { capturingLogs, eventually, openServer, openStore, origin, settings } from "../support/tokenServer.ts"

const start = Date.parse("2026-03-02T09:00:00Z")
const fhirBase = `${origin}/fhir`

const userGrant: Grant = {
  clientId: "growth-chart",
  scopes: ["launch/patient", "openid", "fhirUser", "offline_access", "patient/Observation.rs", "patient/Patient.r"],
  subject: "u-17",
  fhirUser: "Practitioner/p1",
  patient: "pat-1",
  encounter: "enc-9",
  authTime: Math.floor(start / 1000) - 30,
  nonce: "n-0S6_WzA2Mj"
}

const backendGrant: Grant = { clientId: "bulk-exporter", scopes: ["system/*.rs"] }

const now = TestClock.currentTimeMillis

/** A server on a fresh database, the clock at `start`. */
const server = (kind: Parameters<typeof freshDatabase>[0]) =>
  Effect.gen(function*() {
    yield* TestClock.setTime(start)
    const store = yield* openStore(yield* freshDatabase(kind))
    return { store, ...(yield* openServer(store)) }
  })

const refusal = <A, E extends { readonly _tag: string; readonly reason: string }>(effect: Effect.Effect<A, E>) =>
  Effect.map(Effect.flip(effect), (error) => `${error._tag}: ${error.reason}`)

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url")

const refreshRows = Effect.flatMap(Database, (db) =>
  db.withReader((sql) =>
    sql<Record<string, unknown>>`SELECT token_hash, family, client_id, grant_json, created_at, expires_at, used_at, revoked_at
      FROM svc_auth_refresh ORDER BY created_at, token_hash`
  )).pipe(Effect.orDie)

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex")

for (const backend of backends.filter((b) => b.kind !== "memory")) {
  describe.skipIf(backend.skip)(`tokens on ${backend.kind}`, () => {
    it.scoped("issues an RS256 access token (RFC 9068) that verifies and gives back its claims", () =>
      Effect.gen(function*() {
        const { keys, tokens } = yield* server(backend.kind)
        const issued = yield* tokens.issueAccess(userGrant)
        expect(issued.expiresIn).toBe(3600)
        const iat = Math.floor(start / 1000)
        expect(decodeProtectedHeader(issued.accessToken)).toEqual({ alg: "RS256", kid: (yield* keys.current).kid, typ: "at+jwt" })
        const payload = decodeJwt(issued.accessToken)
        expect(payload).toEqual({
          iss: origin,
          aud: fhirBase,
          sub: "u-17",
          client_id: "growth-chart",
          scope: userGrant.scopes.join(" "),
          patient: "pat-1",
          encounter: "enc-9",
          fhirUser: `${fhirBase}/Practitioner/p1`,
          jti: expect.stringMatching(/^[A-Za-z0-9_-]{22}$/),
          iat,
          exp: iat + 3600
        })
        const expected = {
          jti: payload.jti,
          clientId: "growth-chart",
          scopes: userGrant.scopes,
          subject: "u-17",
          fhirUser: "Practitioner/p1",
          patient: "pat-1",
          encounter: "enc-9",
          exp: iat + 3600,
          iat
        }
        expect(issued.claims).toEqual(expected)
        expect(yield* tokens.verifyAccess(issued.accessToken)).toEqual(expected)
        expect(tokens.cached(issued.accessToken, yield* now)).toEqual(expected)
      }))

    it.scoped("a backend client's token names the client as subject and no user", () =>
      Effect.gen(function*() {
        const { tokens } = yield* server(backend.kind)
        const issued = yield* tokens.issueAccess(backendGrant)
        expect(decodeJwt(issued.accessToken)).toMatchObject({ sub: "bulk-exporter", client_id: "bulk-exporter", scope: "system/*.rs" })
        expect(decodeJwt(issued.accessToken)).not.toHaveProperty("patient")
        const claims = yield* tokens.verifyAccess(issued.accessToken)
        expect(claims).toMatchObject({ clientId: "bulk-exporter", subject: undefined, patient: undefined, fhirUser: undefined, scopes: ["system/*.rs"] })
      }))

    it.scoped("an outside verifier accepts the token with jose's jwtVerify against the published JWK Set", () =>
      Effect.gen(function*() {
        const { keys, tokens } = yield* server(backend.kind)
        const { accessToken } = yield* tokens.issueAccess(userGrant)
        const jwks = createLocalJWKSet(JSON.parse(JSON.stringify(yield* keys.jwks)))
        const verified = yield* Effect.promise(() =>
          jwtVerify(accessToken, jwks, { issuer: origin, audience: fhirBase, typ: "at+jwt", algorithms: ["RS256"], currentDate: new Date(start) })
        )
        expect(verified.payload).toMatchObject({ sub: "u-17", client_id: "growth-chart", patient: "pat-1" })
      }))

    it.scoped("refuses a token whose payload or signature was changed, one not signed with RS256, and one signed by an unknown key", () =>
      Effect.gen(function*() {
        const { keys, tokens } = yield* server(backend.kind)
        const { accessToken } = yield* tokens.issueAccess(userGrant)
        const [header, payload, signature] = accessToken.split(".") as [string, string, string]
        const widened = b64({ ...decodeJwt(accessToken), scope: "user/*.cruds", patient: "someone-else" })
        expect(yield* refusal(tokens.verifyAccess(`${header}.${widened}.${signature}`))).toBe(
          "InvalidToken: the token's signature does not verify"
        )
        const flipped = `${signature.slice(0, 10)}${signature[10] === "A" ? "B" : "A"}${signature.slice(11)}`
        expect(yield* refusal(tokens.verifyAccess(`${header}.${payload}.${flipped}`))).toBe("InvalidToken: the token's signature does not verify")
        const unsigned = `${b64({ alg: "none", typ: "at+jwt", kid: (yield* keys.current).kid })}.${payload}.`
        expect(yield* refusal(tokens.verifyAccess(unsigned))).toBe("InvalidToken: the token is not signed with RS256")
        const kid = (yield* keys.current).kid
        const hmac = yield* Effect.promise(() =>
          new SignJWT(decodeJwt(accessToken)).setProtectedHeader({ alg: "HS256", kid, typ: "at+jwt" })
            .sign(new TextEncoder().encode("a shared secret of thirty-two bytes!"))
        )
        expect(yield* refusal(tokens.verifyAccess(hmac))).toBe("InvalidToken: the token is not signed with RS256")
        const foreignKid = `${b64({ alg: "RS256", typ: "at+jwt", kid: "unknown-kid" })}.${payload}.${signature}`
        expect(yield* refusal(tokens.verifyAccess(foreignKid))).toBe("InvalidToken: the token is signed with a key this server does not know")
        expect(yield* refusal(tokens.verifyAccess("not a token"))).toBe("InvalidToken: the token is not a well-formed access token of this server")
        // The genuine token still verifies.
        expect((yield* tokens.verifyAccess(accessToken)).patient).toBe("pat-1")
      }))

    it.scoped("refuses a token for another server (issuer or audience) and an id_token presented as an access token", () =>
      Effect.gen(function*() {
        const { keys, store, tokens } = yield* server(backend.kind)
        // A server with the same keys but another public URL: its tokens are not for this one.
        const elsewhere = yield* openServer(store, { tokens: tokenSettings("https://elsewhere.example") })
        const foreign = yield* elsewhere.tokens.issueAccess(userGrant)
        expect(decodeProtectedHeader(foreign.accessToken).kid).toBe((yield* keys.current).kid)
        expect(yield* refusal(tokens.verifyAccess(foreign.accessToken))).toBe("InvalidToken: the token is not for this server")
        const idToken = yield* tokens.issueIdToken(userGrant, userGrant.clientId)
        expect(yield* refusal(tokens.verifyAccess(idToken))).toBe("InvalidToken: the token is not an access token")
      }))

    it.scoped("a token expires with the clock: refused after exp, gone from the cache, and its claims no longer current", () =>
      Effect.gen(function*() {
        const { tokens } = yield* server(backend.kind)
        const { accessToken, claims } = yield* tokens.issueAccess(userGrant)
        yield* TestClock.adjust("3599 seconds")
        expect(tokens.cached(accessToken, yield* now)).toBeDefined()
        expect(tokens.current(claims, yield* now)).toBe(true)
        expect((yield* tokens.verifyAccess(accessToken)).subject).toBe("u-17")
        yield* TestClock.adjust("1 second")
        expect(tokens.cached(accessToken, yield* now)).toBeUndefined()
        expect(tokens.current(claims, yield* now)).toBe(false)
        expect(yield* refusal(tokens.verifyAccess(accessToken))).toBe("InvalidToken: the token has expired")
        expect(yield* tokens.introspect(accessToken)).toEqual({ active: false })
      }))

    it.scoped("the lifetime is the settings'", () =>
      Effect.gen(function*() {
        const { store } = yield* server(backend.kind)
        const short = yield* openServer(store, { tokens: { ...settings, accessLifetime: "5 minutes" } })
        const issued = yield* short.tokens.issueAccess(userGrant)
        expect(issued.expiresIn).toBe(300)
        expect(issued.claims.exp - issued.claims.iat).toBe(300)
      }))

    it.scoped("rotation: a token signed before still verifies, a new one names the new key, the JWK Set lists both until the old key's tokens cannot be valid", () =>
      Effect.gen(function*() {
        const { keys, store, tokens } = yield* server(backend.kind)
        const first = (yield* keys.current).kid
        const before = (yield* tokens.issueAccess(userGrant)).accessToken
        const second = (yield* keys.rotate).kid
        const after = (yield* tokens.issueAccess(userGrant)).accessToken
        expect(decodeProtectedHeader(before).kid).toBe(first)
        expect(decodeProtectedHeader(after).kid).toBe(second)
        expect((yield* keys.jwks).keys.map((k) => k.kid)).toEqual([second, first])
        const jwks = createLocalJWKSet(JSON.parse(JSON.stringify(yield* keys.jwks)))
        // A server that has not seen the tokens verifies them by their keys, the retired one included.
        const fresh = yield* openServer(store)
        for (const token of [before, after]) {
          yield* Effect.promise(() => jwtVerify(token, jwks, { issuer: origin, audience: fhirBase, currentDate: new Date(start) }))
          expect((yield* tokens.verifyAccess(token)).clientId).toBe("growth-chart")
          expect((yield* fresh.tokens.verifyAccess(token)).clientId).toBe("growth-chart")
        }
        yield* TestClock.adjust("2 hours")
        const third = (yield* keys.rotate).kid
        expect((yield* keys.jwks).keys.map((k) => k.kid)).toEqual([third, second])
        expect(yield* refusal(tokens.verifyAccess(before))).toBe("InvalidToken: the token is signed with a key this server does not know")
      }))

    it.scoped("a restart on the same database: a token and a refresh token issued before are still good after", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(start)
        const options = yield* freshDatabase(backend.kind)
        const first = yield* Scope.make()
        const { accessToken, refreshToken } = yield* Effect.gen(function*() {
          const { tokens } = yield* openServer(yield* openStore(options))
          return {
            accessToken: (yield* tokens.issueAccess(userGrant)).accessToken,
            refreshToken: yield* tokens.issueRefresh(userGrant, "offline")
          }
        }).pipe(Scope.extend(first))
        yield* Scope.close(first, Exit.void)
        yield* TestClock.adjust("10 minutes")
        const { tokens } = yield* openServer(yield* openStore(options))
        expect(tokens.cached(accessToken, yield* now)).toBeUndefined()
        expect((yield* tokens.verifyAccess(accessToken)).patient).toBe("pat-1")
        expect((yield* tokens.redeemRefresh(refreshToken, userGrant.clientId)).grant).toEqual(userGrant)
      }))

    it.scoped("issues an OpenID Connect id_token for the client, with fhirUser as an absolute URL and profile claims only when given", () =>
      Effect.gen(function*() {
        const { keys, tokens } = yield* server(backend.kind)
        const idToken = yield* tokens.issueIdToken(userGrant, "growth-chart", { name: "Ada Lovelace", email: undefined })
        const iat = Math.floor(start / 1000)
        expect(decodeProtectedHeader(idToken)).toEqual({ alg: "RS256", kid: (yield* keys.current).kid, typ: "JWT" })
        const jwks = createLocalJWKSet(JSON.parse(JSON.stringify(yield* keys.jwks)))
        const { payload } = yield* Effect.promise(() => jwtVerify(idToken, jwks, { issuer: origin, audience: "growth-chart", currentDate: new Date(start) }))
        expect(payload).toEqual({
          iss: origin,
          sub: "u-17",
          aud: "growth-chart",
          iat,
          exp: iat + 3600,
          auth_time: userGrant.authTime,
          nonce: "n-0S6_WzA2Mj",
          fhirUser: `${fhirBase}/Practitioner/p1`,
          name: "Ada Lovelace"
        })
        // Without the fhirUser scope, nonce, sign-in time or profile: none of those claims.
        const plain = decodeJwt(yield* tokens.issueIdToken({ ...userGrant, scopes: ["openid"], nonce: undefined, authTime: undefined }, "growth-chart"))
        expect(Object.keys(plain).sort()).toEqual(["aud", "exp", "iat", "iss", "sub"])
      }))

    it.scoped("a refresh token is opaque, stored only as its hash, and rotated on use: the old one then fails", () =>
      Effect.gen(function*() {
        const { store, tokens } = yield* server(backend.kind)
        const refresh = yield* tokens.issueRefresh(userGrant, "offline")
        expect(refresh).toMatch(/^[A-Za-z0-9_-]{43}$/)
        const [row] = yield* refreshRows.pipe(Effect.provide(store))
        expect(row).toMatchObject({ token_hash: sha256(refresh), client_id: "growth-chart", expires_at: null, used_at: null, revoked_at: null })
        expect(JSON.stringify(row)).not.toContain(refresh)
        yield* TestClock.adjust("1 minute")
        const redeemed = yield* tokens.redeemRefresh(refresh, "growth-chart")
        expect(redeemed.grant).toEqual(userGrant)
        expect(redeemed.refreshToken).not.toBe(refresh)
        const rows = yield* refreshRows.pipe(Effect.provide(store))
        expect(rows).toHaveLength(2)
        expect(new Set(rows.map((r) => r["family"])).size).toBe(1)
        expect(Number(rows[0]!["used_at"])).toBe(start + 60_000)
        // The new one works, once; so does its successor.
        const again = yield* tokens.redeemRefresh(redeemed.refreshToken, "growth-chart")
        expect(again.grant).toEqual(userGrant)
      }))

    it.scoped("a refresh token used twice revokes its whole family: the thief's and the client's tokens both fail", () =>
      Effect.gen(function*() {
        const { store, tokens } = yield* server(backend.kind)
        const stolen = yield* tokens.issueRefresh(userGrant, "offline")
        const { refreshToken: clients } = yield* tokens.redeemRefresh(stolen, "growth-chart")
        expect(yield* refusal(tokens.redeemRefresh(stolen, "growth-chart"))).toBe(
          "InvalidGrant: the refresh token was already used: every token of its authorization is now revoked"
        )
        expect(yield* refusal(tokens.redeemRefresh(clients, "growth-chart"))).toBe("InvalidGrant: the refresh token was revoked")
        const rows = yield* refreshRows.pipe(Effect.provide(store))
        expect(rows.map((r) => r["revoked_at"] === null)).toEqual([false, false])
        // Another family of the same client is untouched.
        const other = yield* tokens.issueRefresh(userGrant, "offline")
        expect((yield* tokens.redeemRefresh(other, "growth-chart")).grant.clientId).toBe("growth-chart")
      }))

    it.scoped("refuses a refresh token presented by another client without using it up, and an unknown one", () =>
      Effect.gen(function*() {
        const { tokens } = yield* server(backend.kind)
        const refresh = yield* tokens.issueRefresh(userGrant, "offline")
        expect(yield* refusal(tokens.redeemRefresh(refresh, "another-app"))).toBe("InvalidGrant: the refresh token was not issued to this client")
        expect((yield* tokens.redeemRefresh(refresh, "growth-chart")).grant).toEqual(userGrant)
        expect(yield* refusal(tokens.redeemRefresh("A".repeat(43), "growth-chart"))).toBe("InvalidGrant: the refresh token is not known")
      }))

    it.scoped("a refresh may narrow the scopes (RFC 6749 6); the new refresh token keeps the grant's; a scope not granted is refused and uses nothing up", () =>
      Effect.gen(function*() {
        const { tokens } = yield* server(backend.kind)
        const refresh = yield* tokens.issueRefresh(userGrant, "offline")
        expect(yield* refusal(tokens.redeemRefresh(refresh, "growth-chart", ["patient/Patient.r", "user/*.cruds"]))).toBe(
          "InvalidScope: the scope asked for was not granted: user/*.cruds"
        )
        const narrowed = yield* tokens.redeemRefresh(refresh, "growth-chart", ["patient/Patient.r", "openid"])
        expect(narrowed.grant).toEqual({ ...userGrant, scopes: ["openid", "patient/Patient.r"] })
        const { grant } = yield* tokens.redeemRefresh(narrowed.refreshToken, "growth-chart")
        expect(grant.scopes).toEqual(userGrant.scopes)
      }))

    it.scoped("online refresh tokens end 8 hours after the authorization, rotation or not; offline ones do not expire", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(start)
        const store = yield* openStore(yield* freshDatabase(backend.kind))
        // The clock jumps years here: the revoked tokens are read again once a day, not every 30 seconds.
        const { tokens } = yield* openServer(store, { tokens: { ...settings, revokedReloadEvery: "1 day" } })
        const online = yield* tokens.issueRefresh(userGrant, "online")
        const offline = yield* tokens.issueRefresh(userGrant, "offline")
        expect(yield* tokens.introspect(online)).toMatchObject({ active: true, exp: Math.floor(start / 1000) + 8 * 3600 })
        yield* TestClock.adjust("7 hours")
        const { refreshToken } = yield* tokens.redeemRefresh(online, "growth-chart")
        expect(yield* tokens.introspect(refreshToken)).toMatchObject({ active: true, exp: Math.floor(start / 1000) + 8 * 3600 })
        yield* TestClock.adjust("1 hour")
        expect(yield* refusal(tokens.redeemRefresh(refreshToken, "growth-chart"))).toBe("InvalidGrant: the refresh token has expired")
        expect(yield* tokens.introspect(refreshToken)).toEqual({ active: false })
        yield* TestClock.adjust("1000 days")
        expect((yield* tokens.redeemRefresh(offline, "growth-chart")).grant).toEqual(userGrant)
      }))

    it.scoped("revoking an access token (RFC 7009): refused from then on, gone from the cache, its claims no longer current, and still refused after a restart", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(start)
        const options = yield* freshDatabase(backend.kind)
        const first = yield* Scope.make()
        const { accessToken, kept } = yield* Effect.gen(function*() {
          const { tokens } = yield* openServer(yield* openStore(options))
          const { accessToken, claims } = yield* tokens.issueAccess(userGrant)
          const kept = yield* tokens.issueAccess(userGrant)
          // Another client's request, or an unknown token, changes nothing.
          yield* tokens.revoke(accessToken, "another-app")
          yield* tokens.revoke("eyJ.garbage.token", "growth-chart")
          yield* tokens.revoke("unknown-opaque-token", "growth-chart")
          expect((yield* tokens.verifyAccess(accessToken)).clientId).toBe("growth-chart")
          expect(tokens.current(claims, yield* now)).toBe(true)
          yield* tokens.revoke(accessToken, "growth-chart")
          expect(tokens.cached(accessToken, yield* now)).toBeUndefined()
          expect(tokens.current(claims, yield* now)).toBe(false)
          expect(yield* refusal(tokens.verifyAccess(accessToken))).toBe("InvalidToken: the token was revoked")
          expect(yield* tokens.introspect(accessToken)).toEqual({ active: false })
          expect((yield* tokens.verifyAccess(kept.accessToken)).clientId).toBe("growth-chart")
          expect(tokens.current(kept.claims, yield* now)).toBe(true)
          return { accessToken, kept: kept.accessToken }
        }).pipe(Scope.extend(first))
        yield* Scope.close(first, Exit.void)
        const { tokens } = yield* openServer(yield* openStore(options))
        expect(yield* refusal(tokens.verifyAccess(accessToken))).toBe("InvalidToken: the token was revoked")
        expect((yield* tokens.verifyAccess(kept)).clientId).toBe("growth-chart")
      }))

    it.scoped("another server on the database stops accepting a revoked access token within 30 seconds", () =>
      Effect.gen(function*() {
        const { store, tokens } = yield* server(backend.kind)
        const other = yield* openServer(store)
        const { accessToken } = yield* tokens.issueAccess(userGrant)
        yield* other.tokens.verifyAccess(accessToken)
        yield* tokens.revoke(accessToken, "growth-chart")
        expect(other.tokens.cached(accessToken, yield* now)).toBeDefined()
        yield* TestClock.adjust("30 seconds")
        const at = yield* now
        expect(yield* eventually(() => other.tokens.cached(accessToken, at) === undefined)).toBe(true)
        expect(yield* refusal(other.tokens.verifyAccess(accessToken))).toBe("InvalidToken: the token was revoked")
      }))

    it.scoped("revoking a refresh token revokes its family; another client's request or an unknown token does nothing", () =>
      Effect.gen(function*() {
        const { tokens } = yield* server(backend.kind)
        const first = yield* tokens.issueRefresh(userGrant, "offline")
        const { refreshToken: second } = yield* tokens.redeemRefresh(first, "growth-chart")
        yield* tokens.revoke(second, "another-app")
        expect(yield* tokens.introspect(second)).toMatchObject({ active: true })
        yield* tokens.revoke(first, "growth-chart")
        expect(yield* refusal(tokens.redeemRefresh(second, "growth-chart"))).toBe("InvalidGrant: the refresh token was revoked")
        expect(yield* tokens.introspect(second)).toEqual({ active: false })
      }))

    it.scoped("introspection (RFC 7662, SMART's fields): an active access token, an active refresh token, and anything else inactive", () =>
      Effect.gen(function*() {
        const { tokens } = yield* server(backend.kind)
        const { accessToken, claims } = yield* tokens.issueAccess(userGrant)
        const iat = Math.floor(start / 1000)
        expect(yield* tokens.introspect(accessToken)).toEqual({
          active: true,
          token_type: "Bearer",
          scope: userGrant.scopes.join(" "),
          client_id: "growth-chart",
          sub: "u-17",
          exp: iat + 3600,
          iat,
          iss: origin,
          aud: fhirBase,
          jti: claims.jti,
          patient: "pat-1",
          encounter: "enc-9",
          fhirUser: `${fhirBase}/Practitioner/p1`
        })
        const backendToken = (yield* tokens.issueAccess(backendGrant)).accessToken
        expect(yield* tokens.introspect(backendToken)).toEqual({
          active: true,
          token_type: "Bearer",
          scope: "system/*.rs",
          client_id: "bulk-exporter",
          sub: "bulk-exporter",
          exp: iat + 3600,
          iat,
          iss: origin,
          aud: fhirBase,
          jti: decodeJwt(backendToken).jti
        })
        const refresh = yield* tokens.issueRefresh(userGrant, "offline")
        expect(yield* tokens.introspect(refresh)).toEqual({
          active: true,
          token_type: "refresh_token",
          scope: userGrant.scopes.join(" "),
          client_id: "growth-chart",
          sub: "u-17"
        })
        yield* tokens.redeemRefresh(refresh, "growth-chart")
        expect(yield* tokens.introspect(refresh)).toEqual({ active: false })
        expect(yield* tokens.introspect("")).toEqual({ active: false })
        expect(yield* tokens.introspect("x.y.z")).toEqual({ active: false })
      }))

    it.scoped("no token, hash or private key reaches a log line", () =>
      Effect.gen(function*() {
        const lines: Array<string> = []
        const secrets = yield* Effect.gen(function*() {
          const { store, tokens } = yield* server(backend.kind)
          const access = (yield* tokens.issueAccess(userGrant)).accessToken
          const idToken = yield* tokens.issueIdToken(userGrant, "growth-chart")
          const refresh = yield* tokens.issueRefresh(userGrant, "offline")
          const { refreshToken } = yield* tokens.redeemRefresh(refresh, "growth-chart")
          yield* Effect.flip(tokens.redeemRefresh(refresh, "growth-chart"))
          yield* Effect.flip(tokens.redeemRefresh(refreshToken, "growth-chart"))
          yield* Effect.flip(tokens.verifyAccess(`${access}x`))
          yield* tokens.introspect(access)
          yield* tokens.revoke(access, "growth-chart")
          yield* Effect.flip(tokens.verifyAccess(access))
          const keyRows = yield* Effect.flatMap(Database, (db) => db.withReader((sql) => sql<{ private_jwk: string }>`SELECT private_jwk FROM svc_auth_keys`))
            .pipe(Effect.provide(store), Effect.orDie)
          const privateParts = keyRows.flatMap((row) => {
            const jwk = JSON.parse(row.private_jwk) as Record<string, string>
            return ["d", "p", "q", "dp", "dq", "qi"].map((name) => jwk[name]!)
          })
          return [access, idToken, refresh, refreshToken, sha256(refresh), sha256(refreshToken), ...privateParts]
        }).pipe(capturingLogs(lines))
        // Something was logged (the key made, the reuse, the revocation), and none of it is secret.
        expect(lines.join("\n")).toContain("signing key made")
        expect(lines.join("\n")).toContain("used twice")
        for (const secret of secrets) {
          for (const line of lines) expect(line.includes(secret.slice(-24)), line).toBe(false)
        }
      }))
  })
}
