import { performance } from "node:perf_hooks"
import { beforeAll, describe, expect, it } from "vitest"
import { build, type Catalog } from "../../src/catalog/Catalog.ts"
import { loadR4Conformance } from "../support/r4Examples.ts"

let resources: ReadonlyArray<Record<string, unknown>> | undefined
let catalog: Catalog
let buildMillis = 0

beforeAll(async () => {
  resources = await loadR4Conformance()
  if (resources === undefined) return
  const start = performance.now()
  catalog = build(resources, 1)
  buildMillis = performance.now() - start
  console.log(`R4 catalog built from ${resources.length} conformance resources in ${buildMillis.toFixed(0)} ms`)
}, 300_000)

const patientParameters = [
  "active", "address", "address-city", "address-country", "address-postalcode", "address-state", "address-use",
  "birthdate", "death-date", "deceased", "email", "family", "gender", "general-practitioner", "given", "identifier",
  "language", "link", "name", "organization", "phone", "phonetic", "telecom"
]

// R4 defines these as SearchParameter resources on Resource and DomainResource.
const inheritedParameters = ["_content", "_id", "_lastUpdated", "_profile", "_query", "_security", "_source", "_tag", "_text"]

describe("the catalog of the R4 core conformance resources", () => {
  it("knows every concrete resource type", (context) => {
    if (resources === undefined) return context.skip()
    expect(catalog.fhirVersion).toBe("4.0.1")
    expect(catalog.resourceTypes.length).toBeGreaterThanOrEqual(145)
    for (const type of ["Patient", "Observation", "Bundle", "Binary", "Parameters", "CodeSystem"]) {
      expect(catalog.isResourceType(type)).toBe(true)
    }
    for (const type of ["Resource", "DomainResource", "HumanName", "vitalsigns"]) expect(catalog.isResourceType(type)).toBe(false)
    expect(catalog.structureDefinitionForType("Patient")?.snapshot?.element.length).toBeGreaterThan(30)
  })

  it("reports the R4 SearchParameters that have no base as problems", (context) => {
    if (resources === undefined) return context.skip()
    expect(catalog.problems.every((p) => p.resourceType === "SearchParameter" && p.message.includes("base"))).toBe(true)
  })

  it("has every search parameter of Patient, inherited ones included", (context) => {
    if (resources === undefined) return context.skip()
    // The package also carries extension parameters on Patient (age, mothersMaidenName, ...) and an example.
    const codes = [...catalog.searchParameters("Patient").keys()]
    expect(codes).toEqual(expect.arrayContaining([...patientParameters, ...inheritedParameters]))
    expect(catalog.searchParameter("Patient", "general-practitioner")?.target).toContain("Practitioner")
    for (const type of ["Bundle", "Binary", "Parameters"]) expect(catalog.searchParameter(type, "_text"), type).toBeUndefined()
    expect(catalog.searchParameter("Bundle", "_id")?.type).toBe("token")
  })

  it("has the search parameters of Observation, composites with their components", (context) => {
    if (resources === undefined) return context.skip()
    const observation = catalog.searchParameters("Observation")
    for (
      const code of [
        "code", "subject", "patient", "date", "value-quantity", "value-concept", "component-code", "category", "status",
        "code-value-quantity", "component-code-value-quantity", "combo-code", "performer", "encounter", "_lastUpdated"
      ]
    ) {
      expect(observation.get(code), code).toBeDefined()
    }
    const composite = observation.get("code-value-quantity")
    expect(composite?.type).toBe("composite")
    for (const component of composite?.components ?? []) {
      expect(catalog.searchParameterByUrl(component.definition), component.definition).toBeDefined()
    }
    expect(observation.get("patient")?.base).toContain("Condition")
  })

  it("has the patient compartment, with Observation in it through subject and performer", (context) => {
    if (resources === undefined) return context.skip()
    expect(catalog.compartment("Patient")?.resources.get("Observation")).toEqual(["subject", "performer"])
    expect(catalog.compartments.map((c) => c.code).sort()).toEqual(["Device", "Encounter", "Patient", "Practitioner", "RelatedPerson"])
    expect(catalog.compartment("Device")?.url).toBe("http://hl7.org/fhir/CompartmentDefinition/device")
  })

  it("has the $everything and $validate operations", (context) => {
    if (resources === undefined) return context.skip()
    const onPatient = catalog.operationsFor("instance", "Patient").map((op) => op.code)
    expect(onPatient).toContain("everything")
    expect(onPatient).toContain("validate")
    expect(catalog.operationsFor("type", "Observation").map((op) => op.code)).toContain("validate")
    expect(catalog.operationsFor("system").map((op) => op.code)).toContain("process-message")
  })

  it("looks up codes in code systems and finds value sets", (context) => {
    if (resources === undefined) return context.skip()
    expect(catalog.codeSystem("http://hl7.org/fhir/administrative-gender")?.concept("female")?.display).toBe("Female")
    expect(catalog.codeSystem("http://hl7.org/fhir/administrative-gender|4.0.1")?.concepts()).toHaveLength(4)
    expect(catalog.valueSet("http://hl7.org/fhir/ValueSet/administrative-gender")?.compose?.include[0]?.system)
      .toBe("http://hl7.org/fhir/administrative-gender")
  })
})
