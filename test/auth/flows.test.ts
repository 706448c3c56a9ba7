/**
 * SMART App Launch 2.2 end to end on the real server (SQLite file and Postgres): discovery, dynamic
 * registration, a standalone launch with the patient picker and an EHR launch, each driven by the
 * `fhirclient` library in an app and by a real headless Chromium through svc's sign-in, picker and consent
 * pages; refresh with rotation; a backend service with a signed assertion; introspection and revocation.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { exportJWK, generateKeyPair, SignJWT } from "jose"
import { randomUUID } from "node:crypto"
import { SmartSecrets } from "../../src/auth/SmartSecrets.ts"
import { pgAvailable } from "../support/backends.ts"
import { realPackageCache, registryUrl, skipRealPackages } from "../support/npmRegistry.ts"
import { browserAvailable, launchBrowser } from "../support/browser.ts"
import { call, startServer, type TestServer } from "../support/server.ts"
import { startSmartApp } from "../support/smartApp.ts"

const dcrToken = "test-dcr-token-0123456789abcdef"
const confidentialSecret = "test-confidential-secret-0123456789"
const secrets = { dcrToken: Redacted.make(dcrToken), confidentialSecret: Redacted.make(confidentialSecret), oidcClientSecret: undefined }

const smartServer = (kind: "sqlite" | "postgres") =>
  startServer(kind, {
    smart: { enabled: true, demo_login: true, fhir_user: "Practitioner/demo" },
    rate_limit: { requests_per_second: 10_000, auth_failures_per_minute: 3 },
    conformance: { package_registry: registryUrl ?? "", package_cache: realPackageCache }
  }).pipe(
    Effect.provideService(SmartSecrets, secrets)
  )

const form = (fields: Record<string, string>) => new URLSearchParams(fields).toString()

const post = (url: string, fields: Record<string, string>, headers: Record<string, string> = {}) =>
  call("POST", url, { body: form(fields), headers: { "content-type": "application/x-www-form-urlencoded", ...headers } })

const bearer = (token: string) => ({ authorization: `Bearer ${token}` })

const seed = (server: TestServer) =>
  Effect.gen(function*() {
    // Seeded with the confidential client's system token: no write goes through without one.
    const token = yield* post(`${server.url}/auth/token`, { grant_type: "client_credentials", scope: "system/*.cruds" }, {
      authorization: `Basic ${Buffer.from(`svc-confidential:${confidentialSecret}`).toString("base64")}`
    })
    expect(token.status).toBe(200)
    const system = bearer(token.json.access_token)
    const ids: Record<string, string> = {}
    for (const [key, family] of [["alice", "Alvarez"], ["bob", "Brown"]] as const) {
      const created = yield* call("POST", `${server.base}/Patient`, { body: { resourceType: "Patient", name: [{ family, given: [key] }] }, headers: system })
      expect(created.status).toBe(201)
      ids[key] = created.json.id
      const observation = yield* call("POST", `${server.base}/Observation`, {
        body: { resourceType: "Observation", status: "final", code: { text: `${key}'s weight` }, subject: { reference: `Patient/${created.json.id}` } },
        headers: system
      })
      expect(observation.status).toBe(201)
    }
    const encounter = yield* call("POST", `${server.base}/Encounter`, {
      body: { resourceType: "Encounter", status: "finished", class: { code: "AMB" }, subject: { reference: `Patient/${ids.bob}` } },
      headers: system
    })
    expect(encounter.status).toBe(201)
    ids.encounter = encounter.json.id
    yield* server.searchIndexed
    return ids
  })

const register = (server: TestServer, metadata: Record<string, unknown>) =>
  call("POST", `${server.url}/auth/register`, { body: metadata, headers: { "content-type": "application/json", ...bearer(dcrToken) } })

for (const kind of ["sqlite", "postgres"] as const) {
  describe.skipIf((kind === "postgres" && !pgAvailable) || !browserAvailable || skipRealPackages)(`SMART App Launch on ${kind}`, () => {
    it.scopedLive("publishes discovery, refuses requests without a token, and keeps the probes and metadata open", () =>
      Effect.gen(function*() {
        const server = yield* smartServer(kind)
        const smartConfig = yield* call("GET", `${server.base}/.well-known/smart-configuration`)
        expect(smartConfig.status).toBe(200)
        expect(smartConfig.json).toMatchObject({
          issuer: server.url,
          authorization_endpoint: `${server.url}/auth/authorize`,
          token_endpoint: `${server.url}/auth/token`,
          registration_endpoint: `${server.url}/auth/register`,
          introspection_endpoint: `${server.url}/auth/introspect`,
          revocation_endpoint: `${server.url}/auth/revoke`,
          jwks_uri: `${server.url}/auth/jwks`,
          code_challenge_methods_supported: ["S256"]
        })
        expect(smartConfig.json.capabilities).toEqual(expect.arrayContaining(["launch-ehr", "launch-standalone", "client-public", "client-confidential-asymmetric", "permission-v2", "context-standalone-patient"]))
        const openid = yield* call("GET", `${server.url}/.well-known/openid-configuration`)
        expect(openid.json).toMatchObject({ issuer: server.url, jwks_uri: `${server.url}/auth/jwks` })
        const jwks = yield* call("GET", `${server.url}/auth/jwks`)
        expect(jwks.json.keys[0]).toMatchObject({ kty: "RSA", alg: "RS256", use: "sig" })
        expect(jwks.json.keys[0].d).toBeUndefined()

        const refused = yield* call("GET", `${server.base}/Patient`)
        expect(refused.status).toBe(401)
        expect(refused.headers.get("www-authenticate")).toMatch(/^Bearer/)
        expect(refused.json.resourceType).toBe("OperationOutcome")
        const badToken = yield* call("GET", `${server.base}/Patient`, { headers: bearer("not-a-token") })
        expect(badToken.status).toBe(401)
        expect(badToken.headers.get("www-authenticate")).toContain('error="invalid_token"')
        // Two more unknown tokens make three this minute: the next is refused without a lookup.
        for (const attempt of ["second", "third"]) expect((yield* call("GET", `${server.base}/Patient`, { headers: bearer(attempt) })).status).toBe(401)
        const throttled = yield* call("GET", `${server.base}/Patient`, { headers: bearer("fourth") })
        expect(throttled.status).toBe(429)
        expect(Number(throttled.headers.get("retry-after"))).toBeGreaterThan(0)
        expect((yield* call("GET", `${server.base}/metadata`)).status).toBe(200)
        expect((yield* call("GET", `${server.url}/livez`)).status).toBe(200)
        expect((yield* call("GET", `${server.url}/readyz`)).status).toBe(200)
      }))

    it.scopedLive("runs a standalone launch with the patient picker, then refreshes, for an app registered by DCR", () =>
      Effect.gen(function*() {
        const server = yield* smartServer(kind)
        const ids = yield* seed(server)
        let clientId = ""
        const scope = "launch/patient openid fhirUser offline_access patient/*.rs"
        const app = yield* Effect.acquireRelease(Effect.promise(() => startSmartApp(() => ({ clientId, scope }))), (app) => Effect.promise(app.close))
        const registered = yield* register(server, {
          client_name: "Chart <Viewer>",
          redirect_uris: [app.redirectUri],
          token_endpoint_auth_method: "none",
          grant_types: ["authorization_code", "refresh_token"]
        })
        expect(registered.status).toBe(201)
        clientId = registered.json.client_id
        expect(registered.json.client_secret).toBeUndefined()

        const browser = yield* launchBrowser
        const page = yield* Effect.promise(() => browser.newPage())
        yield* Effect.promise(async () => {
          await page.goto(`${app.url}/launch?standalone=${encodeURIComponent(server.base)}`)
          expect(await page.$eval("h1", (h) => h.textContent)).toMatch(/sign in/i)
          // The client's name is shown as text, never as markup.
          expect(await page.content()).toContain("Chart &lt;Viewer&gt;")
          await page.type("input[name=username]", "dr-demo")
          await Promise.all([page.waitForNavigation(), page.click("button::-p-text(Sign in)")])
          // The picker lists the server's patients; the user picks Bob.
          expect(await page.content()).toContain("Brown")
          await page.click(`input[name=patient][value="${ids.bob}"]`)
          await Promise.all([page.waitForNavigation(), page.click("button::-p-text(Continue)")])
          // Consent: every scope asked is shown; the user grants them all.
          const offered = await page.$$eval("input[name=scope]", (inputs) => inputs.map((input) => input.getAttribute("value")))
          expect(offered).toEqual(scope.split(" "))
          await Promise.all([page.waitForNavigation(), page.click("button[name=decision][value=allow]")])
          await page.waitForSelector("#ready")
        })
        expect(app.errors).toEqual([])
        const client = app.clients.at(-1)
        expect(client.patient.id).toBe(ids.bob)
        expect(client.state.tokenResponse.need_patient_banner).toBe(true)
        expect(client.getFhirUser()).toBe("Practitioner/demo")
        const bob: any = yield* Effect.promise(() => client.request(`Patient/${ids.bob}`))
        expect(bob.name[0].family).toBe("Brown")
        const alice = yield* call("GET", `${server.base}/Patient/${ids.alice}`, { headers: bearer(client.state.tokenResponse.access_token) })
        expect([403, 404]).toContain(alice.status)

        // Refresh: a new access token and a new refresh token; the old refresh token is spent.
        const oldRefresh = client.state.tokenResponse.refresh_token as string
        yield* Effect.promise(() => client.refresh())
        expect(client.state.tokenResponse.refresh_token).not.toBe(oldRefresh)
        const again: any = yield* Effect.promise(() => client.request(`Patient/${ids.bob}`))
        expect(again.id).toBe(ids.bob)
        // A spent token presented again (as a thief would, without naming the client) revokes its family:
        // the app's current refresh token stops working too.
        const reused = yield* post(`${server.url}/auth/token`, { grant_type: "refresh_token", refresh_token: oldRefresh })
        expect(reused.status).toBe(400)
        expect(reused.json.error).toBe("invalid_grant")
        const current = yield* post(`${server.url}/auth/token`, { grant_type: "refresh_token", refresh_token: client.state.tokenResponse.refresh_token, client_id: clientId })
        expect(current.status).toBe(400)
        expect(current.json.error).toBe("invalid_grant")
      }))

    it.scopedLive("runs an EHR launch whose context comes from a launch created at /auth/launch, and honours a narrower consent", () =>
      Effect.gen(function*() {
        const server = yield* smartServer(kind)
        const ids = yield* seed(server)
        let clientId = ""
        const scope = "launch openid fhirUser patient/Patient.rs patient/Observation.rs"
        const app = yield* Effect.acquireRelease(Effect.promise(() => startSmartApp(() => ({ clientId, scope }))), (app) => Effect.promise(app.close))
        clientId = (yield* register(server, { client_name: "EHR app", redirect_uris: [app.redirectUri], token_endpoint_auth_method: "none" })).json.client_id
        expect((yield* call("POST", `${server.url}/auth/launch`, { body: { patient: ids.bob } , headers: { "content-type": "application/json" } })).status).toBe(401)
        const launch = yield* call("POST", `${server.url}/auth/launch`, { body: { patient: ids.bob, encounter: ids.encounter }, headers: { "content-type": "application/json", ...bearer(dcrToken) } })
        expect(launch.status).toBe(201)

        const browser = yield* launchBrowser
        const page = yield* Effect.promise(() => browser.newPage())
        yield* Effect.promise(async () => {
          await page.goto(`${app.url}/launch?iss=${encodeURIComponent(server.base)}&launch=${encodeURIComponent(launch.json.launch)}`)
          await page.type("input[name=username]", "nurse")
          await Promise.all([page.waitForNavigation(), page.click("button::-p-text(Sign in)")])
          // No picker: the EHR gave the patient. The user withholds Observation.
          await page.click(`input[name=scope][value="patient/Observation.rs"]`)
          await Promise.all([page.waitForNavigation(), page.click("button[name=decision][value=allow]")])
          await page.waitForSelector("#ready")
        })
        expect(app.errors).toEqual([])
        const client = app.clients.at(-1)
        expect(client.patient.id).toBe(ids.bob)
        expect(client.encounter.id).toBe(ids.encounter)
        expect(client.state.tokenResponse.need_patient_banner).toBe(false)
        expect(client.state.tokenResponse.scope.split(" ")).not.toContain("patient/Observation.rs")
        const token = client.state.tokenResponse.access_token as string
        expect((yield* call("GET", `${server.base}/Patient/${ids.bob}`, { headers: bearer(token) })).status).toBe(200)
        expect((yield* call("GET", `${server.base}/Observation?subject=Patient/${ids.bob}`, { headers: bearer(token) })).status).toBe(403)
      }))

    it.scopedLive("issues backend tokens for a signed assertion, refuses its replay, and introspects and revokes", () =>
      Effect.gen(function*() {
        const server = yield* smartServer(kind)
        const ids = yield* seed(server)
        const { privateKey, publicKey } = yield* Effect.promise(() => generateKeyPair("RS384"))
        const jwk = { ...(yield* Effect.promise(() => exportJWK(publicKey))), kid: "backend-1", alg: "RS384", use: "sig" }
        const registered = yield* register(server, {
          client_name: "Nightly job",
          token_endpoint_auth_method: "private_key_jwt",
          grant_types: ["client_credentials"],
          jwks: { keys: [jwk] }
        })
        expect(registered.status).toBe(201)
        const clientId = registered.json.client_id as string
        const assertion = (jti: string) =>
          Effect.promise(() =>
            new SignJWT({})
              .setProtectedHeader({ alg: "RS384", kid: "backend-1", typ: "JWT" })
              .setIssuer(clientId).setSubject(clientId).setAudience(`${server.url}/auth/token`)
              .setJti(jti).setExpirationTime("4m").setIssuedAt()
              .sign(privateKey)
          )
        const jti = randomUUID()
        const signed = yield* assertion(jti)
        const fields = {
          grant_type: "client_credentials",
          scope: "system/Patient.rs system/Observation.rs",
          client_assertion_type: "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
          client_assertion: signed
        }
        const issued = yield* post(`${server.url}/auth/token`, fields)
        expect(issued.status).toBe(200)
        expect(issued.headers.get("cache-control")).toBe("no-store")
        expect(issued.json).toMatchObject({ token_type: "Bearer", scope: "system/Patient.rs system/Observation.rs" })
        expect(issued.json.refresh_token).toBeUndefined()
        const token = issued.json.access_token as string
        const patients = yield* call("GET", `${server.base}/Patient`, { headers: bearer(token) })
        expect(patients.status).toBe(200)
        expect(patients.json.entry.map((entry: any) => entry.resource.id).sort()).toEqual([ids.alice, ids.bob].sort())
        const replay = yield* post(`${server.url}/auth/token`, fields)
        expect(replay.status).toBe(401)
        expect(replay.json.error).toBe("invalid_client")

        // Introspection by the confidential client (a gateway would use it so), then revocation by the owner.
        const basic = { authorization: `Basic ${Buffer.from(`svc-confidential:${confidentialSecret}`).toString("base64")}` }
        const active = yield* post(`${server.url}/auth/introspect`, { token }, basic)
        expect(active.json).toMatchObject({ active: true, client_id: clientId, scope: "system/Patient.rs system/Observation.rs", token_type: "Bearer" })
        const revoked = yield* post(`${server.url}/auth/revoke`, { token, client_assertion_type: fields.client_assertion_type, client_assertion: yield* assertion(randomUUID()) })
        expect(revoked.status).toBe(200)
        expect((yield* post(`${server.url}/auth/introspect`, { token }, basic)).json).toEqual({ active: false })
        const after = yield* call("GET", `${server.base}/Patient`, { headers: bearer(token) })
        expect(after.status).toBe(401)
        expect(after.headers.get("www-authenticate")).toContain("invalid_token")
      }))
  })
}
