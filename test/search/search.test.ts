/** Search over HTTP on every storage kind (fixture catalog: Patient.gender, Observation.subject, _id). */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { backends } from "../support/backends.ts"
import { call, startServer, type TestServer } from "../support/server.ts"

class Server extends Context.Tag("test/SearchServer")<Server, TestServer>() {}

const ids = (bundle: any): Array<string> => (bundle.entry ?? []).filter((e: any) => e.search.mode === "match").map((e: any) => e.resource.id).sort()

for (const backend of backends) {
  describe.skipIf(backend.skip)(`search on ${backend.kind}`, () => {
    layer(Layer.scoped(Server, startServer(backend.kind)), { timeout: 60_000, excludeTestServices: true })((it) => {
      it.effect("matches tokens, ORs commas, ANDs repeats, excludes with :not, and finds by _id", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const make = (gender: string) => Effect.map(call("POST", `${base}/Patient`, { body: { resourceType: "Patient", gender } }), (r) => r.json.id as string)
          const female = yield* make("female")
          const male = yield* make("male")
          const other = yield* make("other")
          const find = (query: string) => Effect.map(call("GET", `${base}/Patient?${query}&_count=1000`), (r) => ids(r.json).filter((id) => [female, male, other].includes(id)))
          expect(yield* find("gender=female")).toEqual([female])
          expect(yield* find("gender=female,male")).toEqual([female, male].sort())
          expect(yield* find("gender=female,male&gender=male")).toEqual([male])
          expect(yield* find("gender:not=female,male")).toEqual([other])
          expect(yield* find(`_id=${female},${other}`)).toEqual([female, other].sort())
          const reply = yield* call("GET", `${base}/Patient?gender=female`)
          expect(reply.json.type).toBe("searchset")
          expect(reply.headers.get("vary")).toBe("Prefer")
          expect(reply.json.entry[0].fullUrl).toMatch(new RegExp(`${base}/Patient/`))
          const posted = yield* call("POST", `${base}/Patient/_search`, { body: "gender=female&_count=1000", headers: { "content-type": "application/x-www-form-urlencoded" } })
          expect(ids(posted.json).filter((id) => id === female)).toEqual([female])
        }))

      it.effect("finds by reference, with Type/id and with a bare id", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const { json: patient } = yield* call("POST", `${base}/Patient`, { body: { resourceType: "Patient" } })
          const { json: observation } = yield* call("POST", `${base}/Observation`, { body: { resourceType: "Observation", status: "final", code: { text: "x" }, subject: { reference: `Patient/${patient.id}` } } })
          expect(ids((yield* call("GET", `${base}/Observation?subject=Patient/${patient.id}`)).json)).toEqual([observation.id])
          expect(ids((yield* call("GET", `${base}/Observation?subject=${patient.id}`)).json)).toEqual([observation.id])
        }))

      it.effect("pages without repeats or gaps, and counts with _summary=count", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const made: Array<string> = []
          for (let i = 0; i < 7; i++) made.push((yield* call("POST", `${base}/Patient`, { body: { resourceType: "Patient", gender: "unknown" } })).json.id)
          const seen: Array<string> = []
          let next: string | undefined = `${base}/Patient?gender=unknown&_count=3`
          while (next !== undefined) {
            const page: any = (yield* call("GET", next)).json
            seen.push(...page.entry.map((e: any) => e.resource.id))
            next = page.link.find((l: any) => l.relation === "next")?.url
          }
          expect(seen.sort()).toEqual([...made].sort())
          const counted = (yield* call("GET", `${base}/Patient?gender=unknown&_summary=count`)).json
          expect(counted.total).toBe(7)
          // FHIR JSON has no empty arrays: a Bundle without entries has no `entry`.
          expect(counted.entry).toBeUndefined()
        }))

      it.effect("answers an unknown parameter with 400, and sets it aside with handling=lenient", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const strict = yield* call("GET", `${base}/Patient?nonsense=1`)
          expect(strict.status).toBe(400)
          expect(strict.json.issue[0].diagnostics).toContain("nonsense")
          expect(strict.headers.get("vary")).toBe("Prefer")
          const lenient = yield* call("GET", `${base}/Patient?nonsense=1&gender=female`, { headers: { prefer: "handling=lenient" } })
          expect(lenient.status).toBe(200)
          expect(lenient.headers.get("preference-applied")).toBe("handling=lenient")
          const outcome = lenient.json.entry.find((e: any) => e.search.mode === "outcome")
          expect(outcome.resource.issue[0].severity).toBe("warning")
          expect(lenient.json.link[0].url).not.toContain("nonsense")
        }))
    })
  })
}
