/**
 * Search results as a client sees them: `_sort` on each parameter type, over HTTP on SQLite and Postgres.
 * The servers install the real R4 packages: the sort parameters come from R4 core. Each test marks its
 * resources with its own identifier system, so the tests share one server per backend without seeing
 * each other's data.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { type BackendKind, pgAvailable } from "../support/backends.ts"
import { realPackageCache, registryUrl, skipRealPackages } from "../support/npmRegistry.ts"
import { call, startServer, type TestServer } from "../support/server.ts"

class Server extends Context.Tag("test/ResultsServer")<Server, TestServer>() {}

/** A resource created on the server, as the server answered it. */
const create = (resource: Record<string, unknown>) =>
  Effect.gen(function*() {
    const { base } = yield* Server
    const reply = yield* call("POST", `${base}/${String(resource["resourceType"])}`, { body: resource })
    expect([reply.status, reply.text.slice(0, 300)]).toEqual([201, reply.text.slice(0, 300)])
    return reply.json
  })

/** A searchset Bundle of `path` (relative to the base), asserting a 200. */
const search = (path: string) =>
  Effect.gen(function*() {
    const { base } = yield* Server
    const reply = yield* call("GET", `${base}/${path}`)
    expect([reply.status, reply.text.slice(0, 300)]).toEqual([200, reply.text.slice(0, 300)])
    return reply.json
  })

const matches = (bundle: any): Array<any> => (bundle.entry ?? []).filter((e: any) => e.search.mode === "match").map((e: any) => e.resource)

/** The ids of the matches of `path`, in the order the server gave them. */
const order = (path: string) => Effect.map(search(path), (bundle) => matches(bundle).map((resource) => resource.id as string))

const identifier = (system: string) => [{ system: `urn:results:${system}`, value: "1" }]

/** A patient of the test `system`, with the elements given. */
const patient = (system: string, elements: Record<string, unknown> = {}) =>
  Effect.map(create({ resourceType: "Patient", identifier: identifier(system), ...elements }), (json) => json.id as string)

const observation = (system: string, elements: Record<string, unknown> = {}) =>
  Effect.map(create({ resourceType: "Observation", identifier: identifier(system), status: "final", code: { text: "weight" }, ...elements }), (json) => json.id as string)

const of = (system: string) => `identifier=${encodeURIComponent(`urn:results:${system}|1`)}`

const backendsUnderTest: ReadonlyArray<{ readonly kind: BackendKind; readonly skip: boolean }> = [
  { kind: "sqlite", skip: false },
  { kind: "postgres", skip: !pgAvailable }
]

