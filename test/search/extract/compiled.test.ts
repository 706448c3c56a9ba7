/**
 * The compiled paths (src/fhirpath/compiledPath.ts) give what fhirpath.js gives: node by node on small
 * inputs, and index row by row over every Synthea resource and every R4 example.
 */
import { beforeAll, describe, expect, it } from "vitest"
import type { Catalog } from "../../../src/catalog/Catalog.ts"
import { compilePath } from "../../../src/fhirpath/compiledPath.ts"
import { compile, isCompiled, rewrite } from "../../../src/fhirpath/expressions.ts"
import { extractIndexReport } from "../../../src/search/extract/extractIndex.ts"
import { elementPath, typed } from "../../../src/fhirpath/nodes.ts"
import { planFor } from "../../../src/search/extract/plan.ts"
import { loadR4Examples } from "../../support/r4Examples.ts"
import { asStored, loadSynthea, skipSynthea } from "../../support/synthea.ts"
import { loadCatalog } from "./catalog.ts"

/** What extraction reads of a result: its value and FHIR type, and the element path bindings are looked up by. */
const seen = (results: ReadonlyArray<unknown>) =>
  results.map((result) => {
    const value = typed(result)
    return { type: value?.type, data: value?.data, path: value?.node === undefined ? undefined : elementPath(value.node) }
  })

/** Both engines on one expression; the compiled one must exist. */
const both = (expression: string, resource: unknown, base?: string) => {
  const text = base === undefined ? rewrite(expression) : expression
  expect(isCompiled(text, base)).toBe(true)
  const compiled = compile(text, base, "compiled")
  const reference = compile(text, base, "fhirpath")
  if (compiled === undefined || reference === undefined) throw new Error(`${expression} does not compile`)
  return { compiled: seen(compiled(resource)), reference: seen(reference(resource)) }
}

const observation = {
  resourceType: "Observation",
  id: "o1",
  status: "final",
  code: { coding: [{ system: "http://loinc.org", code: "8480-6" }], text: "Systolic" },
  subject: { reference: "Patient/p1" },
  performer: [{ reference: "Practitioner/d1" }, { reference: "https://example.org/fhir/Patient/p2" }, { reference: "#c1" }, { type: "Patient", display: "someone" }],
  valueQuantity: { value: 120.50, unit: "mmHg", system: "http://unitsofmeasure.org", code: "mm[Hg]" },
  component: [
    { code: { text: "a" }, valueCodeableConcept: { coding: [{ code: "x" }] } },
    { code: { text: "b" }, valueQuantity: { value: 3 } },
    { code: { text: "c" }, valueString: "three" }
  ],
  extension: [{ url: "http://example.org/a", valueString: "one" }, { url: "http://example.org/b", valueBoolean: true }],
  _status: { extension: [{ url: "http://example.org/s", valueCode: "z" }] }
}

