/**
 * Questionnaires and the responses to them (https://hl7.org/fhir/R4/questionnaire.html,
 * https://hl7.org/fhir/R4/questionnaireresponse.html), checked as the HL7 reference validator checks them.
 *
 * A Questionnaire: each enableWhen names a question that exists, is not the item itself nor one of its
 * own inner items, and (a warning) comes before it; a questionnaire it derives from (derivedFrom with the
 * questionnaire-derivationType extension) constrains its items.
 *
 * A QuestionnaireResponse is checked against its Questionnaire when the validator can find it: contained
 * (`#id`), an entry of the Bundle that holds the response (by url or fullUrl), or given by the caller
 * (`ValidateOptions.questionnaire`, a lookup by canonical url that the server may answer from its store).
 * One it cannot find is a warning, as the reference validator has it. Against the Questionnaire: every
 * linkId exists and is in its place and order, answers have the item's type, no answers on groups and
 * display items, required items are answered (errors once the response is completed or amended), a
 * non-repeating item has one answer, answers are among the answerOptions (exclusive options alone), the
 * extensions minValue/maxValue, min/maxQuantity, maxDecimalPlaces, minLength, maxLength, regex, mimeType,
 * maxSize, unitOption, questionnaire-referenceResource and min/maxOccurs are met, and items that
 * enableWhen disables carry no answers.
 */
import fhirpath from "fhirpath"
import r4 from "fhirpath/fhir-context/r4"
import { isObject, type Json } from "../catalog/json.ts"
import { toCanonical } from "../terminology/ucum.ts"
import { expressionTooLarge } from "../fhirpath/expressionSize.ts"
import type { Severity } from "./Issue.ts"
import { javaRegex } from "../fhirpath/regex.ts"
import type { Registry } from "./registry.ts"

/** Finds a Questionnaire (its JSON) by canonical url, `url|version` included; undefined when unknown. */
export type { QuestionnaireLookup } from "./Reporter.ts"
import type { QuestionnaireLookup } from "./Reporter.ts"

export interface QuestionnaireReporter {
  readonly registry: Registry
  readonly report: (severity: Severity, code: string, expression: string, diagnostics: string) => void
  /** Questionnaires the caller can supply (ValidateOptions.questionnaire). */
  readonly questionnaires?: QuestionnaireLookup | undefined
  /** The Bundle resource being walked that holds the resource, if any. */
  readonly bundle?: Json | undefined
}

const ext = {
  minValue: "http://hl7.org/fhir/StructureDefinition/minValue",
  maxValue: "http://hl7.org/fhir/StructureDefinition/maxValue",
  minQuantity: "http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-minQuantity",
  maxQuantity: "http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-maxQuantity",
  maxDecimals: "http://hl7.org/fhir/StructureDefinition/maxDecimalPlaces",
  minLength: "http://hl7.org/fhir/StructureDefinition/minLength",
  regex: "http://hl7.org/fhir/StructureDefinition/regex",
  entryFormat: "http://hl7.org/fhir/StructureDefinition/entryFormat",
  mimeType: "http://hl7.org/fhir/StructureDefinition/mimeType",
  maxSize: "http://hl7.org/fhir/StructureDefinition/maxSize",
  unitOption: "http://hl7.org/fhir/StructureDefinition/questionnaire-unitOption",
  unitValueSet: "http://hl7.org/fhir/StructureDefinition/questionnaire-unitValueSet",
  referenceResource: "http://hl7.org/fhir/StructureDefinition/questionnaire-referenceResource",
  exclusive: "http://hl7.org/fhir/StructureDefinition/questionnaire-optionExclusive",
  minOccurs: "http://hl7.org/fhir/StructureDefinition/questionnaire-minOccurs",
  maxOccurs: "http://hl7.org/fhir/StructureDefinition/questionnaire-maxOccurs",
  derivationType: "http://hl7.org/fhir/StructureDefinition/questionnaire-derivationType",
  enableWhenExpression: "http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-enableWhenExpression",
  enableWhenFinnish: "http://phr.kanta.fi/StructureDefinition/fiphr-ext-questionnaire-enablewhen"
} as const

const list = (value: unknown): ReadonlyArray<Json> => (Array.isArray(value) ? value.filter(isObject) : [])
const text = (value: Json, key: string): string | undefined => (typeof value[key] === "string" ? (value[key] as string) : undefined)

const extensions = (value: Json, url: string): ReadonlyArray<Json> => list(value["extension"]).filter((e) => e["url"] === url)
const extension = (value: Json, url: string): Json | undefined => list(value["extension"]).find((e) => e["url"] === url)

/** The `value[x]` of an extension, answer or option: its type (`integer`, `Coding`) and value. */
const valueOf = (value: Json | undefined, prefix = "value"): { readonly type: string; readonly key: string; readonly value: unknown } | undefined => {
  if (value === undefined) return undefined
  for (const key in value) {
    const name = key.charCodeAt(0) === 95 ? key.slice(1) : key
    if (!name.startsWith(prefix) || name.length === prefix.length) continue
    const suffix = name.slice(prefix.length)
    if (!/^[A-Z]/.test(suffix)) continue
    const type = complexTypes.has(suffix) ? suffix : suffix.charAt(0).toLowerCase() + suffix.slice(1)
    return { type, key: name, value: value[name] }
  }
  return undefined
}

const complexTypes = new Set(["Attachment", "Coding", "Quantity", "Reference", "Address", "Age", "Annotation", "CodeableConcept", "ContactPoint",
  "Count", "Distance", "Duration", "HumanName", "Identifier", "Money", "Period", "Range", "Ratio", "SampledData", "Signature", "Timing",
  "ContactDetail", "Contributor", "DataRequirement", "Expression", "ParameterDefinition", "RelatedArtifact", "TriggerDefinition",
  "UsageContext", "Dosage", "Meta"])

