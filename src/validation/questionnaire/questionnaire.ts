/**
 * A Questionnaire (https://hl7.org/fhir/R4/questionnaire.html), checked as the HL7 reference validator
 * checks it: each enableWhen names a question that exists, is not the item itself nor one of its own inner
 * items, and (a warning) comes before it; a questionnaire it derives from (derivedFrom with the
 * questionnaire-derivationType extension) constrains its items.
 */
import { isObject, type Json } from "../../catalog/json.ts"
import type { QuestionnaireReporter } from "./context.ts"
import { findQuestionnaire } from "./find.ts"
import { contains, type Indexed, indexItems } from "./items.ts"
import { ext, extension, list, text, valueOf } from "./json.ts"

/** Questionnaire: enableWhen targets (https://hl7.org/fhir/R4/questionnaire-definitions.html#Questionnaire.item.enableWhen.question) and derivation. */
export const questionnaireRule = (value: Json, path: string, reporter: QuestionnaireReporter): void => {
  const items = indexItems(value, path)
  if (items.length === 0) return
  const byLinkId = new Map<string, Indexed>()
  for (const entry of items) {
    const linkId = text(entry.item, "linkId")
    if (linkId !== undefined && !byLinkId.has(linkId)) byLinkId.set(linkId, entry)
  }
  for (const entry of items) {
    const enableWhen = list(entry.item["enableWhen"])
    for (const condition of enableWhen) {
      const question = text(condition, "question")
      if (question === undefined) {
        reporter.report("error", "business-rule", entry.path, "An enableWhen must name the linkId of the question it depends on")
        continue
      }
      const inner = items.find((other) => other !== entry && contains(entry, other) && other.item["linkId"] === question)
      if (inner !== undefined) {
        reporter.report("error", "business-rule", entry.path, `The enableWhen refers to '${question}', an item inside this one: an item cannot depend on its own inner questions`)
        continue
      }
      const target = byLinkId.get(question)
      if (target === undefined) {
        reporter.report("error", "business-rule", entry.path, `The enableWhen refers to the linkId '${question}', which no item of the questionnaire has (in the item '${String(entry.item["linkId"] ?? "")}')`)
      } else if (target === entry) {
        reporter.report("error", "business-rule", entry.path, "The enableWhen refers to the item itself")
      } else if (target.order > entry.order) {
        reporter.report("warning", "business-rule", entry.path, `The enableWhen refers to '${question}', which comes after this item in the questionnaire`)
      }
    }
  }
  derivations(value, path, reporter, items)
}

const derivationSystem = "http://hl7.org/fhir/questionnaire-derivationType"

/** derivedFrom with an `extends` or `compliesWith` derivation type: each item keeps what the base item fixes. */
const derivations = (value: Json, path: string, reporter: QuestionnaireReporter, items: ReadonlyArray<Indexed>): void => {
  const urls = value["derivedFrom"]
  if (!Array.isArray(urls)) return
  const extensionsOf = Array.isArray(value["_derivedFrom"]) ? value["_derivedFrom"] : []
  urls.forEach((url, i) => {
    if (typeof url !== "string") return
    const at = `${path}.derivedFrom[${i}]`
    const base = findQuestionnaire(url, value, reporter)
    if (base === undefined) {
      reporter.report("warning", "business-rule", at, `The questionnaire '${url}' it derives from could not be found: derivation was not checked`)
      return
    }
    const own = extensionsOf[i]
    const typeExtension = isObject(own) ? extension(own, ext.derivationType) : undefined
    if (typeExtension === undefined) {
      reporter.report("warning", "business-rule", at, `The derivation from '${url}' has no type (extension ${ext.derivationType}): derivation was not checked`)
      return
    }
    const coding = typeExtension["valueCoding"]
    if (!isObject(coding)) {
      reporter.report("warning", "business-rule", at, "The derivation type extension has no value")
      return
    }
    const code = `${String(coding["system"] ?? "")}#${String(coding["code"] ?? "")}`
    if (coding["system"] === derivationSystem && coding["code"] === "inspiredBy") {
      reporter.report("information", "business-rule", at, `The derivation type '${code}' asks for no derivation checks`)
      return
    }
    if (coding["system"] !== derivationSystem || (coding["code"] !== "extends" && coding["code"] !== "compliesWith")) {
      reporter.report("warning", "business-rule", at, `The derivation type '${code}' is unknown: derivation was not checked`)
      return
    }
    const extending = coding["code"] === "extends"
    const baseItems = new Map<string, Json>()
    for (const entry of indexItems(base, "")) {
      const linkId = text(entry.item, "linkId")
      if (linkId !== undefined && !baseItems.has(linkId)) baseItems.set(linkId, entry.item)
    }
    for (const entry of items) derivedItem(entry, url, baseItems, extending, reporter)
  })
}

