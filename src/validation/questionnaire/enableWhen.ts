/**
 * enableWhen (https://hl7.org/fhir/R4/questionnaire-definitions.html#Questionnaire.item.enableWhen), and
 * SDC's enableWhenExpression, evaluated on a response to tell which items it may answer.
 */
import fhirpath from "fhirpath"
import r4 from "fhirpath/fhir-context/r4"
import { isObject, type Json } from "../../catalog/json.ts"
import { expressionTooLarge } from "../../fhirpath/expressionSize.ts"
import type { Context, Frame } from "./context.ts"
import { instantOf } from "./instants.ts"
import { contains, type Indexed } from "./items.ts"
import { ext, extension, list, text, valueOf } from "./json.ts"

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
export const isEnabled = (context: Context, qItem: Json, stack: ReadonlyArray<Frame>): boolean | undefined => {
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