const integerOf = (value: Json | undefined): number | undefined => {
  const v = valueOf(value)?.value
  return typeof v === "number" && Number.isInteger(v) ? v : typeof v === "string" && /^-?\d+$/.test(v) ? Number(v) : undefined
}

/** The answer types an R4 item type takes (https://hl7.org/fhir/R4/valueset-item-type.html). */
const answerTypes: ReadonlyMap<string, ReadonlyArray<string>> = new Map([
  ["boolean", ["boolean"]], ["decimal", ["decimal"]], ["integer", ["integer"]], ["date", ["date"]], ["dateTime", ["dateTime"]],
  ["time", ["time"]], ["string", ["string"]], ["text", ["string"]], ["url", ["uri"]], ["attachment", ["Attachment"]],
  ["reference", ["Reference"]], ["quantity", ["Quantity"]],
  ["choice", ["Coding", "date", "time", "integer", "string"]], ["open-choice", ["Coding", "date", "time", "integer", "string"]]
])

/** The types of QuestionnaireResponse.item.answer.value[x]. */
const responseTypes = new Set(["boolean", "decimal", "integer", "date", "dateTime", "time", "string", "uri", "Attachment", "Coding", "Quantity", "Reference"])

/** group and (R4's abstract) question items hold items, never answers. */
const isGroup = (type: unknown): boolean => type === "group" || type === "question"

// ---------------------------------------------------------------------------------------------------------
// Dates and times, compared by the instant each starts at (a year is its first day), as the reference
// validator compares them.

const dateTimePattern = /^(\d{4})(?:-(\d{2})(?:-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(\.\d+)?)?(Z|[+-]\d{2}:\d{2})?)?)?)?$/

const instantOf = (value: string): number | undefined => {
  const m = dateTimePattern.exec(value)
  if (m === null) return undefined
  const zone = m[8]
  const offset = zone === undefined || zone === "Z" ? 0 : (zone.startsWith("-") ? -1 : 1) * (Number(zone.slice(1, 3)) * 60 + Number(zone.slice(4, 6)))
  const ms = m[7] === undefined ? 0 : Math.round(Number(m[7]) * 1000)
  return Date.UTC(Number(m[1]), Number(m[2] ?? "1") - 1, Number(m[3] ?? "1"), Number(m[4] ?? "0"), Number(m[5] ?? "0"), Number(m[6] ?? "0"), ms) - offset * 60_000
}

const decimalPlaces = (value: number | string): number => {
  const s = String(value)
  if (/e/i.test(s)) {
    const [mantissa, exponent] = s.toLowerCase().split("e")
    const places = mantissa!.includes(".") ? mantissa!.length - mantissa!.indexOf(".") - 1 : 0
    return Math.max(0, places - Number(exponent))
  }
  return s.includes(".") ? s.length - s.indexOf(".") - 1 : 0
}

// ---------------------------------------------------------------------------------------------------------
// The Questionnaire itself.

interface Indexed {
  readonly item: Json
  readonly path: string
  /** Position in a pre-order walk of the items: an item's ancestors and earlier items have smaller ones. */
  readonly order: number
  readonly parent: Indexed | undefined
}

const indexItems = (root: Json, path: string): ReadonlyArray<Indexed> => {
  const out: Array<Indexed> = []
  const visit = (owner: Json, at: string, parent: Indexed | undefined, depth: number): void => {
    if (depth > 64) return
    list(owner["item"]).forEach((item, i) => {
      const entry: Indexed = { item, path: `${at}.item[${i}]`, order: out.length, parent }
      out.push(entry)
      visit(item, entry.path, entry, depth + 1)
    })
  }
  visit(root, path, undefined, 0)
  return out
}

const contains = (ancestor: Indexed, entry: Indexed | undefined): boolean => {
  for (let e = entry; e !== undefined; e = e.parent) if (e === ancestor) return true
  return false
}

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

// ---------------------------------------------------------------------------------------------------------
// Finding a Questionnaire.

const isQuestionnaire = (value: unknown): value is Json => isObject(value) && value["resourceType"] === "Questionnaire"

/** By `#id` among `holder`'s contained resources, in the Bundle being walked, or through the caller's lookup. */
const findQuestionnaire = (reference: string, holder: Json, reporter: QuestionnaireReporter): Json | undefined => {
  if (reference.startsWith("#")) {
    const id = reference.slice(1)
    return list(holder["contained"]).find((r) => r["id"] === id && isQuestionnaire(r))
  }
  const bar = reference.indexOf("|")
  const url = bar < 0 ? reference : reference.slice(0, bar)
  const version = bar < 0 ? undefined : reference.slice(bar + 1)
  const bundle = reporter.bundle
  if (bundle !== undefined) {
    for (const entry of list(bundle["entry"])) {
      const resource = entry["resource"]
      if (!isQuestionnaire(resource)) continue
      const byUrl = resource["url"] === url && (version === undefined || resource["version"] === version)
      if (byUrl || entry["fullUrl"] === reference || (typeof resource["id"] === "string" && url === `Questionnaire/${resource["id"]}`)) return resource
    }
  }
  const lookup = reporter.questionnaires
  if (lookup === undefined) return undefined
  try {
    const found = lookup(reference) ?? (version === undefined ? undefined : lookup(url))
    return isQuestionnaire(found) ? found : undefined
  } catch {
    return undefined
  }
}

// ---------------------------------------------------------------------------------------------------------
// A QuestionnaireResponse against its Questionnaire.

