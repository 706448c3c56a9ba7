/**
 * Bulk Data `$export` under `--smart` (docs/export.md, "Access"), on the real server (SQLite file and
 * Postgres) with the real R4 packages, as SMART Backend Services clients use it
 * (https://hl7.org/fhir/smart-app-launch/backend-services.html): each client registered with its public key,
 * its tokens got by `client_credentials` with an assertion it signs, the export kicked off, polled and
 * downloaded with them. A kick-off needs a token that reads every type exported; the status, the cancel and
 * the files are its client's alone; a v2 scope's query bounds what is exported; each request is in the
 * audit trail under the client.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer, Schedule } from "effect"
import { exportJWK, generateKeyPair, SignJWT } from "jose"
import { randomUUID } from "node:crypto"
import { SmartSecrets } from "../../src/auth/SmartSecrets.ts"
import { type BackendKind, pgAvailable } from "../support/backends.ts"
import { realPackageCache, registryUrl, skipRealPackages } from "../support/npmRegistry.ts"
import { call, type Reply, startServer, type TestServer } from "../support/server.ts"
import { dcrToken, launchToken, secrets, systemToken } from "../support/smartTokens.ts"

class Server extends Context.Tag("test/ExportSmartServer")<Server, TestServer>() {}

const laboratory = { coding: [{ system: "http://terminology.hl7.org/CodeSystem/observation-category", code: "laboratory" }] }
const vitalSigns = { coding: [{ system: "http://terminology.hl7.org/CodeSystem/observation-category", code: "vital-signs" }] }

const observation = (id: string, patient: string, category: unknown) => ({
  resourceType: "Observation",
  id,
  status: "final",
  category: [category],
  code: { coding: [{ system: "http://example.org/codes", code: id }] },
  subject: { reference: `Patient/${patient}` }
})

/** Two patients, each with a laboratory and a vital signs Observation and a Condition. */
const seeded: ReadonlyArray<Record<string, unknown>> = [
  { resourceType: "Patient", id: "xa", name: [{ family: "Ayy" }] },
  { resourceType: "Patient", id: "xb", name: [{ family: "Bee" }] },
  observation("xa-lab", "xa", laboratory),
  observation("xa-vital", "xa", vitalSigns),
  observation("xb-lab", "xb", laboratory),
  observation("xb-vital", "xb", vitalSigns),
  { resourceType: "Condition", id: "xa-cond", subject: { reference: "Patient/xa" }, code: { text: "a" } },
  { resourceType: "Condition", id: "xb-cond", subject: { reference: "Patient/xb" }, code: { text: "b" } }
]

const idsOf = (type: string): Array<string> => seeded.filter((r) => r["resourceType"] === type).map((r) => String(r["id"])).sort()

const bearer = (token: string) => ({ authorization: `Bearer ${token}` })

const started = (kind: BackendKind) =>
  Effect.gen(function*() {
    const server = yield* startServer(kind, {
      smart: { enabled: true, demo_login: true },
      conformance: { package_registry: registryUrl ?? "", package_cache: realPackageCache, update_as_create: true }
    }).pipe(Effect.provideService(SmartSecrets, secrets))
    const writer = yield* systemToken(server, "system/*.cruds")
    const written = yield* call("POST", server.base, {
      body: {
        resourceType: "Bundle",
        type: "transaction",
        entry: seeded.map((resource) => ({ resource, request: { method: "PUT", url: `${resource["resourceType"]}/${resource["id"]}` } }))
      },
      headers: bearer(writer)
    })
    expect(written.status, written.text.slice(0, 500)).toBe(200)
    yield* server.searchIndexed
    return server
  })

/** A backend services client: registered with its public key (RFC 7591), its tokens got with a signed assertion. */
interface BackendClient {
  readonly clientId: string
  /** An access token for `scope` (checked to be granted as asked). */
  readonly token: (scope: string) => Effect.Effect<string>
}

