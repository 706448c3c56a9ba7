/** Batch and transaction Bundles over HTTP, on every storage kind. */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { backends } from "../support/backends.ts"
import { call, startServer, type TestServer } from "../support/server.ts"

class Server extends Context.Tag("test/BundleServer")<Server, TestServer>() {}

const patientUrn = "urn:uuid:2a7c0a8e-6a0f-4e4b-9a53-1f1f0a5e0b01"
const bundle = (type: string, entry: ReadonlyArray<unknown>) => ({ resourceType: "Bundle", type, entry })
const post = (resource: Record<string, unknown>, fullUrl?: string) => ({
  ...(fullUrl ? { fullUrl } : {}),
  resource,
  request: { method: "POST", url: String(resource["resourceType"]) }
})

const total = (base: string) => Effect.map(call("GET", `${base}/_history?_count=1`), (reply) => reply.json.total as number)

for (const backend of backends) {
  describe.skipIf(backend.skip)(`Bundles on ${backend.kind}`, () => {
    layer(Layer.scoped(Server, startServer(backend.kind, { server: { max_bundle_entries: 50 } })), { timeout: 60_000, excludeTestServices: true })((it) => {
      it.effect("commits a transaction as one step: placeholders rewritten at any depth, one commit timestamp", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const reply = yield* call("POST", base, {
            body: bundle("transaction", [
              post({
                resourceType: "Observation",
                status: "final",
                code: { text: "weight" },
                subject: { reference: patientUrn },
                extension: [{ url: "http://example.org/x", extension: [{ url: "deep", valueReference: { reference: patientUrn } }] }],
                text: { status: "generated", div: `<div xmlns="http://www.w3.org/1999/xhtml"><a href="${patientUrn}">patient</a></div>` }
              }),
              post({ resourceType: "Patient", gender: "female" }, patientUrn)
            ])
          })
          expect(reply.status).toBe(200)
          expect(reply.json.type).toBe("transaction-response")
          const [observation, patient] = reply.json.entry
          expect(patient.response.status).toBe("201 Created")
          expect(patient.response.location).toMatch(/^Patient\/[^/]+\/_history\/1$/)
          expect(patient.response.etag).toBe('W/"1"')
          const patientRef = patient.response.location.split("/_history")[0]
          const stored = (yield* call("GET", `${base}/${observation.response.location.split("/_history")[0]}`)).json
          expect(stored.subject.reference).toBe(patientRef)
          expect(stored.extension[0].extension[0].valueReference.reference).toBe(patientRef)
          expect(stored.text.div).toContain(`href="${patientRef}"`)
          expect(JSON.stringify(stored)).not.toContain("urn:uuid")
          // One commit: every version carries the same time, and the header the same timestamp.
          expect(observation.response.lastModified).toBe(patient.response.lastModified)
          expect(stored.meta.lastUpdated).toBe((yield* call("GET", `${base}/${patientRef}`)).json.meta.lastUpdated)
          expect(reply.headers.get("x-svc-commit-ts")).toMatch(/^\d+$/)
        }))

      it.effect("writes nothing when the last entry fails, and names the entry", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const before = yield* total(base)
          const reply = yield* call("POST", base, {
            body: bundle("transaction", [
              post({ resourceType: "Patient" }, "urn:uuid:11111111-1111-4111-8111-111111111111"),
              post({ resourceType: "Observation", status: "final", code: { text: "x" } }),
              { resource: { resourceType: "Patient", id: "nobody" }, request: { method: "PUT", url: "Patient/nobody" } }
            ])
          })
          expect(reply.status).toBe(405)
          expect(reply.json.issue[0].diagnostics).toContain("Bundle.entry[2]")
          expect(yield* total(base)).toBe(before)
        }))

      it.effect("processes DELETE, then POST, then PUT/PATCH, then GET", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const { json: a } = yield* call("POST", `${base}/Patient`, { body: { resourceType: "Patient", gender: "male" } })
          const { json: b } = yield* call("POST", `${base}/Patient`, { body: { resourceType: "Patient" } })
          const reply = yield* call("POST", base, {
            body: bundle("transaction", [
              { request: { method: "GET", url: `Patient/${a.id}` } },
              { resource: { resourceType: "Patient", id: a.id, gender: "female" }, request: { method: "PUT", url: `Patient/${a.id}`, ifMatch: 'W/"1"' } },
              { request: { method: "DELETE", url: `Patient/${b.id}` } }
            ])
          })
          expect(reply.status).toBe(200)
          const [read, put, del] = reply.json.entry
          // The GET ran last: it sees the PUT.
          expect(read.response.status).toBe("200 OK")
          expect(read.resource.gender).toBe("female")
          expect(put.response.status).toBe("200 OK")
          expect(del.response.status).toBe("204 No Content")
          expect((yield* call("GET", `${base}/Patient/${b.id}`)).status).toBe(410)
        }))

      it.effect("answers a search entry with the resources and index rows the Bundle's own creates wrote", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const system = `http://example.org/mrn/${Math.random().toString(36).slice(2)}`
          const reply = yield* call("POST", base, {
            body: bundle("transaction", [
              { request: { method: "GET", url: `Patient?identifier=${encodeURIComponent(`${system}|`)}` } },
              post({ resourceType: "Patient", identifier: [{ system, value: "1" }], gender: "female" }),
              post({ resourceType: "Patient", identifier: [{ system, value: "2" }], gender: "male" }),
              { request: { method: "GET", url: `Patient?identifier=${encodeURIComponent(`${system}|2`)}&gender=male` } }
            ])
          })
          expect(reply.status).toBe(200)
          const [all, first, second, one] = reply.json.entry
          expect(first.response.status).toBe("201 Created")
          expect(second.response.status).toBe("201 Created")
          const ids = (searchset: { entry?: ReadonlyArray<{ resource: { id: string } }> }) => (searchset.entry ?? []).map((entry) => entry.resource.id).sort()
          expect(ids(all.resource)).toEqual([first.resource.id, second.resource.id].sort())
          expect(ids(one.resource)).toEqual([second.resource.id])
        }))

      it.effect("applies a FHIRPath Patch entry and refuses a stale ifMatch with 409 naming the entry", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const { json: a } = yield* call("POST", `${base}/Patient`, { body: { resourceType: "Patient" } })
          const patch = { resourceType: "Parameters", parameter: [{ name: "operation", part: [{ name: "type", valueCode: "add" }, { name: "path", valueString: "Patient" }, { name: "name", valueString: "active" }, { name: "value", valueBoolean: true }] }] }
          const ok = yield* call("POST", base, { body: bundle("transaction", [{ resource: patch, request: { method: "PATCH", url: `Patient/${a.id}` } }]) })
          expect(ok.status).toBe(200)
          expect(ok.json.entry[0].resource.active).toBe(true)
          const stale = yield* call("POST", base, { body: bundle("transaction", [{ resource: patch, request: { method: "PATCH", url: `Patient/${a.id}`, ifMatch: 'W/"1"' } }]) })
          expect(stale.status).toBe(409)
          expect(stale.json.issue[0].diagnostics).toContain("Bundle.entry[0]")
        }))

      it.effect("answers 304 to GET entries with ifNoneMatch or ifModifiedSince when unchanged", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const { json: a } = yield* call("POST", `${base}/Patient`, { body: { resourceType: "Patient" } })
          const reply = yield* call("POST", base, {
            body: bundle("batch", [
              { request: { method: "GET", url: `Patient/${a.id}`, ifNoneMatch: 'W/"1"' } },
              { request: { method: "GET", url: `Patient/${a.id}`, ifModifiedSince: "2999-01-01T00:00:00Z" } },
              { request: { method: "GET", url: `Patient/${a.id}`, ifModifiedSince: "2000-01-01T00:00:00Z" } }
            ])
          })
          expect(reply.json.entry.map((e: any) => e.response.status)).toEqual(["304 Not Modified", "304 Not Modified", "200 OK"])
        }))

      it.effect("runs batch entries on their own: a failure stays in its entry", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const reply = yield* call("POST", base, {
            body: bundle("batch", [
              post({ resourceType: "Patient", gender: "other" }),
              { resource: { resourceType: "Patient", id: "nobody" }, request: { method: "PUT", url: "Patient/nobody" } },
              { request: { method: "GET", url: "Patient/not-there" } },
              post({ resourceType: "Patient", gender: "unknown" })
            ])
          })
          expect(reply.status).toBe(200)
          expect(reply.json.type).toBe("batch-response")
          const statuses = reply.json.entry.map((e: any) => e.response.status)
          expect(statuses).toEqual(["201 Created", "405 Method Not Allowed", "404 Not Found", "201 Created"])
          expect(reply.json.entry[1].response.outcome.resourceType).toBe("OperationOutcome")
          const created = reply.json.entry[0].response.location.split("/_history")[0]
          expect((yield* call("GET", `${base}/${created}`)).json.gender).toBe("other")
        }))

      it.effect("refuses malformed Bundles with a 400 that names the entry (an operation with a 501), writing nothing", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const before = yield* total(base)
          const urn = "urn:uuid:22222222-2222-4222-8222-222222222222"
          const cases: Array<[unknown, number, string]> = [
            [{ resourceType: "Patient" }, 400, "Bundle"],
            [bundle("collection", []), 400, "Bundle.type"],
            [bundle("transaction", [{ resource: { resourceType: "Patient" } }]), 400, "Bundle.entry[0]"],
            [bundle("transaction", [{ request: { method: "FETCH", url: "Patient" } }]), 400, "Bundle.entry[0]"],
            [bundle("transaction", [{ request: { method: "GET", url: "https://elsewhere.example/Patient/1" } }]), 400, "Bundle.entry[0]"],
            [bundle("transaction", [post({ resourceType: "Patient" }, urn), post({ resourceType: "Patient" }, urn)]), 400, "Bundle.entry[1]"],
            [bundle("transaction", [post({ resourceType: "Observation", status: "final", code: {}, subject: { reference: "urn:uuid:33333333-3333-4333-8333-333333333333" } })]), 400, "Bundle.entry[0]"],
            [bundle("transaction", [{ request: { method: "DELETE", url: "Patient/a" } }, { request: { method: "DELETE", url: "Patient/a" } }]), 400, "Bundle.entry[1]"],
            [bundle("transaction", Array.from({ length: 51 }, () => post({ resourceType: "Patient" }))), 413, "max_bundle_entries"],
            // An operation is a valid entry, but not one this build runs inside a Bundle: 501, not a malformed Bundle.
            [bundle("batch", [{ request: { method: "GET", url: "Patient/a/$everything" } }]), 501, "Bundle.entry[0]: the operation in Patient/a/$everything is not available"],
            [bundle("transaction", [{ request: { method: "POST", url: "Patient/$validate" }, resource: { resourceType: "Patient" } }]), 501, "Bundle.entry[0]"]
          ]
          for (const [body, status, mentions] of cases) {
            const reply = yield* call("POST", base, { body })
            expect([mentions, reply.status]).toEqual([mentions, status])
            expect(reply.json.issue[0].diagnostics).toContain(mentions)
          }
          expect(yield* total(base)).toBe(before)
        }))
    })
  })
}