interface Frame {
  readonly qItem: Json
  readonly element: Json
}

interface Context {
  readonly q: Json
  readonly qr: Json
  readonly reporter: QuestionnaireReporter
  readonly notCompleted: boolean
  readonly allItems: ReadonlyArray<Indexed>
  readonly byLinkId: ReadonlyMap<string, Indexed>
}

/** QuestionnaireResponse: against its Questionnaire when it can be found (https://hl7.org/fhir/R4/questionnaireresponse.html#link). */
export const questionnaireResponseRule = (value: Json, path: string, reporter: QuestionnaireReporter): void => {
  const reference = text(value, "questionnaire")
  if (reference === undefined || reference.trim() === "") {
    reporter.report("information", "required", path, "No questionnaire is identified, so the answers cannot be checked against one")
    return
  }
  const q = findQuestionnaire(reference, value, reporter)
  if (q === undefined) {
    const example = /^https?:\/\/example\.org/.test(reference)
    reporter.report(example ? "information" : "warning", "required", `${path}.questionnaire`,
      `The questionnaire '${reference}' could not be found, so the answers were not checked against it`)
    return
  }
  const allItems = indexItems(q, "")
  const byLinkId = new Map<string, Indexed>()
  for (const entry of allItems) {
    const linkId = text(entry.item, "linkId")
    if (linkId !== undefined && !byLinkId.has(linkId)) byLinkId.set(linkId, entry)
  }
  const status = value["status"]
  const context: Context = { q, qr: value, reporter, notCompleted: status !== "completed" && status !== "amended", allItems, byLinkId }
  authored(value, q, path, reporter)
  items(context, list(q["item"]), value, path, [])
}

/** authored within the Questionnaire's effectivePeriod: warnings. */
const authored = (qr: Json, q: Json, path: string, reporter: QuestionnaireReporter): void => {
  const when = text(qr, "authored")
  const period = q["effectivePeriod"]
  if (when === undefined || !isObject(period)) return
  const at = instantOf(when)
  if (at === undefined) return
  const end = text(period, "end")
  const start = text(period, "start")
  const endAt = end === undefined ? undefined : instantOf(end)
  const startAt = start === undefined ? undefined : instantOf(start)
  if (endAt !== undefined && at > endAt) reporter.report("warning", "business-rule", `${path}.authored`, `The authored date '${when}' is after the end of the questionnaire's effective period ('${end}')`)
  if (startAt !== undefined && at < startAt) reporter.report("warning", "business-rule", `${path}.authored`, `The authored date '${when}' is before the start of the questionnaire's effective period ('${start}')`)
}

/** The items of a response element (the response, an item or an answer) against the items the Questionnaire has there. */
const items = (context: Context, qItems: ReadonlyArray<Json>, element: Json, path: string, stack: ReadonlyArray<Frame>): void => {
  if (stack.length > 64) return
  const { reporter } = context
  const grouped = new Map<string, Array<{ item: Json; index: number }>>()
  let last = -1
  list(element["item"]).forEach((item, i) => {
    const linkId = text(item, "linkId")
    if (linkId === undefined || linkId === "") {
      reporter.report("error", "required", path, "An item has no linkId, so it cannot be checked")
      return
    }
    const index = qItems.findIndex((q) => q["linkId"] === linkId)
    if (index < 0) {
      const elsewhere = context.byLinkId.get(linkId)
      if (elsewhere === undefined) {
        reporter.report("error", "not-found", path, `LinkId '${linkId}' not found in the questionnaire`)
      } else {
        reporter.report("error", "structure", path, `The item with linkId '${linkId}' is in the wrong place: the questionnaire has it elsewhere`)
        item1(context, elsewhere.item, item, `${path}.item[${i}]`, [...stack, { qItem: elsewhere.item, element: item }])
      }
      return
    }
    if (index < last) reporter.report("error", "structure", path, `The item with linkId '${linkId}' is out of order: the questionnaire has it before the item that precedes it here`)
    last = index
    let group = grouped.get(linkId)
    if (group === undefined) grouped.set(linkId, (group = []))
    group.push({ item, index: i })
  })
  for (const qItem of qItems) {
    const linkId = text(qItem, "linkId")
    if (linkId === undefined) continue
    const found = grouped.get(linkId)
    const enabled = isEnabled(context, qItem, stack)
    if (found === undefined) {
      if (enabled === true && qItem["required"] === true) missing(context, path, linkId)
      continue
    }
    if (enabled === false) {
      for (const { item, index } of found) {
        if (Array.isArray(item["answer"]) || Array.isArray(item["item"])) {
          reporter.report("error", "invalid", `${path}.item[${index}]`, `The item '${linkId}' has answers although the questionnaire's enableWhen disables it`)
        }
      }
    }
    if (found.length > 1 && qItem["repeats"] !== true) {
      reporter.report("error", "invalid", path, `The item '${linkId}' does not repeat, but ${found.length} items have its linkId here`)
    }
    for (const { item, index } of found) item1(context, qItem, item, `${path}.item[${index}]`, [...stack, { qItem, element: item }])
  }
}

const missing = (context: Context, path: string, linkId: string): void => {
  context.reporter.report(context.notCompleted ? "warning" : "error", "required", path, `No answer found for the required item '${linkId}'`)
}

