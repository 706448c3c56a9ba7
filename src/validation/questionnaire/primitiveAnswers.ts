/**
 * Answers of the primitive item types (decimal, integer, date, dateTime, time, string): the extensions
 * minValue/maxValue, maxDecimalPlaces, minLength, maxLength and regex, the item's answerValueSet for strings,
 * and the answerOptions of items that are not choices.
 */
import type { Json } from "../../catalog/json.ts"
import { javaRegex } from "../../fhirpath/regex.ts"
import type { Context, QuestionnaireReporter } from "./context.ts"
import { instantOf } from "./instants.ts"
import { ext, extension, integerOf, list, text, valueOf } from "./json.ts"

const decimalPlaces = (value: number | string): number => {
  const s = String(value)
  if (/e/i.test(s)) {
    const [mantissa, exponent] = s.toLowerCase().split("e")
    const places = mantissa!.includes(".") ? mantissa!.length - mantissa!.indexOf(".") - 1 : 0
    return Math.max(0, places - Number(exponent))
  }
  return s.includes(".") ? s.length - s.indexOf(".") - 1 : 0
}

export const primitiveOptions = (qItem: Json, type: string): ReadonlyArray<unknown> =>
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

export const decimalAnswer = (reporter: QuestionnaireReporter, qItem: Json, value: number, at: string): void => {
  const min = valueOf(extension(qItem, ext.minValue))?.value
  const max = valueOf(extension(qItem, ext.maxValue))?.value
  if (typeof min === "number" && value < min) reporter.report("error", "invariant", at, `The value ${value} is less than the allowed minimum of ${min}`)
  if (typeof max === "number" && value > max) reporter.report("error", "invariant", at, `The value ${value} is greater than the allowed maximum of ${max}`)
  maxDecimals(reporter, qItem, value, at)
  typedOptions(reporter, qItem, "decimal", value, at)
}

export const maxDecimals = (reporter: QuestionnaireReporter, qItem: Json, value: number, at: string): void => {
  const limit = integerOf(extension(qItem, ext.maxDecimals))
  if (limit !== undefined && decimalPlaces(value) > limit) {
    reporter.report("error", "invariant", at, `The value ${value} has too many decimal places (at most ${limit})`)
  }
}

export const integerAnswer = (reporter: QuestionnaireReporter, qItem: Json, value: number, at: string): void => {
  const min = valueOf(extension(qItem, ext.minValue))?.value
  const max = valueOf(extension(qItem, ext.maxValue))?.value
  if (typeof min === "number" && value < min) reporter.report("error", "invariant", at, `The value ${value} is less than the allowed minimum of ${min}`)
  if (typeof max === "number" && value > max) reporter.report("error", "invariant", at, `The value ${value} is greater than the allowed maximum of ${max}`)
  typedOptions(reporter, qItem, "integer", value, at)
}

export const dateAnswer = (reporter: QuestionnaireReporter, qItem: Json, value: string, at: string): void => {
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

export const timeAnswer = (reporter: QuestionnaireReporter, qItem: Json, value: string, at: string): void => {
  const min = valueOf(extension(qItem, ext.minValue))?.value
  const max = valueOf(extension(qItem, ext.maxValue))?.value
  if (typeof min === "string" && value < min) reporter.report("error", "invariant", at, `The value ${value} is less than the allowed minimum of ${min}`)
  if (typeof max === "string" && value > max) reporter.report("error", "invariant", at, `The value ${value} is greater than the allowed maximum of ${max}`)
  typedOptions(reporter, qItem, "time", value, at)
}

export const stringAnswer = (context: Context, qItem: Json, value: string, at: string): void => {
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
