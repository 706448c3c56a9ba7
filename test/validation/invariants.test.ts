import { describe, expect, it } from "vitest"
import { comparePeriod } from "../../src/validation/dates.ts"
import { registryFor } from "../../src/validation/registry.ts"
import { compileSimple } from "../../src/fhirpath/simplePath.ts"
import { validateResource } from "../../src/validation/Validator.ts"
import { Walk } from "../../src/validation/walk.ts"
import { loadR4Examples } from "../support/r4Examples.ts"
import { loadSynthea, skipSynthea } from "../support/synthea.ts"
import { catalogTests, errors, narrative, problems } from "./support.ts"

const withCatalog = catalogTests()

const encounter = (period: Record<string, unknown>) => ({
  resourceType: "Encounter",
  status: "finished",
  class: { system: "http://terminology.hl7.org/CodeSystem/v3-ActCode", code: "AMB" },
  period
})

describe("per-1: a period's start is not after its end", () => {
  withCatalog("start after end is an error", (c) => {
    expect(problems(c, encounter({ start: "2020-02-01", end: "2020-01-01" }))).toEqual([{
      severity: "error",
      code: "invariant",
      expression: "Encounter.period",
      diagnostics: "Constraint failed: per-1: 'If present, start SHALL have a lower value than end'"
    }])
  })

  withCatalog("start before end, or one of them absent, is fine", (c) => {
    expect(problems(c, encounter({ start: "2020-01-01T10:00:00Z", end: "2020-01-01T10:00:00+01:00" }))).toHaveLength(1)
    expect(problems(c, encounter({ start: "2020-01-01T10:00:00+01:00", end: "2020-01-01T10:00:00Z" }))).toEqual([])
    expect(problems(c, encounter({ start: "2020-01-01" }))).toEqual([])
  })

  it.each([
    ["2020", "2021", true],
    ["2021", "2020-06", false],
    ["2020-06-21", "2020-06-21", true],
    ["2023-06-21", "2023-06-21T06:20:00Z", undefined],
    ["2023-06-20", "2023-06-21T06:20:00Z", true],
    ["2020-01-01T10:00:00.500Z", "2020-01-01T10:00:00Z", false]
  ] as const)("%s <= %s is %s", (start, end, expected) => {
    expect(comparePeriod(start, end)).toBe(expected)
  })
})

describe("bdl-7: fullUrls are distinct in a Bundle, however many entries", () => {
  const bundle = (urls: ReadonlyArray<string>) => ({
    resourceType: "Bundle",
    type: "collection",
    entry: urls.map((fullUrl) => ({ fullUrl, resource: { resourceType: "Basic", code: { text: "x" } } }))
  })
  const many = Array.from({ length: 3_000 }, (_, i) => `urn:uuid:00000000-0000-0000-0000-${String(i).padStart(12, "0")}`)

  withCatalog("three thousand distinct fullUrls pass; one repeated among them is an error", (c) => {
    expect(errors(validateResource(bundle(many), c))).toEqual([])
    const repeated = errors(validateResource(bundle([...many, many[1_500]!]), c))
    expect(repeated.map((issue) => issue.diagnostics.slice(0, 26))).toEqual(["Constraint failed: bdl-7: "])
  })
})

