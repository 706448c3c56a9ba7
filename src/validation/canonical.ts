/**
 * Rules on the metadata of canonical resources (https://hl7.org/fhir/R4/resource.html#canonical), the
 * resources that carry a `url`, a `version` and a `status`:
 * - the `status` agrees with the standards status an artefact declares with the
 *   structuredefinition-standards-status extension (https://hl7.org/fhir/R4/versions.html#std-process):
 *   a `normative` artefact is `active`, a `deprecated` or `withdrawn` one `retired`, and so on (a warning
 *   when they contradict each other, information when they merely look unusual);
 * - a `version` holds no `#`, which canonical references use to separate a fragment
 *   (https://hl7.org/fhir/R4/references.html#canonical): a warning.
 */
import { isObject, type Json } from "../catalog/json.ts"
import type { Severity } from "./Issue.ts"

/** The R4 resource types whose instances are canonical resources. */
export const canonicalResourceTypes: ReadonlySet<string> = new Set([
  "ActivityDefinition", "CapabilityStatement", "ChargeItemDefinition", "CodeSystem", "CompartmentDefinition",
  "ConceptMap", "EffectEvidenceSynthesis", "EventDefinition", "Evidence", "EvidenceVariable", "ExampleScenario",
  "GraphDefinition", "ImplementationGuide", "Library", "Measure", "MessageDefinition", "NamingSystem",
  "OperationDefinition", "PlanDefinition", "Questionnaire", "ResearchDefinition", "ResearchElementDefinition",
  "RiskEvidenceSynthesis", "SearchParameter", "StructureDefinition", "StructureMap", "TerminologyCapabilities",
  "TestScript", "ValueSet"
])

const standardsStatusUrl = "http://hl7.org/fhir/StructureDefinition/structuredefinition-standards-status"

/** The statuses that do not contradict a standards status, and (second) those that are usual with it. */
const consistent: Readonly<Record<string, readonly [ReadonlyArray<string>, ReadonlyArray<string>]>> = {
  draft: [["draft"], ["draft"]],
  normative: [["active"], ["active"]],
  "trial-use": [["draft", "active"], ["active"]],
  informative: [["draft", "active", "retired"], ["draft", "active"]],
  deprecated: [["retired"], ["retired"]],
  withdrawn: [["retired"], ["retired"]],
  external: [["draft", "active", "retired"], ["draft", "active"]]
}

const standardsStatus = (value: Json): string | undefined => {
  const extensions = value["extension"]
  if (!Array.isArray(extensions)) return undefined
  for (const extension of extensions) {
    if (isObject(extension) && extension["url"] === standardsStatusUrl && typeof extension["valueCode"] === "string") return extension["valueCode"]
  }
  return undefined
}

/** Where the rules below report (the walk, or any Reporter). */
interface IssueSink {
  readonly report: (severity: Severity, code: string, expression: string, diagnostics: string) => void
}

export const canonicalResourceRules = (value: Json, path: string, reporter: IssueSink): void => {
  const status = value["status"]
  const declared = standardsStatus(value)
  if (typeof status === "string" && status !== "" && declared !== undefined) {
    const expected = consistent[declared]
    if (expected !== undefined && !expected[0].includes(status)) {
      reporter.report("warning", "business-rule", path, `The resource status '${status}' and the standards status '${declared}' contradict each other`)
    } else if (expected !== undefined && !expected[1].includes(status)) {
      reporter.report("information", "business-rule", path, `The resource status '${status}' and the standards status '${declared}' may not agree: check them`)
    }
  }
  const version = value["version"]
  if (typeof version === "string" && version.includes("#")) {
    reporter.report("warning", "business-rule", `${path}.version`, `The version '${version.slice(0, 80)}' contains a '#', which canonical references use to separate a fragment`)
  }
}