/** One response item against its Questionnaire item. */
const item1 = (context: Context, qItem: Json, element: Json, path: string, stack: ReadonlyArray<Frame>): void => {
  const { reporter } = context
  const type = qItem["type"]
  const linkId = String(qItem["linkId"] ?? "")
  const itemText = text(element, "text")
  if (itemText !== undefined && itemText !== "" && itemText !== qItem["text"]) {
    reporter.report("error", "invalid", path, `The text of the item '${linkId}' must be the questionnaire's text for it when given`)
  }
  const answers = list(element["answer"])
  const answered = answers.length > 0 || qItem["required"] !== true || isGroup(type)
  if (!answered) {
    if (context.notCompleted) missing(context, path, linkId)
    else if (isEnabled(context, qItem, stack) === true) missing(context, path, linkId)
  }
  if (answers.length > 1 && qItem["repeats"] !== true) {
    reporter.report("error", "invalid", path, `The item '${linkId}' does not repeat: only one answer is allowed`)
  }
  const maxOccurs = integerOf(extension(qItem, ext.maxOccurs))
  if (maxOccurs !== undefined && maxOccurs >= 0 && answers.length > maxOccurs) {
    reporter.report("error", "invalid", path, `The maximum number of answers is ${maxOccurs}, but this item has ${answers.length}`)
  }
  const minOccurs = integerOf(extension(qItem, ext.minOccurs))
  if (minOccurs !== undefined && minOccurs >= 0 && answers.length < minOccurs) {
    reporter.report("error", "invalid", path, `The minimum number of answers is ${minOccurs}, but this item has ${answers.length}`)
  }
  answers.forEach((answer, i) => {
    const at = `${path}.answer[${i}]`
    if (isGroup(type)) reporter.report("error", "structure", path, `Items of type '${String(type)}' cannot have answers`)
    else if (type === "display") reporter.report("error", "structure", path, "Items of type 'display' cannot have answers")
    else if (typeof type === "string") answerValue(context, qItem, type, answer, at, answers.length)
    if (!isGroup(type)) items(context, list(qItem["item"]), answer, at, stack)
  })
  const children = Array.isArray(element["item"]) && element["item"].length > 0
  if (typeof type !== "string") {
    reporter.report("error", "required", path, `The questionnaire's item '${linkId}' has no type`)
  } else if (type === "display") {
    if (children) reporter.report("error", "structure", path, `Items of type 'display' cannot have items (linkId '${linkId}')`)
  } else if (!isGroup(type)) {
    if (children) reporter.report("error", "structure", path, `The item '${linkId}' is not a group: its inner items go in answer.item, not item`)
  } else {
    if (qItem["required"] === true && !children) reporter.report("error", "invariant", path, `The required group '${linkId}' has no items`)
    items(context, list(qItem["item"]), element, path, stack)
  }
}

// ---------------------------------------------------------------------------------------------------------
// enableWhen (https://hl7.org/fhir/R4/questionnaire-definitions.html#Questionnaire.item.enableWhen).

type Evaluator = (data: unknown, vars: Record<string, unknown>) => ReadonlyArray<unknown>

/** Compiled enableWhen expressions; bounded, since they come from the questionnaires clients send. */
const expressions = new Map<string, Evaluator | null>()

const compileExpression = (expression: string): Evaluator | undefined => {
  let compiled = expressions.get(expression)
  if (compiled === undefined) {
    try {
      compiled = expressionTooLarge(expression) === undefined ? (fhirpath.compile(expression, r4, { traceFn: () => undefined }) as Evaluator) : null
    } catch {
      compiled = null
    }
    if (expressions.size < 256) expressions.set(expression, compiled)
  }
  return compiled ?? undefined
}

/** An enableWhen given as a FHIRPath expression on the response (SDC's enableWhenExpression): its outcome, or undefined. */
const expressionEnabled = (context: Context, qItem: Json): boolean | undefined => {
  const sdc = extension(qItem, ext.enableWhenExpression)?.["valueExpression"]
  const finnish = extension(qItem, ext.enableWhenFinnish)?.["valueString"]
  const expression = isObject(sdc) ? (sdc["language"] === "text/fhirpath" ? sdc["expression"] : undefined) : finnish
  if (typeof expression !== "string") return undefined
  const evaluate = compileExpression(expression)
  if (evaluate === undefined) return undefined
  try {
    const result = evaluate(context.qr, { resource: context.qr, rootResource: context.qr })
    if (result.length === 0) return false
    return result.length === 1 && typeof result[0] === "boolean" ? result[0] : true
  } catch {
    return undefined
  }
}

/** true or false, or undefined when it depends on an expression that cannot be evaluated. */
const isEnabled = (context: Context, qItem: Json, stack: ReadonlyArray<Frame>): boolean | undefined => {
  if (extension(qItem, ext.enableWhenExpression) !== undefined || extension(qItem, ext.enableWhenFinnish) !== undefined) return expressionEnabled(context, qItem)
  const conditions = list(qItem["enableWhen"])
  if (conditions.length === 0) return true
  const results = conditions.map((condition) => conditionHolds(context, qItem, condition, stack))
  const behavior = qItem["enableBehavior"]
  if (behavior === "any" || results.length === 1) return results.some((r) => r)
  if (behavior === "all") return results.every((r) => r)
  // Several conditions and no enableBehavior (que-12 reports that): taken as enabled.
  return true
}

const conditionHolds = (context: Context, source: Json, condition: Json, stack: ReadonlyArray<Frame>): boolean => {
  const question = text(condition, "question")
  const values = question === undefined ? [] : answersTo(context, source, question, stack)
  const operator = condition["operator"]
  const expected = valueOf(condition, "answer")
  if (operator === "exists") return expected?.value === true ? values.length > 0 : values.length === 0
  if (expected === undefined) return false
  return values.some((actual) => compareAnswer(actual, expected, operator))
}

/**
 * The answers to `question` that count for `source`: found under the response element that matches the
 * innermost Questionnaire item holding both (the whole response when none does).
 */
