import { describe, expect } from "vitest"
import { build, type Catalog } from "../../src/catalog/Catalog.ts"
import { type Issue, validateResource, type ValidateOptions } from "../../src/validation/Validator.ts"
import { catalogTests, loadResources } from "./support.ts"

const withCatalog = catalogTests()

const gender = "http://hl7.org/fhir/administrative-gender"

const valueSet = (include: Record<string, unknown>, fields: Record<string, unknown> = {}) => ({
  resourceType: "ValueSet", url: "http://example.org/fhir/ValueSet/vs", name: "Vs", status: "draft", ...fields, compose: { include: [include] }
})

/** Every issue (information included) whose text contains `text`. */
const saying = (c: Catalog, resource: unknown, text: string, options?: ValidateOptions): ReadonlyArray<Issue> =>
  validateResource(resource, c, options).filter((issue) => issue.diagnostics.includes(text))

describe("ValueSet compose", () => {
  withCatalog("a system with a version suffix is a problem: the version goes in include.version", (c) => {
    const syntax = "canonical version syntax"
    expect(saying(c, valueSet({ system: `${gender}|` }), "ends with a '|'")).toEqual([expect.objectContaining({
      severity: "warning", expression: "ValueSet.compose.include[0]"
    })])
    expect(saying(c, valueSet({ system: `${gender}|4.0.1` }), syntax)).toEqual([expect.objectContaining({
      severity: "error", expression: "ValueSet.compose.include[0]", diagnostics: expect.stringContaining("the version '4.0.1' should be in the version property")
    })])
    expect(saying(c, valueSet({ system: `${gender}|4.0.1`, version: "4.0.0" }), syntax)).toEqual([expect.objectContaining({
      severity: "error", diagnostics: expect.stringContaining("but that already contains '4.0.0'")
    })])
    expect(saying(c, valueSet({ system: `${gender}|4.0.1`, version: "4.0.1" }), syntax)).toEqual([expect.objectContaining({
      severity: "error", diagnostics: expect.stringContaining("is already in the version property")
    })])
    expect(saying(c, valueSet({ system: gender, version: "4.0.1" }), syntax)).toEqual([])
  })

  withCatalog("an imported value set is one the server holds", (c) => {
    expect(saying(c, valueSet({ valueSet: ["http://example.org/fhir/ValueSet/nowhere"] }), "value set import")).toEqual([expect.objectContaining({
      severity: "warning", expression: "ValueSet.compose.include[0].valueSet[0]",
      diagnostics: "The value set import http://example.org/fhir/ValueSet/nowhere could not be found so cannot be checked"
    })])
    expect(saying(c, valueSet({ valueSet: [gender] }), "value set import")).toEqual([expect.objectContaining({
      severity: "warning", diagnostics: `The value set import ${gender} points to a resource of type CodeSystem which is not valid`
    })])
    expect(saying(c, valueSet({ valueSet: ["http://hl7.org/fhir/ValueSet/administrative-gender"] }), "value set import")).toEqual([])
    expect(saying(c, valueSet({ valueSet: ["http://hl7.org/fhir/ValueSet/administrative-gender|4.0.1"] }), "value set import")).toEqual([])
    expect(saying(c, valueSet({ valueSet: ["http://snomed.info/sct?fhir_vs=isa/404684003"] }), "value set import")).toEqual([])
    const inner = (resourceType: string) => [{ resourceType, id: "inner", status: "draft", ...(resourceType === "CodeSystem" ? { content: "not-present" } : {}) }]
    expect(saying(c, valueSet({ valueSet: ["#inner"] }, { contained: inner("ValueSet") }), "value set import")).toEqual([])
    expect(saying(c, valueSet({ valueSet: ["#inner"] }, { contained: inner("CodeSystem") }), "value set import")).toEqual([expect.objectContaining({
      severity: "warning", diagnostics: "The value set import #inner points to a resource of type CodeSystem which is not valid"
    })])
  })

  withCatalog("several imports in one include are an intersection, which a warning recalls", (c) => {
    const two = valueSet({ valueSet: ["http://hl7.org/fhir/ValueSet/administrative-gender", "http://hl7.org/fhir/ValueSet/languages"] })
    expect(saying(c, two, "multiple imported value sets")).toEqual([expect.objectContaining({
      severity: "warning", code: "informational", expression: "ValueSet.compose.include[0]"
    })])
    expect(saying(c, valueSet({ valueSet: ["http://hl7.org/fhir/ValueSet/administrative-gender"] }), "multiple imported value sets")).toEqual([])
  })

  withCatalog("a #id system names exactly one contained CodeSystem", (c) => {
    const local = (version?: string) => ({ resourceType: "CodeSystem", id: "local", url: "http://example.org/fhir/CodeSystem/local", status: "draft", content: "complete", ...(version === undefined ? {} : { version }), concept: [{ code: "a" }] })
    const at = (contained: ReadonlyArray<unknown>, include: Record<string, unknown>) => valueSet(include, { contained })
    expect(saying(c, at([], { system: "#local" }), "No matching contained code system found for system '#local'")).toEqual([expect.objectContaining({
      severity: "error", expression: "ValueSet.compose.include[0]"
    })])
    expect(saying(c, at([local("1")], { system: "#local", version: "2" }), "No matching contained code system found for system '#local' version '2'")).toHaveLength(1)
    expect(saying(c, at([{ resourceType: "ValueSet", id: "local", status: "draft" }], { system: "#local" }), "the contained resource with that id is not a CodeSystem, it's a ValueSet")).toEqual([
      expect.objectContaining({ severity: "error" })
    ])
    expect(saying(c, at([local(), local()], { system: "#local" }), "Multiple matching contained code systems found for system '#local'")).toHaveLength(1)
    expect(saying(c, at([local("1"), local("1")], { system: "#local", version: "1" }), "Multiple matching contained code systems found for system '#local' version '1'")).toHaveLength(1)
    expect(saying(c, at([local("1")], { system: "#local", version: "1" }), "matching contained code system")).toEqual([])
  })

  withCatalog("a urn:oid system that identifies a held code system is an error: its url is to be used", async (c) => {
    expect(saying(c, valueSet({ system: "urn:oid:2.16.840.1.113883.4.642.4.2" }), "by an identifier")).toEqual([expect.objectContaining({
      severity: "error", expression: "ValueSet.compose.include[0]",
      diagnostics: `It is not valid to refer to a CodeSystem by an identifier like this 'urn:oid:2.16.840.1.113883.4.642.4.2' - use '${gender}'`
    })])
    expect(saying(c, valueSet({ system: "urn:oid:1.2.3.4.5.6.7" }), "by an identifier")).toEqual([])
    const twin = (url: string) => ({ resourceType: "CodeSystem", url, status: "draft", content: "complete", identifier: [{ system: "urn:ietf:rfc:3986", value: "urn:oid:1.2.3.4.99" }], concept: [{ code: "a" }] })
    const twins = build([...((await loadResources()) ?? []), twin("http://example.org/fhir/CodeSystem/one"), twin("http://example.org/fhir/CodeSystem/two")], 2)
    expect(saying(twins, valueSet({ system: "urn:oid:1.2.3.4.99" }), "by an identifier")).toEqual([expect.objectContaining({
      severity: "error", diagnostics: expect.stringContaining("matches to multiple CodeSystem resources (http://example.org/fhir/CodeSystem/one,http://example.org/fhir/CodeSystem/two)")
    })])
  }, 120_000)

  withCatalog("a value set named as the system names the systems it uses", (c) => {
    expect(saying(c, valueSet({ system: "http://hl7.org/fhir/ValueSet/administrative-gender" }), "is actually a value set")).toEqual([expect.objectContaining({
      severity: "error", diagnostics: `The system 'http://hl7.org/fhir/ValueSet/administrative-gender' is actually a value set, which itself refers to the system '${gender}' so that may be what is intended here`
    })])
    expect(saying(c, valueSet({ system: "http://hl7.org/fhir/ValueSet/jurisdiction" }), "is actually a value set")).toEqual([expect.objectContaining({
      severity: "error", diagnostics: expect.stringContaining("which itself refers to the systems http://unstats.un.org/unsd/methods/m49/m49.htm, urn:iso:std:iso:3166")
    })])
  })

  withCatalog("concepts and filters without a system cannot be checked", (c) => {
    expect(saying(c, valueSet({ concept: [{ code: "a" }] }), "No System specified")).toEqual([expect.objectContaining({
      severity: "warning", expression: "ValueSet.compose.include[0]"
    })])
    expect(saying(c, valueSet({ valueSet: ["http://hl7.org/fhir/ValueSet/administrative-gender"] }), "No System specified")).toEqual([])
  })

  withCatalog("the concepts of a system the server does not know cannot be checked", (c) => {
    const unknown = "http://unknown.test/CodeSystem/x"
    expect(saying(c, valueSet({ system: unknown, concept: [{ code: "a" }] }), "Unknown System")).toEqual([expect.objectContaining({
      severity: "warning", expression: "ValueSet.compose.include[0]", diagnostics: expect.stringContaining(`Unknown System '${unknown}' specified, so Concepts and Filters can't be checked`)
    })])
    expect(saying(c, valueSet({ system: gender, version: "9.9", concept: [{ code: "male" }] }), "Unknown System/Version")).toEqual([expect.objectContaining({
      severity: "warning", diagnostics: expect.stringContaining(`'${gender}#9.9'`)
    })])
    expect(saying(c, valueSet({ system: unknown, concept: [{ code: "a" }, { code: "b" }] }), "no terminology service supports it")).toEqual([expect.objectContaining({
      severity: "information", expression: "ValueSet.compose.include[0]"
    })])
    const many = Array.from({ length: 1001 }, (_, i) => ({ code: `c${i}` }))
    expect(saying(c, valueSet({ system: unknown, concept: many }), "too many concepts to validate (1001, more than the limit of 1000)")).toEqual([
      expect.objectContaining({ severity: "information" })
    ])
    expect(saying(c, valueSet({ system: gender, concept: [{ code: "male" }] }), "Unknown System")).toEqual([])
    expect(saying(c, valueSet({ system: "http://snomed.info/sct", concept: [{ code: "404684003" }] }), "Unknown System")).toEqual([])
  })

  withCatalog("an example system is an error, and information when validating examples", (c) => {
    const example = valueSet({ system: "http://example.org/fhir/CodeSystem/colours", concept: [{ code: "red" }] })
    expect(saying(c, example, "Example System")).toEqual([expect.objectContaining({
      severity: "error", diagnostics: "Example System 'http://example.org/fhir/CodeSystem/colours' specified, which is illegal. Concepts and Filters can't be checked"
    })])
    expect(saying(c, example, "Example System", { examples: true })).toEqual([expect.objectContaining({
      severity: "information", diagnostics: "Example System 'http://example.org/fhir/CodeSystem/colours' specified, so Concepts and Filters can't be checked"
    })])
  })

  withCatalog("a filter on a system the server does not hold uses a generally known property", (c) => {
    const filtered = (system: string, property: string) => valueSet({ system, filter: [{ property, op: "=", value: "x" }] })
    expect(saying(c, filtered("http://unknown.test/CodeSystem/x", "colour"), "No definition can be found for the system")).toEqual([expect.objectContaining({
      severity: "information", expression: "ValueSet.compose.include[0].filter[0]",
      diagnostics: expect.stringContaining("the property 'colour' is not a generally known property")
    })])
    expect(saying(c, filtered("http://unknown.test/CodeSystem/x", "inactive"), "No definition can be found")).toEqual([])
    expect(saying(c, filtered("http://loinc.org", "COMPONENT"), "No definition can be found")).toEqual([])
    expect(saying(c, filtered("http://loinc.org", "colour"), "No definition can be found")).toHaveLength(1)
  })

  withCatalog("a listed display that is not the code's display is information", (c) => {
    expect(saying(c, valueSet({ system: gender, concept: [{ code: "male", display: "Man" }] }), "does not have to match")).toEqual([expect.objectContaining({
      severity: "information", expression: "ValueSet.compose.include[0].concept[0]",
      diagnostics: expect.stringContaining(`Wrong Display Name 'Man' for ${gender}#male`)
    })])
    expect(saying(c, valueSet({ system: gender, version: "4.0.1", concept: [{ code: "male", display: "Man" }] }), "does not have to match")).toHaveLength(1)
    expect(saying(c, valueSet({ system: gender, concept: [{ code: "male", display: "male" }] }), "does not have to match")).toEqual([])
  })

  withCatalog("an include gives displays for all its concepts or for none", (c) => {
    expect(saying(c, valueSet({ system: gender, concept: [{ code: "male", display: "Male" }, { code: "female" }] }), "some concepts with displays and some without")).toEqual([
      expect.objectContaining({ severity: "information", expression: "ValueSet.compose.include[0]" })
    ])
    expect(saying(c, valueSet({ system: gender, concept: [{ code: "male" }, { code: "female" }] }), "some concepts with displays")).toEqual([])
    const sct = (displays: ReadonlyArray<string>) => valueSet({ system: "http://snomed.info/sct", concept: [{ code: "195967001", display: displays[0] }, { code: "404684003", display: displays[1] }] })
    expect(saying(c, sct(["Asthma (disorder)", "Clinical finding"]), "semantic tags")).toEqual([expect.objectContaining({
      severity: "information", diagnostics: expect.stringContaining("examples for FSN: [Asthma (disorder)] and examples for no FSN: [Clinical finding]")
    })])
    expect(saying(c, sct(["Asthma (disorder)", "Clinical finding (finding)"]), "semantic tags")).toEqual([])
  })
})
