import { describe, expect } from "vitest"
import type { Catalog } from "../../src/catalog/Catalog.ts"
import { validateResource } from "../../src/validation/Validator.ts"
import { catalogTests } from "./support.ts"

const withCatalog = catalogTests()

const wg = (code: string) => ({ url: "http://hl7.org/fhir/StructureDefinition/structuredefinition-wg", valueCode: code })

const valueSet = (fields: Record<string, unknown>) => ({
  resourceType: "ValueSet",
  url: "http://hl7.org/fhir/ValueSet/my-codes",
  name: "MyCodes",
  status: "draft",
  extension: [wg("pa")],
  publisher: "HL7 International / Patient Administration",
  contact: [{ telecom: [{ system: "url", value: "http://www.hl7.org/Special/committees/pafm" }] }],
  compose: { include: [{ system: "http://example.org/codes" }] },
  ...fields
})

/** The issues about the work group or publisher of an HL7 artefact. */
const about = (c: Catalog, resource: unknown, examples = false) =>
  validateResource(resource, c, { examples }).filter((issue) => /(work group|publisher)/.test(issue.diagnostics))

describe("canonical resources HL7 publishes", () => {
  withCatalog("a work group stated twice or unknown is an error", (c) => {
    expect(about(c, valueSet({}))).toEqual([])
    expect(about(c, valueSet({ extension: [wg("pa"), wg("oo")] }))).toEqual([expect.objectContaining({
      severity: "error", code: "business-rule", expression: "ValueSet", diagnostics: expect.stringContaining("more than one work group extension")
    })])
    expect(about(c, valueSet({ extension: [wg("nobody")] }))).toEqual([expect.objectContaining({
      severity: "error", expression: "ValueSet", diagnostics: "The work group 'nobody' is unknown"
    })])
    // Not under http://hl7.org/fhir/, or an example: not judged.
    expect(about(c, valueSet({ url: "http://example.org/ValueSet/x", extension: [wg("nobody")] }))).toEqual([])
    expect(about(c, valueSet({ extension: [wg("nobody")] }), true)).toEqual([])
  })

  withCatalog("the publisher of an HL7 artefact is its work group's", (c) => {
    expect(about(c, valueSet({ publisher: undefined }))).toEqual([expect.objectContaining({
      severity: "warning", expression: "ValueSet", diagnostics: expect.stringContaining("states its publisher: for the work group 'pa' it is 'HL7 International / Patient Administration'")
    })])
    expect(about(c, valueSet({ publisher: "HL7 International / Patient Care" }))).toEqual([expect.objectContaining({
      severity: "error", diagnostics: expect.stringContaining("but it is 'HL7 International / Patient Care'")
    })])
    expect(about(c, valueSet({ publisher: "Health Level Seven International (Patient Administration)" }))).toEqual([expect.objectContaining({
      severity: "warning", diagnostics: expect.stringContaining("should be 'HL7 International / Patient Administration'")
    })])
    // A work group with two names takes either.
    const vocabulary = { extension: [wg("vocab")], contact: [{ telecom: [{ system: "url", value: "http://www.hl7.org/Special/committees/Vocab" }] }] }
    expect(about(c, valueSet({ ...vocabulary, publisher: "HL7 International / Vocabulary" }))).toEqual([])
    expect(about(c, valueSet({ ...vocabulary, publisher: "HL7 International / Terminology Infrastructure" }))).toEqual([])
    expect(about(c, valueSet({ ...vocabulary, publisher: "HL7 International / Security" }))).toEqual([expect.objectContaining({
      severity: "error", diagnostics: expect.stringContaining("'HL7 International / Terminology Infrastructure' or 'HL7 International / Vocabulary'")
    })])
  })

  withCatalog("a contact url of an HL7 artefact leads to its work group's page", (c) => {
    expect(about(c, valueSet({ contact: [{ telecom: [{ system: "url", value: "http://hl7.org/fhir" }] }] }))).toEqual([expect.objectContaining({
      severity: "warning", expression: "ValueSet", diagnostics: expect.stringContaining("a contact url should lead to 'http://www.hl7.org/Special/committees/pafm'")
    })])
    expect(about(c, valueSet({ contact: [{ telecom: [{ system: "url", value: "http://www.hl7.org/Special/committees/pafm/index.cfm" }] }] }))).toEqual([])
  })
})