const answersTo = (context: Context, source: Json, question: string, stack: ReadonlyArray<Frame>): ReadonlyArray<{ type: string; value: unknown }> => {
  const target = context.byLinkId.get(question)
  if (target === undefined) return []
  const sourceEntry = context.allItems.find((e) => e.item === source)
  let group: Indexed | undefined
  for (let g = target as Indexed | undefined; g !== undefined; g = g.parent) {
    if (sourceEntry !== undefined && contains(g, sourceEntry)) {
      group = g
      break
    }
  }
  let focus: Json = context.qr
  if (group !== undefined) {
    const frame = [...stack].reverse().find((f) => f.qItem === group!.item)
    if (frame === undefined) return []
    focus = frame.element
  }
  const out: Array<{ type: string; value: unknown }> = []
  collectAnswers(focus, question, out, 0)
  return out
}

const collectAnswers = (focus: Json, question: string, out: Array<{ type: string; value: unknown }>, depth: number): void => {
  if (depth > 64) return
  for (const item of list(focus["item"])) {
    if (item["linkId"] === question) pushAnswers(item, out)
    collectAnswers(item, question, out, depth + 1)
  }
  for (const answer of list(focus["answer"])) collectAnswers(answer, question, out, depth + 1)
  if (focus["linkId"] === question) pushAnswers(focus, out)
}

const pushAnswers = (item: Json, out: Array<{ type: string; value: unknown }>): void => {
  for (const answer of list(item["answer"])) {
    const v = valueOf(answer)
    if (v !== undefined && v.value !== undefined) out.push({ type: v.type, value: v.value })
  }
}

const compareAnswer = (actual: { type: string; value: unknown }, expected: { type: string; value: unknown }, operator: unknown): boolean => {
  if (actual.type !== expected.type) return false
  if (expected.type === "Coding") {
    if (!isObject(actual.value) || !isObject(expected.value)) return false
    const e = expected.value
    const a = actual.value
    const same = (e["system"] === undefined || e["system"] === a["system"]) && (e["code"] === undefined ? a["code"] === undefined : e["code"] === a["code"])
    return operator === "=" ? same : operator === "!=" ? !same : false
  }
  let a: number | string | boolean | undefined
  let e: number | string | boolean | undefined
  if (expected.type === "Quantity") {
    a = isObject(actual.value) && typeof actual.value["value"] === "number" ? actual.value["value"] : undefined
    e = isObject(expected.value) && typeof expected.value["value"] === "number" ? expected.value["value"] : undefined
  } else if (expected.type === "Reference") {
    a = isObject(actual.value) ? String(actual.value["reference"] ?? "") : undefined
    e = isObject(expected.value) ? String(expected.value["reference"] ?? "") : undefined
    if (operator !== "=" && operator !== "!=") return false
  } else if (expected.type === "date" || expected.type === "dateTime") {
    a = typeof actual.value === "string" ? instantOf(actual.value) : undefined
    e = typeof expected.value === "string" ? instantOf(expected.value) : undefined
  } else if (typeof actual.value === "number" || typeof actual.value === "string" || typeof actual.value === "boolean") {
    a = actual.value
    e = typeof expected.value === "number" || typeof expected.value === "string" || typeof expected.value === "boolean" ? expected.value : undefined
  }
  if (a === undefined || e === undefined) return false
  switch (operator) {
    case "=": return a === e
    case "!=": return a !== e
    case ">": return a > e
    case "<": return a < e
    case ">=": return a >= e
    case "<=": return a <= e
    default: return false
  }
}

// ---------------------------------------------------------------------------------------------------------
// Answers.

const answerValue = (context: Context, qItem: Json, type: string, answer: Json, path: string, count: number): void => {
  const allowed = answerTypes.get(type)
  const value = valueOf(answer)
  // A value[x] that QuestionnaireResponse does not allow is already an unknown element.
  if (allowed === undefined || value === undefined || !responseTypes.has(value.type)) return
  const { reporter } = context
  const at = `${path}.value.ofType(${value.type})`
  if (!allowed.includes(value.type)) {
    reporter.report("error", "invariant", at, allowed.length === 1
      ? `The answer must be of the type ${allowed[0]}, not ${value.type}`
      : `The answer must be of one of the types ${allowed.join(", ")}, not ${value.type}`)
    return
  }
  const v = value.value
  switch (type) {
    case "decimal":
      if (typeof v === "number") decimalAnswer(reporter, qItem, v, at)
      break
    case "integer":
      if (typeof v === "number") integerAnswer(reporter, qItem, v, at)
      break
    case "date":
    case "dateTime":
      if (typeof v === "string") dateAnswer(reporter, qItem, v, at)
      break
    case "time":
      if (typeof v === "string") timeAnswer(reporter, qItem, v, at)
      break
    case "string":
      if (typeof v === "string") stringAnswer(context, qItem, v, at)
      break
    case "attachment":
      if (isObject(v)) attachmentAnswer(reporter, qItem, v, path)
      break
    case "reference":
      if (isObject(v)) referenceAnswer(context, qItem, v, at)
      break
    case "quantity":
      if (isObject(v)) quantityAnswer(reporter, qItem, v, at)
      break
    case "choice":
    case "open-choice":
      choiceAnswer(context, qItem, value.type, v, path, count, type === "open-choice")
      break
  }
}

const primitiveOptions = (qItem: Json, type: string): ReadonlyArray<unknown> =>
  list(qItem["answerOption"]).map((option) => valueOf(option)).filter((v) => v !== undefined && v.type === type).map((v) => v!.value)