for (const backend of backendsUnderTest) {
  describe.skipIf(skipRealPackages || backend.skip)(`search results on ${backend.kind} (R4 catalog)`, () => {
    layer(
      Layer.scoped(Server, startServer(backend.kind, { conformance: { package_registry: registryUrl ?? "", package_cache: realPackageCache } })),
      { timeout: 300_000, excludeTestServices: true }
    )((it) => {
      it.effect("sorts by a string, accents and case aside, by each resource's smallest value ascending and largest descending, missing last", () =>
        Effect.gen(function*() {
          const zeta = yield* patient("family", { name: [{ family: "Zeta" }] })
          const none = yield* patient("family")
          const alpha = yield* patient("family", { name: [{ family: "alpha" }] })
          const emile = yield* patient("family", { name: [{ family: "Émile" }] })
          const both = yield* patient("family", { name: [{ family: "Aaron" }, { family: "Zz" }] })
          const beta = yield* patient("family", { name: [{ family: "Beta" }] })
          expect(yield* order(`Patient?${of("family")}&_sort=family`)).toEqual([both, alpha, beta, emile, zeta, none])
          expect(yield* order(`Patient?${of("family")}&_sort=-family`)).toEqual([both, zeta, emile, beta, alpha, none])
        }))

      it.effect("sorts by a date of any precision: ascending by where it starts, descending by where it ends", () =>
        Effect.gen(function*() {
          const day = yield* patient("birthdate", { birthDate: "1980-06-01" })
          const year = yield* patient("birthdate", { birthDate: "1980" })
          const none = yield* patient("birthdate")
          const month = yield* patient("birthdate", { birthDate: "1980-06" })
          const before = yield* patient("birthdate", { birthDate: "1979-12-31" })
          // 1980-06 and 1980-06-01 both start on 1 June: the first created comes first.
          expect(yield* order(`Patient?${of("birthdate")}&_sort=birthdate`)).toEqual([before, year, day, month, none])
          expect(yield* order(`Patient?${of("birthdate")}&_sort=-birthdate`)).toEqual([year, month, day, before, none])
        }))

      it.effect("sorts by a token code and by _id, missing last both ways", () =>
        Effect.gen(function*() {
          const male = yield* patient("gender", { gender: "male" })
          const none = yield* patient("gender")
          const unknown = yield* patient("gender", { gender: "unknown" })
          const female = yield* patient("gender", { gender: "female" })
          const other = yield* patient("gender", { gender: "other" })
          expect(yield* order(`Patient?${of("gender")}&_sort=gender`)).toEqual([female, male, other, unknown, none])
          expect(yield* order(`Patient?${of("gender")}&_sort=-gender`)).toEqual([unknown, other, male, female, none])
          const ids = [male, none, unknown, female, other].sort()
          expect(yield* order(`Patient?${of("gender")}&_sort=_id`)).toEqual(ids)
          expect(yield* order(`Patient?${of("gender")}&_sort=-_id`)).toEqual([...ids].reverse())
        }))

      it.effect("sorts quantities by their value in base units, and numbers by value", () =>
        Effect.gen(function*() {
          const quantity = (value: number, code: string) => ({ valueQuantity: { value, unit: code, system: "http://unitsofmeasure.org", code } })
          const gram = yield* observation("quantity", quantity(1, "g"))
          const mg900 = yield* observation("quantity", quantity(900, "mg"))
          const none = yield* observation("quantity", { valueString: "not measured" })
          const mg50 = yield* observation("quantity", quantity(50, "mg"))
          const kg = yield* observation("quantity", quantity(0.002, "kg"))
          expect(yield* order(`Observation?${of("quantity")}&_sort=value-quantity`)).toEqual([mg50, mg900, gram, kg, none])
          expect(yield* order(`Observation?${of("quantity")}&_sort=-value-quantity`)).toEqual([kg, gram, mg900, mg50, none])

          const subject = { reference: `Patient/${yield* patient("probability")}` }
          const risk = (probability: ReadonlyArray<number>) =>
            Effect.map(create({
              resourceType: "RiskAssessment",
              identifier: identifier("probability"),
              status: "final",
              subject,
              ...(probability.length === 0 ? {} : { prediction: probability.map((p) => ({ probabilityDecimal: p })) })
            }), (json) => json.id as string)
          const high = yield* risk([0.9])
          const spread = yield* risk([0.05, 0.95])
          const none2 = yield* risk([])
          const low = yield* risk([0.2])
          expect(yield* order(`RiskAssessment?${of("probability")}&_sort=probability`)).toEqual([spread, low, high, none2])
          expect(yield* order(`RiskAssessment?${of("probability")}&_sort=-probability`)).toEqual([spread, high, low, none2])
        }))

      it.effect("sorts by a reference's target, Type/id", () =>
        Effect.gen(function*() {
          const patients = [yield* patient("subject"), yield* patient("subject"), yield* patient("subject")]
          const made: Array<{ id: string; target: string }> = []
          for (const target of [patients[1]!, patients[0]!, patients[2]!]) {
            made.push({ id: yield* observation("subject", { subject: { reference: `Patient/${target}` } }), target: `Patient/${target}` })
          }
          const none = yield* observation("subject")
          const byTarget = [...made].sort((a, b) => (a.target < b.target ? -1 : a.target > b.target ? 1 : 0)).map((m) => m.id)
          expect(yield* order(`Observation?${of("subject")}&_sort=subject`)).toEqual([...byTarget, none])
          expect(yield* order(`Observation?${of("subject")}&_sort=-subject`)).toEqual([...[...byTarget].reverse(), none])
        }))

      it.effect("sorts by several keys, each in its own direction", () =>
        Effect.gen(function*() {
          const maleNone = yield* patient("keys", { gender: "male" })
          const female1980 = yield* patient("keys", { gender: "female", birthDate: "1980-01-01" })
          const male1985 = yield* patient("keys", { gender: "male", birthDate: "1985-01-01" })
          const female1990 = yield* patient("keys", { gender: "female", birthDate: "1990-01-01" })
          const none1970 = yield* patient("keys", { birthDate: "1970-01-01" })
          expect(yield* order(`Patient?${of("keys")}&_sort=gender,-birthdate`)).toEqual([female1990, female1980, male1985, maleNone, none1970])
          expect(yield* order(`Patient?${of("keys")}&_sort=-birthdate,gender`)).toEqual([female1990, male1985, female1980, none1970, maleNone])
          // Repeated _sort parameters add keys in order.
          expect(yield* order(`Patient?${of("keys")}&_sort=gender&_sort=-birthdate`)).toEqual([female1990, female1980, male1985, maleNone, none1970])
        }))

      it.effect("pages through a sorted result with ties and missing values, without repeats or gaps", () =>
        Effect.gen(function*() {
          const families = ["Moss", "Abbot", "Moss", "Lee", "Zhu", "Abbot", "Moss", "Lee"]
          for (const family of families) yield* patient("paging", { name: [{ family }] })
          for (let i = 0; i < 3; i++) yield* patient("paging")
          const { base } = yield* Server
          const whole = yield* order(`Patient?${of("paging")}&_sort=-family&_count=100`)
          expect(whole.length).toBe(11)
          const seen: Array<string> = []
          let next: string | undefined = `${base}/Patient?${of("paging")}&_sort=-family&_count=3`
          let pages = 0
          while (next !== undefined) {
            const page: any = yield* search(next.slice(base.length + 1))
            seen.push(...matches(page).map((resource) => resource.id))
            next = page.link.find((l: any) => l.relation === "next")?.url
            pages++
          }
          expect(pages).toBe(4)
          expect(seen).toEqual(whole)
          const named = (yield* search(`Patient?${of("paging")}&_sort=-family&_count=100`))
          expect(matches(named).map((resource) => resource.name?.[0]?.family)).toEqual(
            ["Zhu", "Moss", "Moss", "Moss", "Lee", "Lee", "Abbot", "Abbot", undefined, undefined, undefined]
          )
        }))

      it.effect("answers _sort on a composite parameter with 501", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const reply = yield* call("GET", `${base}/Observation?_sort=code-value-quantity`)
          expect(reply.status).toBe(501)
          expect(reply.json.issue[0].diagnostics).toContain("code-value-quantity")
        }))
    })
  })
}
