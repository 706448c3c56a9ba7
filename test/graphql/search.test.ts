/**
 * GraphQL's searches over HTTP on SQLite and Postgres with the real R4 packages (docs/graphql.md, "Searches"):
 * `TypeConnection` with its counts and cursors, a `TypeList` that would be cut short, reverse references
 * (`ObservationList(_reference: subject)` inside a Patient), the field arguments that select a list's items
 * (`name(use: official)`, `fhirpath`, `_offset`/`_count`), and FHIR GraphQL's bare names and lists as argument values.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { skipRealPackages } from "../support/npmRegistry.ts"
import { call, type TestServer } from "../support/server.ts"
import { backendsUnderTest, packagesServer } from "./servers.ts"

class Server extends Context.Tag("test/GraphQLSearchServer")<Server, TestServer>() {}

const errorsOf = (reply: { readonly json: any }): ReadonlyArray<string> => (reply.json.errors ?? []).map((error: any) => error.message)

for (const backend of backendsUnderTest) {
  describe.skipIf(skipRealPackages || backend.skip)(`GraphQL searches on ${backend.kind}`, () => {
    layer(
      Layer.scoped(Server, packagesServer(backend.kind)),
      { timeout: 600_000, excludeTestServices: true }
    )((it) => {
      const ask = (query: string, variables?: Record<string, unknown>) =>
        Effect.flatMap(Server, ({ url }) => call("POST", `${url}/graphql`, { body: JSON.stringify({ query, variables }), headers: { "content-type": "application/json" } }))
      const create = (resource: Record<string, unknown>) =>
        Effect.flatMap(Server, ({ base }) =>
          Effect.map(call("POST", `${base}/${String(resource["resourceType"])}`, { body: resource }), (reply) => {
            expect(reply.status).toBe(201)
            return reply.json.id as string
          }))

      it.effect("pages a search as a connection: count, offset, page size, edges, and cursors that lead through it", () =>
        Effect.gen(function*() {
          const ids: Array<string> = []
          for (let i = 0; i < 5; i++) ids.push(yield* create({ resourceType: "Patient", name: [{ family: "Connected" }], birthDate: `198${i}-01-01` }))
          const first = yield* ask(`{ PatientConnection(family: "Connected", _sort: "birthdate", _count: 2) {
            count offset pagesize first previous next last edges { mode score resource { id birthDate } } } }`)
          expect(errorsOf(first)).toEqual([])
          const page = first.json.data.PatientConnection
          expect([page.count, page.offset, page.pagesize, page.previous]).toEqual([5, 0, 2, null])
          expect(page.edges).toEqual([
            { mode: "match", score: null, resource: { id: ids[0], birthDate: "1980-01-01" } },
            { mode: "match", score: null, resource: { id: ids[1], birthDate: "1981-01-01" } }
          ])
          const follow = (cursor: string) => ask(`query($c: String) { PatientConnection(_cursor: $c) { offset previous next edges { resource { id } } } }`, { c: cursor })
          const second = (yield* follow(page.next)).json.data.PatientConnection
          expect(second.edges.map((edge: any) => edge.resource.id)).toEqual([ids[2], ids[3]])
          const third = (yield* follow(second.next)).json.data.PatientConnection
          expect([third.edges.map((edge: any) => edge.resource.id), third.next]).toEqual([[ids[4]], null])
          const back = (yield* follow(third.previous)).json.data.PatientConnection
          expect(back.edges.map((edge: any) => edge.resource.id)).toEqual([ids[2], ids[3]])
          const last = (yield* follow(page.last)).json.data.PatientConnection
          expect([last.offset, last.edges.map((edge: any) => edge.resource.id)]).toEqual([4, [ids[4]]])
          const restart = (yield* follow(third.previous)).json.data.PatientConnection
          expect(restart.edges).toHaveLength(2)
          // A cursor carries its search: nothing else goes with it, and one of another type is refused.
          const mixed = yield* ask(`query($c: String) { PatientConnection(_cursor: $c, family: "Other") { count } }`, { c: page.next })
          expect(errorsOf(mixed)).toEqual(["a cursor carries its search: give _cursor alone, not with family"])
          const foreign = yield* ask(`query($c: String) { ObservationConnection(_cursor: $c) { count } }`, { c: page.next })
          expect(errorsOf(foreign)[0]).toMatch(/not a cursor of a Observation search/)
        }))

      it.effect("lists every match, or says the list would be cut short; _count and _offset give a window", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const entries = Array.from({ length: 1001 }, () => ({
            resource: { resourceType: "Patient", name: [{ family: "Crowd" }] },
            request: { method: "POST", url: "Patient" }
          }))
          const bundle = yield* call("POST", base, { body: { resourceType: "Bundle", type: "transaction", entry: entries } })
          expect(bundle.status).toBe(200)
          const all = yield* ask(`{ PatientList(family: "Crowd") { id } }`)
          expect(all.json.data).toEqual({ PatientList: null })
          expect(errorsOf(all)[0]).toMatch(/matches more than 1000 Patient resources/)
          const window = yield* ask(`{ PatientList(family: "Crowd", _count: 3, _offset: 999) { id } }`)
          expect(window.json.data.PatientList).toHaveLength(2)
          const counted = yield* ask(`{ PatientConnection(family: "Crowd", _count: 0) { count edges { resource { id } } } }`)
          expect(counted.json.data.PatientConnection).toEqual({ count: 1001, edges: [] })
        }))

      it.effect("follows references backwards: the resources whose reference parameter points at this one", () =>
        Effect.gen(function*() {
          const patient = yield* create({ resourceType: "Patient", name: [{ family: "Reversed" }] })
          const other = yield* create({ resourceType: "Patient", name: [{ family: "Elsewhere" }] })
          const codes = ["8867-4", "8310-5", "29463-7"]
          const observations: Array<string> = []
          for (const [i, code] of codes.entries()) {
            observations.push(yield* create({
              resourceType: "Observation",
              status: "final",
              code: { coding: [{ system: "http://loinc.org", code }] },
              subject: { reference: `Patient/${patient}` },
              effectiveDateTime: `2020-01-0${i + 1}`
            }))
          }
          yield* create({ resourceType: "Observation", status: "final", code: { text: "not this one" }, subject: { reference: `Patient/${other}` } })
          const reply = yield* ask(`{ Patient(id: "${patient}") {
            name { family }
            ObservationList(_reference: subject, _sort: "date") { id code { coding { code } } }
            ObservationConnection(_reference: patient, _count: 2, _sort: "-date") { count next edges { resource { id } } }
            ConditionList(_reference: subject) { id }
            coded: ObservationList(_reference: patient, _filter: "code eq http://loinc.org|8310-5") { id }
          } }`)
          expect(errorsOf(reply)).toEqual([])
          const found = reply.json.data.Patient
          expect(found.name).toEqual([{ family: "Reversed" }])
          expect(found.ObservationList).toEqual(observations.map((id, i) => ({ id, code: { coding: [{ code: codes[i] }] } })))
          expect(found.ObservationConnection.count).toBe(3)
          expect(found.ObservationConnection.edges.map((edge: any) => edge.resource.id)).toEqual([observations[2], observations[1]])
          expect(found.ConditionList).toEqual([])
          expect(found.coded).toEqual([{ id: observations[1] }])
          // The cursor of a nested connection is followed at the root.
          const next = yield* ask(`query($c: String) { ObservationConnection(_cursor: $c) { edges { resource { id } } } }`, { c: found.ObservationConnection.next })
          expect(next.json.data.ObservationConnection.edges).toEqual([{ resource: { id: observations[0] } }])
          const wrong = yield* ask(`{ Patient(id: "${patient}") { ObservationList(_reference: specimen) { id } } }`)
          expect(wrong.json.data).toEqual({ Patient: { ObservationList: null } })
          expect(errorsOf(wrong)[0]).toMatch(/_reference: 'specimen' is not a search parameter of Observation that refers to Patient \(it is one of .*subject/)
          const missing = yield* ask(`{ Patient(id: "${patient}") { ObservationList { id } } }`)
          expect(errorsOf(missing)[0]).toMatch(/argument "_reference" of type "String!" is required/)
        }))

      it.effect("selects a list's items by a sub-element's value, by FHIRPath, and by _offset and _count", () =>
        Effect.gen(function*() {
          const id = yield* create({
            resourceType: "Patient",
            name: [
              { use: "official", family: "Chalmers", given: ["Peter", "James"] },
              { use: "usual", given: ["Jim"] },
              { use: "maiden", family: "Windsor", given: ["Peter", "James"] }
            ],
            extension: [
              { url: "http://example.org/colour", valueString: "blue" },
              { url: "http://example.org/size", valueInteger: 3 }
            ]
          })
          const reply = yield* ask(`{ Patient(id: "${id}") {
            official: name(use: official) { family }
            quoted: name(use: "maiden") { family }
            withFamily: name(fhirpath: "family.exists()") { use }
            jim: name(given: "Jim") { use }
            window: name(_offset: 1, _count: 1) { use }
            filteredWindow: name(fhirpath: "family.exists()", _offset: 1) { use }
            colour: extension(url: "http://example.org/colour") { value: valueString }
          } }`)
          expect(errorsOf(reply)).toEqual([])
          expect(reply.json.data.Patient).toEqual({
            official: [{ family: "Chalmers" }],
            quoted: [{ family: "Windsor" }],
            withFamily: [{ use: "official" }, { use: "maiden" }],
            jim: [{ use: "usual" }],
            window: [{ use: "usual" }],
            filteredWindow: [{ use: "maiden" }],
            colour: [{ value: "blue" }]
          })
          const broken = yield* ask(`{ Patient(id: "${id}") { name(fhirpath: "family.(") { use } } }`)
          expect(broken.json.data).toEqual({ Patient: { name: null } })
          expect(errorsOf(broken)[0]).toMatch(/^fhirpath: "family\.\(" cannot be read/)
          const primitive = yield* ask(`{ Patient(id: "${id}") { birthDate(use: official) } }`)
          expect(errorsOf(primitive)).toEqual(['Unknown argument "use" on field "Patient.birthDate".'])
        }))

      it.effect("reads FHIR GraphQL's bare names and lists of alternatives as search values", () =>
        Effect.gen(function*() {
          const a = yield* create({ resourceType: "Patient", gender: "female", name: [{ family: "Literal" }] })
          const b = yield* create({ resourceType: "Patient", gender: "male", name: [{ family: "Literal" }] })
          yield* create({ resourceType: "Patient", gender: "other", name: [{ family: "Literal" }] })
          const bare = yield* ask(`{ PatientList(family: Literal, gender: male) { id } }`)
          expect(bare.json).toEqual({ data: { PatientList: [{ id: b }] } })
          const alternatives = yield* ask(`{ PatientList(_id: ["${a}", "${b}"], _sort: "gender") { id } }`)
          expect(alternatives.json).toEqual({ data: { PatientList: [{ id: a }, { id: b }] } })
          const variable = yield* ask(`query($g: String) { PatientList(family: "Literal", gender: $g) { id } }`, { g: "female" })
          expect(variable.json).toEqual({ data: { PatientList: [{ id: a }] } })
          const matching = yield* ask(`{ PatientList(family: "Literal", fhirpath: "gender = 'other'") { gender } }`)
          expect(matching.json).toEqual({ data: { PatientList: [{ gender: "other" }] } })
        }))
    })
  })
}
