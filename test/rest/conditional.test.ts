/**
 * Conditional create, update, patch and delete over HTTP, on every storage kind (fixture catalog:
 * Patient.identifier, Patient.family, Patient.gender, _id).
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { randomUUID } from "node:crypto"
import { backends } from "../support/backends.ts"
import { call, startServer, type TestServer } from "../support/server.ts"

class Server extends Context.Tag("test/ConditionalServer")<Server, TestServer>() {}

/** A fresh identifier system per test, so tests sharing a server do not see each other's patients. */
const newSystem = () => `urn:test:${randomUUID()}`
const patient = (system: string, value: string, extra: Record<string, unknown> = {}) => ({
  resourceType: "Patient",
  identifier: [{ system, value }],
  ...extra
})

const idsWhere = (base: string, query: string) =>
  Effect.map(call("GET", `${base}/Patient?${query}&_count=1000`), (reply) => (reply.json.entry ?? []).map((e: any) => e.resource.id as string).sort())

const versionCount = (base: string, id: string) =>
  Effect.map(call("GET", `${base}/Patient/${id}/_history`), (reply) => reply.json.entry.length as number)

const addActive = { resourceType: "Parameters", parameter: [{ name: "operation", part: [{ name: "type", valueCode: "add" }, { name: "path", valueString: "Patient" }, { name: "name", valueString: "active" }, { name: "value", valueBoolean: true }] }] }

