/**
 * Searches driven by a chain (`Observation?subject.family=...`), whose pages SQLite reads in two steps: the
 * targets' ids, then one ordered range of the reference index per target, merged (src/search/plan/scope.ts,
 * `chainedPage`); with more than `maxChainTargets` targets, as `IN`. Either way: each match once, in creation
 * order, across pages and offsets, deleted targets and deleted referrers left out, the other criteria applied.
 * Answered by the fast search and (with a `Prefer` header) by the general path alike; on SQLite and Postgres,
 * with the fixture catalog (Patient.family, Observation.subject).
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { maxChainTargets } from "../../src/search/plan/scope.ts"
import { backends } from "../support/backends.ts"
import { matchIds, pages } from "../support/searchPages.ts"
import { call, startServer, type TestServer } from "../support/server.ts"

class Server extends Context.Tag("test/ChainedPageServer")<Server, TestServer>() {}

/** Both ways a GET search is answered on SQLite: the fast search, and the general path (a `Prefer` header). */
const bothPaths = [{}, { prefer: "handling=strict" }]

for (const backend of backends) {
  describe.skipIf(backend.skip)(`searches driven by a chain on ${backend.kind}`, () => {
    layer(Layer.scoped(Server, startServer(backend.kind)), { timeout: 120_000, excludeTestServices: true })((it) => {
      const create = (base: string, body: Record<string, unknown>) =>
        Effect.map(call("POST", `${base}/${body["resourceType"]}`, { body }), (reply) => {
          expect(reply.status).toBe(201)
          return reply.json.id as string
        })

      it.effect("serve each match once, in creation order, across pages, without deleted targets or referrers", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const patient = (family: string) => create(base, { resourceType: "Patient", name: [{ family }] })
          const observation = (of: string) =>
            create(base, { resourceType: "Observation", status: "final", code: { text: "x" }, subject: { reference: `Patient/${of}` } })
          const a = yield* patient("Chainer")
          const b = yield* patient("Chainer")
          const other = yield* patient("Otherwise")
          const gone = yield* patient("Chainer")
          const o1 = yield* observation(a)
          yield* observation(other)
          const o3 = yield* observation(b)
          const o4 = yield* observation(a)
          yield* observation(gone)
          const o6 = yield* observation(b)
          const o7 = yield* observation(a)
          yield* observation(other)
          expect((yield* call("DELETE", `${base}/Patient/${gone}`)).status).toBe(204)
          expect((yield* call("DELETE", `${base}/Observation/${o6}`)).status).toBe(204)

          for (const headers of bothPaths) {
            const all = yield* pages(`${base}/Observation?subject.family=Chainer&_count=2`, headers)
            expect(all.ids).toEqual([o1, o3, o4, o7])
            expect(all.sizes).toEqual([2, 2])

            const offset = yield* call("GET", `${base}/Observation?subject.family=Chainer&_count=2&_offset=1`, { headers })
            expect(matchIds(offset.json)).toEqual([o3, o4])

            // Another criterion on the same search: only b's.
            const ofB = yield* pages(`${base}/Observation?subject.family=Chainer&subject=Patient/${b}`, headers)
            expect(ofB.ids).toEqual([o3])

            const counted = yield* call("GET", `${base}/Observation?subject.family=Chainer&_total=accurate&_count=1`, { headers })
            expect([counted.json.total, matchIds(counted.json)]).toEqual([4, [o1]])

            const none = yield* call("GET", `${base}/Observation?subject.family=Nobody`, { headers })
            expect([none.status, matchIds(none.json)]).toEqual([200, []])
          }
        }))

      it.effect("serve the same with more targets than are read as ranges", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const targets = maxChainTargets + 3
          // One transaction: the patients, and an Observation for each, interleaved with others' Observations.
          const entries = Array.from({ length: targets }, (_, n) => [
            { fullUrl: `urn:uuid:00000000-0000-4000-8000-${String(n).padStart(12, "0")}`, resource: { resourceType: "Patient", name: [{ family: "Many" }] }, request: { method: "POST", url: "Patient" } },
            {
              resource: { resourceType: "Observation", status: "final", code: { text: `obs ${n}` }, subject: { reference: `urn:uuid:00000000-0000-4000-8000-${String(n).padStart(12, "0")}` } },
              request: { method: "POST", url: "Observation" }
            }
          ]).flat()
          const reply = yield* call("POST", base, { body: { resourceType: "Bundle", type: "transaction", entry: entries } })
          expect(reply.status).toBe(200)
          // The Observations' ids in the order they were created (the response follows the Bundle's entries).
          const created = (reply.json.entry as Array<any>)
            .map((entry) => String(entry.response.location))
            .filter((location) => location.startsWith("Observation/"))
            .map((location) => location.split("/")[1]!)
          expect(created).toHaveLength(targets)

          for (const headers of bothPaths) {
            const all = yield* pages(`${base}/Observation?subject.family=Many&_count=10`, headers)
            expect(all.ids.length).toBe(targets)
            expect(new Set(all.ids)).toEqual(new Set(created))
            expect(all.sizes).toEqual([10, 10, 10, targets - 30])
          }
        }))
    })
  })
}
