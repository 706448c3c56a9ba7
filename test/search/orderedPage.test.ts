/**
 * Searches driven by one equality value (`identifier=system|value`, `subject=Patient/id`), whose pages SQLite
 * reads by walking the index in row-key order: each match once even when a resource has the value twice, in
 * the order of creation, deleted resources left out, the other criteria applied, and pages without repeats or
 * gaps. On SQLite and Postgres, with the fixture catalog (Patient.identifier and gender, Observation.subject).
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { backends } from "../support/backends.ts"
import { matchIds, pages } from "../support/searchPages.ts"
import { call, startServer, type TestServer } from "../support/server.ts"

class Server extends Context.Tag("test/OrderedPageServer")<Server, TestServer>() {}

for (const backend of backends) {
  describe.skipIf(backend.skip)(`searches driven by one equality value on ${backend.kind}`, () => {
    layer(Layer.scoped(Server, startServer(backend.kind)), { timeout: 60_000, excludeTestServices: true })((it) => {
      it.effect("serve each match once, in creation order, across pages, with the other criteria and without deleted resources", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const system = "urn:test:ordered-page"
          const patient = (gender: string, values: ReadonlyArray<string>) =>
            Effect.map(
              call("POST", `${base}/Patient`, { body: { resourceType: "Patient", gender, identifier: values.map((value) => ({ system, value })) } }),
              (reply) => {
                expect(reply.status).toBe(201)
                return reply.json.id as string
              }
            )
          // The same identifier twice: two index rows for one resource.
          const twice = yield* patient("female", ["dup", "dup"])
          const male = yield* patient("male", ["dup"])
          const deleted = yield* patient("female", ["dup"])
          yield* patient("female", ["other"])
          const rest = [yield* patient("female", ["dup"]), yield* patient("female", ["dup", "dup"]), yield* patient("female", ["dup"])]
          expect((yield* call("DELETE", `${base}/Patient/${deleted}`)).status).toBe(204)

          const all = yield* pages(`${base}/Patient?identifier=${encodeURIComponent(`${system}|dup`)}&_count=2`)
          expect(all.ids).toEqual([twice, male, ...rest])
          expect(all.sizes).toEqual([2, 2, 1])

          const female = yield* pages(`${base}/Patient?identifier=${encodeURIComponent(`${system}|dup`)}&gender=female&_count=2`)
          expect(female.ids).toEqual([twice, ...rest])

          const offset = yield* call("GET", `${base}/Patient?identifier=${encodeURIComponent(`${system}|dup`)}&_count=2&_offset=3`)
          expect(matchIds(offset.json)).toEqual(rest.slice(1))

          const counted = yield* call("GET", `${base}/Patient?identifier=${encodeURIComponent(`${system}|dup`)}&_total=accurate&_count=1`)
          expect([counted.json.total, matchIds(counted.json)]).toEqual([5, [twice]])
        }))

      it.effect("page a reference search by Type/id", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const { json: subject } = yield* call("POST", `${base}/Patient`, { body: { resourceType: "Patient" } })
          const { json: elsewhere } = yield* call("POST", `${base}/Patient`, { body: { resourceType: "Patient" } })
          const observation = (of: string) =>
            Effect.map(
              call("POST", `${base}/Observation`, { body: { resourceType: "Observation", status: "final", code: { text: "x" }, subject: { reference: `Patient/${of}` } } }),
              (reply) => reply.json.id as string
            )
          const first = yield* observation(subject.id)
          yield* observation(elsewhere.id)
          const second = yield* observation(subject.id)
          const third = yield* observation(subject.id)
          const found = yield* pages(`${base}/Observation?subject=Patient/${subject.id}&_count=2`)
          expect(found.ids).toEqual([first, second, third])
          expect(found.sizes).toEqual([2, 1])
        }))
    })
  })
}
