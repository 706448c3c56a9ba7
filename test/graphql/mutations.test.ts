/**
 * FHIR GraphQL mutations (src/graphql/mutations.ts, writes.ts; docs/graphql.md, "Mutations"): their input types
 * made from the output types of the R4 catalog, and, on the real server on SQLite and Postgres with the real R4
 * packages, `TypeCreate`, `TypeUpdate` and `TypeDelete` as a REST client then sees them (read, history, 410), what
 * they refuse (validation, a resourceType or id that disagrees, an unknown input field, a mutation by GET), and
 * under `--smart` the token's write scopes and a patient token's compartment.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { getNamedType, type GraphQLInputObjectType, type GraphQLObjectType } from "graphql"
import { beforeAll, it as plainIt } from "vitest"
import type { Catalog } from "../../src/catalog/Catalog.ts"
import { buildSchema } from "../../src/graphql/schema.ts"
import { skipRealPackages } from "../support/npmRegistry.ts"
import { call, type TestServer } from "../support/server.ts"
import { launchToken, systemToken } from "../support/smartTokens.ts"
import { loadCatalog } from "../validation/support.ts"
import { backendsUnderTest, packagesServer, smartPackagesServer } from "./servers.ts"

let catalog: Catalog | undefined
beforeAll(async () => {
  catalog = await loadCatalog()
}, 300_000)

describe("the mutation input types of the R4 catalog", () => {
  plainIt("match the output types field for field, with a scalar for Resource and no input for Reference.resource or reverse references", () => {
    if (catalog === undefined) return
    const schema = buildSchema(catalog)
    const input = (name: string) => (schema.getType(name) as GraphQLInputObjectType).getFields()
    const output = (name: string) => (schema.getType(name) as GraphQLObjectType).getFields()
    const patient = input("PatientInput")
    // The reverse references (ObservationList...) are searches, not elements: they have no input.
    expect(Object.keys(patient)).toEqual(Object.keys(output("Patient")).filter((name) => !/^[A-Z]/.test(name)))
    expect(Object.keys(patient)).not.toContain("ObservationList")
    expect(String(patient["resourceType"]!.type)).toBe("String")
    expect(String(patient["name"]!.type)).toBe("[HumanNameInput]")
    expect(String(patient["_birthDate"]!.type)).toBe("ElementInput")
    expect(String(patient["multipleBirthInteger"]!.type)).toBe("Int")
    expect(String(patient["contact"]!.type)).toBe("[PatientContactInput]")
    expect(String(patient["contained"]!.type)).toBe("[ResourceInput]")
    expect(String(input("ObservationInput")["valueQuantity"]!.type)).toBe("QuantityInput")
    expect(String(input("BundleEntryInput")["resource"]!.type)).toBe("ResourceInput")
    expect(Object.keys(input("ReferenceInput"))).toEqual(Object.keys(output("Reference")).filter((name) => name !== "resource"))
    // Task.input is the output type TaskInput: Task's input type is Task_Input, Task.input's TaskInputInput.
    expect(String(input("Task_Input")["input"]!.type)).toBe("[TaskInputInput]")
    const mutations = schema.getMutationType()!.getFields()
    expect(Object.keys(mutations).length).toBe(3 * catalog.resourceTypes.length)
    expect(mutations["PatientCreate"]!.args.map((arg) => `${arg.name}: ${String(arg.type)}`)).toEqual(["res: PatientInput!"])
    expect(mutations["TaskUpdate"]!.args.map((arg) => `${arg.name}: ${String(arg.type)}`)).toEqual(["id: ID!", "res: Task_Input!"])
    expect([String(mutations["PatientCreate"]!.type), String(mutations["PatientUpdate"]!.type), getNamedType(mutations["PatientDelete"]!.type).name])
      .toEqual(["Patient", "Patient", "OperationOutcome"])
  })
})

class Server extends Context.Tag("test/GraphQLMutationServer")<Server, TestServer>() {}

const json = { "content-type": "application/json" }

for (const backend of backendsUnderTest) {
  describe.skipIf(skipRealPackages || backend.skip)(`GraphQL mutations on ${backend.kind}`, () => {
    layer(
      Layer.scoped(Server, packagesServer(backend.kind)),
      { timeout: 600_000, excludeTestServices: true }
    )((it) => {
      const mutate = (url: string, query: string, variables?: Record<string, unknown>) =>
        call("POST", `${url}/graphql`, { body: JSON.stringify({ query, ...(variables === undefined ? {} : { variables }) }), headers: json })

      it.effect("creates, updates and deletes as REST does: read back, versions in the history, 410 once deleted", () =>
        Effect.gen(function*() {
          const { base, url } = yield* Server
          const requestId = `graphql-mutation-${Date.now()}`
          const created = yield* call("POST", `${url}/graphql`, {
            body: JSON.stringify({
              query: `mutation {
                PatientCreate(res: { resourceType: "Patient", id: "ignored", active: true, name: [{ family: "Mutated", given: ["Graph"] }], birthDate: "1975-05-05" }) {
                  resourceType id meta { versionId } active name { family given } birthDate
                }
              }`
            }),
            headers: { ...json, "x-request-id": requestId }
          })
          expect(created.status).toBe(200)
          expect(created.json.errors).toBeUndefined()
          const patient = created.json.data.PatientCreate
          expect(patient).toEqual({
            resourceType: "Patient",
            id: expect.any(String),
            meta: { versionId: "1" },
            active: true,
            name: [{ family: "Mutated", given: ["Graph"] }],
            birthDate: "1975-05-05"
          })
          expect(patient.id).not.toBe("ignored")
          expect(created.headers.get("x-svc-commit-ts")).toMatch(/^\d+$/)
          const read = yield* call("GET", `${base}/Patient/${patient.id}`)
          expect(read.status).toBe(200)
          expect(read.json).toEqual({ ...patient, meta: { versionId: "1", lastUpdated: expect.any(String) } })
          // In the audit trail as a create made by this request.
          const audit = yield* call("GET", `${url}/_audit?_count=1000`)
          const events = (audit.json.entry ?? []).map((entry: any) => entry.resource)
            .filter((event: any) => (event.entity ?? []).some((entity: any) => entity.what?.identifier?.value === requestId))
          expect(events.map((event: any) => event.subtype[0].code).sort()).toEqual(["create", "graphql"])
          expect(events.find((event: any) => event.subtype[0].code === "create").entity[0].what.reference).toBe(`Patient/${patient.id}/_history/1`)

          const updated = yield* mutate(url, `mutation Update($id: ID!, $res: PatientInput!) { PatientUpdate(id: $id, res: $res) { id meta { versionId } birthDate gender } }`, {
            id: patient.id,
            res: { name: [{ family: "Mutated" }], birthDate: "1976-06-06", gender: "female", active: null }
          })
          expect(updated.json).toEqual({ data: { PatientUpdate: { id: patient.id, meta: { versionId: "2" }, birthDate: "1976-06-06", gender: "female" } } })
          const reread = yield* call("GET", `${base}/Patient/${patient.id}`)
          expect(reread.json).toEqual({
            resourceType: "Patient",
            id: patient.id,
            meta: { versionId: "2", lastUpdated: expect.any(String) },
            name: [{ family: "Mutated" }],
            gender: "female",
            birthDate: "1976-06-06"
          })

          const deleted = yield* mutate(url, `mutation { PatientDelete(id: "${patient.id}") { resourceType issue { severity code diagnostics } } }`)
          expect(deleted.json).toEqual({
            data: { PatientDelete: { resourceType: "OperationOutcome", issue: [{ severity: "information", code: "informational", diagnostics: `deleted Patient/${patient.id} (version 3)` }] } }
          })
          expect((yield* call("GET", `${base}/Patient/${patient.id}`)).status).toBe(410)
          const history = yield* call("GET", `${base}/Patient/${patient.id}/_history`)
          expect(history.json.entry.map((entry: any) => [entry.request.method, entry.resource?.meta.versionId ?? entry.response.etag]))
            .toEqual([["DELETE", 'W/"3"'], ["PUT", "2"], ["POST", "1"]])
        }))

      it.effect("writes choice elements, primitives' extensions and contained resources as FHIR JSON has them", () =>
        Effect.gen(function*() {
          const { base, url } = yield* Server
          const res = {
            status: "final",
            _status: { extension: [{ url: "http://example.org/fhir/StructureDefinition/checked", valueBoolean: true }] },
            code: { text: "weight" },
            contained: [{ resourceType: "Practitioner", id: "weigher", name: [{ family: "Inside" }] }],
            performer: [{ reference: "#weigher" }],
            valueQuantity: { value: 72.5, unit: "kg", system: "http://unitsofmeasure.org", code: "kg" }
          }
          const created = yield* mutate(url, `mutation Create($res: ObservationInput!) {
            ObservationCreate(res: $res) { id valueQuantity { value } contained { ... on Practitioner { name { family } } } }
          }`, { res })
          expect(created.json.errors).toBeUndefined()
          const observation = created.json.data.ObservationCreate
          expect(observation).toEqual({ id: expect.any(String), valueQuantity: { value: 72.5 }, contained: [{ name: [{ family: "Inside" }] }] })
          const read = yield* call("GET", `${base}/Observation/${observation.id}`)
          expect(read.json).toEqual({ resourceType: "Observation", id: observation.id, meta: expect.any(Object), ...res })
          // The same in the query text itself.
          const literal = yield* mutate(url, `mutation {
            ObservationCreate(res: { status: "final", code: { text: "weight" }, contained: [{ resourceType: "Practitioner", id: "w", name: [{ family: "Lit" }] }],
              performer: [{ reference: "#w" }], valueString: "heavy" }) { id }
          }`)
          const again = yield* call("GET", `${base}/Observation/${literal.json.data.ObservationCreate.id}`)
          expect([again.json.contained, again.json.valueString]).toEqual([[{ resourceType: "Practitioner", id: "w", name: [{ family: "Lit" }] }], "heavy"])
        }))

      it.effect("refuses what it cannot write, writing nothing: an invalid resource, another type or id, an unknown field or id", () =>
        Effect.gen(function*() {
          const { base, url } = yield* Server
          const invalid = yield* mutate(url, `mutation { PatientCreate(res: { name: [{ family: "Refused-Mutation" }], birthDate: "someday" }) { id } }`)
          expect(invalid.status).toBe(200)
          expect(invalid.json.data).toEqual({ PatientCreate: null })
          expect(invalid.json.errors).toHaveLength(1)
          expect(invalid.json.errors[0].message).toMatch(/^Patient\/[^ ]+ is not valid: 1 error, the first: .*someday/)
          expect(invalid.json.errors[0].path).toEqual(["PatientCreate"])
          const outcome = invalid.json.errors[0].extensions.resource
          expect(outcome.resourceType).toBe("OperationOutcome")
          expect(outcome.issue.some((issue: any) => issue.severity === "error" && issue.expression?.[0]?.startsWith("Patient.birthDate"))).toBe(true)
          const found = yield* call("GET", `${base}/Patient?family=Refused-Mutation`)
          expect(found.json.entry ?? []).toEqual([])

          const otherType = yield* mutate(url, `mutation { PatientCreate(res: { resourceType: "Observation" }) { id } }`)
          expect(otherType.json.errors[0].message).toBe("res holds a Observation, but PatientCreate writes a Patient")
          expect(otherType.json.errors[0].extensions.resource.issue[0].code).toBe("invalid")

          const target = yield* call("POST", `${base}/Patient`, { body: { resourceType: "Patient", birthDate: "1999-09-09" } })
          const otherId = yield* mutate(url, `mutation { PatientUpdate(id: "${target.json.id}", res: { id: "elsewhere", birthDate: "2000-01-01" }) { id } }`)
          expect(otherId.json.errors[0].message).toBe(`res has the id "elsewhere", but the mutation's id is "${target.json.id}"`)
          expect((yield* call("GET", `${base}/Patient/${target.json.id}`)).json.birthDate).toBe("1999-09-09")

          const unknownField = yield* mutate(url, `mutation { PatientCreate(res: { colour: "blue" }) { id } }`)
          expect(unknownField.json).toEqual({
            errors: [{ message: 'Field "colour" is not defined by type "PatientInput".', locations: [{ line: 1, column: 33 }], extensions: expect.any(Object) }]
          })
          const notAResource = yield* mutate(url, `mutation Create($res: PatientInput!) { PatientCreate(res: $res) { id } }`, { res: { contained: [{ id: "x" }] } })
          expect(notAResource.json.errors[0].message).toMatch(/ResourceInput.*a resource has the resourceType of a resource type this server knows/)

          const missing = yield* mutate(url, `mutation { PatientUpdate(id: "no-such-patient", res: { active: true }) { id } PatientDelete(id: "no-such-patient") { id } }`)
          expect(missing.json.data).toEqual({ PatientUpdate: null, PatientDelete: null })
          expect(missing.json.errors.map((error: any) => [error.path[0], error.extensions.resource.issue[0].code])).toEqual([
            ["PatientUpdate", "not-supported"],
            ["PatientDelete", "not-found"]
          ])
          expect(missing.json.errors[1].message).toBe("Patient/no-such-patient is not known")

          // Input that nests past what a resource may is refused, not a failure of the server.
          const deep = yield* mutate(url, `mutation Create($res: PatientInput!) { PatientCreate(res: $res) { id } }`, {
            res: { contained: [JSON.parse(`{"resourceType":"Basic",${'"extension":[{"url":"http://example.org/x",'.repeat(300)}"valueString":"x"${"}]".repeat(300)}}`)] }
          })
          expect(deep.status).toBe(200)
          expect(deep.json.errors[0].message).toMatch(/nests deeper than the limit/)
          // Nested past what the engine's stack holds: in the query text, or in the variables.
          const levels = 5000
          const literal = `mutation { PatientCreate(res: { ${'extension: [{ url: "http://example.org/x", '.repeat(levels)}valueString: "x"${" }]".repeat(levels)} }) { id } }`
          const variables = `{${'"extension":[{"url":"http://example.org/x",'.repeat(levels)}"valueString":"x"${"}]".repeat(levels)}}`
          for (const reply of [
            yield* call("POST", `${url}/graphql`, { body: literal, headers: { "content-type": "application/graphql" } }),
            yield* call("POST", `${url}/graphql`, {
              body: `{"query": "mutation Create($res: PatientInput!) { PatientCreate(res: $res) { id } }", "variables": {"res": ${variables}}}`,
              headers: json
            })
          ]) {
            expect([reply.status, reply.json]).toEqual([200, { errors: [{ message: "The query or its variables nest too deeply to be read", extensions: expect.any(Object) }] }])
          }
        }))

      it.effect("refuses a mutation by GET with a 405, Allow: POST", () =>
        Effect.gen(function*() {
          const { base, url } = yield* Server
          const query = `mutation { PatientCreate(res: { name: [{ family: "By-Get" }] }) { id } }`
          const got = yield* call("GET", `${url}/graphql?query=${encodeURIComponent(query)}`)
          expect([got.status, got.headers.get("allow"), got.json.resourceType, got.json.issue[0].code]).toEqual([405, "POST", "OperationOutcome", "not-supported"])
          const named = yield* call("GET", `${url}/graphql?query=${encodeURIComponent(`query Q { PatientList(_count: 1) { id } } ${query.replace("mutation", "mutation M")}`)}&operationName=M`)
          expect(named.status).toBe(405)
          const read = yield* call("GET", `${url}/graphql?query=${encodeURIComponent(`query Q { PatientList(_count: 1) { id } } ${query.replace("mutation", "mutation M")}`)}&operationName=Q`)
          expect(read.status).toBe(200)
          expect((yield* call("GET", `${base}/Patient?family=By-Get`)).json.entry ?? []).toEqual([])
        }))
    })
  })
}

class SmartServer extends Context.Tag("test/GraphQLMutationSmartServer")<SmartServer, { readonly server: TestServer; readonly system: string }>() {}

describe.skipIf(skipRealPackages)("GraphQL mutations under --smart", () => {
  layer(
    Layer.scoped(SmartServer, smartPackagesServer),
    { timeout: 600_000, excludeTestServices: true }
  )((it) => {
    it.effect("writes with the token's write scopes only, a patient token in its compartment only", () =>
      Effect.gen(function*() {
        const { server, system } = yield* SmartServer
        const as = (token: string) => ({ authorization: `Bearer ${token}` })
        const mutate = (query: string, headers: Record<string, string>) =>
          call("POST", `${server.url}/graphql`, { body: JSON.stringify({ query }), headers: { ...json, ...headers } })
        const create = `mutation { PatientCreate(res: { name: [{ family: "Scoped-Mutation" }] }) { id } }`
        expect((yield* mutate(create, {})).status).toBe(401)

        const readOnly = yield* systemToken(server, "system/Patient.rs")
        const refused = yield* mutate(create, as(readOnly))
        expect(refused.json.data).toEqual({ PatientCreate: null })
        expect(refused.json.errors[0].message).toMatch(/^the token's scopes do not allow creating Patient/)
        expect(refused.json.errors[0].extensions.resource.issue[0].code).toBe("forbidden")
        const none = yield* call("GET", `${server.base}/Patient?family=Scoped-Mutation`, { headers: as(system) })
        expect(none.json.entry ?? []).toEqual([])

        const writer = yield* systemToken(server, "system/Patient.cu")
        const allowed = yield* mutate(create, as(writer))
        expect(allowed.json.errors).toBeUndefined()
        const id = allowed.json.data.PatientCreate.id
        const updated = yield* mutate(`mutation { PatientUpdate(id: "${id}", res: { name: [{ family: "Scoped-Mutation" }], active: true }) { meta { versionId } } }`, as(writer))
        expect(updated.json).toEqual({ data: { PatientUpdate: { meta: { versionId: "2" } } } })
        const noDelete = yield* mutate(`mutation { PatientDelete(id: "${id}") { id } }`, as(writer))
        expect(noDelete.json.errors[0].message).toMatch(/^the token's scopes do not allow deleting Patient/)
        expect((yield* call("GET", `${server.base}/Patient/${id}`, { headers: as(system) })).json.meta.versionId).toBe("2")

        // A patient token writes in its patient's compartment only.
        const other = yield* call("POST", `${server.base}/Patient`, { body: { resourceType: "Patient" }, headers: as(system) })
        const own = yield* launchToken(server, id, "launch patient/Observation.cruds")
        const observation = (patient: string) =>
          `mutation { ObservationCreate(res: { status: "final", code: { text: "scoped" }, subject: { reference: "Patient/${patient}" } }) { id subject { reference } } }`
        const inside = yield* mutate(observation(id), as(own))
        expect(inside.json.errors).toBeUndefined()
        expect(inside.json.data.ObservationCreate.subject).toEqual({ reference: `Patient/${id}` })
        const outside = yield* mutate(observation(other.json.id), as(own))
        expect(outside.json.data).toEqual({ ObservationCreate: null })
        expect(outside.json.errors[0].message).toMatch(/is outside what the token may create/)
        const written = yield* call("GET", `${server.base}/Observation?subject=Patient/${other.json.id}`, { headers: as(system) })
        expect(written.json.entry ?? []).toEqual([])
      }))
  })
})
