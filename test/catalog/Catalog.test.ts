import { describe, expect, it } from "@effect/vitest"
import { build } from "../../src/catalog/Catalog.ts"
import { compareVersions } from "../../src/catalog/Canonicals.ts"
import { compartment, operations, searchParameter, searchParameters, structure, structures } from "./fixtures.ts"

const catalog = build([...structures, ...searchParameters, ...operations], 1)

const codes = (map: ReadonlyMap<string, unknown>) => [...map.keys()].sort()

describe("Catalog.build", () => {
  it("lists concrete resource types only, sorted", () => {
    expect(catalog.resourceTypes).toEqual(["Bundle", "Observation", "Patient"])
    expect(catalog.isResourceType("Patient")).toBe(true)
    expect(catalog.isResourceType("DomainResource")).toBe(false)
    expect(catalog.isResourceType("HumanName")).toBe(false)
    expect(catalog.generation).toBe(1)
    expect(catalog.fhirVersion).toBe("4.0.1")
    expect(catalog.problems).toEqual([])
  })

  it("gives a type its own search parameters and those of Resource and DomainResource", () => {
    expect(codes(catalog.searchParameters("Patient"))).toEqual(["_id", "_lastUpdated", "_profile", "_text", "gender"])
    expect(catalog.searchParameter("Patient", "_lastUpdated")?.type).toBe("date")
    expect(catalog.searchParameter("Patient", "_id")?.url).toBe("http://hl7.org/fhir/SearchParameter/Resource-id")
  })

  it("gives a resource that is not a DomainResource only the parameters of Resource", () => {
    expect(codes(catalog.searchParameters("Bundle"))).toEqual(["_id", "_lastUpdated", "_profile"])
  })

  it("answers an unknown type with no parameters", () => {
    expect(catalog.searchParameters("NoSuchType").size).toBe(0)
    expect(catalog.searchParameter("NoSuchType", "_id")).toBeUndefined()
  })

  it("files a search parameter with several bases under each base", () => {
    const patient = catalog.searchParameter("Observation", "patient")
    expect(patient?.base).toEqual(["Observation", "Condition"])
    expect(patient?.target).toEqual(["Patient", "Group"])
    expect(catalog.searchParameter("Condition", "patient")).toBe(patient)
    expect(catalog.searchParameter("Patient", "patient")).toBeUndefined()
  })

  it("keeps the components of a composite parameter and defaults multipleOr/multipleAnd to true", () => {
    const composite = catalog.searchParameter("Observation", "code-value-quantity")
    expect(composite?.components.map((c) => c.expression)).toEqual(["code", "value.as(Quantity)"])
    expect(composite?.multipleOr).toBe(false)
    expect(composite?.multipleAnd).toBe(true)
    expect(catalog.searchParameterByUrl("http://hl7.org/fhir/SearchParameter/Observation-code")?.code).toBe("code")
  })

  it("lets a parameter of the type itself override an inherited one with the same code", () => {
    const own = searchParameter("Patient-own-id", "_id", ["Patient"], { type: "string" })
    const withOwn = build([...structures, ...searchParameters, own], 1)
    expect(withOwn.searchParameter("Patient", "_id")?.type).toBe("string")
    expect(withOwn.searchParameter("Observation", "_id")?.type).toBe("token")
  })

  it("finds structure definitions by url, by url|version and the base definition of a type", () => {
    const profile = structure("Patient", {
      url: "http://example.org/StructureDefinition/my-patient",
      derivation: "constraint",
      baseDefinition: "http://hl7.org/fhir/StructureDefinition/Patient"
    })
    const withProfile = build([...structures, profile], 1)
    const url = "http://hl7.org/fhir/StructureDefinition/Patient"
    expect(withProfile.structureDefinition(url)?.type).toBe("Patient")
    expect(withProfile.structureDefinition(`${url}|4.0.1`)?.url).toBe(url)
    expect(withProfile.structureDefinition(`${url}|3.0.2`)).toBeUndefined()
    expect(withProfile.structureDefinitionForType("Patient")?.url).toBe(url)
    expect(withProfile.structureDefinitionForType("HumanName")?.kind).toBe("complex-type")
    expect(withProfile.resourceTypes).toEqual(["Bundle", "Observation", "Patient"])
  })

  it("takes the highest version of a canonical url, then the last given, and keeps the others by url|version", () => {
    const url = "http://example.org/CodeSystem/colours"
    const cs = (version: string | undefined, display: string) => ({
      resourceType: "CodeSystem",
      url,
      ...(version === undefined ? {} : { version }),
      content: "complete",
      concept: [{ code: "r", display }]
    })
    const built = build([cs("1.10.0", "ten"), cs("1.9.0", "nine"), cs(undefined, "none"), cs("1.10.0", "ten again")], 1)
    expect(built.codeSystem(url)?.concept("r")?.display).toBe("ten again")
    expect(built.codeSystem(`${url}|1.9.0`)?.concept("r")?.display).toBe("nine")
    expect(built.codeSystem(`${url}|2.0.0`)).toBeUndefined()
  })

  it("orders versions segment by segment, numbers as numbers", () => {
    expect(compareVersions("4.0.10", "4.0.9")).toBe(1)
    expect(compareVersions("1.0.0", "1.0.0-ballot")).toBe(1)
    expect(compareVersions("1.0", "1.0.1")).toBe(-1)
    expect(compareVersions(undefined, "0.1")).toBe(-1)
    expect(compareVersions("2020", "2020")).toBe(0)
  })

  it("skips a malformed resource and reports it in problems", () => {
    const built = build([
      ...structures,
      searchParameter("broken", "broken", []),
      { resourceType: "StructureDefinition", id: "odd", url: "http://example.org/odd", type: "Odd", kind: "weird" },
      { resourceType: "OperationDefinition", id: "half", url: "http://example.org/half", code: "half", kind: "operation" },
      { resourceType: "CodeSystem", id: "no-url" },
      // A list where one resource is expected, as a bad row could give.
      JSON.parse("[1, 2]"),
      searchParameter("Patient-gender", "gender", ["Patient"])
    ], 3)
    expect(built.problems.map((p) => [p.resourceType, p.id])).toEqual([
      ["SearchParameter", "broken"],
      ["StructureDefinition", "odd"],
      ["OperationDefinition", "half"],
      ["CodeSystem", "no-url"],
      [undefined, undefined]
    ])
    expect(built.problems[0]?.message).toContain("base")
    expect(built.structureDefinition("http://example.org/odd")).toBeUndefined()
    expect(codes(built.searchParameters("Patient"))).toEqual(["gender"])
  })

  it("maps a compartment's resource types to their parameters, leaving out types without any", () => {
    const patient = compartment("Patient", [
      { code: "Observation", param: ["subject", "performer"] },
      { code: "Patient", param: ["link"] },
      { code: "Bundle" }
    ])
    // The R4 core package also carries an unversioned example with the code Device.
    const device = compartment("Device", [{ code: "Observation", param: ["subject", "device"] }])
    const example = compartment("Device", [{ code: "Communication", param: ["sender"] }], {
      id: "example",
      url: "http://hl7.org/fhir/CompartmentDefinition/example",
      version: undefined
    })
    const built = build([patient, device, example], 1)
    expect(built.compartment("Patient")?.resources.get("Observation")).toEqual(["subject", "performer"])
    expect(built.compartment("Patient")?.resources.has("Bundle")).toBe(false)
    expect(built.compartment("Device")?.url).toBe("http://hl7.org/fhir/CompartmentDefinition/device")
    expect(built.compartments.map((c) => c.code).sort()).toEqual(["Device", "Patient"])
    expect(built.compartment("Encounter")).toBeUndefined()
  })

  it("finds operations by level, Resource standing for every type", () => {
    const names = (ops: ReadonlyArray<{ code: string }>) => ops.map((op) => op.code).sort()
    expect(names(catalog.operations)).toEqual(["everything", "process-message", "validate"])
    expect(names(catalog.operationsFor("system"))).toEqual(["process-message"])
    expect(names(catalog.operationsFor("instance", "Patient"))).toEqual(["everything", "validate"])
    expect(names(catalog.operationsFor("type", "Observation"))).toEqual(["validate"])
    const everything = catalog.operations.find((op) => op.code === "everything")
    expect(everything?.parameters.map((p) => [p.name, p.use, p.min, p.max])).toEqual([
      ["start", "in", 0, "1"],
      ["return", "out", 1, "1"]
    ])
  })
})