describe("compiled paths against fhirpath.js on small inputs", () => {
  const cases: ReadonlyArray<readonly [string, string, unknown]> = [
    ["a dotted path through lists", "Observation.code.coding.code", observation],
    ["a path from a parent type", "Resource.id", observation],
    ["a path without a type", "status", observation],
    ["a choice element, typed by the field present", "Observation.value", observation],
    ["choice elements under a list", "Observation.component.value", observation],
    ["ofType on a choice", "(Observation.component.value as Quantity)", observation],
    ["ofType by the `.as` form", "Observation.component.value.as(CodeableConcept)", observation],
    ["ofType with a primitive type", "Observation.component.value.ofType(string)", observation],
    ["a step after a parenthesised ofType", "(Observation.value as Quantity).value", observation],
    ["resolve() is Patient", "Observation.performer.where(resolve() is Patient)", observation],
    ["resolve() is Practitioner", "Observation.performer.where(resolve() is Practitioner)", observation],
    ["where on a code", "Patient.telecom.where(system='email')", {
      resourceType: "Patient",
      telecom: [{ system: "phone", value: "1" }, { system: "email", value: "a@b" }, { value: "none" }, { system: "email", value: "c@d" }]
    }],
    ["extension by url", "Observation.extension('http://example.org/b')", observation],
    ["extension of a primitive", "Observation.status.extension('http://example.org/s')", observation],
    ["an indexer", "Bundle.entry[0].resource", {
      resourceType: "Bundle", entry: [{ resource: { resourceType: "Composition", id: "c" } }, { resource: { resourceType: "Patient" } }]
    }],
    ["a decimal", "RiskAssessment.prediction.probability", { resourceType: "RiskAssessment", prediction: [{ probabilityDecimal: 0.25 }, { probabilityRange: { low: { value: 1 } } }] }],
    ["ofType(uri) takes canonical too", "(ConceptMap.source as uri)", { resourceType: "ConceptMap", sourceCanonical: "http://example.org/vs" }],
    ["a type the resource is not", "Patient.name", observation],
    ["an element named like an operator", "ValueSet.expansion.contains.contains.code", {
      resourceType: "ValueSet", expansion: { contains: [{ code: "a", contains: [{ code: "b" }] }, { code: "c" }] }
    }]
  ]
  for (const [name, expression, resource] of cases) {
    it(`${name}: ${expression}`, () => {
      const { compiled, reference } = both(expression, resource)
      expect(compiled).toEqual(reference)
    })
  }

  it("gives nodes with their type, property name and parent, as fhirpath.js does", () => {
    const evaluate = compilePath("Observation.component.value.ofType(Quantity)")
    const [value] = evaluate?.(observation) ?? []
    expect(value?.fhirNodeDataType).toBe("Quantity")
    expect(value?.propName).toBe("value")
    expect(value?.parentResNode?.fhirNodeDataType).toBe("BackboneElement")
    expect(value?.parentResNode?.parentResNode?.fhirNodeDataType).toBe("Observation")
  })

  it("runs component expressions relative to a base path", () => {
    for (const base of ["Observation", "Observation.component"]) {
      const resource = base === "Observation" ? observation : observation.component[1]
      for (const expression of ["code", "value.as(Quantity)", "value.as(DateTime) | value.as(Period)"]) {
        const { compiled, reference } = both(expression, resource, base)
        expect(compiled).toEqual(reference)
      }
    }
  })

  it("reads odd data as fhirpath.js does", () => {
    const odd = {
      resourceType: "Patient",
      active: true,
      name: [{ given: ["a", null, "c"], _given: [null, { extension: [{ url: "u", valueString: "b" }] }, null, { id: "d" }], text: "abc" }],
      contained: [{ resourceType: "Practitioner", id: "c1", name: [{ family: "f" }] }, { resourceType: "name", id: "c2" }],
      extension: [null],
      _birthDate: { extension: [{ url: "u", valueDate: "2000" }] }
    }
    const expressions = [
      "Patient.name.given", "Patient.name.given.extension('u')", "Patient.contained.name", "Patient.contained.name.family",
      "Patient.name.text.length", "Patient.active.valueOf", "Patient.extension('')", "Patient.extension('u')", "Patient.birthDate.extension('u')", "Patient.birthDate.extension"
    ]
    for (const expression of expressions) {
      const compiled = compile(expression, undefined, "compiled")
      const reference = compile(expression, undefined, "fhirpath")
      const run = (evaluate: typeof compiled) => {
        try {
          return seen(evaluate?.(odd) ?? [])
        } catch (error) {
          return String(error)
        }
      }
      expect(run(compiled), expression).toEqual(run(reference))
    }
  })

  it("leaves to fhirpath.js what it does not read exactly", () => {
    expect(isCompiled("Patient.deceased.exists() and Patient.deceased != false")).toBe(false)
    expect(isCompiled("Patient.name.where(given.exists())")).toBe(false)
    expect(isCompiled("Patient.link.other.resolve()")).toBe(false)
    expect(isCompiled("true")).toBe(false)
    expect(isCompiled("Patient.name.given[0] | %resource.id")).toBe(false)
    // An equality on a number, and a union of two values, are decided by fhirpath.js at run time.
    const odd = { resourceType: "Patient", telecom: [{ system: 3, value: "x" }], name: [{ family: "a" }, { family: "b" }] }
    for (const expression of ["Patient.telecom.where(system='3')", "Patient.name.family | Patient.name.family"]) {
      const compiled = compile(expression, undefined, "compiled")
      const reference = compile(expression, undefined, "fhirpath")
      expect(seen(compiled?.(odd) ?? [])).toEqual(seen(reference?.(odd) ?? []))
    }
  })
})

let catalog: Catalog | undefined

beforeAll(async () => {
  catalog = await loadCatalog()
}, 300_000)

/** The resources whose extraction differs between the engines, with the first differing row of each. */
const differences = (resources: ReadonlyArray<Record<string, unknown>>, catalog: Catalog) => {
  const found: Array<string> = []
  for (const resource of resources) {
    const compiled = extractIndexReport(resource, catalog, "compiled")
    const reference = extractIndexReport(resource, catalog, "fhirpath")
    const a = compiled.rows.map((row) => JSON.stringify(row))
    const b = reference.rows.map((row) => JSON.stringify(row))
    const at = a.findIndex((row, i) => row !== b[i])
    if (at >= 0 || a.length !== b.length || JSON.stringify(compiled.skipped) !== JSON.stringify(reference.skipped)) {
      found.push(`${resource["resourceType"]}/${resource["id"]}: row ${at}: ${a[at] ?? "(none)"} instead of ${b[at] ?? "(none)"}`)
    }
  }
  return found
}

describe("extraction with compiled paths", () => {
  it("compiles all but a few of R4's search parameter expressions", (context) => {
    if (catalog === undefined) return context.skip()
    let compiled = 0
    let all = 0
    for (const type of catalog.resourceTypes) {
      for (const parameter of planFor(catalog, type)?.parameters ?? []) {
        all++
        if (parameter.compiled) compiled++
      }
    }
    expect(all).toBeGreaterThan(2000)
    expect(compiled / all).toBeGreaterThan(0.99)
  })

  it.skipIf(skipSynthea)("gives the same index rows as fhirpath.js on every Synthea resource", (context) => {
    if (catalog === undefined) return context.skip()
    const resources = loadSynthea().flatMap(({ bundle }) => asStored(bundle.entry))
    expect(resources.length).toBeGreaterThan(10_000)
    expect(differences(resources, catalog)).toEqual([])
  }, 120_000)

  it("gives the same index rows as fhirpath.js on every R4 example", async (context) => {
    const examples = await loadR4Examples("R4 examples of the compiled extraction test")
    if (catalog === undefined || examples === undefined) return context.skip()
    expect(examples.length).toBeGreaterThan(5000)
    expect(differences(examples.map(({ resource }) => resource), catalog)).toEqual([])
  }, 120_000)
})

