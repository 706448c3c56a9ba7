/**
 * Rules of Measure and MeasureReport that R4 states in prose, checked as the HL7 reference validator
 * checks them (https://hl7.org/fhir/R4/measure.html, https://hl7.org/fhir/R4/measurereport.html):
 * - Measure: groups, and the populations and stratifiers of a group, are told apart by their codes; a
 *   CQL criterion needs a library to name.
 * - MeasureReport: a subject list is only given, and agrees with the count, in a `subject-list` report; a
 *   `data-collection` report has no score. When the Measure is contained in the report, each group,
 *   population and stratifier of the report matches one of the Measure by its code, each of the Measure
 *   is reported, and the score fits the Measure's scoring (and the unit the Measure fixes with the
 *   questionnaire-unit extension).
 */
import { isObject, type Json } from "../catalog/json.ts"
import type { Reporter } from "./Reporter.ts"

type Rule = (value: Json, path: string, reporter: Reporter) => void

const list = (value: unknown): ReadonlyArray<unknown> => (Array.isArray(value) ? value : [])
const objects = (value: unknown): ReadonlyArray<Json> => list(value).filter(isObject)

const cqlLanguages = new Set(["text/cql", "text/cql.identifier", "text/cql-identifier", "text/cql-expression"])

const criteria = (criterion: unknown, at: string, libraries: number, reporter: Reporter): void => {
  if (!isObject(criterion)) return
  const language = criterion["language"]
  if (typeof language !== "string" || language === "") return
  if (cqlLanguages.has(language)) {
    if (libraries === 0) reporter.report("error", "invalid", at, "The criterion is written in CQL, but the Measure names no Library")
  } else {
    reporter.report("warning", "informational", at, `The expression language ${language} is not supported, so the criterion is not checked`)
  }
}

const measure: Rule = (value, path, reporter) => {
  const libraries = list(value["library"]).filter((l) => typeof l === "string").length
  const groups = objects(value["group"])
  if (groups.length === 0) {
    reporter.report("warning", "required", path, "A Measure should contain at least one group")
    return
  }
  list(value["group"]).forEach((group, g) => {
    if (!isObject(group)) return
    const at = `${path}.group[${g}]`
    if (groups.length > 1 && group["code"] === undefined) reporter.report("warning", "required", at, "Groups should have codes when there is more than one group")
    const populations = objects(group["population"])
    if (populations.length === 0) reporter.report("warning", "required", at, "A Measure group should have at least one population")
    list(group["population"]).forEach((population, p) => {
      if (isObject(population) && populations.length > 1 && population["code"] === undefined) {
        reporter.report("warning", "required", `${at}.population[${p}]`, "A group population should have a code when there is more than one population")
      }
    })
    const stratifiers = objects(group["stratifier"])
    list(group["stratifier"]).forEach((stratifier, s) => {
      if (!isObject(stratifier)) return
      const sat = `${at}.stratifier[${s}]`
      if (stratifiers.length > 1 && stratifier["code"] === undefined) {
        reporter.report("warning", "required", sat, "A group stratifier should have a code when there is more than one stratifier")
      }
      criteria(stratifier["criteria"], `${sat}.criteria`, libraries, reporter)
      const components = objects(stratifier["component"])
      list(stratifier["component"]).forEach((component, c) => {
        if (!isObject(component)) return
        if (components.length > 1 && component["code"] === undefined) {
          reporter.report("warning", "required", `${sat}.component[${c}]`, "A stratifier component should have a code when there is more than one component")
        }
        criteria(component["criteria"], `${sat}.component[${c}].criteria`, libraries, reporter)
      })
    })
  })
}

interface Code { readonly system: string; readonly code: string }

const codings = (concept: unknown): ReadonlyArray<Code> =>
  objects(isObject(concept) ? concept["coding"] : undefined)
    .filter((c) => typeof c["system"] === "string" && typeof c["code"] === "string")
    .map((c) => ({ system: String(c["system"]), code: String(c["code"]) }))

const shareCode = (a: unknown, b: unknown): boolean =>
  codings(a).some((x) => codings(b).some((y) => x.system === y.system && x.code === y.code))

const codeText = (concept: unknown): string => {
  const codes = codings(concept).map((c) => `${c.system}#${c.code}`)
  const label = isObject(concept) && typeof concept["text"] === "string" ? `'${concept["text"]}'` : ""
  return [codes.join(", "), label].filter((s) => s !== "").join(": ")
}

/** Same code by system and code; two codes without codings match by their text. */
const sameConcept = (a: unknown, b: unknown): boolean => {
  if (shareCode(a, b)) return true
  if (codings(a).length > 0 || codings(b).length > 0) return false
  return isObject(a) && isObject(b) && typeof a["text"] === "string" && a["text"] === b["text"]
}

const subjectTypes = new Set(["Patient", "Practitioner", "Person", "PractitionerRole", "RelatedPerson"])