/** The answerOptions of a non-choice item (integer, date, time, string, decimal): the answer is one of them. */
const typedOptions = (reporter: QuestionnaireReporter, qItem: Json, type: string, value: string | number, at: string, matches?: (option: unknown) => boolean): void => {
  if (list(qItem["answerOption"]).length === 0) return
  const options = type === "decimal" ? [...primitiveOptions(qItem, "integer"), ...primitiveOptions(qItem, "decimal")] : primitiveOptions(qItem, type)
  if (options.length === 0) {
    reporter.report("error", "invariant", at, `The answer options list no value of type ${type}`)
    return
  }
  if (!options.some(matches ?? ((o) => o === value))) reporter.report("error", "invariant", at, `The ${type} ${String(value)} is not one of the permitted values`)
}

const decimalAnswer = (reporter: QuestionnaireReporter, qItem: Json, value: number, at: string): void => {
  const min = valueOf(extension(qItem, ext.minValue))?.value
  const max = valueOf(extension(qItem, ext.maxValue))?.value
  if (typeof min === "number" && value < min) reporter.report("error", "invariant", at, `The value ${value} is less than the allowed minimum of ${min}`)
  if (typeof max === "number" && value > max) reporter.report("error", "invariant", at, `The value ${value} is greater than the allowed maximum of ${max}`)
  maxDecimals(reporter, qItem, value, at)
  typedOptions(reporter, qItem, "decimal", value, at)
}

const maxDecimals = (reporter: QuestionnaireReporter, qItem: Json, value: number, at: string): void => {
  const limit = integerOf(extension(qItem, ext.maxDecimals))
  if (limit !== undefined && decimalPlaces(value) > limit) {
    reporter.report("error", "invariant", at, `The value ${value} has too many decimal places (at most ${limit})`)
  }
}

const integerAnswer = (reporter: QuestionnaireReporter, qItem: Json, value: number, at: string): void => {
  const min = valueOf(extension(qItem, ext.minValue))?.value
  const max = valueOf(extension(qItem, ext.maxValue))?.value
  if (typeof min === "number" && value < min) reporter.report("error", "invariant", at, `The value ${value} is less than the allowed minimum of ${min}`)
  if (typeof max === "number" && value > max) reporter.report("error", "invariant", at, `The value ${value} is greater than the allowed maximum of ${max}`)
  typedOptions(reporter, qItem, "integer", value, at)
}

const dateAnswer = (reporter: QuestionnaireReporter, qItem: Json, value: string, at: string): void => {
  const instant = instantOf(value)
  const min = valueOf(extension(qItem, ext.minValue))?.value
  const max = valueOf(extension(qItem, ext.maxValue))?.value
  if (instant !== undefined) {
    const minAt = typeof min === "string" ? instantOf(min) : undefined
    const maxAt = typeof max === "string" ? instantOf(max) : undefined
    if (minAt !== undefined && instant < minAt) reporter.report("error", "invariant", at, `The value ${value} is less than the allowed minimum of ${String(min)}`)
    if (maxAt !== undefined && instant > maxAt) reporter.report("error", "invariant", at, `The value ${value} is greater than the allowed maximum of ${String(max)}`)
  }
  typedOptions(reporter, qItem, "date", value, at)
}

const timeAnswer = (reporter: QuestionnaireReporter, qItem: Json, value: string, at: string): void => {
  const min = valueOf(extension(qItem, ext.minValue))?.value
  const max = valueOf(extension(qItem, ext.maxValue))?.value
  if (typeof min === "string" && value < min) reporter.report("error", "invariant", at, `The value ${value} is less than the allowed minimum of ${min}`)
  if (typeof max === "string" && value > max) reporter.report("error", "invariant", at, `The value ${value} is greater than the allowed maximum of ${max}`)
  typedOptions(reporter, qItem, "time", value, at)
}

const stringAnswer = (context: Context, qItem: Json, value: string, at: string): void => {
  const { reporter } = context
  const length = [...value].length
  const minLength = integerOf(extension(qItem, ext.minLength))
  if (minLength !== undefined && minLength >= 0 && length < minLength) {
    reporter.report("error", "invariant", at, `The answer '${value.slice(0, 80)}' is shorter than the required minimum length of ${minLength}`)
  }
  const maxLength = qItem["maxLength"]
  if (typeof maxLength === "number" && maxLength >= 0 && length > maxLength) {
    reporter.report("error", "invariant", at, `The answer '${value.slice(0, 80)}' is longer than the allowed maximum length of ${maxLength}`)
  }
  const regex = valueOf(extension(qItem, ext.regex))?.value
  if (typeof regex === "string") {
    let pattern: RegExp | undefined
    try {
      pattern = nestedQuantifier.test(regex) ? undefined : javaRegex(regex)
    } catch {
      pattern = undefined
    }
    if (pattern === undefined) reporter.report("information", "not-supported", at, `The regex '${regex.slice(0, 200)}' was not evaluated: it does not compile, or it repeats a repeated group (which can take exponential time)`)
    if (pattern !== undefined && value.length <= 4096 && !pattern.test(value)) {
      const format = valueOf(extension(qItem, ext.entryFormat))?.value
      reporter.report("error", "invariant", at, typeof format === "string"
        ? `The answer '${value.slice(0, 80)}' does not have the expected format '${format}' (regex '${regex}')`
        : `The answer '${value.slice(0, 80)}' does not match the required regex '${regex}'`)
    }
  }
  if (value.includes("\n") || value.includes("\r")) {
    reporter.report("warning", "invariant", at, "A string answer should not contain new line characters (the item type 'text' takes them)")
  }
  const valueSet = text(qItem, "answerValueSet")
  if (valueSet !== undefined && !valueSet.startsWith("#")) {
    const catalog = reporter.registry.catalog
    if (catalog.valueSet(valueSet) === undefined && catalog.valueSet(valueSet.replace(/\|.*$/, "")) === undefined) {
      reporter.report("warning", "not-found", at, `The value set '${valueSet}' could not be found, so the answer was not checked against it`)
    } else {
      const membership = reporter.registry.membership(valueSet)
      if (membership.known && !membership.codes.has(value)) {
        reporter.report("error", "invariant", at, `The value '${value.slice(0, 80)}' is not in the list of allowed values (value set '${valueSet}')`)
      }
    }
  }
  typedOptions(reporter, qItem, "string", value, at)
}

