/** The REST core over HTTP, on every storage kind: read, vread, create, update, delete, history, headers. */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { backends } from "../support/backends.ts"
import { call, startServer, type TestServer } from "../support/server.ts"

class Server extends Context.Tag("test/Server")<Server, TestServer>() {}

const patient = { resourceType: "Patient", gender: "female", birthDate: "1970-01-01" }

for (const backend of backends) {
  describe.skipIf(backend.skip)(`REST on ${backend.kind}`, () => {
    // A small body limit, so the 413 case needs no 16 MiB body.
    layer(Layer.scoped(Server, startServer(backend.kind, { server: { max_body_bytes: 16_384 } })), { timeout: 60_000, excludeTestServices: true })((it) => {
      it.effect("creates with a server id, and answers 201 with Location, ETag, Last-Modified and the commit timestamp", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const created = yield* call("POST", `${base}/Patient`, { body: { ...patient, id: "client-chosen" } })
          expect(created.status).toBe(201)
          const id = created.json.id as string
          expect(id).not.toBe("client-chosen")
          expect(created.headers.get("location")).toBe(`${base}/Patient/${id}/_history/1`)
          expect(created.headers.get("etag")).toBe('W/"1"')
          expect(created.headers.get("last-modified")).toMatch(/GMT$/)
          expect(Number(created.headers.get("x-svc-commit-ts"))).toBeGreaterThan(0)
          expect(created.json).toMatchObject({ resourceType: "Patient", id, gender: "female", meta: { versionId: "1" } })
          const read = yield* call("GET", `${base}/Patient/${id}`)
          expect(read.status).toBe(200)
          expect(read.json).toEqual(created.json)
          expect(read.headers.get("content-type")).toContain("application/fhir+json")
          const notModified = yield* call("GET", `${base}/Patient/${id}`, { headers: { "if-none-match": 'W/"1"' } })
          expect(notModified.status).toBe(304)
          const lastModified = created.headers.get("last-modified")!
          expect((yield* call("GET", `${base}/Patient/${id}`, { headers: { "if-modified-since": lastModified } })).status).toBe(304)
          expect((yield* call("GET", `${base}/Patient/${id}`, { headers: { "if-modified-since": "Thu, 01 Jan 1970 00:00:00 GMT" } })).status).toBe(200)
          const plainJson = yield* call("POST", `${base}/Patient`, { body: patient, headers: { "content-type": "application/json", accept: "application/json" } })
          expect(plainJson.status).toBe(201)
          expect(plainJson.json.resourceType).toBe("Patient")
        }))

      it.effect("updates with versions, vreads each, and refuses a stale If-Match with 409", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const { json: first } = yield* call("POST", `${base}/Patient`, { body: patient })
          const url = `${base}/Patient/${first.id}`
          const second = yield* call("PUT", url, { body: { ...patient, id: first.id, gender: "male" }, headers: { "if-match": 'W/"1"' } })
          expect(second.status).toBe(200)
          expect(second.json.meta.versionId).toBe("2")
          const stale = yield* call("PUT", url, { body: { ...patient, id: first.id }, headers: { "if-match": 'W/"1"' } })
          expect(stale.status).toBe(409)
          expect(stale.json.resourceType).toBe("OperationOutcome")
          expect((yield* call("PUT", url, { body: { ...patient, id: first.id }, headers: { "if-match": "yesterday" } })).status).toBe(400)
          expect((yield* call("GET", `${url}/_history/1`)).json.gender).toBe("female")
          expect((yield* call("GET", `${url}/_history/2`)).json.gender).toBe("male")
          expect((yield* call("GET", `${url}/_history/3`)).status).toBe(404)
        }))

      it.effect("answers 405 to a PUT of an id that does not exist", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const reply = yield* call("PUT", `${base}/Patient/not-there`, { body: { ...patient, id: "not-there" } })
          expect(reply.status).toBe(405)
          expect(reply.json.issue[0].diagnostics).toContain("update_as_create")
          expect((yield* call("GET", `${base}/Patient/not-there`)).status).toBe(404)
        }))

      it.effect("deletes: read is 410, deleting twice is fine, history shows the delete", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const { json: created } = yield* call("POST", `${base}/Patient`, { body: patient })
          const url = `${base}/Patient/${created.id}`
          const deleted = yield* call("DELETE", url)
          expect(deleted.status).toBe(204)
          expect(deleted.headers.get("x-svc-commit-ts")).toMatch(/^\d+$/)
          expect((yield* call("GET", url)).status).toBe(410)
          expect((yield* call("DELETE", url)).status).toBe(204)
          const history = yield* call("GET", `${url}/_history`)
          expect(history.json.type).toBe("history")
          expect(history.json.total).toBe(2)
          expect(history.json.entry.map((e: any) => e.request.method)).toEqual(["DELETE", "POST"])
          expect(history.json.entry[0].resource).toBeUndefined()
          expect((yield* call("DELETE", `${base}/Patient/never-was`)).status).toBe(404)
        }))

      it.effect("pages history newest first without repeats, at instance, type and system level", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const { json: created } = yield* call("POST", `${base}/Observation`, { body: { resourceType: "Observation", status: "final", code: { text: "a" } } })
          const url = `${base}/Observation/${created.id}`
          for (const text of ["b", "c", "d"]) {
            yield* call("PUT", url, { body: { resourceType: "Observation", id: created.id, status: "final", code: { text } } })
          }
          const seen: Array<string> = []
          let next: string | undefined = `${url}/_history?_count=3`
          while (next !== undefined) {
            const page: any = (yield* call("GET", next)).json
            seen.push(...page.entry.map((e: any) => e.resource.meta.versionId))
            next = page.link.find((l: any) => l.relation === "next")?.url
          }
          expect(seen).toEqual(["4", "3", "2", "1"])
          const typeHistory = (yield* call("GET", `${base}/Observation/_history?_count=1000`)).json
          expect(typeHistory.entry.every((e: any) => e.fullUrl.includes("/Observation/"))).toBe(true)
          const system = (yield* call("GET", `${base}/_history?_count=2`)).json
          expect(system.entry).toHaveLength(2)
          expect(system.total).toBeGreaterThanOrEqual(4)
          const since = (yield* call("GET", `${url}/_history?_since=2100-01-01`)).json
          expect(since.total).toBe(0)
          expect((yield* call("GET", `${url}/_history?_since=yesterday`)).status).toBe(400)
        }))

      it.effect("honours Prefer: return=minimal and return=OperationOutcome", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const minimal = yield* call("POST", `${base}/Patient`, { body: patient, headers: { prefer: "return=minimal" } })
          expect(minimal.status).toBe(201)
          expect(minimal.text).toBe("")
          expect(minimal.headers.get("location")).toContain("/Patient/")
          const outcome = yield* call("POST", `${base}/Patient`, { body: patient, headers: { prefer: "return=OperationOutcome" } })
          expect(outcome.json.resourceType).toBe("OperationOutcome")
        }))

      it.effect("answers bad input with 4xx OperationOutcomes and writes nothing", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const before = (yield* call("GET", `${base}/_history?_count=1`)).json.total
          const cases: Array<[string, string, unknown, Record<string, string>, number]> = [
            ["POST", "/NoSuchType", { resourceType: "NoSuchType" }, {}, 404],
            ["POST", "/Patient", { resourceType: "Observation" }, {}, 400],
            ["POST", "/Patient", "{not json", {}, 400],
            ["POST", "/Patient", "[1,2]", {}, 400],
            ["POST", "/Patient", "", {}, 400],
            ["POST", "/Patient", patient, { "content-type": "text/plain" }, 415],
            ["PUT", "/Patient/x", { resourceType: "Patient", id: "y" }, {}, 400],
            ["PUT", "/Patient/x", { resourceType: "Patient" }, {}, 400],
            ["PUT", "/Patient/bad_id!", { resourceType: "Patient", id: "bad_id!" }, {}, 400],
            ["POST", "/Patient", { ...patient, text: "x".repeat(20_000) }, {}, 413],
            ["GET", "/Patient/x?_format=yaml", undefined, {}, 406]
          ]
          for (const [method, path, body, headers, status] of cases) {
            const reply = yield* call(method, `${base}${path}`, { body, headers })
            expect([method, path, reply.status]).toEqual([method, path, status])
            expect(reply.json?.resourceType).toBe("OperationOutcome")
          }
          expect((yield* call("GET", `${base}/_history?_count=1`)).json.total).toBe(before)
        }))

      it.effect("lets exactly one of many concurrent updates with the same If-Match win", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const { json: created } = yield* call("POST", `${base}/Patient`, { body: patient })
          const url = `${base}/Patient/${created.id}`
          const replies = yield* Effect.all(
            Array.from({ length: 12 }, (_, i) =>
              call("PUT", url, { body: { ...patient, id: created.id, birthDate: `19${10 + i}-01-01` }, headers: { "if-match": 'W/"1"' } })),
            { concurrency: "unbounded" }
          )
          expect(replies.filter((r) => r.status === 200)).toHaveLength(1)
          expect(replies.filter((r) => r.status === 409)).toHaveLength(11)
          const history = (yield* call("GET", `${url}/_history`)).json
          expect(history.entry.map((e: any) => e.resource.meta.versionId)).toEqual(["2", "1"])
        }))

      it.effect("gives every write a strictly greater commit timestamp", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const stamps: Array<number> = []
          for (let i = 0; i < 5; i++) {
            stamps.push(Number((yield* call("POST", `${base}/Patient`, { body: patient })).headers.get("x-svc-commit-ts")))
          }
          expect([...stamps].sort((a, b) => a - b)).toEqual(stamps)
          expect(new Set(stamps).size).toBe(5)
        }))

      it.effect("describes itself at /metadata, with the search rules in rest.documentation", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const metadata = yield* call("GET", `${base}/metadata`)
          expect(metadata.status).toBe(200)
          expect(metadata.json.resourceType).toBe("CapabilityStatement")
          expect(metadata.json.fhirVersion).toBe("4.0.1")
          expect(metadata.json.rest[0].resource.map((r: any) => r.type)).toEqual(["Observation", "Patient"])
          expect(metadata.json.rest[0].documentation).toContain("comma")
          expect(metadata.json.rest[0].documentation).toContain("1000")
        }))
    })
  })
}

describe("update as create", () => {
  layer(Layer.scoped(Server, startServer("memory", { conformance: { update_as_create: true } })), { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("creates under the client's id with 201 when conformance.update_as_create is on", () =>
      Effect.gen(function*() {
        const { base } = yield* Server
        const reply = yield* call("PUT", `${base}/Patient/chosen-1`, { body: { ...patient, id: "chosen-1" } })
        expect(reply.status).toBe(201)
        expect(reply.headers.get("location")).toBe(`${base}/Patient/chosen-1/_history/1`)
        expect((yield* call("GET", `${base}/Patient/chosen-1`)).json.id).toBe("chosen-1")
      }))
  })
})
