/**
 * A response's answer against its Questionnaire item: the answer has a type the item type takes, then is
 * checked by the rules of that type (primitiveAnswers.ts, complexAnswers.ts, choiceAnswers.ts).
 */
import { isObject, type Json } from "../../catalog/json.ts"
import { choiceAnswer } from "./choiceAnswers.ts"
import { attachmentAnswer, quantityAnswer, referenceAnswer } from "./complexAnswers.ts"
import type { Context } from "./context.ts"
import { valueOf } from "./json.ts"
import { dateAnswer, decimalAnswer, integerAnswer, stringAnswer, timeAnswer } from "./primitiveAnswers.ts"

/** The answer types an R4 item type takes (https://hl7.org/fhir/R4/valueset-item-type.html). */
const answerTypes: ReadonlyMap<string, ReadonlyArray<string>> = new Map([
  ["boolean", ["boolean"]], ["decimal", ["decimal"]], ["integer", ["integer"]], ["date", ["date"]], ["dateTime", ["dateTime"]],
  ["time", ["time"]], ["string", ["string"]], ["text", ["string"]], ["url", ["uri"]], ["attachment", ["Attachment"]],
  ["reference", ["Reference"]], ["quantity", ["Quantity"]],
  ["choice", ["Coding", "date", "time", "integer", "string"]], ["open-choice", ["Coding", "date", "time", "integer", "string"]]
])

/** The types of QuestionnaireResponse.item.answer.value[x]. */
const responseTypes = new Set(["boolean", "decimal", "integer", "date", "dateTime", "time", "string", "uri", "Attachment", "Coding", "Quantity", "Reference"])

export const answerValue = (context: Context, qItem: Json, type: string, answer: Json, path: string, count: number): void => {
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