const registerBackend = (name: string) =>
  Effect.gen(function*() {
    const server = yield* Server
    const { privateKey, publicKey } = yield* Effect.promise(() => generateKeyPair("RS384"))
    const jwk = { ...(yield* Effect.promise(() => exportJWK(publicKey))), kid: `${name}-key`, alg: "RS384", use: "sig" }
    const registered = yield* call("POST", `${server.url}/auth/register`, {
      body: { client_name: name, token_endpoint_auth_method: "private_key_jwt", grant_types: ["client_credentials"], jwks: { keys: [jwk] } },
      headers: { "content-type": "application/json", ...bearer(dcrToken) }
    })
    expect(registered.status, registered.text).toBe(201)
    const clientId = registered.json.client_id as string
    const tokenEndpoint = `${server.url}/auth/token`
    const token = (scope: string) =>
      Effect.gen(function*() {
        const assertion = yield* Effect.promise(() =>
          new SignJWT({})
            .setProtectedHeader({ alg: "RS384", kid: jwk.kid, typ: "JWT" })
            .setIssuer(clientId).setSubject(clientId).setAudience(tokenEndpoint)
            .setJti(randomUUID()).setExpirationTime("4m").setIssuedAt()
            .sign(privateKey)
        )
        const issued = yield* call("POST", tokenEndpoint, {
          body: new URLSearchParams({
            grant_type: "client_credentials",
            scope,
            client_assertion_type: "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
            client_assertion: assertion
          }).toString(),
          headers: { "content-type": "application/x-www-form-urlencoded" }
        })
        expect(issued.status, issued.text).toBe(200)
        expect(issued.json.scope).toBe(scope)
        return issued.json.access_token as string
      })
    return { clientId, token } satisfies BackendClient
  })

/** A kick-off at `path` under the FHIR base (`$export?_type=Patient`), with `headers` beside the async ones. */
const kickOff = (path: string, headers: Record<string, string> = {}) =>
  Effect.flatMap(Server, (server) =>
    call("GET", `${server.base}/${path}`, { headers: { prefer: "respond-async", accept: "application/fhir+json", ...headers } }))

/** The status URL of an accepted kick-off. */
const statusUrlOf = (reply: Reply): string => {
  expect(reply.status, reply.text).toBe(202)
  const location = reply.headers.get("content-location")
  expect(location).toMatch(/\/export\/[^/?]+$/)
  return location!
}

/** Polls the status URL until the job is no longer queued or running (a retry on a schedule, bounded). */
const finished = (statusUrl: string, headers: Record<string, string>) =>
  call("GET", statusUrl, { headers }).pipe(
    Effect.filterOrFail((reply) => reply.status !== 202, (reply) => new Error(`still ${reply.headers.get("x-progress")}`)),
    Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.upTo("120 seconds"))),
    Effect.orDie
  )

interface Manifest {
  readonly transactionTime: string
  readonly request: string
  readonly requiresAccessToken: boolean
  readonly output: ReadonlyArray<{ readonly type: string; readonly url: string; readonly count: number }>
  readonly error: ReadonlyArray<{ readonly type: string; readonly url: string }>
}

/** Kicks off with `token`, waits for the job, and gives its status URL and manifest. */
const exported = (path: string, token: string) =>
  Effect.gen(function*() {
    const statusUrl = statusUrlOf(yield* kickOff(path, bearer(token)))
    const done = yield* finished(statusUrl, bearer(token))
    expect(done.status, done.text).toBe(200)
    return { statusUrl, manifest: done.json as Manifest }
  })

/** Every line of every file of `type` in the manifest, downloaded with `token`, each checked against the resource read by id. */
const linesOf = (manifest: Manifest, type: string, token: string) =>
  Effect.gen(function*() {
    const server = yield* Server
    const lines: Array<string> = []
    for (const file of manifest.output.filter((entry) => entry.type === type)) {
      const reply = yield* call("GET", file.url, { headers: { ...bearer(token), accept: "application/fhir+ndjson" } })
      expect(reply.status, reply.text).toBe(200)
      expect(reply.headers.get("content-type")).toMatch(/^application\/fhir\+ndjson/)
      expect(reply.text.endsWith("\n")).toBe(true)
      const ofFile = reply.text.slice(0, -1).split("\n")
      expect(ofFile.length).toBe(file.count)
      lines.push(...ofFile)
    }
    for (const line of lines) {
      const resource = JSON.parse(line)
      expect(resource.resourceType).toBe(type)
      const read = yield* call("GET", `${server.base}/${type}/${resource.id}`, { headers: bearer(token) })
      expect([resource.id, read.text]).toEqual([resource.id, line])
    }
    return lines.map((line) => JSON.parse(line).id as string).sort()
  })

const kinds: ReadonlyArray<{ readonly kind: BackendKind; readonly skip: boolean }> = [
  { kind: "sqlite", skip: false },
  { kind: "postgres", skip: !pgAvailable }
]

