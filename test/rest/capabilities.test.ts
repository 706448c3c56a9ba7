/**
 * `GET [base]/metadata` as a FHIR client or tool reads it (https://hl7.org/fhir/R4/capabilitystatement.html),
 * on the real R4 catalog, over HTTP on SQLite and Postgres: valid by the server's own validator in JSON and
 * in XML, with each type's search parameters, operations, conditional and versioning support, and with no
 * search parameter listed that a search would refuse.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { pgAvailable, type BackendKind } from "../support/backends.ts"
import { realPackageCache, registryUrl, skipRealPackages } from "../support/npmRegistry.ts"
import { call, startServer, type TestServer } from "../support/server.ts"

class Server extends Context.Tag("test/CapabilitiesServer")<Server, TestServer>() {}

interface SearchParam {
  readonly name: string
  readonly definition?: string
  readonly type: string
  readonly documentation?: string
}
interface ResourceEntry {
  readonly type: string
  readonly searchParam: ReadonlyArray<SearchParam>
  readonly searchRevInclude?: ReadonlyArray<string>
  readonly [key: string]: unknown
}

const metadata = Effect.gen(function*() {
  const { base } = yield* Server
  const reply = yield* call("GET", `${base}/metadata`)
  expect(reply.status).toBe(200)
  return reply.json as { readonly rest: ReadonlyArray<{ readonly resource: ReadonlyArray<ResourceEntry>; readonly [key: string]: any }>; readonly [key: string]: any }
})

const resourceOf = (statement: Effect.Effect.Success<typeof metadata>, type: string): ResourceEntry =>
  statement.rest[0]!.resource.find((entry) => entry.type === type)!

/**
 * A query that uses `param` of `type` with a value it can read: what a client trying each listed parameter
 * would send. `parts` is the number of components of a composite parameter (from its definition).
 */
const queryFor = (param: SearchParam, entry: ResourceEntry, parts = 2): string => {
  switch (param.name) {
    case "_has": {
      const [source, code] = entry.searchRevInclude![0]!.split(":")
      return `_has:${source}:${code}:_id=x`
    }
    case "_filter":
      return `_filter=${encodeURIComponent("_id eq x")}`
  }
  switch (param.type) {
    case "date":
      return `${param.name}=2020`
    case "number":
    case "quantity":
      return `${param.name}=1`
    case "uri":
      return `${param.name}=${encodeURIComponent("http://example.org/x")}`
    case "reference":
      return `${param.name}:missing=true`
    case "composite":
      return `${param.name}=${encodeURIComponent(["x", ...Array(parts - 1).fill("2020")].join("$"))}`
    case "special":
      return param.name === "near" ? `near=${encodeURIComponent("0|0")}` : `${param.name}=x`
    default:
      return `${param.name}=x`
  }
}

const backendsUnderTest: ReadonlyArray<{ readonly kind: BackendKind; readonly skip: boolean }> = [
  { kind: "sqlite", skip: false },
  { kind: "postgres", skip: !pgAvailable }
]

