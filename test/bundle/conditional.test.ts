/** Conditional entries and conditional references in batch and transaction Bundles, on every storage kind. */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { randomUUID } from "node:crypto"
import { backends } from "../support/backends.ts"
import { call, startServer, type TestServer } from "../support/server.ts"

class Server extends Context.Tag("test/ConditionalBundleServer")<Server, TestServer>() {}

const newSystem = () => `urn:test:${randomUUID()}`
const urn = () => `urn:uuid:${randomUUID()}`
const bundle = (type: string, entry: ReadonlyArray<unknown>) => ({ resourceType: "Bundle", type, entry })
const patient = (system: string, value: string, extra: Record<string, unknown> = {}) => ({ resourceType: "Patient", identifier: [{ system, value }], ...extra })
const observation = (subject: string) => ({ resourceType: "Observation", status: "final", code: { text: "weight" }, subject: { reference: subject } })
const post = (resource: Record<string, unknown>, options: { readonly fullUrl?: string; readonly ifNoneExist?: string } = {}) => ({
  ...(options.fullUrl ? { fullUrl: options.fullUrl } : {}),
  resource,
  request: { method: "POST", url: String(resource["resourceType"]), ...(options.ifNoneExist ? { ifNoneExist: options.ifNoneExist } : {}) }
})
const addActive = { resourceType: "Parameters", parameter: [{ name: "operation", part: [{ name: "type", valueCode: "add" }, { name: "path", valueString: "Patient" }, { name: "name", valueString: "active" }, { name: "value", valueBoolean: true }] }] }

const idOf = (entry: any): string => entry.response.location.split("/")[1]
const total = (base: string) => Effect.map(call("GET", `${base}/_history?_count=1`), (reply) => reply.json.total as number)
const idsWhere = (base: string, query: string) =>
  Effect.map(call("GET", `${base}/Patient?${query}&_count=1000`), (reply) => (reply.json.entry ?? []).map((e: any) => e.resource.id as string).sort())
const create = (base: string, resource: Record<string, unknown>) => Effect.map(call("POST", `${base}/${String(resource["resourceType"])}`, { body: resource }), (r) => r.json.id as string)

