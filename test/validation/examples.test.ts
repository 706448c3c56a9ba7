/**
 * A report over every resource of hl7.fhir.r4.examples@4.0.1: how many are accepted, and each rejected
 * one with its first error. Every rejection found is a defect of the published resource, listed here with
 * what is wrong; the test fails on a rejection that is not listed (a validator bug until shown otherwise).
 */
import { expect } from "vitest"
import { isValid, validateResource } from "../../src/validation/Validator.ts"
import { loadR4Examples } from "../support/r4Examples.ts"
import { catalogTests, errors } from "./support.ts"

const withCatalog = catalogTests()

const defects: Readonly<Record<string, string>> = {
  "ActivityDefinition-blood-tubes-supply.json": "empty narrative (txt-2)",
  "ActivityDefinition-heart-valve-replacement.json": "empty narrative (txt-2)",
  "EventDefinition-example.json": "empty narrative (txt-2)",
  "Questionnaire-zika-virus-exposure-assessment.json": "narrative of whitespace only (txt-2)",
  "ImagingStudy-example-xr.json": "SNOMED RT code T-15460 given as SNOMED CT",
  "PlanDefinition-example-cardiology-os.json": "the placeholder 'look up value' given as a SNOMED CT code",
  "NutritionOrder-enteralcontinuous.json": "SNOMED CT id 6547210000124112 with a wrong check digit",
  "ImplementationGuide-fhir.json": "no name and no status (both required)",
  "ig-r4.json": "no name and no status (both required)",
  "Bundle-dataelements.json": "the same fullUrl on several entries (bdl-7)",
  "Bundle-valuesets.json": "the SNOMED CT CodeSystem declares the property code 'Laterality' twice",
  "Questionnaire-qs1.json": "items without linkId (required)",
  "CodeSystem-snomedct.json": "declares the property code 'Laterality' twice",
  "StructureDefinition-Definition.json": "logical model, not abstract, without baseDefinition (sdf-4)",
  "StructureDefinition-Event.json": "logical model, not abstract, without baseDefinition (sdf-4)",
  "StructureDefinition-FiveWs.json": "logical model, not abstract, without baseDefinition (sdf-4)",
  "StructureDefinition-Request.json": "logical model, not abstract, without baseDefinition (sdf-4)",
  "SearchParameter-questionnaireresponse-extensions-QuestionnaireResponse-item-subject.json": "an id longer than 64 characters"
}

/** The ten extension search parameters of CodeSystem and ValueSet that R4 published without a base. */
const withoutBase = /^SearchParameter-(codesystem|valueset)-extensions-/

withCatalog("reports which R4 examples are accepted, and why the others are not", async (c) => {
  const examples = await loadR4Examples("R4 examples report")
  if (examples === undefined) return
  let accepted = 0
  const unexplained: Array<string> = []
  const started = performance.now()
  for (const { file, resource } of examples) {
    const issues = validateResource(resource, c)
    if (isValid(issues)) {
      accepted++
      continue
    }
    const first = errors(issues)[0]!
    const reason = defects[file] ?? (withoutBase.test(file) ? "published without a base" : undefined)
    console.log(`  rejected ${file}: ${first.expression}: ${first.diagnostics.slice(0, 160)}${reason === undefined ? "" : ` [${reason}]`}`)
    if (reason === undefined) unexplained.push(`${file}: ${first.expression}: ${first.diagnostics}`)
  }
  const elapsed = performance.now() - started
  console.log(`R4 examples: ${accepted} of ${examples.length} accepted, ${((elapsed * 1000) / examples.length).toFixed(0)} µs per resource`)
  expect(unexplained).toEqual([])
  expect(accepted).toBeGreaterThan(examples.length - 40)
}, 600_000)
