/**
 * Rules of particular types that the StructureDefinitions state in prose rather than as invariants:
 * - Attachment: `size` is the number of bytes in `data` (https://hl7.org/fhir/R4/datatypes.html#Attachment).
 * - Bundle: links, fullUrls, references between entries, documents, messages and searchsets (bundle.ts).
 * - CodeSystem: a supplement has content `supplement`; property codes are unique; a concept that uses an
 *   undeclared property is a warning (https://hl7.org/fhir/R4/codesystem.html).
 * - ValueSet: a listed code exists in its system when the server holds the system completely; SNOMED CT
 *   identifiers in codes, filters and ECL are well-formed.
 * - Identifier: an absolute system, and a URI value with urn:ietf:rfc:3986 (uris.ts).
 * - Meta: no security label twice (security.ts).
 * - Coding, and more of CodeSystem, ValueSet and ConceptMap: terminology.ts, terminologyResources.ts,
 *   conceptMap.ts and codeSystemAdvice.ts.
 */
import type { Rule } from "./Reporter.ts"
export type { Reporter, Rule } from "./Reporter.ts"
import { isObject } from "../catalog/json.ts"
import { bundle } from "./bundle.ts"
import { codeSystemAdvice } from "./codeSystemAdvice.ts"
import { codeInSystemProblem, sctidProblem, snomed } from "./codes.ts"
import { conceptMapRules } from "./conceptMap.ts"
import { conformanceRules } from "./conformance.ts"
import { hl7ArtefactRules } from "./hl7Artefacts.ts"
import { measureRules } from "./measure.ts"
import { operationDefinitionRules } from "./operationDefinition.ts"
import { parametersRules } from "./parameters.ts"
import { questionnaireRule } from "./questionnaire/questionnaire.ts"
import { questionnaireResponseRule } from "./questionnaire/response.ts"
import { duplicateSecurityLabels } from "./security.ts"
import { structureDefinitionRules } from "./structureDefinition.ts"
import { identifierProblems } from "./uris.ts"
import { checkCoding } from "./terminology.ts"
import { codeSystemRules, valueSetRules } from "./terminologyResources.ts"
import { valueSetAuthoringRules } from "./valueSetAuthoring.ts"



const list = (value: unknown): ReadonlyArray<unknown> => (Array.isArray(value) ? value : [])

const base64Length = (data: string): number => {
  const text = data.replace(/\s+/g, "")
  const padding = text.endsWith("==") ? 2 : text.endsWith("=") ? 1 : 0
  return (text.length / 4) * 3 - padding
}

const attachment: Rule = (value, path, reporter) => {
  const data = value["data"]
  const size = value["size"]
  if (typeof data !== "string" || typeof size !== "number") return
  if (!/^(\s*[0-9a-zA-Z+/=]{4}\s*)+$/.test(data)) return
  const actual = base64Length(data)
  if (actual !== size) {
    reporter.report("error", "value", `${path}.size`, `The stated size ${size} does not match the size of the data (${actual} bytes)`)
  }
}

/**
 * The properties every code system may state, by their URI in http://hl7.org/fhir/concept-properties, with
 * the code and type that URI stands for (https://hl7.org/fhir/R4/codesystem.html#defined-props, and the
 * later additions that tools use).
 */
const conceptProperties: ReadonlyMap<string, { readonly code: string; readonly type: string }> = new Map(
  ([
    ["status", "code"], ["inactive", "boolean"], ["effectiveDate", "dateTime"], ["deprecationDate", "dateTime"],
    ["retirementDate", "dateTime"], ["notSelectable", "boolean"], ["parent", "code"], ["child", "code"],
    ["partOf", "code"], ["synonym", "code"], ["comment", "string"], ["itemWeight", "decimal"]
  ] as const).map(([code, type]) => [`http://hl7.org/fhir/concept-properties#${code}`, { code, type }])
)

const codeSystem: Rule = (value, path, reporter) => {
  if (typeof value["supplements"] === "string" && value["content"] !== "supplement") {
    reporter.report("error", "business-rule", `${path}.content`, "A CodeSystem that supplements another SHALL have the content 'supplement'")
  }
  const declared = new Set<string>()
  const uris = new Set<string>()
  list(value["property"]).forEach((property, i) => {
    if (!isObject(property) || typeof property["code"] !== "string") return
    const at = `${path}.property[${i}]`
    if (declared.has(property["code"])) {
      reporter.report("error", "business-rule", at, `A property is already defined with the code '${property["code"]}'`)
    }
    declared.add(property["code"])
    const uri = property["uri"]
    if (typeof uri !== "string") return
    if (uris.has(uri)) reporter.report("error", "business-rule", at, `A property is already defined with the URI '${uri}'`)
    uris.add(uri)
    const known = conceptProperties.get(uri)
    if (known === undefined) return
    if (property["code"] !== known.code) {
      reporter.report("error", "business-rule", at, `The URI '${uri}' is normally assigned the code '${known.code}'. Using the code '${property["code"]}' will usually create confusion in ValueSet filters etc`)
    }
    if (typeof property["type"] === "string" && property["type"] !== known.type) {
      reporter.report("error", "business-rule", at, `Wrong type '${property["type"]}': The URI '${uri}' identifies a property that has the type '${known.type}'`)
    }
  })
  const visit = (concepts: unknown, at: string, depth: number): void => {
    if (depth > 64) return
    list(concepts).forEach((concept, i) => {
      if (!isObject(concept)) return
      list(concept["property"]).forEach((property, j) => {
        if (isObject(property) && typeof property["code"] === "string" && !declared.has(property["code"]) && !implicitProperties.has(property["code"])) {
          reporter.report("warning", "business-rule", `${at}[${i}].property[${j}]`, `The property '${property["code"]}' has no definition in CodeSystem.property. Many terminology tools won't know what to do with it`)
        }
      })
      visit(concept["concept"], `${at}[${i}].concept`, depth + 1)
    })
  }
  visit(value["concept"], `${path}.concept`, 0)
}

