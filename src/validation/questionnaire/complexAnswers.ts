/**
 * Answers of the attachment, reference and quantity item types: the extensions mimeType, maxSize,
 * questionnaire-referenceResource, sdc minQuantity/maxQuantity (UCUM units converted), maxDecimalPlaces,
 * unitOption and unitValueSet.
 */
import { isObject, type Json } from "../../catalog/json.ts"
import { toCanonical } from "../../terminology/ucum.ts"
import type { Context, QuestionnaireReporter } from "./context.ts"
import { ext, extension, extensions, text, valueOf } from "./json.ts"
import { maxDecimals } from "./primitiveAnswers.ts"

const base64Bytes = (data: string): number | undefined => {
  const clean = data.replace(/\s+/g, "")
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(clean)) return undefined
  const padding = clean.endsWith("==") ? 2 : clean.endsWith("=") ? 1 : 0
  return Math.floor((clean.length * 3) / 4) - padding
}

export const attachmentAnswer = (reporter: QuestionnaireReporter, qItem: Json, value: Json, at: string): void => {
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

export const referenceAnswer = (context: Context, qItem: Json, value: Json, at: string): void => {
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

export const quantityAnswer = (reporter: QuestionnaireReporter, qItem: Json, value: Json, at: string): void => {
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
