/**
 * One evaluated value to index rows, by search parameter type and the value's FHIR type.
 * https://hl7.org/fhir/R4/search.html#ptypes (the table of which data types each parameter type reads).
 */
import { cover, dateRange, periodRange, type Range } from "./dates.ts"
import type { IndexRow, QuantityRow, ReferenceRow, TokenRow } from "./IndexRow.ts"
import { extensionValue, type FhirNode, type Json, list, obj, text, type Typed } from "../../fhirpath/nodes.ts"
import type { Canonical } from "../../terminology/ucum.ts"
import { lexicalOf } from "../../json/lexical.ts"
import { readDecimal } from "../parse/numbers.ts"

export interface ValueContext {
  /** The code system bound to a `code` element, if the binding names exactly one. */
  readonly codeSystem: (node: FhirNode) => string | null
  readonly skip: (code: string, reason: string) => void
  /** `toCanonical` of ucum.ts. */
  readonly canonical: (value: number, unit: string) => Canonical | undefined
}

const primitiveText = new Set([
  "string", "code", "id", "uri", "url", "canonical", "oid", "uuid", "markdown", "boolean", "integer", "decimal",
  "positiveInt", "unsignedInt", "date", "dateTime", "instant", "time", "base64Binary"
])

export const normalize = (value: string): string =>
  value.normalize("NFD").replace(/\p{M}/gu, "").toLowerCase().replace(/\s+/g, " ").trim()

/** What token `:text` compares: normalised, with punctuation read as spaces, so that words can be told apart. */
export const words = (value: string): string => normalize(value.replace(/[^\p{L}\p{N}]+/gu, " "))

const token = (code: string, system: string | null, value: string | null, display?: string): TokenRow =>
  display === undefined ? { kind: "token", code, system, value } : { kind: "token", code, system, value, display }

const tokens = (code: string, t: Typed, ctx: ValueContext): ReadonlyArray<IndexRow> => {
  const data = obj(t.data)
  switch (t.type) {
    case "Coding":
      return data === undefined ? [] : [coding(code, data)]
    case "CodeableConcept": {
      if (data === undefined) return []
      const rows: Array<TokenRow> = list(data["coding"]).flatMap((c) => {
        const json = obj(c)
        return json === undefined ? [] : [coding(code, json)]
      })
      const label = text(data["text"])
      if (label !== undefined) rows.push(token(code, null, null, label))
      return rows
    }
    case "Identifier": {
      if (data === undefined) return []
      const type = obj(data["type"])
      const typeCoding = obj(list(type?.["coding"])[0])
      const typeCode = text(typeCoding?.["code"])
      const row: TokenRow = token(code, text(data["system"]) ?? null, text(data["value"]) ?? null, text(type?.["text"]))
      return [typeCode === undefined ? row : { ...row, identifierType: { system: text(typeCoding?.["system"]) ?? null, code: typeCode } }]
    }
    case "ContactPoint":
      return data === undefined ? [] : [token(code, text(data["system"]) ?? null, text(data["value"]) ?? null)]
    case "code": {
      const value = text(t.data)
      return value === undefined ? [] : [token(code, t.node === undefined ? null : ctx.codeSystem(t.node), value)]
    }
    default:
      if (primitiveText.has(t.type) && (typeof t.data === "string" || typeof t.data === "boolean" || typeof t.data === "number")) {
        return [token(code, null, String(t.data))]
      }
      return []
  }
}

const coding = (code: string, json: Json): TokenRow =>
  token(code, text(json["system"]) ?? null, text(json["code"]) ?? null, text(json["display"]))

const stringRow = (code: string, value: string): IndexRow => ({ kind: "string", code, normalized: normalize(value), exact: value })

const nameParts = ["text", "family", "given", "prefix", "suffix"]
const addressParts = ["text", "line", "city", "district", "state", "postalCode", "country"]