/**
 * A group that holds a quantifier and is itself repeated (`(a+)+`, `(\\w*,?)*`): such patterns can backtrack
 * for exponential time, and the pattern comes from a Questionnaire a client may send, so it is not run.
 */
const nestedQuantifier = /\((?:[^()\\]|\\.)*(?:[+*]|\{\d*,\d*\})(?:[^()\\]|\\.)*\)(?:[+*]|\{\d*,\d*\})/

const base64Bytes = (data: string): number | undefined => {
  const clean = data.replace(/\s+/g, "")
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(clean)) return undefined
  const padding = clean.endsWith("==") ? 2 : clean.endsWith("=") ? 1 : 0
  return Math.floor((clean.length * 3) / 4) - padding
}

const attachmentAnswer = (reporter: QuestionnaireReporter, qItem: Json, value: Json, at: string): void => {
  const mimeTypes = extensions(qItem, ext.mimeType).map((e) => valueOf(e)?.value).filter((v): v is string => typeof v === "string")
  if (mimeTypes.length > 0) {
    const contentType = text(value, "contentType")
    if (contentType === undefined) reporter.report("error", "required", at, `The attachment needs a contentType (allowed: ${mimeTypes.join(", ")})`)
    else if (!mimeTypes.some((m) => contentType.startsWith(m))) {
      reporter.report("error", "required", at, `The mime type ${contentType} is not allowed for this answer (allowed: ${mimeTypes.join(", ")})`)
    }
  }
  const maxSize = valueOf(extension(qItem, ext.maxSize))?.value
  const data = text(value, "data")
  if (typeof maxSize === "number" && maxSize > 0 && data !== undefined) {
    const size = base64Bytes(data)
    if (size !== undefined && size > maxSize) reporter.report("error", "required", at, `The attachment is too large (at most ${maxSize} bytes, found ${size})`)
  }
}

/** The resource type a reference names: `Type/id`, `Type/id/_history/v` or an absolute URL ending so. */
const referenceType = (reference: string): string | undefined => {
  const parts = reference.split("?")[0]!.split("/")
  const history = parts.indexOf("_history")
  const end = history >= 0 ? history : parts.length
  if (end < 2) return undefined
  const type = parts[end - 2]!
  return /^[A-Z][A-Za-z]*$/.test(type) ? type : undefined
}

const referenceAnswer = (context: Context, qItem: Json, value: Json, at: string): void => {
  const reference = text(value, "reference")
  if (reference === undefined || reference.startsWith("#") || reference.startsWith("urn:")) return
  const { reporter } = context
  const type = referenceType(reference)
  const allowed = extensions(qItem, ext.referenceResource).map((e) => valueOf(e)?.value).filter((v): v is string => typeof v === "string")
  if (allowed.length > 0) {
    if (type === undefined) reporter.report("error", "invariant", at, `The resource type of the reference '${reference}' cannot be determined, so it cannot be checked against ${allowed.join(", ")}`)
    else if (!allowed.includes(type)) reporter.report("error", "invariant", at, `The resource type '${type}' in the reference ${reference} is not allowed (allowed: ${allowed.join(", ")})`)
  } else if (type !== undefined && !reporter.registry.catalog.isResourceType(type)) {
    reporter.report("error", "invariant", at, `The resource type ${type} in the reference ${reference} is not a resource type`)
  }
}

const showQuantity = (q: Json): string => {
  const system = q["system"] === "http://unitsofmeasure.org" ? "UCUM" : String(q["system"] ?? "")
  return `${String(q["comparator"] ?? "")}${String(q["value"] ?? "")}${q["unit"] === undefined ? "" : ` ${String(q["unit"])}`}` +
    (q["system"] !== undefined || q["code"] !== undefined ? ` (${system}#${String(q["code"] ?? "")})` : "")
}

