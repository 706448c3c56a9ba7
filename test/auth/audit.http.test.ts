/**
 * The authorization server's decisions in `GET /_audit`, on the real server with SMART on (SQLite file and
 * Postgres): backend tokens issued and refused, registrations made and refused, a launch context, an EHR
 * launch signed in and consented to, the code exchanged, refreshed, its refresh token reused, revoked, a
 * consent denied; each found with its outcome, and no credential any request carried anywhere in the trail.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { exportJWK, generateKeyPair, SignJWT } from "jose"
import { createHash, randomBytes, randomUUID } from "node:crypto"
import { SmartSecrets } from "../../src/auth/SmartSecrets.ts"
import { pgAvailable } from "../support/backends.ts"
import { call, type Reply, startServer, type TestServer } from "../support/server.ts"

const dcrToken = "audit-test-dcr-token-5e4d3c2b1a"
const confidentialSecret = "audit-test-confidential-secret-9z8y7x"
const secrets = { dcrToken: Redacted.make(dcrToken), confidentialSecret: Redacted.make(confidentialSecret), oidcClientSecret: undefined }

const smartServer = (kind: "sqlite" | "postgres") =>
  startServer(kind, { smart: { enabled: true, demo_login: true, fhir_user: "Practitioner/demo" } }).pipe(Effect.provideService(SmartSecrets, secrets))

/** One request, redirects not followed (the code comes back in a `Location`). */
const send = (method: string, url: string, init: { readonly headers?: Record<string, string>; readonly body?: string } = {}) =>
  call(method, url, { ...init, redirect: "manual" })

const formHeaders = { "content-type": "application/x-www-form-urlencoded" }
const post = (url: string, fields: URLSearchParams | Record<string, string>, headers: Record<string, string> = {}) =>
  send("POST", url, { body: new URLSearchParams(fields).toString(), headers: { ...formHeaders, ...headers } })
const basic = (id: string, secret: string) => ({ authorization: `Basic ${Buffer.from(`${id}:${secret}`).toString("base64")}` })
const bearer = (token: string) => ({ authorization: `Bearer ${token}` })
const json = (body: unknown, headers: Record<string, string> = {}) => ({ body: JSON.stringify(body), headers: { "content-type": "application/json", ...headers } })

/** A hidden field of a sign-in or consent page. */
const field = (page: string, name: string): string => {
  const match = new RegExp(`name="${name}" value="([^"]+)"`).exec(page)
  expect(match, `the page has a ${name} field`).not.toBeNull()
  return match![1]!
}

interface Event {
  readonly type: { readonly code: string }
  readonly subtype: ReadonlyArray<{ readonly code: string }>
  readonly outcome: string
  readonly outcomeDesc?: string
  readonly agent: ReadonlyArray<{ readonly who: { readonly reference?: string; readonly identifier: { readonly value: string } }; readonly network?: { readonly address: string } }>
  readonly entity?: ReadonlyArray<{ readonly what?: { readonly reference?: string }; readonly detail?: ReadonlyArray<{ readonly type: string; readonly valueString: string }> }>
}

const eventsOf = (reply: Reply): ReadonlyArray<Event> => (reply.json?.entry ?? []).map((entry: { resource: Event }) => entry.resource)
const detail = (event: Event, type: string) => event.entity?.flatMap((entity) => entity.detail ?? []).find((d) => d.type === type)?.valueString

/**
 * An authorization through the sign-in and consent pages, as a browser goes through them: the code (or the
 * error) the app gets back, and every value of the way that must stay out of the trail.
 */
const authorize = (server: TestServer, clientId: string, redirectUri: string, scope: string, launch: string, decision: "allow" | "deny") =>
  Effect.gen(function*() {
    const verifier = randomBytes(32).toString("base64url")
    const state = randomBytes(12).toString("base64url")
    const query = new URLSearchParams({
      response_type: "code",
      client_id: clientId,
      redirect_uri: redirectUri,
      scope,
      state,
      aud: server.base,
      launch,
      code_challenge: createHash("sha256").update(verifier).digest("base64url"),
      code_challenge_method: "S256"
    })
    const signIn = yield* send("GET", `${server.url}/auth/authorize?${query}`)
    expect(signIn.status).toBe(200)
    const cookie = (signIn.headers.get("set-cookie") ?? "").split(";")[0]!
    expect(cookie).toMatch(/^svc_authz=./)
    const request = field(signIn.text, "request")
    const csrf = field(signIn.text, "csrf")
    const consentPage = yield* post(`${server.url}/auth/login`, { request, csrf, username: "dr-audit" }, { cookie })
    expect(consentPage.status).toBe(200)
    const choice = new URLSearchParams({ request, csrf, decision })
    for (const asked of scope.split(" ")) choice.append("scope", asked)
    const back = yield* post(`${server.url}/auth/consent`, choice, { cookie })
    expect(back.status).toBe(302)
    const location = new URL(back.headers.get("location")!)
    return { location, verifier, carried: [verifier, state, cookie.slice("svc_authz=".length), request, csrf] }
  })