const derivedItem = (entry: Indexed, url: string, baseItems: ReadonlyMap<string, Json>, extending: boolean, reporter: QuestionnaireReporter): void => {
  const item = entry.item
  const linkId = String(item["linkId"] ?? "")
  const base = baseItems.get(linkId)
  const at = entry.path
  const about = `The item '${linkId}' of the questionnaire '${url}'`
  if (base === undefined) {
    if (!extending) reporter.report("error", "not-found", at, `The questionnaire '${url}' has no item with the linkId '${linkId}'`)
    return
  }
  if (typeof base["type"] === "string" && typeof item["type"] === "string" && base["type"] !== item["type"]) {
    reporter.report("error", "business-rule", `${at}.type`, `${about} has the type '${base["type"]}', which cannot change to '${item["type"]}'`)
  }
  if (base["repeats"] !== true && item["repeats"] === true) {
    reporter.report("error", "business-rule", `${at}.repeats`, `${about} does not repeat, so it cannot repeat here`)
  }
  if (base["required"] === true && item["required"] === false) {
    reporter.report("error", "business-rule", `${at}.required`, `${about} is required, so it must be required here`)
  }
  if (typeof base["definition"] === "string") {
    if (typeof item["definition"] !== "string") reporter.report("information", "business-rule", at, `${about} has the definition '${base["definition"]}', which should be repeated here`)
    else if (item["definition"] !== base["definition"]) reporter.report("information", "business-rule", `${at}.definition`, `${about} has the definition '${base["definition"]}': is it meant to change?`)
  }
  if (typeof base["maxLength"] === "number") {
    if (typeof item["maxLength"] !== "number") reporter.report("error", "business-rule", at, `${about} has a maxLength of ${base["maxLength"]}, so this item needs one too`)
    else if (item["maxLength"] > base["maxLength"]) reporter.report("error", "business-rule", `${at}.maxLength`, `${about} has a maxLength of ${base["maxLength"]}: it cannot be greater here`)
  }
  const baseOptions = list(base["answerOption"])
  if (baseOptions.length > 0) {
    if (item["answerValueSet"] !== undefined) {
      reporter.report("error", "business-rule", at, `${about} has answerOptions, while this has an answerValueSet: that cannot be checked`)
      return
    }
    const options = list(item["answerOption"])
    if (options.length === 0) {
      reporter.report("error", "business-rule", at, `${about} has answerOptions, so this item must have some too`)
      return
    }
    options.forEach((option, i) => {
      const v = valueOf(option)
      if (v === undefined) return
      const found = baseOptions.some((b) => {
        const bv = valueOf(b)
        if (bv === undefined || bv.type !== v.type) return false
        if (v.type === "Coding" || v.type === "Reference") return sameCoding(bv.value, v.value, v.type)
        return bv.value === v.value
      })
      if (!found) reporter.report("error", "business-rule", `${at}.answerOption[${i}]`, `${about} does not have this answerOption, so it is not allowed here`)
    })
  } else if (typeof base["answerValueSet"] === "string") {
    if (item["answerOption"] !== undefined) {
      reporter.report("error", "business-rule", at, `${about} has an answerValueSet, while this has answerOptions: that cannot be checked`)
    }
  }
}

const sameCoding = (a: unknown, b: unknown, type: string): boolean => {
  if (!isObject(a) || !isObject(b)) return false
  if (type === "Reference") return a["reference"] === b["reference"]
  return a["system"] === b["system"] && a["code"] === b["code"] && (a["version"] === undefined || b["version"] === undefined || a["version"] === b["version"])
}
