/**
 * Advice on a CodeSystem (https://hl7.org/fhir/R4/codesystem.html) beyond the rules of
 * terminologyResources.ts:
 * - a system without content (`not-present`) that lists concepts and states a count of 0 (information);
 * - a supplement (https://hl7.org/fhir/R4/codesystem.html#supplements) states the same `count` and
 *   `hierarchyMeaning` as the system it supplements, when the server holds that system (errors); it is a
 *   warning that its concepts cannot be checked when the server does not hold that system's content; a
 *   concept's display that differs from the base system's display for the same language is information;
 * - a designation without a use (https://hl7.org/fhir/R4/codesystem-definitions.html#CodeSystem.concept.designation)
 *   in the language of the code system (or with no language on either) reads as the concept's display, so a
 *   different value is a warning.
 */
import { isObject, type Json } from "../catalog/json.ts"
import type { CodeSystemDef } from "../catalog/definitions.ts"
import { snomed } from "./codes.ts"
import type { Reporter, Rule } from "./Reporter.ts"
import { loinc } from "./terminology.ts"

const list = (value: unknown): ReadonlyArray<unknown> => (Array.isArray(value) ? value : [])

const text = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined)

/** The concepts of a concept list and their nested concepts, with their paths. */
const eachConcept = (concepts: unknown, at: string, visit: (concept: Json, here: string) => void, depth = 0): void => {
  if (depth > 64) return
  list(concepts).forEach((concept, i) => {
    if (!isObject(concept)) return
    const here = `${at}[${i}]`
    visit(concept, here)
    eachConcept(concept["concept"], `${here}.concept`, visit, depth + 1)
  })
}

/** The code system a supplement names (`url|version` tried first), and what it names. */
const supplemented = (reporter: Reporter, supplements: string): CodeSystemDef | undefined => {
  const catalog = reporter.registry.catalog
  return (supplements.includes("|") ? catalog.codeSystem(supplements) : undefined) ?? catalog.codeSystem(supplements.replace(/\|.*$/, ""))
}

const supplementAdvice = (value: Json, path: string, reporter: Reporter, supplements: string): void => {
  const base = supplemented(reporter, supplements)
  const url = supplements.replace(/\|.*$/, "")
  const hasConcepts = list(value["concept"]).length > 0
  if (base === undefined || base.content !== "complete") {
    // SNOMED CT and LOINC codes are checked for their form (terminologyResources.ts).
    if (hasConcepts && url !== snomed && url !== loinc) {
      reporter.report("warning", "business-rule", path, base === undefined
        ? `CodeSystem ${supplements} cannot be found, so the concepts of the supplement cannot be checked against it`
        : `CodeSystem ${supplements} is held without its content (content = ${base.content}), so the concepts of the supplement cannot be checked against it`)
    }
    if (base === undefined) return
  }
  const hierarchyMeaning = text(value["hierarchyMeaning"])
  if (hierarchyMeaning !== undefined && base.hierarchyMeaning !== undefined && hierarchyMeaning !== base.hierarchyMeaning) {
    reporter.report("error", "business-rule", path, `The supplement's hierarchyMeaning '${hierarchyMeaning}' differs from the hierarchyMeaning '${base.hierarchyMeaning}' of the code system it supplements`)
  }
  const count = value["count"]
  const baseCount = base.resource["count"]
  if (value["content"] === "supplement" && typeof count === "number" && typeof baseCount === "number" && count !== baseCount) {
    reporter.report("error", "invalid", `${path}.count`, `The supplement states a total of ${count} concepts, but the code system it supplements states ${baseCount}`)
  }
  // A display in the supplement in the base system's own language competes with the base display.
  const language = text(value["language"])
  const baseLanguage = text(base.resource["language"])
  if (language !== baseLanguage) return
  eachConcept(value["concept"], `${path}.concept`, (concept, here) => {
    const display = text(concept["display"])
    const code = text(concept["code"])
    if (display === undefined || code === undefined) return
    const baseDisplay = base.concept(code)?.display
    if (baseDisplay === undefined || baseDisplay.toLowerCase() === display.toLowerCase()) return
    reporter.report("information", "business-rule", here, `The display '${display}' differs from the display '${baseDisplay}' of the code system it supplements; both claim to be the primary display in the language '${language ?? "undefined"}', and which one applies is not defined`)
  })
}

const codeSystem: Rule = (value, path, reporter) => {
  const content = value["content"]
  const count = value["count"]
  if (content === "not-present" && typeof count === "number" && count <= 0 && list(value["concept"]).length > 0) {
    reporter.report("information", "invalid", `${path}.concept[0]`, "The code system has no content and states a total of 0 concepts: check whether it is a complete code system without concepts, or correct or remove the count")
  }
  const supplements = text(value["supplements"])
  if (supplements !== undefined && supplements !== "") supplementAdvice(value, path, reporter, supplements)
  const language = text(value["language"])
  eachConcept(value["concept"], `${path}.concept`, (concept, here) => {
    const display = text(concept["display"])
    if (display === undefined) return
    list(concept["designation"]).forEach((designation, j) => {
      if (!isObject(designation) || designation["use"] !== undefined) return
      const designated = text(designation["value"])
      if (designated === undefined || designated === display) return
      const designationLanguage = text(designation["language"])
      if (language === undefined && designationLanguage === undefined) {
        reporter.report("warning", "business-rule", `${here}.designation[${j}]`, `The designation '${designated}' has no use and no language, so it is not told apart from the display '${display}'`)
      } else if (language !== undefined && (designationLanguage === undefined || designationLanguage === language)) {
        reporter.report("warning", "business-rule", `${here}.designation[${j}]`, `The designation '${designated}' has no use and is in the language of the code system ('${language}'), so it is not told apart from the display '${display}'`)
      }
    })
  })
}

export const codeSystemAdvice: ReadonlyArray<readonly [string, Rule]> = [["CodeSystem", codeSystem]]
