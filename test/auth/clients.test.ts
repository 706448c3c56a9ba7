/**
 * The authorization server's clients (src/auth/Clients.ts) on SQLite and Postgres: dynamic registration over
 * `POST /auth/register` (the DCR token, the metadata rules, the secret shown once and stored hashed, the
 * client still there after a restart), client authentication by each method (secrets, basic and post;
 * private_key_jwt with RS384 and ES384 keys given inline or served from a jwks_uri on 127.0.0.1, and every way
 * an assertion is refused), the built-in confidential client, and the redirect URI rules.
 */
import { HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Redacted, TestClock } from "effect"
import { exportJWK, generateKeyPair, type JWK, SignJWT, UnsecuredJWT } from "jose"
import { createHash } from "node:crypto"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { cacheLifetimeMs } from "../../src/auth/clientAssertion.ts"
import {
  basicCredentials,
  builtInClientId,
  type ClientAuthFailed,
  clientAuthFailedResponse,
  Clients,
  type ClientSettings,
  layer,
  make
} from "../../src/auth/Clients.ts"
import { Database } from "../../src/db/Database.ts"
import { anonymous } from "../../src/http/Principal.ts"
import type { RootHandler } from "../../src/http/RootRoutes.ts"
import { backends } from "../support/backends.ts"
import { withStore } from "../support/store.ts"

const dcrToken = "dcr-token-of-the-tests"
const confidentialSecret = "the-built-in-client-secret"
const tokenEndpoint = "https://fhir.example.org/auth/token"

const settings: ClientSettings = {
  dcrToken: Redacted.make(dcrToken),
  confidentialSecret: Redacted.make(confidentialSecret),
  tokenEndpoint,
  publicOrigin: "https://fhir.example.org"
}

const start = Date.parse("2026-11-26T12:00:00Z")
const nowSeconds = () => Effect.map(TestClock.currentTimeMillis, (ms) => Math.floor(ms / 1000))

interface Reply {
  readonly status: number
  readonly headers: Headers
  readonly json: any
}

/** Calls a root handler as the route table would, and reads the answer as a client sees it. */
const call = (handler: RootHandler, init: { readonly method?: string; readonly headers?: Record<string, string>; readonly body?: string }) =>
  handler({
    http: HttpServerRequest.fromWeb(new Request("http://localhost/auth/register", {
      method: init.method ?? "POST",
      headers: init.headers ?? {},
      ...(init.body === undefined ? {} : { body: init.body })
    })),
    path: "/auth/register",
    params: {},
    principal: anonymous("127.0.0.1")
  }).pipe(
    Effect.map((response) => HttpServerResponse.toWeb(response)),
    Effect.flatMap((response) =>
      Effect.promise(async (): Promise<Reply> => ({ status: response.status, headers: response.headers, json: await response.json() }))
    )
  )

const registration = (body: unknown, token = dcrToken) => ({
  headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
  body: JSON.stringify(body)
})

const basic = (id: string, secret: string) =>
  `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString("base64")}`

/** The description of a refused authentication (or the tag of an unexpected error). */
const refusal = <A, E extends { readonly _tag: string }>(effect: Effect.Effect<A, E>) =>
  Effect.map(Effect.flip(effect), (error) => (error._tag === "ClientAuthFailed" ? (error as unknown as ClientAuthFailed).description : `unexpected ${error._tag}`))

const storedRows = (table: "svc_auth_clients" | "svc_auth_assertions") =>
  Effect.flatMap(Database, (db) => db.withReader((sql) => sql<Record<string, unknown>>`SELECT * FROM ${sql(table)}`)).pipe(Effect.orDie)

const keyPair = (alg: "RS384" | "ES384", kid: string) =>
  Effect.promise(async () => {
    const { publicKey, privateKey } = await generateKeyPair(alg, { extractable: true })
    const jwk: JWK = { ...(await exportJWK(publicKey)), kid }
    return { jwk, privateKey, alg, kid }
  })

type KeyPair = Effect.Effect.Success<ReturnType<typeof keyPair>>

