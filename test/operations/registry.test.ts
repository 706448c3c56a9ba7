/** The operations registry and the reading of an operation's parameters from its OperationDefinition. */
import { describe, expect, it } from "vitest"
import { Effect, Either } from "effect"
import { loadCatalog } from "../validation/support.ts"
import { definedInputs, type InputParameter, isOfType, readArguments } from "../../src/operations/arguments.ts"
import { operationPath, operationsOn, systemOperations } from "../../src/operations/registry.ts"
import type { FhirRequest } from "../../src/rest/FhirRequest.ts"
import type { Catalog } from "../../src/catalog/Catalog.ts"

describe("the operations registry", () => {
  it("reads the level, type and id of an operation's path", () => {
    expect(operationPath(["$export"])).toEqual({ name: "export", level: "system" })
    expect(operationPath(["Patient", "$validate"])).toEqual({ name: "validate", level: "type", type: "Patient" })
    expect(operationPath(["Patient", "p1", "$everything"])).toEqual({ name: "everything", level: "instance", type: "Patient", id: "p1" })
    expect(operationPath(["Patient", "p1"])).toBeUndefined()
    expect(operationPath(["Patient", "$a", "$b"])).toBeUndefined()
    expect(operationPath(["Patient", "p1", "_history", "$x"])).toBeUndefined()
    expect(operationPath(["Patient", "p1", "_history", "2", "$meta"])).toEqual({ name: "meta", level: "instance", type: "Patient", id: "p1", version: "2" })
    expect(operationPath(["Patient", "p1", "other", "2", "$meta"])).toBeUndefined()
  })

  it("lists the operations served on a type, each with its OperationDefinition", () => {
    expect(operationsOn("Observation")).toEqual([
      { name: "validate", definition: "http://hl7.org/fhir/OperationDefinition/Resource-validate" },
      { name: "meta", definition: "http://hl7.org/fhir/OperationDefinition/Resource-meta" },
      { name: "meta-add", definition: "http://hl7.org/fhir/OperationDefinition/Resource-meta-add" },
      { name: "meta-delete", definition: "http://hl7.org/fhir/OperationDefinition/Resource-meta-delete" },
      { name: "graphql", definition: "http://hl7.org/fhir/OperationDefinition/Resource-graphql" }
    ])
    expect(operationsOn("Patient").map((operation) => operation.name)).toEqual(["validate", "everything", "export", "meta", "meta-add", "meta-delete", "graphql"])
    expect(operationsOn("Group").find((operation) => operation.name === "export")?.definition).toBe("http://hl7.org/fhir/uv/bulkdata/OperationDefinition/group-export")
    expect(operationsOn("Encounter").find((operation) => operation.name === "everything")?.definition).toBe("http://hl7.org/fhir/OperationDefinition/Encounter-everything")
    expect(operationsOn("Composition").map((operation) => operation.name)).toEqual(["validate", "meta", "meta-add", "meta-delete", "document", "graphql"])
    expect(operationsOn("Composition").find((operation) => operation.name === "document")?.definition).toBe("http://hl7.org/fhir/OperationDefinition/Composition-document")
    expect(operationsOn("Patient").map((operation) => operation.name)).not.toContain("install")
    const definitions = (type: string) => operationsOn(type).map((operation) => `${operation.name} ${operation.definition.replace("http://hl7.org/fhir/OperationDefinition/", "")}`)
    expect(definitions("CodeSystem")).toEqual(["validate Resource-validate", "meta Resource-meta", "meta-add Resource-meta-add", "meta-delete Resource-meta-delete", "lookup CodeSystem-lookup", "validate-code CodeSystem-validate-code", "subsumes CodeSystem-subsumes", "graphql Resource-graphql"])
    expect(definitions("ValueSet")).toEqual(["validate Resource-validate", "meta Resource-meta", "meta-add Resource-meta-add", "meta-delete Resource-meta-delete", "expand ValueSet-expand", "expandability urn:svc:OperationDefinition:ValueSet-expandability", "validate-code ValueSet-validate-code", "graphql Resource-graphql"])
    expect(definitions("ConceptMap")).toEqual(["validate Resource-validate", "meta Resource-meta", "meta-add Resource-meta-add", "meta-delete Resource-meta-delete", "translate ConceptMap-translate", "graphql Resource-graphql"])
  })

  it("lists the operations served at system level, each with the url of its definition", () => {
    expect(systemOperations()).toEqual([
      { name: "export", definition: "http://hl7.org/fhir/uv/bulkdata/OperationDefinition/export" },
      { name: "meta", definition: "http://hl7.org/fhir/OperationDefinition/Resource-meta" },
      { name: "install", definition: "urn:svc:OperationDefinition:install" },
      { name: "graphql", definition: "http://hl7.org/fhir/OperationDefinition/Resource-graphql" }
    ])
  })
})

