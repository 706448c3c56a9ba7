import { describe, expect, it } from "vitest"
import { sctidProblem } from "../../src/validation/codes.ts"
import { validateResource } from "../../src/validation/Validator.ts"
import { catalogTests, errors, problems } from "./support.ts"

const withCatalog = catalogTests()

describe("bindings", () => {
  withCatalog("a code outside a required value set is an error (administrative-gender)", (c) => {
    expect(problems(c, { resourceType: "Patient", gender: "bogus" })).toEqual([{
      severity: "error",
      code: "code-invalid",
      expression: "Patient.gender",
      diagnostics: "The value 'bogus' is not in the value set http://hl7.org/fhir/ValueSet/administrative-gender (required binding)"
    }])
  })

  withCatalog("a CodeableConcept outside a required value set is an error", (c) => {
    const allergy = (coding: Record<string, unknown>) => ({
      resourceType: "AllergyIntolerance",
      patient: { reference: "Patient/1" },
      clinicalStatus: { coding: [coding] }
    })
    expect(problems(c, allergy({ system: "http://terminology.hl7.org/CodeSystem/allergyintolerance-clinical", code: "active" }))).toEqual([])
    const found = errors(validateResource(allergy({ system: "http://example.org/codes", code: "active" }), c))
    expect(found).toHaveLength(1)
    expect(found[0]).toMatchObject({ code: "code-invalid", expression: "AllergyIntolerance.clinicalStatus" })
  })

  withCatalog("a required CodeableConcept with text only is an error", (c) => {
    const found = errors(validateResource({ resourceType: "AllergyIntolerance", patient: { reference: "Patient/1" }, clinicalStatus: { text: "active" } }, c))
    expect(found[0]?.diagnostics).toContain("No code provided")
  })

  withCatalog("a code outside an extensible value set is a warning", (c) => {
    const found = problems(c, {
      resourceType: "Patient",
      identifier: [{ type: { coding: [{ system: "http://example.org/types", code: "X" }] }, value: "1" }]
    })
    expect(found).toEqual([expect.objectContaining({ severity: "warning", code: "code-invalid", expression: "Patient.identifier[0].type" })])
  })

  withCatalog("a value set that needs SNOMED CT or LOINC does not judge codes", (c) => {
    // Condition.code is bound (example) to SNOMED; Observation.code likewise: nothing is said either way.
    expect(problems(c, { resourceType: "Condition", subject: { reference: "Patient/1" }, code: { coding: [{ system: "http://snomed.info/sct", code: "44054006" }] } })).toEqual([])
  })
})

describe("codes of the systems the server holds", () => {
  withCatalog("a code that its system, held completely, does not have is a warning outside a required binding", (c) => {
    const found = validateResource({
      resourceType: "Observation",
      status: "final",
      code: { text: "x" },
      category: [{ coding: [{ system: "http://terminology.hl7.org/CodeSystem/observation-category", code: "vital-sign" }] }]
    }, c).filter((issue) => issue.code === "code-invalid")
    expect(found).toEqual([{
      severity: "warning",
      code: "code-invalid",
      expression: "Observation.category[0].coding[0].code",
      diagnostics: "Unknown code 'vital-sign' in the CodeSystem 'http://terminology.hl7.org/CodeSystem/observation-category'"
    }])
  })

  withCatalog("a code of a version of the system the server does not hold is not judged", (c) => {
    const observation = (version: string) => ({
      resourceType: "Observation",
      status: "final",
      code: { text: "x" },
      category: [{ coding: [{ system: "http://terminology.hl7.org/CodeSystem/observation-category", version, code: "new-category" }] }]
    })
    const invalid = (version: string) => validateResource(observation(version), c).filter((issue) => issue.code === "code-invalid")
    expect(invalid("99.0.0")).toEqual([])
    expect(invalid("4.0.1").map((issue) => issue.severity)).toEqual(["warning"])
  })

  withCatalog("codes of systems the server does not hold are not judged", (c) => {
    expect(problems(c, { resourceType: "Observation", status: "final", code: { coding: [{ system: "http://loinc.org", code: "anything" }] } })).toEqual([])
  })

  withCatalog("a SNOMED CT code that is not a well-formed identifier or expression is a warning", (c) => {
    const condition = (code: string) => ({ resourceType: "Condition", subject: { reference: "Patient/1" }, code: { coding: [{ system: "http://snomed.info/sct", code }] } })
    const invalid = (code: string) => validateResource(condition(code), c).filter((issue) => issue.code === "code-invalid")
    expect(invalid("276885007x")[0]?.severity).toBe("warning")
    expect(invalid("44054007")[0]?.diagnostics).toContain("check digit")
    expect(invalid("44054006")).toEqual([])
    expect(errors(validateResource(condition("128045006:{363698007=56459004}"), c))).toEqual([])
  })
})

describe("SNOMED CT identifiers", () => {
  it.each(["36989005", "44054006", "276885007", "900000000000003001", "731000124108"])("%s is well-formed", (code) => {
    expect(sctidProblem(code)).toBeUndefined()
  })
  it.each(["1", "2", "12345", "276885007x", "36989006", "034552", "234234"])("%s is not", (code) => {
    expect(sctidProblem(code)).toBeDefined()
  })
})