/** How many subjects the references of a subject list stand for, or undefined when that cannot be told. */
const subjectCount = (references: ReadonlyArray<unknown>, contained: ReadonlyMap<string, Json>): number | undefined => {
  let count = 0
  for (const reference of references) {
    const ref = isObject(reference) ? reference["reference"] : undefined
    if (typeof ref !== "string") return undefined
    if (ref.startsWith("#")) {
      const target = contained.get(ref.slice(1))
      if (target === undefined) return undefined
      if (subjectTypes.has(String(target["resourceType"]))) count++
      else if (target["resourceType"] === "List") count += list(target["entry"]).length
      else return undefined
      continue
    }
    const parts = ref.split("/")
    const type = parts.length >= 2 ? parts[parts.length - 2]! : ""
    if (!subjectTypes.has(type)) return undefined
    count++
  }
  return count
}

const measurementScoring = new Set(["proportion", "ratio", "continuous-variable", "cohort"])
const measurePopulation = "http://terminology.hl7.org/CodeSystem/measure-population"

const measureReport: Rule = (value, path, reporter) => {
  const contained = new Map<string, Json>()
  for (const resource of objects(value["contained"])) if (typeof resource["id"] === "string") contained.set(resource["id"], resource)
  const reportType = value["type"]
  const ref = value["measure"]
  const definition = typeof ref === "string" && ref.startsWith("#") ? contained.get(ref.slice(1)) : undefined
  const theMeasure = definition !== undefined && definition["resourceType"] === "Measure" ? definition : undefined
  const scoring = theMeasure === undefined ? undefined : codings(theMeasure["scoring"])[0]?.code
  if (theMeasure !== undefined && scoring !== undefined && !measurementScoring.has(scoring)) {
    reporter.report("information", "business-rule", `${path}.measure`, "The scoring of this Measure is unknown, so the measureScore values are not checked")
  }
  const measureGroups = theMeasure === undefined ? [] : objects(theMeasure["group"])
  const reportGroups = list(value["group"])
  const matched = new Set<Json>()
  reportGroups.forEach((group, g) => {
    if (!isObject(group)) return
    const at = `${path}.group[${g}]`
    let measureGroup: Json | undefined
    if (measureGroups.length === 1 && reportGroups.length === 1) {
      measureGroup = measureGroups[0]
      if (measureGroup?.["code"] !== undefined && group["code"] !== undefined) {
        if (codings(group["code"]).length === 0) {
          reporter.report("error", "business-rule", at, "None of the codes of the group can be compared with the Measure: a code needs both a system and a code")
        } else if (!shareCode(group["code"], measureGroup["code"])) {
          reporter.report("error", "business-rule", at, `The code of the group (${codeText(group["code"])}) does not match the code of the Measure's group (${codeText(measureGroup["code"])})`)
        }
      }
    } else if (measureGroups.length > 0) {
      if (group["code"] === undefined) {
        reporter.report("error", "business-rule", at, "The group should have a code that matches a group of the Measure")
        return
      }
      measureGroup = measureGroups.find((m) => shareCode(group["code"], m["code"]))
      if (measureGroup === undefined) {
        reporter.report("error", "business-rule", at, `The code ${codeText(group["code"])} of the group matches no group of the Measure`)
        return
      }
      if (matched.has(measureGroup)) {
        reporter.report("error", "business-rule", at, "The code of the group is the code of another group of the report")
        return
      }
      matched.add(measureGroup)
    }
    populations(group, at, measureGroup, reportType, contained, reporter)
    score(group, at, theMeasure, scoring, reportType, reporter)
    if (measureGroup !== undefined) stratifiers(group, at, measureGroup, reporter)
  })
  if (measureGroups.length > 0 && !(measureGroups.length === 1 && reportGroups.length === 1) && reportType !== "data-collection") {
    for (const measureGroup of measureGroups) {
      if (!matched.has(measureGroup)) reporter.report("error", "business-rule", path, `The report has no group for the Measure's group with code '${codeText(measureGroup["code"])}'`)
    }
  }
}

const populations = (group: Json, at: string, measureGroup: Json | undefined, reportType: unknown, contained: ReadonlyMap<string, Json>, reporter: Reporter): void => {
  const defined = measureGroup === undefined ? [] : objects(measureGroup["population"])
  const matched = new Set<Json>()
  list(group["population"]).forEach((population, p) => {
    if (!isObject(population)) return
    const pat = `${at}.population[${p}]`
    if (measureGroup !== undefined) {
      if (population["code"] === undefined) {
        reporter.report("error", "business-rule", pat, "The population should have a code that matches a population of the Measure's group")
        return
      }
      const match = defined.find((d) => shareCode(population["code"], d["code"]))
      if (match === undefined) {
        reporter.report("error", "business-rule", pat, `The code ${codeText(population["code"])} of the population matches no population of the Measure's group`)
        return
      }
      if (matched.has(match)) {
        reporter.report("error", "business-rule", pat, "The code of the population is the code of another population of the group")
        return
      }
      matched.add(match)
    }
    const subjects = population["subjectResults"]
    if (reportType === "subject-list") {
      const count = population["count"]
      if (typeof count !== "number" || subjects === undefined) return
      const found = subjectCount([subjects], contained)
      if (found !== undefined && found !== count) {
        reporter.report("error", "business-rule", pat, `The count ${count} does not match the number of subjects listed (${found})`)
      }
    } else if (reportType === "individual" || reportType === "summary" || reportType === "data-collection") {
      if (subjects !== undefined) reporter.report("error", "business-rule", pat, `A report of type '${reportType}' does not list subjects: only 'subject-list' reports do`)
      if (population["count"] === undefined) reporter.report("warning", "business-rule", pat, `A count should be given in a report of type '${reportType}'`)
    }
  })
  for (const d of defined) {
    if (!matched.has(d) && !codings(d["code"]).some((c) => c.system === measurePopulation && c.code === "measure-observation")) {
      reporter.report("error", "business-rule", at, `The group has no population for the Measure's population ${codeText(d["code"])}`)
    }
  }
}