describe("other invariants", () => {
  withCatalog("a local reference needs the contained resource (ref-1)", (c) => {
    const found = errors(validateResource({ resourceType: "Observation", status: "final", code: { text: "x" }, subject: { reference: "#p" } }, c))
    expect(found.map((issue) => [issue.expression, issue.diagnostics.slice(0, 26)])).toEqual([["Observation.subject", "Constraint failed: ref-1: "]])
  })

  withCatalog("a contained resource that nothing refers to is an error (dom-3)", (c) => {
    const contained = [{ resourceType: "Patient", id: "p" }]
    const referred = { resourceType: "Observation", status: "final", code: { text: "x" }, contained, subject: { reference: "#p" } }
    expect(errors(validateResource(referred, c))).toEqual([])
    const { subject: _subject, ...alone } = referred
    expect(errors(validateResource(alone, c)).map((issue) => issue.diagnostics.slice(0, 26))).toEqual(["Constraint failed: dom-3: "])
  })

  withCatalog("no narrative is a warning (dom-6), not an error", (c) => {
    const issues = validateResource({ resourceType: "Patient" }, c)
    expect(issues).toEqual([expect.objectContaining({ severity: "warning", code: "invariant", expression: "Patient" })])
    expect(validateResource({ resourceType: "Patient", text: narrative }, c)).toEqual([])
  })

  withCatalog("que-12 counts from two enableWhen, as its text says", (c) => {
    const item = (enableWhen: ReadonlyArray<unknown>) => ({
      resourceType: "Questionnaire",
      status: "draft",
      item: [{ linkId: "a", type: "integer" }, { linkId: "b", type: "integer", enableWhen }]
    })
    const when = { question: "a", operator: "=", answerInteger: 1 }
    expect(errors(validateResource(item([when]), c))).toEqual([])
    expect(errors(validateResource(item([when, when]), c)).map((issue) => issue.diagnostics.slice(0, 27))).toEqual(["Constraint failed: que-12: "])
  })

  withCatalog("R4's Java regexes run (eld-19 and eld-20 on a StructureDefinition's elements)", (c) => {
    const sd = {
      resourceType: "StructureDefinition",
      url: "http://example.org/sd",
      name: "Sd",
      status: "draft",
      kind: "resource",
      abstract: false,
      type: "Patient",
      baseDefinition: "http://hl7.org/fhir/StructureDefinition/Patient",
      derivation: "constraint",
      differential: { element: [{ id: "Patient.name", path: "Patient.name", min: 1 }, { id: "Patient.bad", path: "Patient..bad" }] }
    }
    const found = validateResource(sd, c).filter((issue) => issue.code === "invariant" && !issue.diagnostics.includes("dom-6"))
    expect(found.map((issue) => [issue.severity, issue.expression, issue.diagnostics.slice(0, 27)])).toEqual([
      ["error", "StructureDefinition.differential.element[1]", "Constraint failed: eld-19: "],
      ["warning", "StructureDefinition.differential.element[1]", "Constraint failed: eld-20: "]
    ])
  })
})

describe("the invariant compiler", () => {
  it.each([
    ["code.empty() or system.exists()", { code: "a" }, false],
    ["code.empty() or system.exists()", { code: "a", system: "s" }, true],
    ["extension.exists() != value.exists()", { valueString: "a" }, true],
    ["extension.exists() != value.exists()", { _valueString: { extension: [{}] } }, true],
    ["extension.exists() != value.exists()", {}, false],
    ["coding.where(system = 'a' and code = 'b').exists()", { coding: [{ system: "a", code: "c" }, { system: "a", code: "b" }] }, true],
    ["name.matches('[A-Z]([A-Za-z0-9_]){0,254}')", {}, false],
    ["url.contains('/_history/').not()", {}, true],
    ["(a.count() + b.count()) <= 1", { a: [1], b: [2] }, false],
    ["item.all(linkId.exists())", { item: [{ linkId: "1" }, { text: "x" }] }, false],
    ["(x | y).count() = 2", { x: "a", y: "a" }, false]
  ] as const)("%s on %j is %s", (expression, focus, expected) => {
    const compiled = compileSimple(expression, expression.includes("value") ? "Extension" : undefined)
    expect(compiled).toBeDefined()
    expect(compiled!(focus, { resource: focus, rootResource: focus }) === true).toBe(expected)
  })

  it.each(["descendants().count() > 1", "value is Quantity", "children().exists()", "Patient.name.exists()", "a ~ b"])("leaves %s to fhirpath.js", (expression) => {
    expect(compileSimple(expression)).toBeUndefined()
  })

  withCatalog("agrees with fhirpath.js on every element of the R4 examples and of three Synthea patients", async (c) => {
    const examples = await loadR4Examples("invariant compiler cross-check")
    if (examples === undefined) return
    const registry = registryFor(c)
    let compared = 0
    const disagreements: Array<string> = []
    const synthea = skipSynthea ? [] : loadSynthea().slice(0, 3).flatMap(({ file, bundle }) => bundle.entry.map((entry) => ({ file, resource: entry.resource })))
    for (const { file, resource } of [...examples, ...synthea]) {
      // Bundles and conformance resources repeat what the other examples have, at many times the cost.
      if (["Bundle", "StructureDefinition", "CodeSystem", "ValueSet", "SearchParameter", "ConceptMap"].includes(String(resource["resourceType"]))) continue
      const walk = new Walk(registry)
      walk.run(resource, "", [])
      for (const { invariant, data, scope, path } of walk.collected) {
        if (invariant.engine !== "simple") continue
        const expected = invariant.reference(data, scope)
        if (typeof expected === "object") continue
        compared++
        const actual = invariant.check(data, scope, false)
        // `is` of nothing is false, as the reference validator reads it (fhirpath.js: empty).
        if (actual !== expected && !/ is /.test(invariant.expression)) disagreements.push(`${file} ${path} ${invariant.key}: ${String(actual)} vs ${expected}`)
      }
    }
    console.log(`invariant compiler: ${compared} evaluations compared with fhirpath.js`)
    expect(compared).toBeGreaterThan(5_000)
    expect(disagreements).toEqual([])
  }, 600_000)
})