for (const backend of backends) {
  describe.skipIf(backend.skip)(`conditional interactions on ${backend.kind}`, () => {
    layer(Layer.scoped(Server, startServer(backend.kind)), { timeout: 60_000, excludeTestServices: true })((it) => {
      it.effect("conditional create: creates when nothing matches, answers 200 with the match when one does, 412 when several do", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const system = newSystem()
          const ifNoneExist = { "if-none-exist": `identifier=${system}|a` }
          const first = yield* call("POST", `${base}/Patient`, { body: patient(system, "a", { gender: "female" }), headers: ifNoneExist })
          expect(first.status).toBe(201)
          const id = first.json.id as string
          const again = yield* call("POST", `${base}/Patient`, { body: patient(system, "a", { gender: "male" }), headers: ifNoneExist })
          expect(again.status).toBe(200)
          expect(again.json).toEqual(first.json)
          expect(again.headers.get("location")).toBe(`${base}/Patient/${id}/_history/1`)
          expect(again.headers.get("etag")).toBe('W/"1"')
          expect(again.headers.get("last-modified")).toBe(first.headers.get("last-modified"))
          expect(yield* versionCount(base, id)).toBe(1)
          expect((yield* call("GET", `${base}/Patient/${id}`)).json.gender).toBe("female")
          // `Type?` in front of the criteria is read the same way.
          const prefixed = yield* call("POST", `${base}/Patient`, { body: patient(system, "a"), headers: { "if-none-exist": `Patient?identifier=${system}|a` } })
          expect([prefixed.status, prefixed.json.id]).toEqual([200, id])
          const minimal = yield* call("POST", `${base}/Patient`, { body: patient(system, "a"), headers: { ...ifNoneExist, prefer: "return=minimal" } })
          expect([minimal.status, minimal.text, minimal.headers.get("location")]).toEqual([200, "", `${base}/Patient/${id}/_history/1`])

          yield* call("POST", `${base}/Patient`, { body: patient(system, "b") })
          yield* call("POST", `${base}/Patient`, { body: patient(system, "b") })
          const several = yield* call("POST", `${base}/Patient`, { body: patient(system, "b"), headers: { "if-none-exist": `identifier=${system}|b` } })
          expect(several.status).toBe(412)
          expect(several.json.resourceType).toBe("OperationOutcome")
          expect(several.json.issue[0].code).toBe("multiple-matches")
          expect(yield* idsWhere(base, `identifier=${system}|b`)).toHaveLength(2)
        }))

      it.effect("twenty concurrent identical conditional creates make exactly one resource", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const system = newSystem()
          const replies = yield* Effect.all(
            Array.from({ length: 20 }, () => call("POST", `${base}/Patient`, { body: patient(system, "v"), headers: { "if-none-exist": `identifier=${system}|v` } })),
            { concurrency: "unbounded" }
          )
          expect(replies.filter((r) => r.status === 201)).toHaveLength(1)
          expect(replies.filter((r) => r.status === 200)).toHaveLength(19)
          const ids = new Set(replies.map((r) => r.json.id))
          expect(ids.size).toBe(1)
          expect(yield* idsWhere(base, `identifier=${system}|v`)).toEqual([...ids])
        }))

      it.effect("refuses conditions that cannot be read, even with handling=lenient, and conditions without criteria, writing nothing", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const system = newSystem()
          const body = patient(system, "x")
          const cases: Array<[string, string, Record<string, string>, unknown, number, ReadonlyArray<string>]> = [
            ["POST", `${base}/Patient`, { "if-none-exist": "nonsense=1&gender:fuzzy=x", prefer: "handling=lenient" }, body, 400, ["nonsense", "fuzzy"]],
            ["POST", `${base}/Patient`, { "if-none-exist": "" }, body, 400, ["criteria"]],
            ["POST", `${base}/Patient`, { "if-none-exist": `identifier=${system}|x&_count=1` }, body, 400, ["_count"]],
            ["POST", `${base}/Patient`, { "if-none-exist": "Observation?subject=Patient/1" }, body, 400, ["Observation"]],
            ["POST", `${base}/Patient`, { "if-none-exist": "general-practitioner.shoe-size=x" }, body, 400, ["general-practitioner.shoe-size"]],
            ["PUT", `${base}/Patient?nonsense=1`, {}, body, 400, ["nonsense"]],
            ["PUT", `${base}/Patient`, {}, body, 400, ["criteria"]],
            ["PUT", `${base}/Patient?identifier=`, {}, body, 400, ["criteria"]],
            ["PUT", `${base}/Patient?identifier=${system}|x&_sort=_id`, {}, body, 400, ["_sort"]],
            ["DELETE", `${base}/Patient?_format=json`, {}, undefined, 400, ["criteria"]],
            ["DELETE", `${base}/Patient?gender=female&nonsense=1`, { prefer: "handling=lenient" }, undefined, 400, ["nonsense"]],
            ["PATCH", `${base}/Patient?nonsense=1`, {}, addActive, 400, ["nonsense"]]
          ]
          for (const [method, url, headers, requestBody, status, mentions] of cases) {
            const reply = yield* call(method, url, { headers, ...(requestBody === undefined ? {} : { body: requestBody }) })
            expect([method, url, reply.status]).toEqual([method, url, status])
            expect(reply.json.resourceType).toBe("OperationOutcome")
            for (const mention of mentions) expect(reply.json.issue[0].diagnostics).toContain(mention)
          }
          expect(yield* idsWhere(base, `identifier=${system}|`)).toEqual([])
        }))

      it.effect("conditional update: creates with a server id when nothing matches, updates the one match, 412 when several match", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const system = newSystem()
          const url = `${base}/Patient?identifier=${encodeURIComponent(`${system}|u`)}`
          const created = yield* call("PUT", url, { body: patient(system, "u", { gender: "female" }) })
          expect(created.status).toBe(201)
          const id = created.json.id as string
          expect(created.headers.get("location")).toBe(`${base}/Patient/${id}/_history/1`)
          const updated = yield* call("PUT", url, { body: patient(system, "u", { gender: "male" }) })
          expect(updated.status).toBe(200)
          expect(updated.json).toMatchObject({ id, gender: "male", meta: { versionId: "2" } })
          expect(updated.headers.get("location")).toBe(`${base}/Patient/${id}/_history/2`)
          // The body may carry the match's id, and no other.
          const withId = yield* call("PUT", url, { body: patient(system, "u", { id, gender: "other" }) })
          expect([withId.status, withId.json.meta.versionId]).toEqual([200, "3"])
          const otherId = yield* call("PUT", url, { body: patient(system, "u", { id: "someone-else" }) })
          expect(otherId.status).toBe(400)
          expect(otherId.json.issue[0].diagnostics).toContain(id)
          // If-Match applies to the match.
          expect((yield* call("PUT", url, { body: patient(system, "u"), headers: { "if-match": 'W/"1"' } })).status).toBe(409)
          expect((yield* call("PUT", url, { body: patient(system, "u", { gender: "unknown" }), headers: { "if-match": 'W/"3"' } })).status).toBe(200)
          expect(yield* versionCount(base, id)).toBe(4)

          // No match and an id in the body is an update as create: 405 unless conformance.update_as_create.
          const clientId = yield* call("PUT", `${base}/Patient?identifier=${encodeURIComponent(`${system}|none`)}`, { body: patient(system, "none", { id: `c-${id}` }) })
          expect(clientId.status).toBe(405)
          expect(clientId.json.issue[0].diagnostics).toContain("update_as_create")

          yield* call("POST", `${base}/Patient`, { body: patient(system, "two") })
          yield* call("POST", `${base}/Patient`, { body: patient(system, "two") })
          const several = yield* call("PUT", `${base}/Patient?identifier=${encodeURIComponent(`${system}|two`)}`, { body: patient(system, "two", { gender: "male" }) })
          expect(several.status).toBe(412)
          expect(yield* idsWhere(base, `identifier=${system}|two&gender=male`)).toEqual([])
        }))

      it.effect("conditional delete: 204 when nothing matches, deletes the one match, 412 when several match", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const system = newSystem()
          const none = yield* call("DELETE", `${base}/Patient?identifier=${system}|nobody`)
          expect(none.status).toBe(204)
          expect(none.headers.get("etag")).toBeNull()
          const { json: one } = yield* call("POST", `${base}/Patient`, { body: patient(system, "d") })
          const deleted = yield* call("DELETE", `${base}/Patient?identifier=${system}|d`)
          expect(deleted.status).toBe(204)
          expect(deleted.headers.get("etag")).toBe('W/"2"')
          expect((yield* call("GET", `${base}/Patient/${one.id}`)).status).toBe(410)
          // Deleted resources no longer match.
          expect((yield* call("DELETE", `${base}/Patient?identifier=${system}|d`)).status).toBe(204)
          expect(yield* versionCount(base, one.id)).toBe(2)

          const a = (yield* call("POST", `${base}/Patient`, { body: patient(system, "dd") })).json.id
          const b = (yield* call("POST", `${base}/Patient`, { body: patient(system, "dd") })).json.id
          const several = yield* call("DELETE", `${base}/Patient?identifier=${system}|dd`)
          expect(several.status).toBe(412)
          expect(several.json.issue[0].code).toBe("multiple-matches")
          expect(yield* idsWhere(base, `identifier=${system}|dd`)).toEqual([a, b].sort())
        }))

      it.effect("conditional patch: patches the one match, 404 when nothing matches, 412 when several match", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const system = newSystem()
          const { json: one } = yield* call("POST", `${base}/Patient`, { body: patient(system, "p") })
          const patched = yield* call("PATCH", `${base}/Patient?identifier=${system}|p`, { body: addActive })
          expect(patched.status).toBe(200)
          expect(patched.json).toMatchObject({ id: one.id, active: true, meta: { versionId: "2" } })
          const jsonPatch = yield* call("PATCH", `${base}/Patient?identifier=${system}|p`, {
            body: [{ op: "replace", path: "/active", value: false }],
            headers: { "content-type": "application/json-patch+json", "if-match": 'W/"2"' }
          })
          expect([jsonPatch.status, jsonPatch.json.active]).toEqual([200, false])
          const none = yield* call("PATCH", `${base}/Patient?identifier=${system}|nobody`, { body: addActive })
          expect(none.status).toBe(404)
          yield* call("POST", `${base}/Patient`, { body: patient(system, "pp") })
          yield* call("POST", `${base}/Patient`, { body: patient(system, "pp") })
          expect((yield* call("PATCH", `${base}/Patient?identifier=${system}|pp`, { body: addActive })).status).toBe(412)
          expect(yield* idsWhere(base, `identifier=${system}|pp`)).toHaveLength(2)
        }))
    })

    layer(Layer.scoped(Server, startServer(backend.kind, { conformance: { update_as_create: true } })), { timeout: 60_000, excludeTestServices: true })((it) => {
      it.effect("with update_as_create, a conditional update without a match creates under the body's id, unless that id is taken", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const system = newSystem()
          const id = `c-${randomUUID()}`
          const created = yield* call("PUT", `${base}/Patient?identifier=${system}|n`, { body: patient(system, "n", { id }) })
          expect(created.status).toBe(201)
          expect(created.json.id).toBe(id)
          const taken = yield* call("PUT", `${base}/Patient?identifier=${system}|other`, { body: patient(system, "other", { id }) })
          expect(taken.status).toBe(409)
          expect((yield* call("GET", `${base}/Patient/${id}`)).json.identifier[0].value).toBe("n")
        }))
    })
  })
}