/** A client assertion of `clientId` signed with `key`, valid four minutes from now unless `claims` say else. */
const assertion = (
  key: KeyPair,
  clientId: string,
  claims: Record<string, unknown> = {},
  header: Record<string, unknown> = {}
) =>
  Effect.gen(function*() {
    const now = yield* nowSeconds()
    const payload = { iss: clientId, sub: clientId, aud: tokenEndpoint, exp: now + 240, jti: crypto.randomUUID(), ...claims }
    return yield* Effect.promise(() => new SignJWT(payload).setProtectedHeader({ alg: key.alg, kid: key.kid, typ: "JWT", ...header }).sign(key.privateKey))
  })

const assertionForm = (jwt: string, extra: Record<string, string> = {}) => ({
  headers: {},
  form: new URLSearchParams({
    grant_type: "client_credentials",
    client_assertion_type: "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
    client_assertion: jwt,
    ...extra
  })
})

/** A JWK Set served on 127.0.0.1, counting its fetches; `serve` changes what it answers. */
const jwksServer = Effect.acquireRelease(
  Effect.promise(() =>
    new Promise<{ url: string; fetches: () => number; serve: (keys: ReadonlyArray<JWK>, cacheControl?: string) => void; close: () => Promise<void> }>((resolve) => {
      let keys: ReadonlyArray<JWK> = []
      let cacheControl: string | undefined
      let fetches = 0
      const server = createServer((_request, response) => {
        fetches++
        response.writeHead(200, { "content-type": "application/json", ...(cacheControl === undefined ? {} : { "cache-control": cacheControl }) })
        response.end(JSON.stringify({ keys }))
      })
      server.listen(0, "127.0.0.1", () => {
        const { port } = server.address() as AddressInfo
        resolve({
          url: `http://127.0.0.1:${port}/jwks.json`,
          fetches: () => fetches,
          serve: (next, control) => {
            keys = next
            cacheControl = control
          },
          close: () =>
            new Promise((done) => {
              server.closeAllConnections()
              server.close(() => done())
            })
        })
      })
    })
  ),
  (server) => Effect.promise(server.close)
)

describe("client authentication helpers", () => {
  it("reads Basic credentials form-urlencoded before base64 (RFC 6749, 2.3.1)", () => {
    const header = `Basic ${Buffer.from("my%3Aapp:se+cret%25:x").toString("base64")}`
    expect(basicCredentials(header)).toEqual({ id: "my:app", secret: "se cret%:x" })
    expect(basicCredentials(`Basic ${Buffer.from("no-colon").toString("base64")}`)).toMatch(/client_id:client_secret/)
    expect(basicCredentials("Basic !!!")).toMatch(/base64/)
    expect(basicCredentials(`Basic ${Buffer.from("%zz:secret").toString("base64")}`)).toMatch(/form-urlencoded/)
  })

  it("holds a fetched JWK Set as long as its Cache-Control allows, five minutes at most", () => {
    expect(cacheLifetimeMs(null, 300_000)).toBe(300_000)
    expect(cacheLifetimeMs("public, max-age=60", 300_000)).toBe(60_000)
    expect(cacheLifetimeMs("max-age=86400", 300_000)).toBe(300_000)
    expect(cacheLifetimeMs("no-cache", 300_000)).toBe(0)
    expect(cacheLifetimeMs("max-age=60, no-store", 300_000)).toBe(0)
  })
})