for (const backend of backends) {
  describe.skipIf(backend.skip)(`conditional Bundle entries on ${backend.kind}`, () => {
    layer(Layer.scoped(Server, startServer(backend.kind)), { timeout: 60_000, excludeTestServices: true })((it) => {
      it.effect("a search entry answers a searchset; in a transaction it sees the Bundle's own writes, and it is never lenient", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const system = newSystem()
          const existing = yield* create(base, patient(system, "s1"))
          const search = (url: string) => ({ request: { method: "GET", url } })
          const batch = yield* call("POST", base, { body: bundle("batch", [search(`Patient?identifier=${system}|s1`), search("Patient?nonsense=1")]) })
          expect(batch.status).toBe(200)
          const [found, refused] = batch.json.entry
          expect(found.response.status).toBe("200 OK")
          expect(found.resource).toMatchObject({ resourceType: "Bundle", type: "searchset" })
          expect(found.resource.entry.map((e: any) => e.resource.id)).toEqual([existing])
          expect(found.resource.entry[0].fullUrl).toBe(`${base}/Patient/${existing}`)
          expect(refused.response.status).toBe("400 Bad Request")
          expect(refused.response.outcome.issue[0].diagnostics).toContain("nonsense")

          const transaction = yield* call("POST", base, {
            body: bundle("transaction", [post(patient(system, "s2")), search(`Patient?identifier=${system}|s2`)])
          })
          expect(transaction.status).toBe(200)
          const [made, seen] = transaction.json.entry
          expect(seen.resource.entry.map((e: any) => e.resource.id)).toEqual([idOf(made)])
        }))

      it.effect("a conditional create creates once; sent again it finds the resource, and its fullUrl names that resource", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const system = newSystem()
          const patientUrl = urn()
          const body = bundle("transaction", [
            post(patient(system, "1"), { fullUrl: patientUrl, ifNoneExist: `identifier=${system}|1` }),
            post(observation(patientUrl))
          ])
          const first = yield* call("POST", base, { body })
          expect(first.status).toBe(200)
          expect(first.json.entry.map((e: any) => e.response.status)).toEqual(["201 Created", "201 Created"])
          const id = idOf(first.json.entry[0])
          expect(first.json.entry[1].resource.subject.reference).toBe(`Patient/${id}`)

          const second = yield* call("POST", base, { body })
          expect(second.status).toBe(200)
          const [found, made] = second.json.entry
          expect(found.response).toMatchObject({ status: "200 OK", location: `Patient/${id}/_history/1`, etag: 'W/"1"' })
          expect(found.resource.id).toBe(id)
          expect(made.response.status).toBe("201 Created")
          expect(made.resource.subject.reference).toBe(`Patient/${id}`)
          expect(yield* idsWhere(base, `identifier=${system}|1`)).toEqual([id])
        }))

      it.effect("replaces a conditional reference by its one match; none is 404 and several 412, naming the entry, its fullUrl and the reference", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const system = newSystem()
          const id = yield* create(base, patient(system, "r"))
          const ok = yield* call("POST", base, { body: bundle("transaction", [post(observation(`Patient?identifier=${system}|r`))]) })
          expect(ok.status).toBe(200)
          expect(ok.json.entry[0].resource.subject.reference).toBe(`Patient/${id}`)
          const stored = yield* call("GET", `${base}/Observation/${idOf(ok.json.entry[0])}`)
          expect(stored.json.subject.reference).toBe(`Patient/${id}`)

          yield* create(base, patient(system, "twice"))
          yield* create(base, patient(system, "twice"))
          const before = yield* total(base)
          const cases: Array<[string, number]> = [[`Patient?identifier=${system}|none`, 404], [`Patient?identifier=${system}|twice`, 412], ["Patient?nonsense=1", 400]]
          for (const [reference, status] of cases) {
            const fullUrl = urn()
            const reply = yield* call("POST", base, {
              body: bundle("transaction", [post(patient(system, "other")), post(observation(reference), { fullUrl })])
            })
            expect([reference, reply.status]).toEqual([reference, status])
            const diagnostics: string = reply.json.issue[0].diagnostics
            expect(diagnostics).toContain("Bundle.entry[1]")
            expect(diagnostics).toContain(fullUrl)
            expect(diagnostics).toContain(reference)
          }
          expect(yield* total(base)).toBe(before)
        }))

      it.effect("a conditional reference written as a conditional create of the Bundle names the resource it creates", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const system = newSystem()
          const reply = yield* call("POST", base, {
            body: bundle("transaction", [
              post(observation(`Patient?identifier=${system}|new`)),
              post(patient(system, "new"), { ifNoneExist: `identifier=${system}|new` })
            ])
          })
          expect(reply.status).toBe(200)
          const id = idOf(reply.json.entry[1])
          expect(reply.json.entry[1].response.status).toBe("201 Created")
          expect(reply.json.entry[0].resource.subject.reference).toBe(`Patient/${id}`)
        }))

      it.effect("runs conditional DELETE first, then conditional POST, then conditional PUT and PATCH", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const system = newSystem()
          const gone = yield* create(base, patient(system, "del"))
          const put = yield* create(base, patient(system, "put"))
          const patched = yield* create(base, patient(system, "patch"))
          const recreated = urn()
          const reply = yield* call("POST", base, {
            body: bundle("transaction", [
              post(observation(recreated)),
              post(patient(system, "del"), { fullUrl: recreated, ifNoneExist: `identifier=${system}|del` }),
              { resource: patient(system, "put", { gender: "male" }), request: { method: "PUT", url: `Patient?identifier=${system}|put` } },
              { resource: addActive, request: { method: "PATCH", url: `Patient?identifier=${system}|patch`, ifMatch: 'W/"1"' } },
              { resource: patient(system, "fresh"), request: { method: "PUT", url: `Patient?identifier=${system}|fresh` } },
              { request: { method: "DELETE", url: `Patient?identifier=${system}|del` } },
              { request: { method: "DELETE", url: `Patient?identifier=${system}|nobody` } }
            ])
          })
          expect(reply.status).toBe(200)
          const entries = reply.json.entry
          expect(entries.map((e: any) => e.response.status)).toEqual(["201 Created", "201 Created", "200 OK", "200 OK", "201 Created", "204 No Content", "204 No Content"])
          // The delete ran before the conditional create, which then matched nothing.
          expect((yield* call("GET", `${base}/Patient/${gone}`)).status).toBe(410)
          const newId = idOf(entries[1])
          expect(newId).not.toBe(gone)
          expect(entries[0].resource.subject.reference).toBe(`Patient/${newId}`)
          expect(entries[2].response.location).toBe(`Patient/${put}/_history/2`)
          expect(entries[2].resource.gender).toBe("male")
          expect(entries[3].response.location).toBe(`Patient/${patched}/_history/2`)
          expect(entries[3].resource.active).toBe(true)
          expect(yield* idsWhere(base, `identifier=${system}|fresh`)).toEqual([idOf(entries[4])])
        }))

      it.effect("fails the whole transaction when conditions change one resource twice, match several, or cannot be read", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const system = newSystem()
          const one = yield* create(base, patient(system, "one"))
          yield* create(base, patient(system, "two"))
          yield* create(base, patient(system, "two"))
          const before = yield* total(base)
          const cases: Array<[ReadonlyArray<unknown>, number, string]> = [
            [[{ request: { method: "DELETE", url: `Patient?identifier=${system}|one` } }, { resource: patient(system, "one", { id: one }), request: { method: "PUT", url: `Patient/${one}` } }], 400, "Bundle.entry[1]"],
            [[{ resource: patient(system, "one"), request: { method: "PUT", url: `Patient?identifier=${system}|one` } }, { resource: addActive, request: { method: "PATCH", url: `Patient?_id=${one}` } }], 400, "Bundle.entry[1]"],
            [[post(patient(system, "x")), { resource: patient(system, "two"), request: { method: "PUT", url: `Patient?identifier=${system}|two` } }], 412, "Bundle.entry[1]"],
            [[post(patient(system, "x")), post(patient(system, "two"), { ifNoneExist: `identifier=${system}|two` })], 412, "Bundle.entry[1]"],
            [[post(patient(system, "x")), { request: { method: "DELETE", url: `Patient?identifier=${system}|two` } }], 412, "Bundle.entry[1]"],
            [[post(patient(system, "x")), { resource: addActive, request: { method: "PATCH", url: `Patient?identifier=${system}|none` } }], 404, "Bundle.entry[1]"],
            [[post(patient(system, "x"), { ifNoneExist: "nonsense=1" })], 400, "nonsense"],
            [[{ request: { method: "DELETE", url: "Patient?_count=1" } }], 400, "_count"],
            [[{ resource: patient(system, "one", { id: "someone-else" }), request: { method: "PUT", url: `Patient?identifier=${system}|one` } }], 400, one]
          ]
          for (const [entries, status, mentions] of cases) {
            const reply = yield* call("POST", base, { body: bundle("transaction", entries) })
            expect([mentions, reply.status]).toEqual([mentions, status])
            expect(reply.json.issue[0].diagnostics).toContain(mentions)
          }
          expect(yield* total(base)).toBe(before)
          expect((yield* call("GET", `${base}/Patient/${one}`)).status).toBe(200)
        }))

      it.effect("runs each conditional batch entry on its own", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const system = newSystem()
          const one = yield* create(base, patient(system, "one"))
          yield* create(base, patient(system, "two"))
          yield* create(base, patient(system, "two"))
          const reply = yield* call("POST", base, {
            body: bundle("batch", [
              post(patient(system, "one"), { ifNoneExist: `identifier=${system}|one` }),
              { request: { method: "DELETE", url: `Patient?identifier=${system}|two` } },
              { resource: patient(system, "three"), request: { method: "PUT", url: `Patient?identifier=${system}|three` } },
              post(observation(`Patient?identifier=${system}|one`))
            ])
          })
          expect(reply.status).toBe(200)
          const entries = reply.json.entry
          expect(entries.map((e: any) => e.response.status)).toEqual(["200 OK", "412 Precondition Failed", "201 Created", "201 Created"])
          expect(idOf(entries[0])).toBe(one)
          expect(entries[1].response.outcome.issue[0].code).toBe("multiple-matches")
          expect(entries[3].resource.subject.reference).toBe(`Patient/${one}`)
          expect(yield* idsWhere(base, `identifier=${system}|two`)).toHaveLength(2)
        }))
    })
  })
}
