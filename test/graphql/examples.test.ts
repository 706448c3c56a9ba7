/**
 * FHIR GraphQL on the R4 examples (https://hl7.org/fhir/R4/graphql.html), over HTTP on SQLite and Postgres:
 * Patient/example, Observation/example, the glossy patient and the long List, stored as the examples package
 * holds them, and asked the page's own queries at `[base]/{type}/{id}/$graphql` and `/graphql`: field selection,
 * primitives' `_` fields, list filters, `_offset`/`_count` on a long list, references (and a broken one), type
 * selection by fragment and by `resource(type: ...)`, and errors.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { type BackendKind } from "../support/backends.ts"
import { skipRealPackages } from "../support/npmRegistry.ts"
import { readR4Examples } from "../support/r4Examples.ts"
import { call, type TestServer } from "../support/server.ts"
import { backendsUnderTest, packagesServer } from "./servers.ts"

class Server extends Context.Tag("test/GraphQLExamplesServer")<Server, TestServer>() {}

const files = ["Patient-example.json", "Patient-glossy.json", "Observation-example.json", "List-long.json"]
const examples = skipRealPackages ? undefined : await readR4Examples("GraphQL examples tests", files)

/** The server with the four examples stored under their own ids. */
const serverWithExamples = (kind: BackendKind) =>
  Effect.gen(function*() {
    const server = yield* packagesServer(kind, { update_as_create: true, reference_policy: "fhir" })
    for (const resource of examples ?? []) {
      const stored = yield* call("PUT", `${server.base}/${String(resource["resourceType"])}/${String(resource["id"])}`, { body: resource })
      expect([resource["id"], stored.status, stored.status === 201 ? "" : JSON.stringify(stored.json)]).toEqual([resource["id"], 201, ""])
    }
    return server
  })

