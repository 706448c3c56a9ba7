import { describe, expect } from "vitest"
import type { Catalog } from "../../src/catalog/Catalog.ts"
import { type Issue, validateResource } from "../../src/validation/Validator.ts"
import { catalogTests } from "./support.ts"

const withCatalog = catalogTests()

const codeSystem = (fields: Record<string, unknown>) => ({
  resourceType: "CodeSystem", url: "http://example.org/cs", name: "Cs", status: "draft", content: "complete", ...fields
})

const supplement = (supplements: string, fields: Record<string, unknown>) => codeSystem({ content: "supplement", supplements, ...fields })

/** Every issue (information included) whose text contains `text`. */
const saying = (c: Catalog, resource: unknown, text: string): ReadonlyArray<Issue> =>
  validateResource(resource, c).filter((issue) => issue.diagnostics.includes(text))

describe("CodeSystem advice", () => {
  withCatalog("a code system without content that lists concepts does not state a count of 0", (c) => {
    const found = saying(c, codeSystem({ content: "not-present", count: 0, concept: [{ code: "a" }] }), "states a total of 0 concepts")
    expect(found).toEqual([expect.objectContaining({ severity: "information", expression: "CodeSystem.concept[0]" })])
    expect(saying(c, codeSystem({ content: "not-present", count: 3, concept: [{ code: "a" }] }), "states a total of 0 concepts")).toEqual([])
    expect(saying(c, codeSystem({ content: "not-present", count: 0 }), "states a total of 0 concepts")).toEqual([])
  })

  withCatalog("a supplement states the count of the system it supplements", (c) => {
    // R4's http://hl7.org/fhir/CodeSystem/summary states a count of 92.
    const summary = "http://hl7.org/fhir/CodeSystem/summary"
    expect(saying(c, supplement(summary, { count: 10 }), "supplement states a total")).toEqual([expect.objectContaining({
      severity: "error", expression: "CodeSystem.count",
      diagnostics: "The supplement states a total of 10 concepts, but the code system it supplements states 92"
    })])
    expect(saying(c, supplement(summary, { count: 92 }), "supplement states a total")).toEqual([])
    expect(saying(c, supplement("http://hl7.org/fhir/administrative-gender", { count: 4 }), "supplement states a total")).toEqual([])
  })

  withCatalog("a supplement's concepts cannot be checked when the server does not hold the supplemented system", (c) => {
    expect(saying(c, supplement("http://example.org/unknown", { concept: [{ code: "a" }] }), "cannot be checked")).toEqual([expect.objectContaining({
      severity: "warning", expression: "CodeSystem",
      diagnostics: "CodeSystem http://example.org/unknown cannot be found, so the concepts of the supplement cannot be checked against it"
    })])
    expect(saying(c, supplement("http://terminology.hl7.org/CodeSystem/service-type", { concept: [{ code: "a" }] }), "cannot be checked")[0]?.diagnostics)
      .toContain("is held without its content (content = example)")
    expect(saying(c, supplement("http://hl7.org/fhir/administrative-gender", { concept: [{ code: "male" }] }), "cannot be checked")).toEqual([])
    // SNOMED CT codes are checked for their form instead.
    expect(saying(c, supplement("http://snomed.info/sct", { concept: [{ code: "22298006" }] }), "cannot be checked")).toEqual([])
  })

  withCatalog("a supplement's hierarchyMeaning is that of the system it supplements", (c) => {
    // v3-ActClass has the hierarchyMeaning is-a.
    const actClass = "http://terminology.hl7.org/CodeSystem/v3-ActClass"
    expect(saying(c, supplement(actClass, { hierarchyMeaning: "part-of" }), "hierarchyMeaning")).toEqual([expect.objectContaining({
      severity: "error", expression: "CodeSystem", diagnostics: expect.stringContaining("'part-of' differs from the hierarchyMeaning 'is-a'")
    })])
    expect(saying(c, supplement(actClass, { hierarchyMeaning: "is-a" }), "hierarchyMeaning")).toEqual([])
  })

  withCatalog("a supplement's display in the language of its base system competes with the base display", (c) => {
    const gender = "http://hl7.org/fhir/administrative-gender"
    expect(saying(c, supplement(gender, { concept: [{ code: "male", display: "Man" }] }), "claim to be the primary display")).toEqual([expect.objectContaining({
      severity: "information", expression: "CodeSystem.concept[0]", diagnostics: expect.stringContaining("'Man' differs from the display 'Male'")
    })])
    expect(saying(c, supplement(gender, { concept: [{ code: "male", display: "male" }] }), "claim to be the primary display")).toEqual([])
    expect(saying(c, supplement(gender, { language: "nl", concept: [{ code: "male", display: "Man" }] }), "claim to be the primary display")).toEqual([])
  })

  withCatalog("a designation without a use in the language of the code system is its display", (c) => {
    const concept = (designation: Record<string, unknown>) => [{ code: "a", display: "Alpha", designation: [designation] }]
    expect(saying(c, codeSystem({ concept: concept({ value: "First" }) }), "not told apart from the display")).toEqual([expect.objectContaining({
      severity: "warning", expression: "CodeSystem.concept[0].designation[0]", diagnostics: expect.stringContaining("has no use and no language")
    })])
    expect(saying(c, codeSystem({ language: "en", concept: concept({ language: "en", value: "First" }) }), "not told apart from the display")).toEqual([expect.objectContaining({
      severity: "warning", expression: "CodeSystem.concept[0].designation[0]", diagnostics: expect.stringContaining("in the language of the code system ('en')")
    })])
    expect(saying(c, codeSystem({ concept: concept({ value: "Alpha" }) }), "not told apart")).toEqual([])
    expect(saying(c, codeSystem({ concept: concept({ language: "nl", value: "Eerste" }) }), "not told apart")).toEqual([])
    expect(saying(c, codeSystem({ language: "en", concept: concept({ language: "nl", value: "Eerste" }) }), "not told apart")).toEqual([])
    expect(saying(c, codeSystem({ concept: concept({ use: { system: "http://snomed.info/sct", code: "900000000000013009" }, value: "First" }) }), "not told apart")).toEqual([])
  })
})