for (const { kind, skip } of kinds) {
  describe.skipIf(skipRealPackages || skip)(`$export under --smart on ${kind}`, () => {
    layer(Layer.scoped(Server, started(kind)), { timeout: 600_000, excludeTestServices: true })((it) => {
      it.effect("refuses a kick-off without a token with 401", () =>
        Effect.gen(function*() {
          const refused = yield* kickOff("$export")
          expect(refused.status, refused.text).toBe(401)
          expect(refused.headers.get("www-authenticate")).toMatch(/^Bearer/)
          expect(refused.json?.resourceType).toBe("OperationOutcome")
          expect(refused.headers.get("content-location")).toBeNull()
        }))

      it.effect("exports every type to a system/*.read client, whose token the status and the files need", () =>
        Effect.gen(function*() {
          const server = yield* Server
          const client = yield* registerBackend("nightly-export")
          const token = yield* client.token("system/*.read")
          const statusUrl = statusUrlOf(yield* kickOff("$export", bearer(token)))
          expect(statusUrl.startsWith(`${server.url}/export/`)).toBe(true)

          const withoutToken = yield* call("GET", statusUrl)
          expect(withoutToken.status, withoutToken.text).toBe(401)
          expect(withoutToken.headers.get("www-authenticate")).toMatch(/^Bearer/)
          const done = yield* finished(statusUrl, bearer(token))
          expect(done.status, done.text).toBe(200)
          const manifest = done.json as Manifest
          expect(manifest.requiresAccessToken).toBe(true)
          expect(manifest.request).toBe(`${server.base}/$export`)
          expect(manifest.error).toEqual([])
          const types = [...new Set(manifest.output.map((entry) => entry.type))]
          expect(types).toEqual(expect.arrayContaining(["Condition", "Observation", "Patient"]))
          expect(types).toEqual([...types].sort())

          const patientFile = manifest.output.find((entry) => entry.type === "Patient")!
          const fileWithoutToken = yield* call("GET", patientFile.url)
          expect(fileWithoutToken.status, fileWithoutToken.text).toBe(401)
          const badToken = yield* call("GET", patientFile.url, { headers: bearer("not-a-token") })
          expect(badToken.status).toBe(401)
          for (const type of ["Patient", "Observation", "Condition"]) {
            expect([type, yield* linesOf(manifest, type, token)]).toEqual([type, idsOf(type)])
          }
        }))

      it.effect("refuses a system/Patient.read token asking for Observation with 403", () =>
        Effect.gen(function*() {
          const client = yield* registerBackend("patients-only")
          const token = yield* client.token("system/Patient.read")
          const refused = yield* kickOff("$export?_type=Observation", bearer(token))
          expect(refused.status, refused.text).toBe(403)
          expect(refused.json).toMatchObject({ resourceType: "OperationOutcome", issue: [{ code: "forbidden" }] })
          expect(refused.headers.get("content-location")).toBeNull()
          // Asking for a type it reads beside one it does not is refused too: every type exported must be readable.
          expect((yield* kickOff("$export?_type=Patient,Observation", bearer(token))).status).toBe(403)
        }))

      it.effect("exports only Patient to a system/Patient.rs token when no _type is given", () =>
        Effect.gen(function*() {
          const server = yield* Server
          const client = yield* registerBackend("patients-rs")
          const token = yield* client.token("system/Patient.rs")
          const { manifest } = yield* exported("$export", token)
          expect(manifest.request).toBe(`${server.base}/$export`)
          expect(manifest.output.map((entry) => entry.type)).toEqual(["Patient"])
          expect(yield* linesOf(manifest, "Patient", token)).toEqual(idsOf("Patient"))
        }))

      it.effect("refuses a patient/*.read token with 403", () =>
        Effect.gen(function*() {
          const server = yield* Server
          const token = yield* launchToken(server, "xa", "launch patient/*.read")
          // Refused whatever is asked: without _type too, where the types no patient compartment holds
          // (Practitioner, the conformance resources), which a patient/ scope reads whole, could still be exported.
          const paths = ["$export", "$export?_type=Observation", "$export?_type=Practitioner", "Patient/$export"]
          const answers: Array<readonly [string, number, string | undefined]> = []
          for (const path of paths) {
            const reply = yield* kickOff(path, bearer(token))
            answers.push([path, reply.status, reply.json?.resourceType])
          }
          expect(answers).toEqual(paths.map((path) => [path, 403, "OperationOutcome"]))
        }))

      it.effect("hides a client's job from another client: status, DELETE and files are 404, and the job goes on", () =>
        Effect.gen(function*() {
          const owner = yield* registerBackend("owner")
          const other = yield* registerBackend("other")
          const ownerToken = yield* owner.token("system/*.read")
          const otherToken = yield* other.token("system/*.read")
          const { statusUrl, manifest } = yield* exported("$export?_type=Patient", ownerToken)
          const file = manifest.output[0]!.url

          const status = yield* call("GET", statusUrl, { headers: bearer(otherToken) })
          expect(status.status, status.text).toBe(404)
          expect(status.json?.resourceType).toBe("OperationOutcome")
          const download = yield* call("GET", file, { headers: bearer(otherToken) })
          expect(download.status, download.text).toBe(404)
          const cancel = yield* call("DELETE", statusUrl, { headers: bearer(otherToken) })
          expect(cancel.status, cancel.text).toBe(404)
          // A job that does not exist answers the same.
          const unknown = yield* call("GET", `${statusUrl.replace(/\/export\/[^/]+$/, "/export/")}no-such-job`, { headers: bearer(otherToken) })
          expect(unknown.status).toBe(404)

          // The other client's DELETE did nothing: the owner still has its job and its file.
          const again = yield* call("GET", statusUrl, { headers: bearer(ownerToken) })
          expect(again.status, again.text).toBe(200)
          expect(again.json).toEqual(manifest)
          expect(yield* linesOf(manifest, "Patient", ownerToken)).toEqual(idsOf("Patient"))
          // A new token of the owner (another jti) is the same client: it sees the job.
          const fresh = yield* owner.token("system/Patient.rs")
          expect((yield* call("GET", statusUrl, { headers: bearer(fresh) })).status).toBe(200)
          expect((yield* call("DELETE", statusUrl, { headers: bearer(fresh) })).status).toBe(202)
          expect((yield* call("GET", statusUrl, { headers: bearer(ownerToken) })).status).toBe(404)
        }))

      it.effect("exports only what a v2 scope's query matches: system/Observation.rs?category=laboratory", () =>
        Effect.gen(function*() {
          const client = yield* registerBackend("lab-feed")
          const token = yield* client.token("system/Observation.rs?category=laboratory")
          const laboratoryIds = ["xa-lab", "xb-lab"]
          const { manifest } = yield* exported("$export", token)
          expect(manifest.output.map((entry) => entry.type)).toEqual(["Observation"])
          expect(yield* linesOf(manifest, "Observation", token)).toEqual(laboratoryIds)
          const typed = yield* exported("$export?_type=Observation", token)
          expect(yield* linesOf(typed.manifest, "Observation", token)).toEqual(laboratoryIds)
          // A type the query's scope does not reach at all is refused.
          expect((yield* kickOff("$export?_type=Patient", bearer(token))).status).toBe(403)
        }))

      it.effect("puts the kick-off, the status requests, the file download and the cancel in the audit trail under the client", () =>
        Effect.gen(function*() {
          const server = yield* Server
          const client = yield* registerBackend("audited")
          const token = yield* client.token("system/*.read")
          const run = randomUUID()
          const ids = { kickOff: `export-kickoff-${run}`, status: `export-status-${run}`, file: `export-file-${run}`, cancel: `export-cancel-${run}` }
          const statusUrl = statusUrlOf(yield* kickOff("$export?_type=Patient", { ...bearer(token), "x-request-id": ids.kickOff }))
          yield* finished(statusUrl, bearer(token))
          const status = yield* call("GET", statusUrl, { headers: { ...bearer(token), "x-request-id": ids.status } })
          expect(status.status).toBe(200)
          const file = yield* call("GET", status.json.output[0].url, { headers: { ...bearer(token), "x-request-id": ids.file } })
          expect(file.status).toBe(200)
          const cancel = yield* call("DELETE", statusUrl, { headers: { ...bearer(token), "x-request-id": ids.cancel } })
          expect(cancel.status).toBe(202)

          const agent = `client:${client.clientId}`
          const audit = yield* call("GET", `${server.url}/_audit?agent=${encodeURIComponent(agent)}&_count=1000`, { headers: bearer(token) })
          expect(audit.status, audit.text).toBe(200)
          const events: ReadonlyArray<any> = (audit.json.entry ?? []).map((entry: any) => entry.resource)
          const byRequest = (requestId: string) =>
            events.filter((event) => (event.entity ?? []).some((entity: any) => entity.what?.identifier?.value === requestId))
          for (const [what, requestId] of Object.entries(ids)) {
            const found = byRequest(requestId)
            expect([what, found.length]).toEqual([what, 1])
            expect([what, found[0].outcome, found[0].agent[0].who.identifier.value]).toEqual([what, "0", agent])
          }
        }))
    })
  })
}