for (const backend of backendsUnderTest) {
  describe.skipIf(examples === undefined || backend.skip)(`FHIR GraphQL on the R4 examples, ${backend.kind}`, () => {
    layer(Layer.scoped(Server, serverWithExamples(backend.kind)), { timeout: 600_000, excludeTestServices: true })((it) => {
      const onInstance = (path: string, query: string) =>
        Effect.flatMap(Server, ({ base }) => call("GET", `${base}/${path}/$graphql?query=${encodeURIComponent(query)}`))

      it.effect("selects Patient/example's fields, its primitives' extensions, and the names a filter keeps", () =>
        Effect.gen(function*() {
          const names = yield* onInstance("Patient/example", "{ name { text given family } }")
          expect(names.json).toEqual({
            data: {
              name: [
                { text: null, given: ["Peter", "James"], family: "Chalmers" },
                { text: null, given: ["Jim"], family: null },
                { text: null, given: ["Peter", "James"], family: "Windsor" }
              ]
            }
          })
          const withFamily = yield* onInstance("Patient/example", `{ name(fhirpath: "family.exists()") { given family } }`)
          expect(withFamily.json.data.name.map((name: any) => name.family)).toEqual(["Chalmers", "Windsor"])
          const official = yield* onInstance("Patient/example", "{ name(use: official) { given family } }")
          expect(official.json).toEqual({ data: { name: [{ given: ["Peter", "James"], family: "Chalmers" }] } })
          const birth = yield* onInstance("Patient/example", "{ birthDate _birthDate { extension { url valueDateTime } } }")
          expect(birth.json).toEqual({
            data: {
              birthDate: "1974-12-25",
              _birthDate: { extension: [{ url: "http://hl7.org/fhir/StructureDefinition/patient-birthTime", valueDateTime: "1974-12-25T14:35:45-05:00" }] }
            }
          })
        }))

      it.effect("reads the glossy patient: its extension by url, coded identifier, narrative and references with their display", () =>
        Effect.gen(function*() {
          const reply = yield* onInstance("Patient/glossy", `{
            trials: extension(url: "http://example.org/StructureDefinition/trials") { value: valueCode }
            identifier { use type { coding { system code } } system value }
            name { family given suffix }
            text { status }
            generalPractitioner { display resource(optional: true) { ... on Practitioner { id } } }
            managingOrganization { reference display }
          }`)
          expect(reply.json).toEqual({
            data: {
              trials: [{ value: "renal" }],
              identifier: [{ use: "usual", type: { coding: [{ system: "http://terminology.hl7.org/CodeSystem/v2-0203", code: "MR" }] }, system: "http://www.goodhealth.org/identifiers/mrn", value: "123456" }],
              name: [{ family: "Levin", given: ["Henry"], suffix: ["The 7th"] }],
              text: { status: "generated" },
              generalPractitioner: [{ display: "Dr Adam Careful", resource: null }],
              managingOrganization: { reference: "Organization/2", display: "Good Health Clinic" }
            }
          })
        }))

      it.effect("resolves Observation/example's subject by type, and says which reference is broken", () =>
        Effect.gen(function*() {
          const reply = yield* onInstance("Observation/example", `{
            id
            subject { reference resource { ... on Patient { birthDate } ... on Group { name } } }
            code { coding(system: "http://loinc.org") { code display } }
            valueQuantity { value unit }
            encounter { reference resource { ... on Encounter { status } } }
          }`)
          expect(reply.json.data).toEqual({
            id: "example",
            subject: { reference: "Patient/example", resource: { birthDate: "1974-12-25" } },
            code: { coding: [{ code: "29463-7", display: "Body Weight" }, { code: "3141-9", display: "Body weight Measured" }] },
            valueQuantity: { value: 185, unit: "lbs" },
            encounter: { reference: "Encounter/example", resource: null }
          })
          expect(reply.json.errors).toEqual([{
            message: "Encounter/example is not known",
            locations: [expect.any(Object)],
            path: ["encounter", "resource"],
            extensions: { resource: { resourceType: "OperationOutcome", issue: [{ severity: "error", code: "not-found", diagnostics: "Encounter/example is not known" }] } }
          }])
          // The denser form: resource(type: ...) selects that type's fields, and ignores a reference to another type.
          const typed = yield* onInstance("Observation/example", `{
            subject { reference asPatient: resource(type: Patient) { birthDate } asGroup: resource(type: Group) { name } }
            encounter { resource(type: Patient) { birthDate } }
          }`)
          expect(typed.json).toEqual({
            data: { subject: { reference: "Patient/example", asPatient: { birthDate: "1974-12-25" }, asGroup: null }, encounter: { resource: null } }
          })
        }))

      it.effect("reads the long List a window at a time (_offset, _count), its items' references resolved where they can be", () =>
        Effect.gen(function*() {
          const window = yield* onInstance("List/long", "{ entry(_count: 5, _offset: 5) { deleted item { reference } } }")
          const all = examples!.find((resource) => resource["id"] === "long")!["entry"] as ReadonlyArray<{ readonly item: { readonly reference: string } }>
          expect(all.length).toBeGreaterThan(200)
          expect(window.json).toEqual({ data: { entry: all.slice(5, 10).map((entry) => ({ deleted: null, item: { reference: entry.item.reference } })) } })
          const past = yield* onInstance("List/long", `{ entry(_offset: ${all.length}) { item { reference } } }`)
          expect(past.json).toEqual({ data: { entry: [] } })
          const first = yield* onInstance("List/long", "{ entry(_count: 2) { item { reference resource(optional: true) { ... on Patient { birthDate } } } } }")
          expect(first.json).toEqual({
            data: { entry: [{ item: { reference: "Patient/example", resource: { birthDate: "1974-12-25" } } }, { item: { reference: all[1]!.item.reference, resource: null } }] }
          })
        }))

      it.effect("answers the query root's forms at /graphql, and an unknown field as an error", () =>
        Effect.gen(function*() {
          const { url } = yield* Server
          const ask = (query: string) => call("POST", `${url}/graphql`, { body: JSON.stringify({ query }), headers: { "content-type": "application/json" } })
          const reply = yield* ask(`{ Patient(id: example) { id active } ObservationList(patient: example) { id } }`)
          expect(reply.json).toEqual({ data: { Patient: { id: "example", active: true }, ObservationList: [{ id: "example" }] } })
          const unknown = yield* ask(`{ Patient(id: "glossy") { name { nickname } } }`)
          expect(unknown.json).toEqual({
            errors: [{ message: 'Cannot query field "nickname" on type "HumanName".', locations: [expect.any(Object)], extensions: { resource: { resourceType: "OperationOutcome", issue: [{ severity: "error", code: "invalid", diagnostics: 'Cannot query field "nickname" on type "HumanName".' }] } } }]
          })
        }))
    })
  })
}
