import { describe, expect } from "vitest"
import type { Catalog } from "../../src/catalog/Catalog.ts"
import { catalogTests, problems } from "./support.ts"

const withCatalog = catalogTests()

const population = (code: string) => ({ code: { coding: [{ system: "http://terminology.hl7.org/CodeSystem/measure-population", code } ] } })

const unit = { url: "http://hl7.org/fhir/StructureDefinition/questionnaire-unit", valueCoding: { system: "http://unitsofmeasure.org", code: "mg" } }

const report = (scoring: string, measureScore: Record<string, unknown>, measureExtension: ReadonlyArray<unknown> = [unit]) => ({
  resourceType: "MeasureReport", status: "complete", type: "summary", measure: "#m",
  period: { start: "2024-01-01", end: "2024-12-31" },
  contained: [{
    resourceType: "Measure", id: "m", status: "active", extension: measureExtension,
    scoring: { coding: [{ system: "http://terminology.hl7.org/CodeSystem/measure-scoring", code: scoring }] },
    group: [{ code: { text: "g" }, population: [{ ...population("initial-population"), criteria: { language: "text/fhirpath", expression: "true" } }] }]
  }],
  group: [{ code: { text: "g" }, population: [{ ...population("initial-population"), count: 3 }], measureScore }]
})

const scoreIssues = (c: Catalog, resource: unknown) => problems(c, resource).filter((issue) => issue.expression.startsWith("MeasureReport.group[0].measureScore"))

describe("MeasureReport scores", () => {
  withCatalog("the unit a Measure fixes with questionnaire-unit is the unit of the score", (c) => {
    expect(scoreIssues(c, report("continuous-variable", { value: 3, system: "http://unitsofmeasure.org", code: "mg" }))).toEqual([])
    expect(scoreIssues(c, report("ratio", { value: 3, system: "http://unitsofmeasure.org", code: "g" }))).toEqual([expect.objectContaining({
      severity: "error", code: "code-invalid", expression: "MeasureReport.group[0].measureScore.code", diagnostics: "This value is fixed by the Measure to 'mg'"
    })])
    expect(scoreIssues(c, report("continuous-variable", { value: 3, system: "http://example.org/units", code: "mg" }))).toEqual([expect.objectContaining({
      severity: "error", expression: "MeasureReport.group[0].measureScore.system", diagnostics: expect.stringContaining("fixed by the Measure to 'http://unitsofmeasure.org'")
    })])
    expect(scoreIssues(c, report("ratio", { value: 3 }))).toEqual([expect.objectContaining({
      severity: "error", code: "not-found", expression: "MeasureReport.group[0].measureScore", diagnostics: expect.stringContaining("fixed by the Measure to http://unitsofmeasure.org#mg")
    })])
    // Without the extension, a ratio's unit is only advised.
    expect(scoreIssues(c, report("ratio", { value: 3 }, []))).toEqual([expect.objectContaining({ severity: "warning" })])
  })
})
