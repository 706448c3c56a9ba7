/**
 * A QuestionnaireResponse (https://hl7.org/fhir/R4/questionnaireresponse.html) against its Questionnaire, as
 * the HL7 reference validator checks it, when the validator can find the Questionnaire (see find.ts). One it
 * cannot find is a warning, as the reference validator has it. Against the Questionnaire: every linkId
 * exists and is in its place and order, answers have the item's type, no answers on groups and display
 * items, required items are answered (errors once the response is completed or amended), a non-repeating
 * item has one answer, and items that enableWhen disables carry no answers; the answers themselves are
 * checked in answers.ts.
 */
import { isObject, type Json } from "../../catalog/json.ts"
import { answerValue } from "./answers.ts"
import type { Context, Frame, QuestionnaireReporter } from "./context.ts"
import { isEnabled } from "./enableWhen.ts"
import { findQuestionnaire } from "./find.ts"
import { instantOf } from "./instants.ts"
import { type Indexed, indexItems } from "./items.ts"
import { ext, extension, integerOf, list, text } from "./json.ts"

/** group and (R4's abstract) question items hold items, never answers. */
const isGroup = (type: unknown): boolean => type === "group" || type === "question"

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
