/**
 * `/graphql` over HTTP on SQLite and Postgres with the real R4 packages (the schema is theirs; docs/graphql.md): a resource read by id, GET and POST
 * (`application/json` and `application/graphql`), variables and operation names, errors in `errors` (an unknown
 * field, an unknown resource), and what is not a GraphQL request (400).
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { skipRealPackages } from "../support/npmRegistry.ts"
import { call, type TestServer } from "../support/server.ts"
import { launchToken, systemToken } from "../support/smartTokens.ts"
import { backendsUnderTest, packagesServer, smartPackagesServer } from "./servers.ts"

class Server extends Context.Tag("test/GraphQLServer")<Server, TestServer>() {}

for (const backend of backendsUnderTest) {
  describe.skipIf(skipRealPackages || backend.skip)(`/graphql on ${backend.kind}`, () => {
    layer(
      Layer.scoped(Server, packagesServer(backend.kind)),
      { timeout: 600_000, excludeTestServices: true }
    )((it) => {
      it.effect("reads a resource by id by GET and POST, with variables and an operation name", () =>
        Effect.gen(function*() {
          const { base, url } = yield* Server
          const created = yield* call("POST", `${base}/Patient`, {
            body: { resourceType: "Patient", active: true, name: [{ family: "Graph", given: ["Ql", "Query"] }], birthDate: "1980-02-03" }
          })
          expect(created.status).toBe(201)
          const id = created.json.id
          const query = `{ Patient(id: "${id}") { resourceType id active birthDate name { family given } } }`
          const expected = { data: { Patient: { resourceType: "Patient", id, active: true, birthDate: "1980-02-03", name: [{ family: "Graph", given: ["Ql", "Query"] }] } } }
          const got = yield* call("GET", `${url}/graphql?query=${encodeURIComponent(query)}`)
          expect([got.status, got.headers.get("content-type")]).toEqual([200, "application/json"])
          expect(got.json).toEqual(expected)
          const posted = yield* call("POST", `${url}/graphql`, { body: JSON.stringify({ query }), headers: { "content-type": "application/json" } })
          expect(posted.json).toEqual(expected)
          const raw = yield* call("POST", `${url}/graphql`, { body: query, headers: { "content-type": "application/graphql" } })
          expect(raw.json).toEqual(expected)
          const named = yield* call("POST", `${url}/graphql`, {
            body: JSON.stringify({
              query: "query One($id: ID!) { Patient(id: $id) { id } } query Two($id: ID!) { Patient(id: $id) { birthDate } }",
              variables: { id },
              operationName: "Two"
            }),
            headers: { "content-type": "application/json" }
          })
          expect(named.json).toEqual({ data: { Patient: { birthDate: "1980-02-03" } } })
        }))

      it.effect("serves $graphql: at [base] from the query root, on an instance with the resource as the root", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const patient = yield* call("POST", `${base}/Patient`, { body: { resourceType: "Patient", name: [{ family: "Operated", given: ["On"] }] } })
          const id = patient.json.id
          yield* call("POST", `${base}/Observation`, { body: { resourceType: "Observation", status: "final", code: { text: "op" }, subject: { reference: `Patient/${id}` } } })
          const system = yield* call("GET", `${base}/$graphql?query=${encodeURIComponent(`{ Patient(id: "${id}") { name { family } } }`)}`)
          expect([system.status, system.headers.get("content-type"), system.json]).toEqual([200, "application/json", { data: { Patient: { name: [{ family: "Operated" }] } } }])
          const query = `{ id name { given } ObservationList(_reference: subject) { code { text } } }`
          const expected = { data: { id, name: [{ given: ["On"] }], ObservationList: [{ code: { text: "op" } }] } }
          const instance = yield* call("GET", `${base}/Patient/${id}/$graphql?query=${encodeURIComponent(query)}`)
          expect([instance.status, instance.json]).toEqual([200, expected])
          const posted = yield* call("POST", `${base}/Patient/${id}/$graphql`, { body: JSON.stringify({ query }), headers: { "content-type": "application/json" } })
          expect(posted.json).toEqual(expected)
          const raw = yield* call("POST", `${base}/Patient/${id}/$graphql`, { body: query, headers: { "content-type": "application/graphql" } })
          expect(raw.json).toEqual(expected)
          // On an instance the root is the resource: the query root's fields are not there.
          const rooted = yield* call("GET", `${base}/Patient/${id}/$graphql?query=${encodeURIComponent(`{ Patient(id: "${id}") { id } }`)}`)
          expect(rooted.json.errors[0].message).toBe('Cannot query field "Patient" on type "Patient".')
          const unknown = yield* call("GET", `${base}/Patient/no-such-one/$graphql?query=${encodeURIComponent("{ id }")}`)
          expect([unknown.status, unknown.json.resourceType]).toEqual([404, "OperationOutcome"])
          const gone = yield* call("POST", `${base}/Patient`, { body: { resourceType: "Patient" } })
          yield* call("DELETE", `${base}/Patient/${gone.json.id}`)
          expect((yield* call("GET", `${base}/Patient/${gone.json.id}/$graphql?query=${encodeURIComponent("{ id }")}`)).status).toBe(410)
          const noQuery = yield* call("GET", `${base}/$graphql`)
          expect([noQuery.status, noQuery.json.issue[0].diagnostics]).toEqual([400, "$graphql: a GET gives the query as the parameter 'query'"])
          expect((yield* call("GET", `${base}/Patient/$graphql?query=${encodeURIComponent("{ id }")}`)).status).toBe(404)
          // A mutation at [base]/$graphql, by POST only.
          const mutation = `mutation { PatientCreate(res: { name: [{ family: "Mutated" }] }) { id name { family } } }`
          const created = yield* call("POST", `${base}/$graphql`, { body: mutation, headers: { "content-type": "application/graphql" } })
          expect(created.json.data.PatientCreate.name).toEqual([{ family: "Mutated" }])
          expect((yield* call("GET", `${base}/Patient/${created.json.data.PatientCreate.id}`)).json.name).toEqual([{ family: "Mutated" }])
          const byGet = yield* call("GET", `${base}/$graphql?query=${encodeURIComponent(mutation)}`)
          expect([byGet.status, byGet.headers.get("allow"), byGet.json.issue[0].diagnostics]).toEqual([405, "POST", "$graphql: a mutation is sent by POST, not GET"])
        }))

      it.effect("searches with TypeList: the search parameters as arguments, the same refusals as a REST search", () =>
        Effect.gen(function*() {
          const { base, url } = yield* Server
          const ask = (query: string) => call("POST", `${url}/graphql`, { body: JSON.stringify({ query }), headers: { "content-type": "application/json" } })
          const a = yield* call("POST", `${base}/Patient`, { body: { resourceType: "Patient", name: [{ family: "Listed" }], birthDate: "1970-01-01", gender: "female" } })
          const b = yield* call("POST", `${base}/Patient`, { body: { resourceType: "Patient", name: [{ family: "Listed" }], birthDate: "2000-01-01", gender: "male" } })
          const all = yield* ask(`{ PatientList(family: "Listed", _sort: "birthdate") { id birthDate } }`)
          expect(all.json).toEqual({ data: { PatientList: [{ id: a.json.id, birthDate: "1970-01-01" }, { id: b.json.id, birthDate: "2000-01-01" }] } })
          const some = yield* ask(`{ PatientList(family: "Listed", birthdate: "ge1990", gender: "male") { id } }`)
          expect(some.json).toEqual({ data: { PatientList: [{ id: b.json.id }] } })
          const counted = yield* ask(`{ PatientList(family: "Listed", _count: 1, _sort: "-birthdate") { id } }`)
          expect(counted.json).toEqual({ data: { PatientList: [{ id: b.json.id }] } })
          const unreadable = yield* ask(`{ PatientList(birthdate: "someday") { id } }`)
          expect(unreadable.json.data).toEqual({ PatientList: null })
          expect(unreadable.json.errors[0].message).toMatch(/birthdate/)
          const unknownArgument = yield* ask(`{ PatientList(colour: "blue") { id } }`)
          expect(unknownArgument.json.errors[0].message).toBe('Unknown argument "colour" on field "Query.PatientList".')
        }))

      it.effect("resolves references to the resources they point at, of any type by fragment, null with optional", () =>
        Effect.gen(function*() {
          const { base, url } = yield* Server
          const ask = (query: string) => call("POST", `${url}/graphql`, { body: JSON.stringify({ query }), headers: { "content-type": "application/json" } })
          const patient = yield* call("POST", `${base}/Patient`, { body: { resourceType: "Patient", name: [{ family: "Referred" }], birthDate: "1960-06-06" } })
          const practitioner = yield* call("POST", `${base}/Practitioner`, { body: { resourceType: "Practitioner", name: [{ family: "Performer" }] } })
          const observations = []
          for (let i = 0; i < 5; i++) {
            observations.push(yield* call("POST", `${base}/Observation`, {
              body: {
                resourceType: "Observation",
                status: "final",
                code: { coding: [{ system: "http://example.org/codes", code: "referenced" }] },
                subject: { reference: `Patient/${patient.json.id}` },
                performer: [{ reference: `${base}/Practitioner/${practitioner.json.id}` }, { display: "no reference" }]
              }
            }))
          }
          const reply = yield* ask(`{ ObservationList(code: "http://example.org/codes|referenced", _sort: "_id") {
            subject { reference resource { ... on Patient { birthDate name { family } } } }
            performer { resource(optional: true) { ... on Practitioner { name { family } } } }
          } }`)
          expect(reply.json.errors).toBeUndefined()
          expect(reply.json.data.ObservationList).toHaveLength(5)
          for (const observation of reply.json.data.ObservationList) {
            expect(observation).toEqual({
              subject: { reference: `Patient/${patient.json.id}`, resource: { birthDate: "1960-06-06", name: [{ family: "Referred" }] } },
              performer: [{ resource: { name: [{ family: "Performer" }] } }, { resource: null }]
            })
          }
          const broken = yield* ask(`{ Observation(id: "${observations[0]!.json.id}") { performer { resource { ... on Practitioner { id } } } } }`)
          expect(broken.json.data.Observation.performer).toEqual([{ resource: { id: practitioner.json.id } }, { resource: null }])
          expect(broken.json.errors.map((error: any) => error.message)).toEqual(["the reference has no literal reference (Reference.reference) to resolve"])
        }))

      it.effect("puts every query in the audit trail, with its query text when it is given in the URL", () =>
        Effect.gen(function*() {
          const { url } = yield* Server
          const query = `{ PatientList(_count: 1) { id } }`
          const requestId = `graphql-audit-${Date.now()}`
          const asked = yield* call("GET", `${url}/graphql?query=${encodeURIComponent(query)}`, { headers: { "x-request-id": requestId } })
          expect(asked.status).toBe(200)
          const audit = yield* call("GET", `${url}/_audit?_count=1000`)
          expect(audit.status).toBe(200)
          const events = (audit.json.entry ?? []).map((entry: any) => entry.resource)
            .filter((event: any) => (event.entity ?? []).some((entity: any) => entity.what?.identifier?.value === requestId))
          expect(events).toHaveLength(1)
          expect(events[0].subtype).toEqual([{ system: expect.any(String), code: "graphql", display: "GET /graphql" }])
          expect(events[0].outcome).toBe("0")
          const recorded = events[0].entity.find((entity: any) => entity.query !== undefined)
          expect(Buffer.from(recorded.query, "base64").toString("utf8")).toBe(`query=${encodeURIComponent(query)}`)
        }))

      it.effect("answers errors in `errors`: an unknown field, an unknown or deleted resource", () =>
        Effect.gen(function*() {
          const { base, url } = yield* Server
          const ask = (query: string) => call("POST", `${url}/graphql`, { body: JSON.stringify({ query }), headers: { "content-type": "application/json" } })
          const unknownField = yield* ask(`{ Patient(id: "x") { colour } }`)
          expect(unknownField.status).toBe(200)
          expect(unknownField.json.errors.map((error: any) => error.message)).toEqual(['Cannot query field "colour" on type "Patient".'])
          expect(unknownField.json.data).toBeUndefined()
          const missing = yield* ask(`{ Patient(id: "no-such-patient") { id } }`)
          // Each error has an OperationOutcome in extensions.resource (FHIR GraphQL, "Error Handling"), coded as REST codes it.
          expect(missing.json).toEqual({
            errors: [{
              message: "Patient/no-such-patient is not known",
              locations: [{ line: 1, column: 3 }],
              path: ["Patient"],
              extensions: { resource: { resourceType: "OperationOutcome", issue: [{ severity: "error", code: "not-found", diagnostics: "Patient/no-such-patient is not known" }] } }
            }],
            data: { Patient: null }
          })
          const created = yield* call("POST", `${base}/Patient`, { body: { resourceType: "Patient" } })
          expect((yield* call("DELETE", `${base}/Patient/${created.json.id}`)).status).toBe(204)
          const deleted = yield* ask(`{ Patient(id: "${created.json.id}") { id } }`)
          expect(deleted.json.errors[0].message).toBe(`Patient/${created.json.id} was deleted`)
          expect(deleted.json.errors[0].extensions.resource.issue[0].code).toBe("deleted")
          const syntax = yield* ask(`{ Patient(id: "x") { id }`)
          expect(syntax.json.errors[0].message).toMatch(/^Syntax Error/)
          const deep = yield* ask(`{ Patient(id: "x") { ${"extension { ".repeat(20)}url${" }".repeat(20)} } }`)
          expect(deep.json).toEqual({
            errors: [{ message: "The query nests its fields 22 deep; at most 15 are allowed", locations: [{ line: 1, column: 1 }], extensions: { resource: { resourceType: "OperationOutcome", issue: [{ severity: "error", code: "invalid", diagnostics: "The query nests its fields 22 deep; at most 15 are allowed" }] } } }]
          })
        }))

      it.effect("flattens with @flatten, @first, @singleton and @slice, its errors in `errors`", () =>
        Effect.gen(function*() {
          const { base, url } = yield* Server
          const created = yield* call("POST", `${base}/Patient`, {
            body: { resourceType: "Patient", name: [{ use: "official", family: "Flat", given: ["A", "B"] }, { use: "nickname", given: ["C"] }] }
          })
          const ask = (query: string, variables?: Record<string, unknown>) =>
            call("POST", `${url}/graphql`, { body: JSON.stringify({ query, variables }), headers: { "content-type": "application/json" } })
          const query = `query Q($id: ID!, $path: String!) { p: Patient(id: $id) { name @flatten @slice(path: $path) { given surname: family @singleton } } }`
          const flat = yield* ask(query, { id: created.json.id, path: "use" })
          expect(flat.text).toBe(`{"data":{"p":{"given.official":["A","B"],"surname.official":"Flat","given.nickname":["C"]}}}`)
          const several = yield* ask(`{ Patient(id: "${created.json.id}") { name @flatten { given @singleton } } }`)
          expect(several.json).toEqual({ data: { Patient: { given: null } }, errors: [{ message: '@singleton: "given" has 3 values', path: ["Patient", "given"], extensions: expect.any(Object) }] })
        }))

      it.effect("refuses what is not a GraphQL request with a 400 OperationOutcome", () =>
        Effect.gen(function*() {
          const { url } = yield* Server
          const cases: ReadonlyArray<readonly [string, Record<string, string>, string | undefined, RegExp]> = [
            ["GET", {}, undefined, /the query as the parameter 'query'/],
            ["POST", { "content-type": "text/plain" }, "{ x }", /application\/json .* or application\/graphql, not text\/plain/],
            ["POST", { "content-type": "application/json" }, "not json", /not JSON/],
            ["POST", { "content-type": "application/json" }, JSON.stringify({ query: 1 }), /needs 'query', a string/],
            ["POST", { "content-type": "application/json" }, JSON.stringify({ query: "{ x }", variables: [1] }), /'variables' is not a JSON object/]
          ]
          for (const [method, headers, body, message] of cases) {
            const reply = yield* call(method, `${url}/graphql`, { headers, ...(body === undefined ? {} : { body }) })
            expect([reply.status, reply.json.resourceType]).toEqual([400, "OperationOutcome"])
            expect(reply.json.issue[0].diagnostics).toMatch(message)
          }
          const large = yield* call("POST", `${url}/graphql`, { body: `{ Patient(id: "${"x".repeat(1024 * 1024)}") { id } }`, headers: { "content-type": "application/graphql" } })
          expect([large.status, large.json.issue[0].code]).toEqual([413, "too-costly"])
          const badVariables = yield* call("GET", `${url}/graphql?query=${encodeURIComponent("{ Patient(id: \"x\") { id } }")}&variables=nope`)
          expect(badVariables.status).toBe(400)
        }))
    })
  })
}

class SmartServer extends Context.Tag("test/GraphQLSmartServer")<SmartServer, { readonly server: TestServer; readonly system: string }>() {}

describe.skipIf(skipRealPackages)("/graphql under --smart", () => {
  layer(
    Layer.scoped(SmartServer, smartPackagesServer),
    { timeout: 600_000, excludeTestServices: true }
  )((it) => {
    it.effect("needs a token, and reads only what the token may read: another type or another patient is an error of its field", () =>
      Effect.gen(function*() {
        const { server, system } = yield* SmartServer
        const as = (token: string) => ({ authorization: `Bearer ${token}` })
        const write = (resource: Record<string, unknown>) =>
          Effect.map(call("POST", `${server.base}/${String(resource["resourceType"])}`, { body: resource, headers: as(system) }), (reply) => {
            expect(reply.status).toBe(201)
            return reply.json
          })
        const own = yield* write({ resourceType: "Patient", birthDate: "1990-01-01" })
        const other = yield* write({ resourceType: "Patient", birthDate: "1991-01-01" })
        const practitioner = yield* write({ resourceType: "Practitioner", name: [{ family: "Seen" }] })
        const ask = (query: string, headers: Record<string, string>) =>
          call("POST", `${server.url}/graphql`, { body: JSON.stringify({ query }), headers: { "content-type": "application/json", ...headers } })
        const query = `{ Patient(id: "${own.id}") { birthDate } }`
        const anonymous = yield* ask(query, {})
        expect(anonymous.status).toBe(401)
        expect(anonymous.headers.get("www-authenticate")).toMatch(/^Bearer/)
        const patients = yield* systemToken(server, "system/Patient.rs")
        expect((yield* ask(query, as(patients))).json).toEqual({ data: { Patient: { birthDate: "1990-01-01" } } })
        const refused = yield* ask(`{ Practitioner(id: "${practitioner.id}") { id } }`, as(patients))
        expect(refused.json.data).toEqual({ Practitioner: null })
        expect(refused.json.errors[0].message).toMatch(/the token's scopes do not allow reading Practitioner/)
        const ownOnly = yield* launchToken(server, own.id, "launch patient/Patient.rs")
        expect((yield* ask(query, as(ownOnly))).json).toEqual({ data: { Patient: { birthDate: "1990-01-01" } } })
        const elsewhere = yield* ask(`{ Patient(id: "${other.id}") { birthDate } }`, as(ownOnly))
        expect(elsewhere.json.data).toEqual({ Patient: null })
        expect(elsewhere.json.errors[0].message).toBe(`Patient/${other.id} is not known`)
        // A search keeps to what the token may see: its own patient only.
        const listed = yield* ask(`{ PatientList(birthdate: "ge1990") { id } }`, as(ownOnly))
        expect(listed.json).toEqual({ data: { PatientList: [{ id: own.id }] } })
        const practitioners = yield* ask(`{ PractitionerList { id } }`, as(patients))
        expect(practitioners.json.data).toEqual({ PractitionerList: null })
        expect(practitioners.json.errors[0].message).toMatch(/Practitioner/)
        // References resolve as the token may read: its patient, not a Practitioner it has no scope for.
        yield* write({ resourceType: "Observation", status: "final", code: { text: "smart" }, subject: { reference: `Patient/${own.id}` }, performer: [{ reference: `Practitioner/${practitioner.id}` }] })
        const observer = yield* launchToken(server, own.id, "launch patient/Patient.rs patient/Observation.rs")
        const resolved = yield* ask(`{ ObservationList { subject { resource { ... on Patient { birthDate } } } performer { resource { ... on Practitioner { id } } } } }`, as(observer))
        expect(resolved.json.data).toEqual({ ObservationList: [{ subject: { resource: { birthDate: "1990-01-01" } }, performer: [{ resource: null }] }] })
        expect(resolved.json.errors.map((error: any) => error.message)).toEqual(["the token's scopes do not allow reading Practitioner"])
        // Reverse references and connections keep to the compartment too: the other patient's observation is not
        // listed, nor counted.
        yield* write({ resourceType: "Observation", status: "final", code: { text: "smart" }, subject: { reference: `Patient/${other.id}` } })
        const reverse = yield* ask(`{ Patient(id: "${own.id}") { ObservationList(_reference: subject) { code { text } } } PatientConnection { count edges { resource { id } } } ObservationConnection(code: "http://nowhere|none,smart") { count } }`, as(observer))
        expect(reverse.json).toEqual({
          data: {
            Patient: { ObservationList: [{ code: { text: "smart" } }] },
            PatientConnection: { count: 1, edges: [{ resource: { id: own.id } }] },
            ObservationConnection: { count: 0 }
          }
        })
        const otherReverse = yield* ask(`{ Patient(id: "${other.id}") { ObservationList(_reference: subject) { id } } }`, as(observer))
        expect(otherReverse.json.data).toEqual({ Patient: null })
        const unscoped = yield* ask(`{ Patient(id: "${own.id}") { ObservationList(_reference: subject) { id } } }`, as(patients))
        expect(unscoped.json.data).toEqual({ Patient: { ObservationList: null } })
        expect(unscoped.json.errors.map((error: any) => error.message)).toEqual([expect.stringMatching(/Observation/)])
      }))
  })
})
