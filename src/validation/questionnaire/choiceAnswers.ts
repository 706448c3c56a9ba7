/**
 * Answers of choice and open-choice items: among the answerOptions (exclusive options alone) or in the
 * answerValueSet.
 */
import { isObject, type Json } from "../../catalog/json.ts"
import type { Context } from "./context.ts"
import { ext, extension, list, text, valueOf } from "./json.ts"
import { primitiveOptions } from "./primitiveAnswers.ts"

/** choice and open-choice: a Coding among the options or in the answerValueSet; a date, time, integer or string among the options. */
export const choiceAnswer = (context: Context, qItem: Json, valueType: string, value: unknown, path: string, count: number, open: boolean): void => {
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