for (const backend of backendsUnderTest) {
  describe.skipIf(skipRealPackages || backend.skip)(`the CapabilityStatement on ${backend.kind} (R4 catalog)`, () => {
    layer(
      Layer.scoped(Server, startServer(backend.kind, { conformance: { package_registry: registryUrl ?? "", package_cache: realPackageCache } })),
      { timeout: 300_000, excludeTestServices: true }
    )((it) => {
      it.effect("is valid by the server's own $validate against the R4 definition, in JSON and in XML", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const json = yield* call("GET", `${base}/metadata`)
          const checked = yield* call("POST", `${base}/CapabilityStatement/$validate`, { body: json.text })
          expect(checked.status).toBe(200)
          expect(checked.json.issue).toEqual([{ severity: "information", code: "informational", diagnostics: "No issues: the resource is valid" }])

          const xml = yield* call("GET", `${base}/metadata`, { headers: { accept: "application/fhir+xml" } })
          expect(xml.status).toBe(200)
          expect(xml.headers.get("content-type")).toContain("application/fhir+xml")
          expect(xml.text).toContain(`<CapabilityStatement xmlns="http://hl7.org/fhir">`)
          expect(xml.text).toContain(`<searchParam><name value="birthdate"/><definition value="http://hl7.org/fhir/SearchParameter/individual-birthdate"/><type value="date"/>`)
          const xmlChecked = yield* call("POST", `${base}/CapabilityStatement/$validate`, {
            body: xml.text,
            headers: { "content-type": "application/fhir+xml" }
          })
          expect(xmlChecked.json.issue).toEqual(checked.json.issue)
          // The same statement is served until the catalog changes.
          expect((yield* call("GET", `${base}/metadata`)).text).toBe(json.text)
        }))

      it.effect("lists each type's search parameters with name, definition, type and documentation", () =>
        Effect.gen(function*() {
          const statement = yield* metadata
          const patient = resourceOf(statement, "Patient")
          const byName = new Map(patient.searchParam.map((param) => [param.name, param]))
          expect(byName.get("birthdate")).toEqual({
            name: "birthdate",
            definition: "http://hl7.org/fhir/SearchParameter/individual-birthdate",
            type: "date",
            documentation: "The patient's date of birth"
          })
          expect(byName.get("_id")).toMatchObject({ definition: "http://hl7.org/fhir/SearchParameter/Resource-id", type: "token" })
          expect(byName.get("_lastUpdated")).toMatchObject({ definition: "http://hl7.org/fhir/SearchParameter/Resource-lastUpdated", type: "date" })
          expect(byName.get("_text")).toMatchObject({ definition: "http://hl7.org/fhir/SearchParameter/DomainResource-text", type: "string" })
          for (const name of ["_id", "_lastUpdated", "_tag", "_profile", "_security", "_source", "_text", "_content", "_list", "_has", "_filter", "name", "identifier", "general-practitioner"]) {
            expect(byName.get(name)?.documentation).toEqual(expect.any(String))
          }
          // Refused by search as not supported, or not a search parameter of one type: never listed.
          for (const name of ["_query", "_type", "_contained", "_containedType", "_sort", "_count"]) expect(byName.has(name)).toBe(false)
          const { base } = yield* Server
          for (const query of ["_query=x", "_type=Patient", "_contained=true"]) {
            const refused = yield* call("GET", `${base}/Patient?${query}`)
            expect([query, refused.status, refused.json.issue[0].code]).toEqual([query, 400, "not-supported"])
          }
          expect(new Set(patient.searchParam.map((param) => param.name)).size).toBe(patient.searchParam.length)
          // A parameter shared by several types is documented for this one, not with R4's whole list.
          const code = resourceOf(statement, "Observation").searchParam.find((param) => param.name === "code")!
          expect(code.documentation).toBe("The code of the observation type")
          expect(resourceOf(statement, "Location").searchParam.map((param) => param.name)).toContain("near")
        }))

      it.effect("lists the interactions, operations, includes, conditional and versioning support", () =>
        Effect.gen(function*() {
          const statement = yield* metadata
          const rest = statement.rest[0]!
          expect(statement["instantiates"]).toEqual(["http://hl7.org/fhir/uv/bulkdata/CapabilityStatement/bulk-data"])
          const patient = resourceOf(statement, "Patient")
          expect(patient).toMatchObject({
            versioning: "versioned-update",
            readHistory: true,
            updateCreate: false,
            conditionalCreate: true,
            conditionalRead: "full-support",
            conditionalUpdate: true,
            conditionalDelete: "single",
            operation: [
              { name: "validate", definition: "http://hl7.org/fhir/OperationDefinition/Resource-validate" },
              { name: "everything", definition: "http://hl7.org/fhir/OperationDefinition/Patient-everything" },
              { name: "export", definition: "http://hl7.org/fhir/uv/bulkdata/OperationDefinition/patient-export" },
              { name: "meta", definition: "http://hl7.org/fhir/OperationDefinition/Resource-meta" },
              { name: "meta-add", definition: "http://hl7.org/fhir/OperationDefinition/Resource-meta-add" },
              { name: "meta-delete", definition: "http://hl7.org/fhir/OperationDefinition/Resource-meta-delete" },
              { name: "graphql", definition: "http://hl7.org/fhir/OperationDefinition/Resource-graphql" }
            ]
          })
          expect((patient["interaction"] as ReadonlyArray<{ code: string }>).map((i) => i.code)).toEqual(
            ["read", "vread", "update", "patch", "delete", "history-instance", "history-type", "create", "search-type"]
          )
          expect(patient["searchInclude"]).toEqual(expect.arrayContaining(["*", "Patient:general-practitioner"]))
          expect(patient.searchRevInclude).toEqual(expect.arrayContaining(["Observation:subject"]))
          expect((resourceOf(statement, "Observation")["operation"] as ReadonlyArray<{ name: string }>).map((operation) => operation.name)).toEqual(["validate", "meta", "meta-add", "meta-delete", "graphql"])
          expect((resourceOf(statement, "Group")["operation"] as ReadonlyArray<{ name: string; definition: string }>).find((operation) => operation.name === "export"))
            .toEqual({ name: "export", definition: "http://hl7.org/fhir/uv/bulkdata/OperationDefinition/group-export" })
          expect(rest["operation"]).toEqual([
            { name: "export", definition: "http://hl7.org/fhir/uv/bulkdata/OperationDefinition/export" },
            { name: "meta", definition: "http://hl7.org/fhir/OperationDefinition/Resource-meta" },
            { name: "install", definition: "urn:svc:OperationDefinition:install" },
            { name: "graphql", definition: "http://hl7.org/fhir/OperationDefinition/Resource-graphql" }
          ])
          expect(rest["interaction"].map((i: { code: string }) => i.code)).toEqual(["transaction", "batch", "search-system", "history-system"])
          expect(rest["searchParam"].map((param: SearchParam) => param.name)).toEqual(
            ["_content", "_id", "_lastUpdated", "_list", "_profile", "_security", "_source", "_tag", "_text", "_type"]
          )
          expect(rest["compartment"]).toContain("http://hl7.org/fhir/CompartmentDefinition/patient")
        }))

      it.effect("lists only search parameters a search accepts, on every type and across types", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const statement = yield* metadata
          // A composite's value has one part per component of its definition, as a client reading the definition would write it.
          const composites = [...new Set(statement.rest[0]!.resource.flatMap((entry) => entry.searchParam.filter((param) => param.type === "composite").map((param) => param.definition!)))]
          const parts = new Map(yield* Effect.forEach(composites, (url) =>
            Effect.map(call("GET", `${base}/SearchParameter?url=${encodeURIComponent(url)}`), (reply) =>
              [url, reply.json.entry[0].resource.component.length as number] as const)))
          const queries = statement.rest[0]!.resource.flatMap((entry) =>
            entry.searchParam.map((param) => `${entry.type}?${queryFor(param, entry, parts.get(param.definition ?? ""))}&_count=1`))
          const system = statement.rest[0]!["searchParam"].map((param: SearchParam) =>
            `?${param.name === "_type" ? "_type=Patient,Observation" : queryFor(param, { type: "", searchParam: [] })}&_count=1`)
          expect(queries.length).toBeGreaterThan(2000)
          const refused = yield* Effect.forEach([...queries, ...system], (query) =>
            Effect.map(call("GET", `${base}/${query}`), (reply) =>
              reply.status === 200 ? undefined : `${query}: ${reply.status} ${reply.json?.issue?.[0]?.diagnostics ?? reply.text.slice(0, 200)}`), { concurrency: 4 })
          expect(refused.filter((problem) => problem !== undefined)).toEqual([])
        }), 240_000)
    })
  })
}