const quantityAnswer = (reporter: QuestionnaireReporter, qItem: Json, value: Json, at: string): void => {
  const amount = value["value"]
  for (const [url, minimum] of [[ext.minQuantity, true], [ext.maxQuantity, false]] as const) {
    const limit = extension(qItem, url)?.["valueQuantity"]
    if (!isObject(limit) || typeof amount !== "number" || typeof limit["value"] !== "number") continue
    const word = minimum ? "minimum" : "maximum"
    if (typeof limit["system"] !== "string" || typeof limit["code"] !== "string" || typeof value["system"] !== "string" || typeof value["code"] !== "string") {
      reporter.report("error", "invariant", at, `The quantity ${showQuantity(value)} cannot be compared to the allowed ${word} of ${showQuantity(limit)}: no coded units`)
      continue
    }
    let a: number | undefined
    let b: number | undefined
    if (limit["system"] === value["system"] && limit["code"] === value["code"]) {
      a = amount
      b = limit["value"]
    } else if (limit["system"] === "http://unitsofmeasure.org" && value["system"] === "http://unitsofmeasure.org") {
      const ca = toCanonical(amount, value["code"])
      const cb = toCanonical(limit["value"], limit["code"])
      // A unit that is not UCUM, or does not convert by a factor, is left unjudged.
      if (ca === undefined || cb === undefined) continue
      if (ca.unit !== cb.unit) {
        reporter.report("error", "invariant", at, `The quantity ${showQuantity(value)} cannot be compared to the allowed ${word} of ${showQuantity(limit)}`)
        continue
      }
      a = ca.value
      b = cb.value
    } else {
      reporter.report("error", "invariant", at, `The quantity ${showQuantity(value)} cannot be compared to the allowed ${word} of ${showQuantity(limit)}`)
      continue
    }
    if (minimum && a < b) reporter.report("error", "invariant", at, `The quantity ${showQuantity(value)} is less than the allowed minimum of ${showQuantity(limit)}`)
    if (!minimum && a > b) reporter.report("error", "invariant", at, `The quantity ${showQuantity(value)} is greater than the allowed maximum of ${showQuantity(limit)}`)
  }
  if (typeof amount === "number") maxDecimals(reporter, qItem, amount, at)
  const units = extensions(qItem, ext.unitOption).map((e) => e["valueCoding"]).filter(isObject)
  if (units.length > 0) {
    const matches = units.some((c) =>
      (c["system"] === undefined || c["system"] === value["system"]) && (c["code"] === undefined || c["code"] === value["code"]) &&
      (c["display"] === undefined || c["display"] === value["unit"]))
    if (!matches) {
      const shown = units.map((c) => `${String(c["display"] ?? "")} (${c["system"] === "http://unitsofmeasure.org" ? "UCUM" : String(c["system"] ?? "")}#${String(c["code"] ?? "")})`)
      reporter.report("error", "invariant", at, `The value ${showQuantity(value)} has a unit that is not allowed (allowed: ${shown.join(", ")})`)
    }
  }
  const unitValueSet = valueOf(extension(qItem, ext.unitValueSet))?.value
  if (typeof unitValueSet === "string") {
    const catalog = reporter.registry.catalog
    if (catalog.valueSet(unitValueSet) === undefined) {
      reporter.report("warning", "not-found", at, `The unit value set '${unitValueSet}' could not be found, so the unit was not checked`)
    } else {
      const membership = reporter.registry.membership(unitValueSet)
      if (membership.known && !membership.pairs.has(`${String(value["system"] ?? "")}|${String(value["code"] ?? "")}`)) {
        reporter.report("error", "invariant", at, `The value ${showQuantity(value)} has a unit that is not in the unit value set '${unitValueSet}'`)
      }
    }
  }
}

/** choice and open-choice: a Coding among the options or in the answerValueSet; a date, time, integer or string among the options. */
const choiceAnswer = (context: Context, qItem: Json, valueType: string, value: unknown, path: string, count: number, open: boolean): void => {
  const { reporter } = context
  const options = list(qItem["answerOption"])
  if (valueType === "Coding") {
    if (!isObject(value)) return
    if (options.length > 0) {
      const codings = options.filter((o) => isObject(o["valueCoding"]))
      if (codings.length === 0) {
        reporter.report("error", "invariant", path, "The answer options list no Coding")
        return
      }
      const match = codings.find((o) => {
        const c = o["valueCoding"] as Json
        return c["system"] === value["system"] && c["code"] === value["code"]
      })
      if (match === undefined) {
        reporter.report("error", "invariant", path, `The code ${String(value["system"] ?? "")}::${String(value["code"] ?? "")} is not one of the permitted values`)
      } else if (count > 1 && valueOf(extension(match, ext.exclusive))?.value === true) {
        reporter.report("error", "invariant", path, `The answer ${String(value["system"] ?? "")}#${String(value["code"] ?? "")} is an exclusive option: no other answer may be selected with it`)
      }
      return
    }
    const valueSet = text(qItem, "answerValueSet")
    if (valueSet === undefined) {
      reporter.report("information", "invariant", path, "The Coding cannot be checked: the item lists no options")
      return
    }
    if (valueSet.startsWith("#")) return
    const catalog = reporter.registry.catalog
    if (catalog.valueSet(valueSet) === undefined && catalog.valueSet(valueSet.replace(/\|.*$/, "")) === undefined) {
      reporter.report("warning", "code-invalid", path, `The value set '${valueSet}' could not be found, so the answer was not checked against it`)
      return
    }
    if (typeof value["code"] !== "string") return
    const membership = reporter.registry.membership(valueSet)
    if (membership.known && !membership.pairs.has(`${String(value["system"] ?? "")}|${value["code"]}`)) {
      reporter.report("error", "code-invalid", path, `The code '${value["code"]}' in the system '${String(value["system"] ?? "")}' is not in the options value set (${valueSet}) of the questionnaire`)
    }
    return
  }
  if (options.length === 0) {
    reporter.report("information", "invariant", path, `The ${valueType} answer cannot be checked: the item lists no options`)
    return
  }
  const typed = primitiveOptions(qItem, valueType)
  if (valueType === "string" && open) {
    const s = String(value).toLowerCase()
    const looksCoded = options.some((o) => {
      const c = o["valueCoding"]
      return isObject(c) && ((typeof c["display"] === "string" && c["display"].toLowerCase() === s) || (typeof c["code"] === "string" && c["code"].toLowerCase() === s))
    })
    if (looksCoded) reporter.report("warning", "invariant", path, `The string '${String(value)}' matches one of the coded options, so a Coding was probably meant`)
    return
  }
  if (typed.length === 0 && !open) {
    reporter.report("error", "invariant", path, `The answer options list no value of type ${valueType}`)
    return
  }
  if (!typed.includes(value)) reporter.report("error", "invariant", path, `The ${valueType} ${String(value)} is not one of the permitted values`)
}