for (const backend of backends.filter((b) => b.kind !== "memory")) {
  describe.skipIf(backend.skip)(`clients on ${backend.kind}`, () => {
    it.scoped("registers a client with the DCR token: 201, the metadata as stored, the secret once, kept after a restart", () =>
      withStore(backend.kind, Effect.gen(function*() {
        yield* TestClock.setTime(start)
        const clients = yield* make(settings)
        const reply = yield* call(clients.registerHandler, registration({
          redirect_uris: ["https://app.example.org/callback", "http://127.0.0.1:8765/cb"],
          client_name: "Growth charts",
          scope: "launch openid fhirUser patient/*.rs",
          contacts: ["dev@app.example.org"],
          software_id: "growth-charts",
          software_version: "2.1",
          not_a_field_svc_knows: true
        }))
        expect(reply.status).toBe(201)
        expect(reply.headers.get("content-type")).toMatch(/^application\/json/)
        expect(reply.headers.get("cache-control")).toBe("no-store")
        expect(reply.headers.get("pragma")).toBe("no-cache")
        const { client_id, client_secret, ...rest } = reply.json
        expect(client_id).toMatch(/^[0-9a-f-]{36}$/)
        expect(client_secret).toMatch(/^[A-Za-z0-9_-]{43}$/)
        expect(rest).toEqual({
          client_id_issued_at: start / 1000,
          client_secret_expires_at: 0,
          redirect_uris: ["https://app.example.org/callback", "http://127.0.0.1:8765/cb"],
          token_endpoint_auth_method: "client_secret_basic",
          grant_types: ["authorization_code"],
          response_types: ["code"],
          client_name: "Growth charts",
          scope: "launch openid fhirUser patient/*.rs",
          contacts: ["dev@app.example.org"],
          software_id: "growth-charts",
          software_version: "2.1"
        })

        // The secret is nowhere in the database: only its SHA-256.
        const rows = yield* storedRows("svc_auth_clients")
        expect(rows.length).toBe(1)
        expect(JSON.stringify(rows)).not.toContain(client_secret)
        expect(rows[0]!.secret_hash).toBe(createHash("sha256").update(client_secret).digest("hex"))
        expect(Number(rows[0]!.created_at)).toBe(start)

        // A server started again on the same database knows the client, and its secret.
        const again = yield* Effect.provide(Clients, layer(settings))
        const found = yield* again.find(client_id)
        const { client_id_issued_at: _issued, client_secret_expires_at: _expires, ...metadata } = rest
        expect(found?.metadata).toEqual(metadata)
        expect([found?.builtIn, found?.createdAt]).toEqual([false, start])
        const authenticated = yield* again.authenticate({ headers: { authorization: basic(client_id, client_secret) }, form: new URLSearchParams() })
        expect([authenticated.client.clientId, authenticated.method]).toEqual([client_id, "client_secret_basic"])
        expect(yield* again.find("no-such-client")).toBeUndefined()
      })))

    it.scoped("refuses registration without the DCR token, with a wrong one, or with a body that is not JSON", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const clients = yield* make(settings)
        const body = { redirect_uris: ["https://app.example.org/cb"] }
        const missing = yield* call(clients.registerHandler, { headers: { "content-type": "application/json" }, body: JSON.stringify(body) })
        expect([missing.status, missing.json.error]).toEqual([401, "invalid_token"])
        expect(missing.headers.get("www-authenticate")).toMatch(/^Bearer\b/)
        expect(missing.headers.get("cache-control")).toBe("no-store")
        for (const authorization of [`Bearer ${dcrToken}x`, `Bearer ${dcrToken.slice(1)}`, `Basic ${Buffer.from(`a:${dcrToken}`).toString("base64")}`]) {
          const wrong = yield* call(clients.registerHandler, { headers: { authorization, "content-type": "application/json" }, body: JSON.stringify(body) })
          expect([authorization, wrong.status, wrong.json.error]).toEqual([authorization, 401, "invalid_token"])
          expect(wrong.headers.get("www-authenticate")).toMatch(/^Bearer\b/)
        }
        const form = yield* call(clients.registerHandler, {
          headers: { authorization: `Bearer ${dcrToken}`, "content-type": "application/x-www-form-urlencoded" },
          body: "redirect_uris=https://app.example.org/cb"
        })
        expect([form.status, form.json.error]).toEqual([400, "invalid_client_metadata"])
        const broken = yield* call(clients.registerHandler, { headers: { authorization: `Bearer ${dcrToken}`, "content-type": "application/json" }, body: "{\"redirect_uris\": [" })
        expect([broken.status, broken.json]).toEqual([400, { error: "invalid_client_metadata", error_description: "the body is not valid JSON" }])
        const get = yield* call(clients.registerHandler, { method: "GET", headers: { authorization: `Bearer ${dcrToken}` } })
        expect([get.status, get.headers.get("allow")]).toEqual([405, "POST"])
        expect(yield* storedRows("svc_auth_clients")).toEqual([])
      })))

    it.scoped("refuses metadata it cannot honour with the RFC 7591 error that names the problem", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const clients = yield* make(settings)
        const rsa = yield* keyPair("RS384", "rsa-1")
        const p256 = yield* Effect.promise(async () => ({ ...(await exportJWK((await generateKeyPair("ES256", { extractable: true })).publicKey)), kid: "p256" }))
        const privateJwk = yield* Effect.promise(() => exportJWK(rsa.privateKey))
        const cb = ["https://app.example.org/cb"]
        const jwt = { token_endpoint_auth_method: "private_key_jwt", grant_types: ["client_credentials"] }
        const cases: ReadonlyArray<readonly [unknown, string, RegExp]> = [
          [{}, "invalid_redirect_uri", /authorization_code needs at least one redirect URI/],
          [{ redirect_uris: ["http://app.example.org/cb"] }, "invalid_redirect_uri", /http on a host that is not loopback/],
          [{ redirect_uris: ["https://app.example.org/cb#top"] }, "invalid_redirect_uri", /fragment/],
          [{ redirect_uris: ["/cb"] }, "invalid_redirect_uri", /not an absolute URI/],
          [{ redirect_uris: ["org.example.app:/cb"] }, "invalid_redirect_uri", /scheme org.example.app/],
          [{ redirect_uris: "https://app.example.org/cb" }, "invalid_redirect_uri", /array of strings/],
          [["https://app.example.org/cb"], "invalid_client_metadata", /JSON object/],
          [{ redirect_uris: cb, token_endpoint_auth_method: "tls_client_auth" }, "invalid_client_metadata", /"tls_client_auth" is not supported/],
          [{ redirect_uris: cb, grant_types: ["implicit"] }, "invalid_client_metadata", /"implicit" is not supported/],
          [{ redirect_uris: cb, grant_types: ["refresh_token"] }, "invalid_client_metadata", /refresh_token needs authorization_code/],
          [{ token_endpoint_auth_method: "none", grant_types: ["client_credentials"] }, "invalid_client_metadata", /client_credentials is for confidential clients/],
          [{ redirect_uris: cb, response_types: ["token"] }, "invalid_client_metadata", /"token" is not supported/],
          [{ redirect_uris: cb, scope: "openid  launch" }, "invalid_client_metadata", /scope tokens/],
          [{ redirect_uris: cb, jwks: { keys: [rsa.jwk] } }, "invalid_client_metadata", /only taken with token_endpoint_auth_method private_key_jwt/],
          [jwt, "invalid_client_metadata", /exactly one of jwks and jwks_uri/],
          [{ ...jwt, jwks: { keys: [rsa.jwk] }, jwks_uri: "https://app.example.org/jwks" }, "invalid_client_metadata", /exactly one of jwks and jwks_uri/],
          [{ ...jwt, jwks_uri: "http://app.example.org/jwks" }, "invalid_client_metadata", /jwks_uri .* not loopback/],
          [{ ...jwt, jwks: { keys: [{ ...privateJwk, kid: "k" }] } }, "invalid_client_metadata", /private or symmetric key material \(d\)/],
          [{ ...jwt, jwks: { keys: [{ kty: "oct", k: "c2VjcmV0", kid: "k" }] } }, "invalid_client_metadata", /private or symmetric key material \(k\)/],
          [{ ...jwt, jwks: { keys: [p256] } }, "invalid_client_metadata", /no public key usable for RS384 .* or ES384/],
          [{ ...jwt, jwks: { keys: [{ ...rsa.jwk, alg: "RS256" }] } }, "invalid_client_metadata", /no public key usable/],
          [{ ...jwt, jwks: { keys: [{ ...rsa.jwk, kid: undefined }] } }, "invalid_client_metadata", /needs a kid/],
          [{ ...jwt, jwks: { keys: [rsa.jwk, rsa.jwk] } }, "invalid_client_metadata", /two keys with kid rsa-1/],
          [{ ...jwt, jwks: { keys: [] } }, "invalid_client_metadata", /holds no key/],
          [{ ...jwt, jwks: [rsa.jwk] }, "invalid_client_metadata", /JWK Set/]
        ]
        for (const [body, error, description] of cases) {
          const reply = yield* call(clients.registerHandler, registration(body))
          expect([JSON.stringify(body), reply.status, reply.json.error]).toEqual([JSON.stringify(body), 400, error])
          expect(reply.json.error_description).toMatch(description)
          expect(reply.headers.get("cache-control")).toBe("no-store")
        }
        expect(yield* storedRows("svc_auth_clients")).toEqual([])

        // What is allowed: loopback http in its three spellings, a public client without a secret.
        const native = yield* clients.register({
          redirect_uris: ["http://127.0.0.1/cb", "http://[::1]:8080/cb", "http://localhost:3000/cb"],
          token_endpoint_auth_method: "none",
          grant_types: ["authorization_code", "refresh_token"]
        })
        expect(native.client_secret).toBeUndefined()
        expect(native.client_secret_expires_at).toBeUndefined()
        expect((yield* storedRows("svc_auth_clients"))[0]!.secret_hash).toBeNull()
      })))

    it.scoped("authenticates client_secret_basic and client_secret_post clients by the method they registered, and no other", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const clients = yield* make(settings)
        const cb = ["https://app.example.org/cb"]
        const basicClient = yield* clients.register({ redirect_uris: cb })
        const postClient = yield* clients.register({ redirect_uris: cb, token_endpoint_auth_method: "client_secret_post" })
        const publicClient = yield* clients.register({ redirect_uris: cb, token_endpoint_auth_method: "none" })
        const id = basicClient.client_id
        const secret = basicClient.client_secret!

        const ok = yield* clients.authenticate({ headers: { authorization: basic(id, secret) }, form: new URLSearchParams({ client_id: id }) })
        expect([ok.client.clientId, ok.method]).toEqual([id, "client_secret_basic"])
        const post = yield* clients.authenticate({ headers: {}, form: new URLSearchParams({ client_id: postClient.client_id, client_secret: postClient.client_secret! }) })
        expect([post.client.clientId, post.method]).toEqual([postClient.client_id, "client_secret_post"])
        const none = yield* clients.authenticate({ headers: {}, form: new URLSearchParams({ client_id: publicClient.client_id }) })
        expect([none.client.clientId, none.method]).toEqual([publicClient.client_id, "none"])

        const wrong = yield* Effect.flip(clients.authenticate({ headers: { authorization: basic(id, `${secret}x`) }, form: new URLSearchParams() }))
        expect(wrong._tag).toBe("ClientAuthFailed")
        const response = HttpServerResponse.toWeb(clientAuthFailedResponse(wrong as ClientAuthFailed))
        expect(response.status).toBe(401)
        expect(response.headers.get("www-authenticate")).toMatch(/^Basic\b/)
        expect(response.headers.get("cache-control")).toBe("no-store")
        expect(yield* Effect.promise(() => response.json())).toEqual({ error: "invalid_client", error_description: `the client secret of ${id} is wrong` })

        const refused = (headers: Record<string, string>, form: Record<string, string> | URLSearchParams) =>
          refusal(clients.authenticate({ headers, form: new URLSearchParams(form) }))
        expect(yield* refused({}, { client_id: id, client_secret: secret })).toBe(`client ${id} is registered for client_secret_basic, not client_secret_post`)
        expect(yield* refused({ authorization: basic(postClient.client_id, postClient.client_secret!) }, {})).toMatch(/registered for client_secret_post, not client_secret_basic/)
        expect(yield* refused({}, { client_id: id })).toBe(`client ${id} must authenticate with client_secret_basic`)
        expect(yield* refused({}, { client_id: postClient.client_id, client_secret: "" })).toMatch(/client secret .* is wrong/)
        expect(yield* refused({ authorization: basic(publicClient.client_id, "anything") }, {})).toMatch(/registered for none/)
        expect(yield* refused({ authorization: basic(id, secret) }, { client_id: id, client_secret: secret })).toMatch(/more than one client authentication method/)
        expect(yield* refused({ authorization: basic(id, secret) }, { client_id: postClient.client_id })).toMatch(/not the one in Authorization: Basic/)
        expect(yield* refused({}, new URLSearchParams([["client_id", id], ["client_id", id]]))).toBe("client_id is given more than once")
        expect(yield* refused({ authorization: basic("nobody", secret) }, {})).toBe("client nobody is not known")
        // A client id no client holds, which Postgres's text could not even hold: unknown, not a database error.
        expect(yield* refused({}, { client_id: "a\u0000b" })).toBe("client a\u0000b is not known")
        expect(yield* clients.find("\u0000")).toBeUndefined()
        expect(yield* refused({}, {})).toMatch(/no client authentication/)
        // The 401 carries WWW-Authenticate: Basic only when Basic was tried.
        const postFailure = yield* Effect.flip(clients.authenticate({ headers: {}, form: new URLSearchParams({ client_id: postClient.client_id, client_secret: "x" }) }))
        expect(HttpServerResponse.toWeb(clientAuthFailedResponse(postFailure as ClientAuthFailed)).headers.get("www-authenticate")).toBeNull()
      })))

    it.scoped("knows the built-in confidential client: its secret by basic or post, and its redirect rule", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const clients = yield* make(settings)
        const builtIn = yield* clients.find(builtInClientId)
        expect([builtIn?.builtIn, builtIn?.metadata.grant_types]).toEqual([true, ["authorization_code", "refresh_token", "client_credentials"]])
        const byBasic = yield* clients.authenticate({ headers: { authorization: basic(builtInClientId, confidentialSecret) }, form: new URLSearchParams() })
        expect([byBasic.client.clientId, byBasic.method]).toEqual([builtInClientId, "client_secret_basic"])
        const byPost = yield* clients.authenticate({ headers: {}, form: new URLSearchParams({ client_id: builtInClientId, client_secret: confidentialSecret }) })
        expect(byPost.method).toBe("client_secret_post")
        expect(yield* refusal(clients.authenticate({ headers: { authorization: basic(builtInClientId, "guess") }, form: new URLSearchParams() }))).toMatch(/is wrong/)
        expect(yield* refusal(clients.authenticate({ headers: {}, form: new URLSearchParams({ client_id: builtInClientId }) }))).toMatch(/must authenticate with client_secret_basic or client_secret_post/)
        // Stored nowhere: the database holds no client.
        expect(yield* storedRows("svc_auth_clients")).toEqual([])

        for (const uri of ["http://127.0.0.1:53123/callback", "http://localhost:3000/", "http://[::1]:8080/cb?x=1", "https://fhir.example.org/app/cb"]) {
          expect([uri, clients.redirectAllowed(builtIn!, uri)]).toEqual([uri, true])
        }
        for (const uri of ["https://app.example.org/cb", "http://127.0.0.1:80/cb#x", "https://fhir.example.org.evil.example/cb", "http://fhir.example.org/cb", "javascript:alert(1)", "http://user@127.0.0.1/cb"]) {
          expect([uri, clients.redirectAllowed(builtIn!, uri)]).toEqual([uri, false])
        }
      })))

    it.scoped("matches a registered client's redirect URIs exactly, but for the port of a loopback IP (RFC 8252, 7.3)", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const clients = yield* make(settings)
        const registered = yield* clients.register({ redirect_uris: ["https://app.example.org/cb", "http://127.0.0.1/native", "http://localhost:3000/cb"] })
        const client = (yield* clients.find(registered.client_id))!
        const allowed = ["https://app.example.org/cb", "http://127.0.0.1/native", "http://127.0.0.1:61234/native", "http://localhost:3000/cb"]
        const refused = ["https://app.example.org/cb/", "https://app.example.org/cb?x=1", "https://app.example.org/cb#f", "http://127.0.0.1:61234/other", "http://localhost:3001/cb", "https://app.example.org/CB"]
        for (const uri of allowed) expect([uri, clients.redirectAllowed(client, uri)]).toEqual([uri, true])
        for (const uri of refused) expect([uri, clients.redirectAllowed(client, uri)]).toEqual([uri, false])
      })))

    for (const alg of ["RS384", "ES384"] as const) {
      it.scoped(`authenticates private_key_jwt with an ${alg} key given inline, once per jti; refuses bad assertions`, () =>
        withStore(backend.kind, Effect.gen(function*() {
          yield* TestClock.setTime(start)
          const clients = yield* make(settings)
          const key = yield* keyPair(alg, `${alg}-key`)
          const other = yield* keyPair(alg, `${alg}-key`)
          const registered = yield* clients.register({
            token_endpoint_auth_method: "private_key_jwt",
            grant_types: ["client_credentials"],
            jwks: { keys: [key.jwk] },
            client_name: "Lab feed"
          })
          expect(registered.client_secret).toBeUndefined()
          expect(yield* storedRows("svc_auth_clients").pipe(Effect.map((rows) => rows[0]!.secret_hash))).toBeNull()
          const id = registered.client_id

          const jwt = yield* assertion(key, id)
          const ok = yield* clients.authenticate(assertionForm(jwt, { client_id: id }))
          expect([ok.client.clientId, ok.method]).toEqual([id, "private_key_jwt"])
          // The jti is kept until the assertion expires: the same assertion again is a replay.
          const kept = yield* storedRows("svc_auth_assertions")
          expect(kept.map((row) => [row.client_id, Number(row.expires_at)])).toEqual([[id, (start / 1000 + 240) * 1000]])
          expect(yield* refusal(clients.authenticate(assertionForm(jwt)))).toMatch(/jti was used before/)

          const now = start / 1000
          const cases: ReadonlyArray<readonly [string, Effect.Effect<string>, RegExp]> = [
            ["wrong aud", assertion(key, id, { aud: "https://fhir.example.org/fhir" }), /aud must be the token endpoint https:\/\/fhir.example.org\/auth\/token/],
            ["expired", assertion(key, id, { exp: now - 1 }), /has expired/],
            ["expiring now", assertion(key, id, { exp: now }), /has expired/],
            ["exp too far ahead", assertion(key, id, { exp: now + 600 }), /more than 5 minutes ahead/],
            ["no exp", assertion(key, id, { exp: undefined }), /claim exp is missing/],
            ["no jti", assertion(key, id, { jti: undefined }), /claim jti is missing/],
            ["sub not the client", assertion(key, id, { sub: "someone-else" }), /iss and sub must both be the client id/],
            ["signed by another key", assertion(other, id), /signature does not verify/],
            ["unknown kid", assertion(key, id, {}, { kid: "not-registered" }), /no key of the client's JWK Set matches/],
            ["jku not registered", assertion(key, id, {}, { jku: "https://evil.example/jwks" }), /jku is not the jwks_uri the client registered/],
            ["typ not JWT", assertion(key, id, {}, { typ: "at+jwt" }), /typ at\+jwt is not JWT/],
            ["unknown iss", assertion(key, "nobody", {}), /client nobody is not known/],
            ["HS256", Effect.promise(() => new SignJWT({ iss: id, sub: id, aud: tokenEndpoint, exp: now + 60, jti: "h" }).setProtectedHeader({ alg: "HS256", kid: key.kid }).sign(new TextEncoder().encode("a shared secret of thirty-two bytes!"))), /alg "HS256" is not accepted/],
            ["none", Effect.sync(() => new UnsecuredJWT({ iss: id, sub: id, aud: tokenEndpoint, exp: now + 60, jti: "n" }).encode()), /alg "none" is not accepted/],
            ["not a JWT", Effect.succeed("not.a.jwt"), /not a signed JWT/]
          ]
          for (const [name, build, description] of cases) {
            const refused = yield* refusal(clients.authenticate(assertionForm(yield* build)))
            expect([name, refused]).toEqual([name, expect.stringMatching(description)])
          }
          const fresh = yield* assertion(key, id)
          expect(yield* refusal(clients.authenticate(assertionForm(fresh, { client_assertion_type: "urn:other" })))).toMatch(/client_assertion_type must be/)
          expect(yield* refusal(clients.authenticate(assertionForm(fresh, { client_id: "someone-else" })))).toMatch(/client_id is not the iss/)
          // A secret client cannot authenticate by assertion, nor this client by anything but its assertion.
          const secretClient = yield* clients.register({ redirect_uris: ["https://app.example.org/cb"] })
          expect(yield* refusal(clients.authenticate(assertionForm(yield* assertion(key, secretClient.client_id))))).toMatch(/registered for client_secret_basic, not private_key_jwt/)
          expect(yield* refusal(clients.authenticate({ headers: {}, form: new URLSearchParams({ client_id: id }) }))).toMatch(/must authenticate with private_key_jwt/)
          // The fresh assertion, untouched by the refusals, still works; the expired ids are deleted in time.
          expect((yield* clients.authenticate(assertionForm(fresh))).method).toBe("private_key_jwt")
          yield* TestClock.adjust("10 minutes")
          expect((yield* clients.authenticate(assertionForm(yield* assertion(key, id)))).method).toBe("private_key_jwt")
          expect((yield* storedRows("svc_auth_assertions")).length).toBe(1)
        })))
    }

    it.scoped("fetches a jwks_uri key set on 127.0.0.1, holds it as its Cache-Control allows, and fetches again for a new kid", () =>
      withStore(backend.kind, Effect.gen(function*() {
        yield* TestClock.setTime(start)
        const clients = yield* make(settings)
        const server = yield* jwksServer
        const rsa = yield* keyPair("RS384", "rsa-1")
        const ec = yield* keyPair("ES384", "ec-1")
        server.serve([rsa.jwk], "max-age=60")
        const registered = yield* clients.register({ token_endpoint_auth_method: "private_key_jwt", grant_types: ["client_credentials"], jwks_uri: server.url })
        const id = registered.client_id
        expect(server.fetches()).toBe(0)

        expect((yield* clients.authenticate(assertionForm(yield* assertion(rsa, id)))).method).toBe("private_key_jwt")
        expect(yield* clients.authenticate(assertionForm(yield* assertion(rsa, id, {}, { jku: server.url })))).toMatchObject({ method: "private_key_jwt" })
        expect(server.fetches()).toBe(1)
        yield* TestClock.adjust("61 seconds")
        yield* clients.authenticate(assertionForm(yield* assertion(rsa, id)))
        expect(server.fetches()).toBe(2)

        // Key rotation: a kid not in the held set fetches again, but not more than every thirty seconds.
        server.serve([rsa.jwk, ec.jwk], "max-age=60")
        expect(yield* refusal(clients.authenticate(assertionForm(yield* assertion(ec, id))))).toMatch(/no key of the client's JWK Set matches/)
        expect(server.fetches()).toBe(2)
        yield* TestClock.adjust("30 seconds")
        expect((yield* clients.authenticate(assertionForm(yield* assertion(ec, id)))).method).toBe("private_key_jwt")
        expect(server.fetches()).toBe(3)

        // no-store: fetched for every assertion.
        server.serve([rsa.jwk, ec.jwk], "no-store")
        yield* TestClock.adjust("61 seconds")
        yield* clients.authenticate(assertionForm(yield* assertion(ec, id)))
        yield* clients.authenticate(assertionForm(yield* assertion(ec, id)))
        expect(server.fetches()).toBe(5)

        // A set that cannot be fetched refuses the client, never a key held past its time.
        yield* Effect.promise(server.close)
        expect(yield* refusal(clients.authenticate(assertionForm(yield* assertion(rsa, id))))).toMatch(/JWK Set could not be fetched from http:\/\/127.0.0.1/)
      })))
  })
}