const strings = (code: string, t: Typed): ReadonlyArray<IndexRow> => {
  const parts = t.type === "HumanName" ? nameParts : t.type === "Address" ? addressParts : undefined
  if (parts !== undefined) {
    const data = obj(t.data)
    if (data === undefined) return []
    return parts.flatMap((part) => list(data[part]).flatMap((value) => (typeof value === "string" && value !== "" ? [stringRow(code, value)] : [])))
  }
  if (t.type === "CodeableConcept") {
    const label = text(obj(t.data)?.["text"])
    return label === undefined ? [] : [stringRow(code, label)]
  }
  return typeof t.data === "string" && t.data !== "" ? [stringRow(code, t.data)] : []
}

const dateOf = (t: Typed): Range | undefined => {
  const data = obj(t.data)
  switch (t.type) {
    case "Period":
      return data === undefined ? undefined : periodRange(data["start"], data["end"])
    case "Timing": {
      if (data === undefined) return undefined
      const ranges = list(data["event"]).map((event) => (typeof event === "string" ? dateRange(event) : undefined))
      const bounds = obj(obj(data["repeat"])?.["boundsPeriod"])
      const all = bounds === undefined ? ranges : [...ranges, periodRange(bounds["start"], bounds["end"])]
      return all.some((range) => range === undefined) ? undefined : cover(all.filter((range): range is Range => range !== undefined))
    }
    default:
      return typeof t.data === "string" ? dateRange(t.data) : undefined
  }
}

/**
 * `[low, high)` from the digits written, as for a search value: 100 covers [99.5, 100.5), 1.50 covers
 * [1.495, 1.505), 1.5e3 covers [1450, 1550).
 */
const numberRow = (code: string, value: number, written: string | undefined): IndexRow => {
  const range = readDecimal(written ?? String(value))
  return range === undefined || range.value !== value
    ? { kind: "number", code, value, low: value, high: value }
    : { kind: "number", code, value, low: range.low, high: range.high }
}

/** The text a number was written with in the resource (src/json/lexical.ts), when kept. */
const writtenText = (t: Typed): string | undefined => {
  const holder = t.node?.parentResNode?.data
  const name = t.node?.propName
  if (typeof holder !== "object" || holder === null || name === undefined) return undefined
  // A choice element is named without its type (`probability` for `probabilityDecimal`).
  const key = name in holder ? name : name + t.type.charAt(0).toUpperCase() + t.type.slice(1)
  const value: unknown = (holder as Json)[key]
  if (!Array.isArray(value)) return lexicalOf(holder, key)
  // An item of a list: found by its number, when that number is there once.
  const at = value.indexOf(t.data)
  return at >= 0 && value.indexOf(t.data, at + 1) < 0 ? lexicalOf(value, at) : undefined
}

const quantityTypes = new Set(["Quantity", "Age", "Duration", "Distance", "Count", "SimpleQuantity", "MoneyQuantity"])
const ucum = "http://unitsofmeasure.org"

const quantity = (code: string, t: Typed, ctx: ValueContext): ReadonlyArray<IndexRow> => {
  const data = obj(t.data)
  if (data === undefined) return []
  const value = data["value"]
  if (typeof value !== "number" || !Number.isFinite(value)) return []
  if (t.type === "Money") {
    return [{ kind: "quantity", code, value, system: "urn:iso:std:iso:4217", unit: text(data["currency"]) ?? null }]
  }
  if (!quantityTypes.has(t.type)) return []
  const system = text(data["system"]) ?? null
  const unit = text(data["code"]) ?? text(data["unit"]) ?? null
  const row: QuantityRow = { kind: "quantity", code, value, system, unit }
  const canonical = unit !== null && (system === ucum || system === null) ? ctx.canonical(value, unit) : undefined
  return canonical === undefined ? [row] : [{ ...row, canonicalValue: canonical.value, canonicalUnit: canonical.unit }]
}

