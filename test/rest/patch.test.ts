/** PATCH over HTTP with the shared JSON Patch and FHIRPath Patch cases, on every storage kind. */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { readFileSync } from "node:fs"
import { backends } from "../support/backends.ts"
import { call, startServer, type TestServer } from "../support/server.ts"
import { readSharedCases } from "./patch/sharedCases.ts"

class Server extends Context.Tag("test/PatchServer")<Server, TestServer>() {}

interface JsonCase {
  readonly comment: string
  readonly doc: Record<string, unknown>
  readonly patch: unknown
  readonly expected?: Record<string, unknown>
  readonly error?: string
}
interface FhirCase {
  readonly name: string
  readonly input: Record<string, unknown>
  readonly patch: unknown
  readonly output?: Record<string, unknown>
}

const jsonCases = (readSharedCases("patch/json-patch-tests.json") ?? []) as ReadonlyArray<JsonCase>
const fhirCases = JSON.parse(readFileSync(new URL("./patch/fhirpatch-cases.json", import.meta.url), "utf8")) as ReadonlyArray<FhirCase>

/** The resource without what the server owns. */
const content = (resource: Record<string, unknown>) => {
  const { id: _id, meta: _meta, resourceType: _type, ...rest } = resource
  return rest
}

for (const backend of backends) {
  describe.skipIf(backend.skip)(`PATCH on ${backend.kind}`, () => {
    layer(Layer.scoped(Server, startServer(backend.kind)), { timeout: 60_000, excludeTestServices: true })((it) => {
      it.effect("applies every shared JSON Patch case to a stored resource; the error cases are 4xx and change nothing", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          expect(jsonCases.length === 0 || jsonCases.length === 16).toBe(true)
          for (const testCase of jsonCases) {
            const { json: created } = yield* call("POST", `${base}/Patient`, { body: { resourceType: "Patient", ...testCase.doc } })
            const url = `${base}/Patient/${created.id}`
            const reply = yield* call("PATCH", url, { body: testCase.patch, headers: { "content-type": "application/json-patch+json" } })
            if (testCase.expected !== undefined) {
              expect([testCase.comment, reply.status]).toEqual([testCase.comment, 200])
              expect(content(reply.json)).toEqual(testCase.expected)
              expect(reply.json.meta.versionId).toBe("2")
            } else {
              expect([testCase.comment, reply.status >= 400 && reply.status < 500]).toEqual([testCase.comment, true])
              expect(reply.json.resourceType).toBe("OperationOutcome")
              expect((yield* call("GET", url)).json.meta.versionId).toBe("1")
            }
          }
        }))

      it.effect("applies every FHIRPath Patch case sent as a Parameters body", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          expect(fhirCases.length).toBe(33)
          for (const testCase of fhirCases) {
            const { json: created } = yield* call("POST", `${base}/Patient`, { body: testCase.input })
            const reply = yield* call("PATCH", `${base}/Patient/${created.id}`, { body: testCase.patch })
            if (testCase.output !== undefined) {
              expect([testCase.name, reply.status]).toEqual([testCase.name, 200])
              expect(content(reply.json)).toEqual(content(testCase.output))
            } else {
              expect([testCase.name, reply.status]).toEqual([testCase.name, 422])
            }
          }
        }))

      it.effect("refuses a patch of a missing or deleted resource, a stale If-Match, and an unknown content type", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const ops = [{ op: "add", path: "/active", value: true }]
          const jsonPatch = { "content-type": "application/json-patch+json" }
          expect((yield* call("PATCH", `${base}/Patient/none`, { body: ops, headers: jsonPatch })).status).toBe(404)
          const { json: created } = yield* call("POST", `${base}/Patient`, { body: { resourceType: "Patient" } })
          const url = `${base}/Patient/${created.id}`
          expect((yield* call("PATCH", url, { body: ops, headers: { ...jsonPatch, "if-match": 'W/"7"' } })).status).toBe(409)
          expect((yield* call("PATCH", url, { body: "x", headers: { "content-type": "text/plain" } })).status).toBe(415)
          expect((yield* call("PATCH", url, { body: [{ op: "replace", path: "/id", value: "elsewhere" }], headers: jsonPatch })).status).toBe(422)
          yield* call("DELETE", url)
          expect((yield* call("PATCH", url, { body: ops, headers: jsonPatch })).status).toBe(410)
        }))
    })
  })
}
