/**
 * Bearer tokens at the front door of the real server under `--smart` (src/auth/Smart.ts; RFC 6750 2.1): a
 * token verified once answers later requests from memory (on SQLite by the fast read and search), whatever
 * the spelling of the scheme; a revoked one is refused at the next request; a header that only ends like a
 * known token's is not taken for it. On a SQLite file and on Postgres.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer, Redacted } from "effect"
import { SmartSecrets } from "../../src/auth/SmartSecrets.ts"
import { pgAvailable } from "../support/backends.ts"
import { call, startServer, type TestServer } from "../support/server.ts"

const confidentialSecret = "test-confidential-secret-0123456789"
const secrets = { dcrToken: Redacted.make("test-dcr-token-0123456789abcdef"), confidentialSecret: Redacted.make(confidentialSecret), oidcClientSecret: undefined }
const basic = { authorization: `Basic ${Buffer.from(`svc-confidential:${confidentialSecret}`).toString("base64")}` }

class Server extends Context.Tag("test/BearerDoorServer")<Server, { readonly server: TestServer; readonly patient: string }>() {}

const form = { "content-type": "application/x-www-form-urlencoded" }

/** A new access token of the built-in confidential client (client credentials). */
const tokenFor = (scope: string) =>
  Effect.gen(function*() {
    const { server } = yield* Server
    const issued = yield* call("POST", `${server.url}/auth/token`, {
      body: new URLSearchParams({ grant_type: "client_credentials", scope }).toString(),
      headers: { ...form, ...basic }
    })
    expect(issued.status).toBe(200)
    return issued.json.access_token as string
  })

const get = (path: string, authorization: string) =>
  Effect.flatMap(Server, ({ server }) => call("GET", `${server.url}${path}`, { headers: { authorization } }))

/** What the fast path has answered so far: undefined on Postgres, which has none. */
const fastCounts = (authorization: string) =>
  Effect.map(get("/healthz?verbose=1", authorization), (reply) => reply.json.fast_path as { reads: number; searches: number } | undefined)

const started = (kind: "sqlite" | "postgres") =>
  Effect.gen(function*() {
    const server = yield* startServer(kind, { smart: { enabled: true } }).pipe(Effect.provideService(SmartSecrets, secrets))
    const issued = yield* call("POST", `${server.url}/auth/token`, {
      body: new URLSearchParams({ grant_type: "client_credentials", scope: "system/*.cruds" }).toString(),
      headers: { ...form, ...basic }
    })
    const created = yield* call("POST", `${server.base}/Patient`, {
      body: { resourceType: "Patient", identifier: [{ system: "urn:test", value: "door-1" }] },
      headers: { authorization: `Bearer ${issued.json.access_token}` }
    })
    expect(created.status).toBe(201)
    yield* server.searchIndexed
    return { server, patient: created.json.id as string }
  })

for (const kind of ["sqlite", "postgres"] as const) {
  describe.skipIf(kind === "postgres" && !pgAvailable)(`bearer tokens at the front door on ${kind}`, () => {
    layer(Layer.scoped(Server, started(kind)), { timeout: 120_000, excludeTestServices: true })((it) => {
      it.effect("a token seen before answers again from memory, on the fast path, whatever the spelling of the scheme", () =>
        Effect.gen(function*() {
          const { patient } = yield* Server
          const bearer = `Bearer ${yield* tokenFor("system/*.rs")}`
          const before = yield* fastCounts(bearer)
          const first = yield* get(`/fhir/Patient/${patient}`, bearer)
          expect([first.status, first.json.id]).toEqual([200, patient])
          const again = yield* get(`/fhir/Patient/${patient}`, bearer)
          expect(again.text).toBe(first.text)
          const search = yield* get(`/fhir/Patient?identifier=${encodeURIComponent("urn:test|door-1")}`, bearer)
          expect(search.json.entry.map((entry: any) => entry.resource.id)).toEqual([patient])
          const spelled = yield* get(`/fhir/Patient/${patient}`, `bearer  ${bearer.slice("Bearer ".length)}`)
          expect(spelled.text).toBe(first.text)
          const after = yield* fastCounts(bearer)
          expect([after!.reads - before!.reads, after!.searches - before!.searches]).toEqual([3, 1])
        }))

      it.effect("a revoked token is refused at the next request, though it was answered from memory before", () =>
        Effect.gen(function*() {
          const { server, patient } = yield* Server
          const token = yield* tokenFor("system/*.rs")
          expect((yield* get(`/fhir/Patient/${patient}`, `Bearer ${token}`)).status).toBe(200)
          expect((yield* get(`/fhir/Patient/${patient}`, `Bearer ${token}`)).status).toBe(200)
          const revoked = yield* call("POST", `${server.url}/auth/revoke`, { body: new URLSearchParams({ token }).toString(), headers: { ...form, ...basic } })
          expect(revoked.status).toBe(200)
          for (const path of [`/fhir/Patient/${patient}`, "/fhir/Patient?identifier=urn:test%7Cdoor-1"]) {
            const refused = yield* get(path, `Bearer ${token}`)
            expect([refused.status, refused.json.issue[0].diagnostics]).toEqual([401, "the token was revoked"])
            expect(refused.headers.get("www-authenticate")).toContain(`error="invalid_token"`)
          }
        }))

      it.effect("a header that ends like a known token's is not taken for it, and the known token still answers", () =>
        Effect.gen(function*() {
          const { patient } = yield* Server
          const token = yield* tokenFor("system/*.rs")
          expect((yield* get(`/fhir/Patient/${patient}`, `Bearer ${token}`)).status).toBe(200)
          const lookalike = `Bearer ${"A".repeat(token.length - 64)}${token.slice(-64)}`
          const refused = yield* get(`/fhir/Patient/${patient}`, lookalike)
          expect(refused.status).toBe(401)
          expect(refused.headers.get("www-authenticate")).toContain(`error="invalid_token"`)
          expect((yield* get(`/fhir/Patient/${patient}`, `Bearer ${token}`)).status).toBe(200)
        }))
    })
  })
}
