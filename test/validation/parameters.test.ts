import { describe, expect } from "vitest"
import type { Catalog } from "../../src/catalog/Catalog.ts"
import { validateResource } from "../../src/validation/Validator.ts"
import { catalogTests } from "./support.ts"

const withCatalog = catalogTests()

const parameters = (...parameter: ReadonlyArray<Record<string, unknown>>) => ({ resourceType: "Parameters", parameter })

/** The hints on parameters named like a core operation's. */
const hints = (c: Catalog, resource: unknown) =>
  validateResource(resource, c).filter((issue) => issue.diagnostics.includes("operation of the core specification"))

describe("Parameters named like the parameters of core operations", () => {
  withCatalog("a value of another type than the core operations give the parameter is a hint", (c) => {
    expect(hints(c, parameters({ name: "_count", valueString: "ten" }))).toEqual([expect.objectContaining({
      severity: "information", code: "business-rule", expression: "Parameters.parameter[0]",
      diagnostics: expect.stringContaining("its type is integer, but this parameter has a value of type string")
    })])
    expect(hints(c, parameters({ name: "code", valueBoolean: true }))[0]?.diagnostics).toContain("its types are code or string")
    expect(hints(c, parameters({ name: "_count", valueInteger: 10 }, { name: "code", valueString: "x" }, { name: "mine", valueBoolean: true }))).toEqual([])
  })

  withCatalog("a parameter without the value or resource the core operations give it is a hint", (c) => {
    expect(hints(c, parameters({ name: "system" }))).toEqual([expect.objectContaining({
      severity: "information", expression: "Parameters.parameter[0]", diagnostics: expect.stringContaining("it has a value, but this parameter has none")
    })])
    expect(hints(c, parameters({ name: "valueSet", valueUri: "http://example.org/vs" }))).toEqual([expect.objectContaining({
      severity: "information", diagnostics: expect.stringContaining("it has a resource (ValueSet), but this parameter has a value of type uri instead")
    })])
    // `designation` is given with parts by $lookup: parts alone are fine.
    expect(hints(c, parameters({ name: "designation", part: [{ name: "value", valueString: "x" }] }))).toEqual([])
  })

  withCatalog("a resource of another type than the core operations give the parameter is a hint", (c) => {
    const patient = { resourceType: "Patient", id: "p" }
    expect(hints(c, parameters({ name: "valueSet", resource: patient }))).toEqual([expect.objectContaining({
      severity: "information", expression: "Parameters.parameter[0]", diagnostics: expect.stringContaining("its resource type is ValueSet, but this parameter has a resource of type Patient")
    })])
    expect(hints(c, parameters({ name: "valueSet", resource: { resourceType: "ValueSet", status: "draft" } }))).toEqual([])
  })

  withCatalog("a parameter given as a value by one core operation and a resource by another is judged against both", (c) => {
    expect(hints(c, parameters({ name: "source", resource: { resourceType: "Patient", id: "p" } }))).toEqual([expect.objectContaining({
      severity: "information", diagnostics: expect.stringContaining("its type or resource type is uri or Observation, but this parameter has a resource of type Patient")
    })])
    expect(hints(c, parameters({ name: "source" }))[0]?.diagnostics).toContain("has neither a value nor a resource")
    expect(hints(c, parameters({ name: "source", valueUri: "http://example.org" }))).toEqual([])
    expect(hints(c, parameters({ name: "resource", resource: { resourceType: "Patient", id: "p" } }))).toEqual([])
  })
})