for (const kind of ["sqlite", "postgres"] as const) {
  describe.skipIf(kind === "postgres" && !pgAvailable)(`the authorization server's decisions in /_audit on ${kind}`, () => {
    it.scopedLive("records backend tokens issued and refused and a refused registration, with their outcomes, and no secret", () =>
      Effect.gen(function*() {
        const server = yield* smartServer(kind)
        const wrongSecret = "wrong-secret-of-the-confidential-client"
        const wrongDcr = "wrong-registration-token-0000"
        const issued = yield* post(`${server.url}/auth/token`, { grant_type: "client_credentials", scope: "system/AuditEvent.read system/Patient.rs" }, basic("svc-confidential", confidentialSecret))
        expect(issued.status).toBe(200)
        const token = issued.json.access_token as string
        const refused = yield* post(`${server.url}/auth/token`, { grant_type: "client_credentials", scope: "system/Patient.rs" }, basic("svc-confidential", wrongSecret))
        expect(refused.status).toBe(401)
        const registration = yield* send("POST", `${server.url}/auth/register`, json({ client_name: "Nope", redirect_uris: ["http://127.0.0.1:9/cb"] }, bearer(wrongDcr)))
        expect(registration.status).toBe(401)

        const audit = yield* send("GET", `${server.url}/_audit?_count=1000`, { headers: bearer(token) })
        expect(audit.status).toBe(200)
        const events = eventsOf(audit)
        const tokens = events.filter((event) => event.subtype[0]!.code === "ITI-71")
        // Newest first: the refusal, then the token issued.
        expect(tokens.map((event) => event.outcome)).toEqual(["4", "0"])
        const [refusal, grant] = tokens
        expect(grant!.type.code).toBe("110114")
        expect(grant!.agent[0]!.who.identifier.value).toBe("client:svc-confidential")
        expect(grant!.agent[0]!.network!.address).toBe("127.0.0.1")
        expect(detail(grant!, "grant_type")).toBe("client_credentials")
        expect(detail(grant!, "scope")).toBe("system/AuditEvent.read system/Patient.rs")
        expect(refusal!.outcomeDesc).toBe("invalid_client: the client secret of svc-confidential is wrong")
        expect(refusal!.agent.map((agent) => agent.who.identifier.value)).toEqual(["address:127.0.0.1", "svc-confidential"])
        const registrations = events.filter((event) => event.subtype[0]!.code === "110129")
        expect(registrations.map((event) => [event.type.code, event.outcome, event.outcomeDesc])).toEqual([["110113", "4", "invalid_token: a wrong registration token"]])
        // The HTTP refusals keep their own rows, as every refused request does.
        expect(events.filter((event) => event.subtype[0]!.code === "operation" && event.outcome === "4").length).toBeGreaterThanOrEqual(2)
        for (const secret of [confidentialSecret, wrongSecret, dcrToken, wrongDcr, token]) expect(audit.text).not.toContain(secret)

        const byType = eventsOf(yield* send("GET", `${server.url}/_audit?type=110114&outcome=4`, { headers: bearer(token) }))
        expect(byType.map((event) => event.subtype[0]!.code)).toEqual(["ITI-71"])
        const rest = eventsOf(yield* send("GET", `${server.url}/_audit?type=rest&_count=1000`, { headers: bearer(token) }))
        expect(rest.length).toBeGreaterThan(0)
        expect(rest.every((event) => event.type.code === "rest")).toBe(true)
        expect((yield* send("GET", `${server.url}/_audit/verify`, { headers: bearer(token) })).json).toMatchObject({ ok: true })
      }))

    it.scopedLive("records an EHR launch from launch context to revocation, with the user, the patient and the scopes, and no credential of the way", () =>
      Effect.gen(function*() {
        const server = yield* smartServer(kind)
        const carried: Array<string> = [confidentialSecret, dcrToken]
        const admin = yield* post(`${server.url}/auth/token`, { grant_type: "client_credentials", scope: "system/AuditEvent.read" }, basic("svc-confidential", confidentialSecret))
        const adminToken = admin.json.access_token as string
        carried.push(adminToken)

        const redirectUri = "http://127.0.0.1:9/callback"
        const app = yield* send("POST", `${server.url}/auth/register`, json({ client_name: "Chart", redirect_uris: [redirectUri], token_endpoint_auth_method: "none", grant_types: ["authorization_code", "refresh_token"] }, bearer(dcrToken)))
        expect(app.status).toBe(201)
        const clientId = app.json.client_id as string
        expect((yield* send("POST", `${server.url}/auth/launch`, json({ patient: "p-audit" }, bearer("not-the-registration-token")))).status).toBe(401)
        const launch = yield* send("POST", `${server.url}/auth/launch`, json({ patient: "p-audit", encounter: "e-audit" }, bearer(dcrToken)))
        expect(launch.status).toBe(201)
        carried.push(launch.json.launch)

        const scope = "launch openid fhirUser offline_access patient/Patient.rs"
        const allowed = yield* authorize(server, clientId, redirectUri, scope, launch.json.launch, "allow")
        carried.push(...allowed.carried)
        const code = allowed.location.searchParams.get("code")!
        carried.push(code)
        const exchanged = yield* post(`${server.url}/auth/token`, { grant_type: "authorization_code", code, code_verifier: allowed.verifier, redirect_uri: redirectUri, client_id: clientId })
        expect(exchanged.status).toBe(200)
        expect(exchanged.json.patient).toBe("p-audit")
        carried.push(exchanged.json.access_token, exchanged.json.refresh_token, exchanged.json.id_token)
        const refreshed = yield* post(`${server.url}/auth/token`, { grant_type: "refresh_token", refresh_token: exchanged.json.refresh_token, client_id: clientId })
        expect(refreshed.status).toBe(200)
        carried.push(refreshed.json.access_token, refreshed.json.refresh_token)
        const reused = yield* post(`${server.url}/auth/token`, { grant_type: "refresh_token", refresh_token: exchanged.json.refresh_token, client_id: clientId })
        expect(reused.status).toBe(400)
        const fakeCode = "fake-authorization-code-314159"
        carried.push(fakeCode)
        expect((yield* post(`${server.url}/auth/token`, { grant_type: "authorization_code", code: fakeCode, code_verifier: allowed.verifier, redirect_uri: redirectUri, client_id: clientId })).status).toBe(400)
        // A public client's refresh need not name the client; one with a token nobody knows names none.
        const unknownRefresh = "unknown-refresh-token-271828"
        carried.push(unknownRefresh)
        expect((yield* post(`${server.url}/auth/token`, { grant_type: "refresh_token", refresh_token: unknownRefresh })).status).toBe(400)
        expect((yield* post(`${server.url}/auth/revoke`, { token: refreshed.json.refresh_token, token_type_hint: "refresh_token", client_id: clientId })).status).toBe(200)

        const secondLaunch = yield* send("POST", `${server.url}/auth/launch`, json({ patient: "p-audit" }, bearer(dcrToken)))
        carried.push(secondLaunch.json.launch)
        const denied = yield* authorize(server, clientId, redirectUri, scope, secondLaunch.json.launch, "deny")
        carried.push(...denied.carried)
        expect(denied.location.searchParams.get("error")).toBe("access_denied")

        // A backend client by signed assertion; its replay is refused under the client the assertion names.
        const { privateKey, publicKey } = yield* Effect.promise(() => generateKeyPair("RS384"))
        const jwk = { ...(yield* Effect.promise(() => exportJWK(publicKey))), kid: "k1", alg: "RS384", use: "sig" }
        const backend = yield* send("POST", `${server.url}/auth/register`, json({ client_name: "Job", token_endpoint_auth_method: "private_key_jwt", grant_types: ["client_credentials"], jwks: { keys: [jwk] } }, bearer(dcrToken)))
        expect(backend.status).toBe(201)
        const backendId = backend.json.client_id as string
        const assertion = yield* Effect.promise(() =>
          new SignJWT({}).setProtectedHeader({ alg: "RS384", kid: "k1", typ: "JWT" }).setIssuer(backendId).setSubject(backendId)
            .setAudience(`${server.url}/auth/token`).setJti(randomUUID()).setExpirationTime("4m").setIssuedAt().sign(privateKey)
        )
        carried.push(assertion)
        const fields = { grant_type: "client_credentials", scope: "system/Patient.rs", client_assertion_type: "urn:ietf:params:oauth:client-assertion-type:jwt-bearer", client_assertion: assertion }
        const backendToken = yield* post(`${server.url}/auth/token`, fields)
        expect(backendToken.status).toBe(200)
        carried.push(backendToken.json.access_token)
        expect((yield* post(`${server.url}/auth/token`, fields)).status).toBe(401)

        const audit = yield* send("GET", `${server.url}/_audit?_count=1000`, { headers: bearer(adminToken) })
        expect(audit.status).toBe(200)
        const events = [...eventsOf(audit)].reverse()
        const security = events.filter((event) => event.type.code !== "rest")
        expect(security.map((event) => `${event.subtype[0]!.code}/${event.outcome}`)).toEqual([
          "ITI-71/0", // the administrator's token
          "110129/0", // the app registered
          "110120/4", // a launch with a wrong token
          "110120/0", // the launch context
          "110122/0", // signed in
          "AuthZ-Consent/0",
          "ITI-71/0", // the code exchanged
          "ITI-71/0", // refreshed
          "ITI-71/4", // the refresh token reused
          "ITI-71/4", // a code that is not one
          "ITI-71/4", // a refresh token nobody knows
          "110123/0", // revoked
          "110120/0",
          "110122/0",
          "AuthZ-Consent/4", // denied
          "110129/0", // the backend client
          "ITI-71/0",
          "ITI-71/4" // the assertion replayed
        ])
        const user = `client:${clientId}/user:dr-audit`
        const [, registered, , launched, signedIn, consented, exchange, refresh, reuse, fake, unknown, revoked, , , deny, , , replay] = security
        expect(detail(registered!, "client_id")).toBe(clientId)
        expect(detail(registered!, "token_endpoint_auth_method")).toBe("none")
        expect(launched!.entity!.map((entity) => entity.what?.reference).filter(Boolean)).toEqual(["Patient/p-audit", "Encounter/e-audit"])
        expect(signedIn!.agent[0]!.who).toEqual({ reference: "Practitioner/demo", identifier: { value: user } })
        expect(signedIn!.entity![0]!.what!.reference).toBe("Patient/p-audit")
        expect(detail(consented!, "scope")).toBe(scope)
        expect(exchange!.agent[0]!.who.identifier.value).toBe(user)
        expect(detail(exchange!, "grant_type")).toBe("authorization_code")
        expect(exchange!.entity![0]!.what!.reference).toBe("Patient/p-audit")
        expect(detail(refresh!, "grant_type")).toBe("refresh_token")
        expect(reuse!.outcomeDesc).toBe("invalid_grant: the refresh token was already used: every token of its authorization is now revoked")
        expect(fake!.outcomeDesc).toBe("invalid_grant: the code is unknown, expired, already used or not this client's")
        expect(unknown!.outcomeDesc).toBe("invalid_grant: the refresh token is unknown, expired, used or revoked")
        expect(unknown!.agent.map((agent) => agent.who.identifier.value)).toEqual(["address:127.0.0.1"])
        expect(detail(revoked!, "token_type_hint")).toBe("refresh_token")
        expect(deny!.outcomeDesc).toBe("access_denied: the user denied the request")
        expect(replay!.agent.map((agent) => agent.who.identifier.value)).toEqual(["address:127.0.0.1", backendId])
        expect(replay!.outcomeDesc).toBe("invalid_client: client_assertion jti was used before: an assertion is good for one request")

        // What the user did is found by the key its token carries, and by the patient.
        const byUser = eventsOf(yield* send("GET", `${server.url}/_audit?agent=${encodeURIComponent(user)}`, { headers: bearer(adminToken) }))
        expect(byUser.map((event) => event.subtype[0]!.code)).toEqual(["AuthZ-Consent", "110122", "ITI-71", "ITI-71", "AuthZ-Consent", "110122"])
        const byPatient = eventsOf(yield* send("GET", `${server.url}/_audit?entity=Patient/p-audit&type=ITI-71`, { headers: bearer(adminToken) }))
        expect(byPatient).toHaveLength(2)

        for (const value of carried) {
          expect(value.length).toBeGreaterThan(8)
          expect(audit.text).not.toContain(value)
        }
        expect((yield* send("GET", `${server.url}/_audit/verify`, { headers: bearer(adminToken) })).json).toMatchObject({ ok: true })
      }))
  })
}