/** The properties every code system has without declaring them (https://hl7.org/fhir/R4/codesystem.html#defined-props). */
const implicitProperties = new Set(["parent", "child", "partOf", "inactive", "deprecated", "notSelectable", "status"])

const snomedFilterProperties = new Set(["concept", "expression", "expressions", "parent", "child"])

/** The concept ids of an ECL expression: its numbers outside terms (`|...|`), cardinalities (`[1..*]`) and concrete values (`#5`). */
const eclIdentifiers = (ecl: string): ReadonlyArray<string> =>
  ecl.replace(/\|[^|]*\|/g, " ").replace(/\[[^\]]*\]/g, " ").replace(/#-?[0-9.]+/g, " ").match(/\d+/g) ?? []

const valueSet: Rule = (value, path, reporter) => {
  const compose = value["compose"]
  if (!isObject(compose)) return
  for (const part of ["include", "exclude"] as const) {
    list(compose[part]).forEach((include, i) => {
      if (!isObject(include) || typeof include["system"] !== "string") return
      const system = include["system"]
      const at = `${path}.compose.${part}[${i}]`
      list(include["concept"]).forEach((concept, j) => {
        if (!isObject(concept) || typeof concept["code"] !== "string") return
        const version = typeof include["version"] === "string" ? include["version"] : undefined
        const problem = codeInSystemProblem(reporter.registry.catalog, system, concept["code"], version)
        if (problem !== undefined) reporter.report("error", "code-invalid", `${at}.concept[${j}]`, problem)
      })
      if (system !== snomed) return
      list(include["filter"]).forEach((filter, j) => {
        if (!isObject(filter) || typeof filter["value"] !== "string") return
        const property = filter["property"]
        const filterValue = filter["value"]
        const ids = property === "constraint"
          ? eclIdentifiers(filterValue)
          : snomedFilterProperties.has(String(property)) && filter["op"] !== "regex" ? [filterValue] : []
        for (const id of ids) {
          const problem = sctidProblem(id)
          if (problem !== undefined) {
            reporter.report("error", "code-invalid", `${at}.filter[${j}]`, `The value '${filterValue}' of the filter on '${String(property)}' is invalid: ${problem}`)
            break
          }
        }
      })
    })
  }
}

/** Every rule of a resource type runs, in the order listed. */
const combine = (entries: ReadonlyArray<readonly [string, Rule]>): ReadonlyMap<string, Rule> => {
  const grouped = new Map<string, Array<Rule>>()
  for (const [type, rule] of entries) grouped.set(type, [...(grouped.get(type) ?? []), rule])
  return new Map([...grouped].map(([type, rules]): [string, Rule] => [
    type,
    rules.length === 1 ? rules[0]! : (value, path, reporter) => { for (const rule of rules) rule(value, path, reporter) }
  ]))
}

const byResource: ReadonlyMap<string, Rule> = combine([
  ["Bundle", bundle],
  ["CodeSystem", codeSystem], ["CodeSystem", codeSystemRules],
  ["ValueSet", valueSet], ["ValueSet", valueSetRules], ...valueSetAuthoringRules,
  ...conceptMapRules, ...codeSystemAdvice,
  ["Questionnaire", questionnaireRule], ["QuestionnaireResponse", questionnaireResponseRule],
  ...conformanceRules, ...measureRules, ...operationDefinitionRules, ...parametersRules, ...hl7ArtefactRules,
  ...structureDefinitionRules
])
const byType: ReadonlyMap<string, Rule> = new Map([
  ["Attachment", attachment],
  ["Coding", checkCoding],
  ["Identifier", (value, path, reporter) => identifierProblems(value, path, reporter)],
  ["Meta", (value, path, reporter) => duplicateSecurityLabels(value, path, reporter)]
])

export const resourceRules = (type: string): Rule | undefined => byResource.get(type)
export const typeRules = (type: string): Rule | undefined => byType.get(type)