const relative = /^([A-Z][A-Za-z]+)\/([A-Za-z0-9\-.]{1,64})(?:\/_history\/([^/]+))?$/
const absoluteTail = /\/([A-Z][A-Za-z]+)\/([A-Za-z0-9\-.]{1,64})(?:\/_history\/[^/]+)?$/

/** A reference's text to its parts: `Type/id` is local, anything else is kept whole in `url`. */
export const referenceText = (code: string, reference: string, declaredType: string | null): ReferenceRow => {
  const local = relative.exec(reference)
  if (local !== null) {
    const row: ReferenceRow = { kind: "reference", code, targetType: local[1]!, targetId: local[2]!, url: null }
    return local[3] === undefined ? row : { ...row, version: local[3] }
  }
  if (reference.startsWith("#")) return { kind: "reference", code, targetType: declaredType, targetId: reference, url: null }
  const bar = reference.indexOf("|")
  const url = bar < 0 ? reference : reference.slice(0, bar)
  const targetType = declaredType ?? absoluteTail.exec(url)?.[1] ?? null
  const row: ReferenceRow = { kind: "reference", code, targetType, targetId: null, url }
  return bar < 0 ? row : { ...row, version: reference.slice(bar + 1) }
}

const references = (code: string, t: Typed): ReadonlyArray<IndexRow> => {
  if (t.type === "Reference") {
    const data = obj(t.data)
    if (data === undefined) return []
    const type = text(data["type"]) ?? null
    const reference = text(data["reference"])
    const identifier = obj(data["identifier"])
    const found = identifier === undefined ? undefined : { system: text(identifier["system"]) ?? null, value: text(identifier["value"]) ?? null }
    if (reference === undefined) {
      return found === undefined ? [] : [{ kind: "reference", code, targetType: type, targetId: null, url: null, identifier: found }]
    }
    const row = referenceText(code, reference, type)
    return [found === undefined ? row : { ...row, identifier: found }]
  }
  return typeof t.data === "string" && t.data !== "" ? [referenceText(code, t.data, null)] : []
}

const near = (code: string, t: Typed): ReadonlyArray<IndexRow> => {
  const data = obj(t.data)
  const latitude = data?.["latitude"]
  const longitude = data?.["longitude"]
  if (typeof latitude !== "number" || typeof longitude !== "number") return []
  if (Math.abs(latitude) > 90 || Math.abs(longitude) > 180) return []
  return [{ kind: "near", code, latitude, longitude }]
}

/** The rows of one value for a parameter of `type` (every type but composite). */
export const rowsOf = (type: string, code: string, value: Typed, ctx: ValueContext): ReadonlyArray<IndexRow> => {
  const t = value.type === "Extension" ? unwrapExtension(value) : value
  if (t === undefined) return []
  switch (type) {
    case "token":
      return tokens(code, t, ctx)
    case "string":
      return strings(code, t)
    case "date": {
      const range = dateOf(t)
      if (range === undefined) {
        ctx.skip(code, `not a date: ${JSON.stringify(t.data).slice(0, 80)}`)
        return []
      }
      return [{ kind: "date", code, low: range.low, high: range.high }]
    }
    case "number": {
      if (typeof t.data === "number") return Number.isFinite(t.data) ? [numberRow(code, t.data, writtenText(t))] : []
      // fhirpath.js gives a decimal element as an object with its number and the text as written.
      const decimal = obj(t.data)
      const value = decimal?.["value"]
      if (typeof value !== "number" || !Number.isFinite(value)) return []
      return [numberRow(code, value, text(decimal?.["asStr"]))]
    }
    case "quantity":
      return quantity(code, t, ctx)
    case "reference":
      return references(code, t)
    case "uri":
      return typeof t.data === "string" && t.data !== "" ? [{ kind: "uri", code, value: t.data }] : []
    case "special":
      return code === "near" ? near(code, t) : []
    default:
      return []
  }
}

const unwrapExtension = (t: Typed): Typed | undefined => {
  const data = obj(t.data)
  return data === undefined ? undefined : extensionValue(data)
}
