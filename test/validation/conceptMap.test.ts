import { describe, expect } from "vitest"
import type { Catalog } from "../../src/catalog/Catalog.ts"
import type { Issue } from "../../src/validation/Validator.ts"
import { catalogTests, problems } from "./support.ts"

const withCatalog = catalogTests()

const gender = "http://hl7.org/fhir/administrative-gender"
const v3Gender = "http://terminology.hl7.org/CodeSystem/v3-AdministrativeGender"
const loinc = "http://loinc.org"
/** A value set of R4 that lists two LOINC codes, 18262-6 and 13457-7. */
const ldl = "http://hl7.org/fhir/ValueSet/ldlcholesterol-codes"

const conceptMap = (fields: Record<string, unknown>, group: Record<string, unknown>) => ({
  resourceType: "ConceptMap", url: "http://example.org/cm", name: "Cm", status: "draft", ...fields, group: [group]
})

/** The errors and warnings whose text contains `text`. */
const saying = (c: Catalog, resource: unknown, text: string): ReadonlyArray<Issue> =>
  problems(c, resource).filter((issue) => issue.diagnostics.includes(text))

describe("ConceptMap", () => {
  withCatalog("the source and target of a map are value sets", (c) => {
    const found = saying(c, conceptMap({ sourceUri: gender }, { source: gender, target: v3Gender, element: [] }), "must be a ValueSet")
    expect(found).toEqual([expect.objectContaining({ severity: "error", expression: "ConceptMap.sourceUri" })])
    expect(found[0]?.diagnostics).toContain("is a CodeSystem")
    expect(saying(c, conceptMap({ targetCanonical: "http://hl7.org/fhir/StructureDefinition/Patient" }, { source: gender, target: v3Gender }), "must be a ValueSet"))
      .toEqual([expect.objectContaining({ severity: "error", expression: "ConceptMap.targetCanonical" })])
    expect(saying(c, conceptMap({ sourceUri: "http://hl7.org/fhir/ValueSet/administrative-gender" }, { source: gender, target: v3Gender }), "must be a ValueSet")).toEqual([])
  })

  withCatalog("a group names systems the server knows and holds with all their content", (c) => {
    expect(saying(c, conceptMap({}, { target: v3Gender }), "names no source code system")).toEqual([
      expect.objectContaining({ severity: "warning", expression: "ConceptMap.group[0]" })
    ])
    expect(saying(c, conceptMap({}, { source: gender }), "names no target code system")).toEqual([
      expect.objectContaining({ severity: "warning", expression: "ConceptMap.group[0]" })
    ])
    expect(saying(c, conceptMap({}, { source: "http://example.org/unknown", target: v3Gender }), "is not known to this server")).toEqual([
      expect.objectContaining({ severity: "warning", expression: "ConceptMap.group[0].source" })
    ])
    // With a value set to check the codes against, an unknown system is no cause for a warning.
    expect(saying(c, conceptMap({ sourceUri: "http://hl7.org/fhir/ValueSet/administrative-gender" }, { source: "http://example.org/unknown", target: v3Gender }), "is not known")).toEqual([])
    expect(saying(c, conceptMap({}, { source: gender, target: "http://terminology.hl7.org/CodeSystem/service-type" }), "without all its content")).toEqual([
      expect.objectContaining({ severity: "warning", expression: "ConceptMap.group[0].target", diagnostics: expect.stringContaining("content = example") })
    ])
    // SNOMED CT and LOINC are left to a terminology server.
    expect(problems(c, conceptMap({}, { source: gender, target: loinc, element: [{ code: "male", target: [{ code: "2093-3", equivalence: "relatedto" }] }] }))).toEqual([])
    expect(problems(c, conceptMap({}, { source: gender, target: v3Gender, element: [{ code: "male", target: [{ code: "M", equivalence: "equal" }] }] }))).toEqual([])
  })

  withCatalog("codes of a system not held completely are checked against the map's value set", (c) => {
    const map = (code: string, group: Record<string, unknown> = {}) =>
      conceptMap({ targetCanonical: ldl }, { source: gender, target: loinc, ...group, element: [{ code: "male", target: [{ code, equivalence: "relatedto" }] }] })
    expect(problems(c, map("13457-7"))).toEqual([])
    expect(problems(c, map("2093-3"))).toEqual([expect.objectContaining({
      severity: "error", expression: "ConceptMap.group[0].element[0].target[0].code",
      diagnostics: `The target code '2093-3' in the system ${loinc} is not valid in the value set '${ldl}'`
    })])
    expect(problems(c, map("2093-3", { targetVersion: "2.67" }))[0]?.diagnostics).toContain(`${loinc} version 2.67 is not valid`)
    // A system the server does not know: only a warning.
    expect(problems(c, map("X", { target: "http://example.org/unknown" }))).toEqual([expect.objectContaining({
      severity: "warning", expression: "ConceptMap.group[0].element[0].target[0].code",
      diagnostics: expect.stringContaining("its system http://example.org/unknown is not known to this server")
    })])
    // A version of a system held without its content that the server does not know: only a warning.
    const otherVersion = problems(c, map("X", { target: "http://terminology.hl7.org/CodeSystem/appointment-cancellation-reason", targetVersion: "9.9" }))
      .filter((issue) => issue.expression.endsWith(".code"))
    expect(otherVersion).toEqual([expect.objectContaining({ severity: "warning", diagnostics: expect.stringContaining("version 9.9 of its system") })])
  })

  withCatalog("a code of a held system is a warning when the map's value set cannot be expanded here", (c) => {
    // practitioner-role takes SNOMED CT codes by a filter besides the codes of its own system.
    const map = conceptMap({ sourceCanonical: "http://hl7.org/fhir/ValueSet/practitioner-role" }, {
      source: "http://terminology.hl7.org/CodeSystem/practitioner-role", target: v3Gender,
      element: [{ code: "doctor", target: [{ code: "M", equivalence: "unmatched" }] }]
    })
    expect(saying(c, map, "could not be checked against the value set")).toEqual([expect.objectContaining({
      severity: "warning", expression: "ConceptMap.group[0].element[0].code",
      diagnostics: expect.stringContaining("The source code 'doctor' of http://terminology.hl7.org/CodeSystem/practitioner-role|4.0.1 could not be checked against the value set http://hl7.org/fhir/ValueSet/practitioner-role")
    })])
    const expandable = conceptMap({ sourceCanonical: "http://hl7.org/fhir/ValueSet/administrative-gender" }, {
      source: gender, target: v3Gender, element: [{ code: "male", target: [{ code: "M", equivalence: "equal" }] }]
    })
    expect(problems(c, expandable)).toEqual([])
  })

  withCatalog("a source code is not mapped twice to the same target", (c) => {
    const map = (...targets: ReadonlyArray<ReadonlyArray<Record<string, unknown>>>) =>
      conceptMap({}, { source: gender, target: v3Gender, element: targets.map((target) => ({ code: "male", target })) })
    expect(problems(c, map([{ code: "M", equivalence: "equal" }], [{ code: "F", equivalence: "disjoint" }]))).toEqual([])
    expect(problems(c, map([{ code: "M", equivalence: "equal" }], [{ code: "M", equivalence: "equal" }]))).toEqual([expect.objectContaining({
      severity: "warning", expression: "ConceptMap.group[0].element[1].target[0]",
      diagnostics: "A 'equal' mapping from the code 'male' to the code 'M' has already been defined"
    })])
    expect(problems(c, map([{ code: "M", equivalence: "equal" }, { code: "M", equivalence: "wider" }]))).toEqual([expect.objectContaining({
      severity: "warning", expression: "ConceptMap.group[0].element[0].target[1]",
      diagnostics: expect.stringContaining("has already been defined, but this one says 'wider'")
    })])
    expect(problems(c, map([{ equivalence: "unmatched" }], [{ equivalence: "unmatched" }]))).toEqual([expect.objectContaining({
      severity: "warning", expression: "ConceptMap.group[0].element[1].target[0]", diagnostics: expect.stringContaining("to no target code has already been defined")
    })])
    expect(problems(c, map([{ equivalence: "unmatched" }], [{ code: "M", equivalence: "equal" }]))).toEqual([expect.objectContaining({
      severity: "warning", expression: "ConceptMap.group[0].element[1].target[0]", diagnostics: expect.stringContaining("already been mapped as 'unmatched' to no target code")
    })])
  })
})