describe("an operation's parameters", () => {
  const request = (catalog: Catalog, query: string) =>
    ({ params: new URLSearchParams(query), http: { method: "GET", headers: {} }, catalog, maxBodyBytes: 1_000_000 }) as unknown as FhirRequest
  const inputs: ReadonlyArray<InputParameter> = [
    { name: "url", type: "uri", min: 1, max: "1" },
    { name: "count", type: "integer", min: 0, max: "1" },
    { name: "date", type: "dateTime", min: 0, max: "1" },
    { name: "code", type: "code", min: 0, max: "*" },
    { name: "resource", type: "Resource", min: 0, max: "1" }
  ]
  const read = (catalog: Catalog, query: string) =>
    Effect.runSync(Effect.either(readArguments(request(catalog, query), "$op", inputs)))
  const refusal = (catalog: Catalog, query: string) => {
    const result = read(catalog, query)
    return Either.isLeft(result) ? (result.left as { diagnostics?: string }).diagnostics ?? String(result.left) : "accepted"
  }

  it("are the OperationDefinition's in parameters", async (context) => {
    const catalog = await loadCatalog()
    if (catalog === undefined) return context.skip()
    expect(definedInputs(catalog, "http://hl7.org/fhir/OperationDefinition/Patient-everything").map((input) => [input.name, input.type, input.max]))
      .toEqual([["start", "date", "1"], ["end", "date", "1"], ["_since", "instant", "1"], ["_type", "code", "*"], ["_count", "integer", "1"]])
    expect(definedInputs(catalog, "http://example.test/no-such-operation")).toEqual([])
  })

  it("are read by name and type: unknown names, repeats beyond max, missing required ones and values of another type are refused", async (context) => {
    const catalog = await loadCatalog()
    if (catalog === undefined) return context.skip()
    const accepted = read(catalog, "url=http://a.test/x&count=3&code=a&code=b&_format=json")
    expect(Either.isRight(accepted) && [...accepted.right.values]).toEqual([["url", "http://a.test/x"], ["count", "3"], ["code", "a"], ["code", "b"]])
    expect(refusal(catalog, "url=u&colour=red")).toBe("Unknown parameter 'colour' for $op; it takes url, count, date, code, resource")
    expect(refusal(catalog, "url=u&count=1&count=2")).toBe("The parameter 'count' of $op is given more than once")
    expect(refusal(catalog, "count=1")).toBe("$op needs the parameter 'url'")
    expect(refusal(catalog, "url=u&count=many")).toBe("The value 'many' of parameter 'count' of $op cannot be read: expected an integer")
    expect(refusal(catalog, "url=u&date=2020-13-01")).toContain("'2020-13-01' of parameter 'date'")
    expect(refusal(catalog, "url=u&resource=x")).toBe("The parameter 'resource' of $op is a resource: it goes in a Parameters body")
  })

  it("take values of complex types from a Parameters body, each of its parameter's type, and refuse them elsewhere", async (context) => {
    const catalog = await loadCatalog()
    if (catalog === undefined) return context.skip()
    const typed: ReadonlyArray<InputParameter> = [
      { name: "meta", type: "Meta", min: 0, max: "1" },
      { name: "coding", type: "Coding", min: 0, max: "*" },
      { name: "code", type: "code", min: 0, max: "1" }
    ]
    const readBody = (parameter: ReadonlyArray<unknown>, query = "") =>
      Effect.runSync(Effect.either(readArguments(request(catalog, query), "$op", typed, { resourceType: "Parameters", parameter })))
    const refused = (parameter: ReadonlyArray<unknown>, query = "") => {
      const result = readBody(parameter, query)
      return Either.isLeft(result) ? (result.left as { diagnostics?: string }).diagnostics : "accepted"
    }
    const read = readBody([
      { name: "meta", valueMeta: { tag: [{ code: "a" }] } },
      { name: "coding", valueCoding: { code: "x" } },
      { name: "coding", valueCoding: { code: "y" } },
      { name: "code", valueCode: "z" }
    ])
    expect(Either.isRight(read) && read.right.complex.get("meta")).toEqual([{ type: "Meta", value: { tag: [{ code: "a" }] } }])
    expect(Either.isRight(read) && read.right.complex.get("coding")?.map((coding) => coding.value["code"])).toEqual(["x", "y"])
    expect(Either.isRight(read) && read.right.values.get("code")).toBe("z")
    expect(refused([{ name: "meta", valueCoding: { code: "x" } }])).toBe("The parameter 'meta' of $op is a Meta (valueMeta), not a Coding")
    expect(refused([], "meta=x")).toBe("The parameter 'meta' of $op is a Meta: it goes in a Parameters body, as valueMeta")
    expect(refused([{ name: "code", valueCoding: { code: "x" } }])).toBe("The parameter 'code' of $op takes a code, not a Coding")
    expect(refused([{ name: "meta", valueMeta: {} }, { name: "meta", valueMeta: {} }])).toBe("The parameter 'meta' of $op is given more than once")
    expect(refused([{ valueMeta: {} }])).toBe("Each parameter of the Parameters body of $op needs a name")
    expect(refused([{ name: "meta", valueMeta: [] }])).toBe("The parameter 'meta' of $op has no value")
  })

  it("checks the lexical forms of the primitive types", () => {
    expect([isOfType("integer", "-3"), isOfType("integer", "03"), isOfType("boolean", "true"), isOfType("boolean", "yes")]).toEqual([true, false, true, false])
    expect([isOfType("date", "2020-02"), isOfType("dateTime", "2020-02-01T10:00:00Z"), isOfType("instant", "2020-02-01")]).toEqual([true, true, false])
    expect(isOfType("Reference", "anything")).toBe(true)
  })
})