const score = (group: Json, at: string, theMeasure: Json | undefined, scoring: string | undefined, reportType: unknown, reporter: Reporter): void => {
  const measureScore = group["measureScore"]
  const sat = `${at}.measureScore`
  if (reportType === "data-collection") {
    if (measureScore !== undefined) reporter.report("error", "business-rule", sat, "A report of type 'data-collection' has no measureScore")
    return
  }
  if (theMeasure === undefined || scoring === undefined) return
  if (scoring === "cohort") {
    if (measureScore !== undefined) reporter.report("error", "business-rule", sat, "A measure whose scoring is 'cohort' has no measureScore")
    return
  }
  if (scoring !== "proportion" && scoring !== "ratio" && scoring !== "continuous-variable") return
  if (!isObject(measureScore)) {
    reporter.report("error", "required", at, `A measureScore is required when the Measure's scoring is ${scoring}`)
    return
  }
  const scoreValue = measureScore["value"]
  if (scoreValue === undefined) {
    reporter.report("error", "required", sat, `A value is required when the Measure's scoring is ${scoring}`)
    return
  }
  if (scoring === "proportion") {
    for (const unit of ["unit", "system", "code"]) {
      if (measureScore[unit] !== undefined) reporter.report("error", "business-rule", `${sat}.${unit}`, "A measureScore for a proportion has no unit")
    }
    if (typeof scoreValue === "number" && (scoreValue < 0 || scoreValue > 1)) {
      reporter.report("error", "value", `${sat}.value`, "The score of a proportion is between 0 and 1")
    }
  } else {
    // The Measure may fix the unit of its score with the questionnaire-unit extension.
    const unitExtension = list(theMeasure["extension"]).find((e) => isObject(e) && e["url"] === questionnaireUnit)
    const fixed = isObject(unitExtension) && isObject(unitExtension["valueCoding"]) ? unitExtension["valueCoding"] : undefined
    const code = measureScore["code"]
    if (code !== undefined && fixed !== undefined) {
      if (code !== fixed["code"]) reporter.report("error", "code-invalid", `${sat}.code`, `This value is fixed by the Measure to '${String(fixed["code"])}'`)
      if (measureScore["system"] !== fixed["system"]) {
        reporter.report("error", "code-invalid", measureScore["system"] === undefined ? sat : `${sat}.system`, `The unit system is fixed by the Measure to '${String(fixed["system"])}'`)
      }
    } else if (fixed !== undefined) {
      reporter.report("error", "not-found", sat, `The unit is fixed by the Measure to ${String(fixed["system"] ?? "")}#${String(fixed["code"] ?? "")}, but the score has none`)
    } else if (scoring === "ratio" && code === undefined) {
      reporter.report("warning", "business-rule", sat, "A unit should be given when the Measure's scoring is ratio")
    }
  }
}

const questionnaireUnit = "http://hl7.org/fhir/StructureDefinition/questionnaire-unit"

const stratifiers = (group: Json, at: string, measureGroup: Json, reporter: Reporter): void => {
  const defined = objects(measureGroup["stratifier"])
  const matched = new Set<Json>()
  list(group["stratifier"]).forEach((stratifier, s) => {
    if (!isObject(stratifier)) return
    const sat = `${at}.stratifier[${s}]`
    const code = list(stratifier["code"])[0]
    if (code === undefined) {
      reporter.report("error", "business-rule", sat, "The stratifier should have a code that matches a stratifier of the Measure's group")
      return
    }
    const match = defined.find((d) => sameConcept(code, d["code"]))
    if (match === undefined) {
      reporter.report("error", "business-rule", sat, `The code ${codeText(code)} of the stratifier matches no stratifier of the Measure's group`)
      return
    }
    if (matched.has(match)) {
      reporter.report("error", "business-rule", sat, "The code of the stratifier is the code of another stratifier of the group")
      return
    }
    matched.add(match)
  })
  for (const d of defined) {
    if (!matched.has(d)) {
      const id = typeof d["id"] === "string" ? ` (id ${d["id"]})` : ""
      reporter.report("error", "business-rule", at, `The group has no stratifier for the Measure's stratifier with code '${codeText(d["code"])}'${id}`)
    }
  }
}

export const measureRules: ReadonlyArray<readonly [string, Rule]> = [
  ["Measure", measure],
  ["MeasureReport", measureReport]
]
