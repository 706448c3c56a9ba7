/**
 * The R4 primitive types (https://hl7.org/fhir/R4/datatypes.html#primitive): the JSON type each is written
 * as and the regex its StructureDefinition gives (`<type>.value`, extension
 * `http://hl7.org/fhir/StructureDefinition/regex`), copied here so that no regex is built per request.
 * `\s` and `\S` in those regexes are Java's, ASCII only: a no-break space is not whitespace to FHIR.
 * Dates are also checked against the calendar (no 30 February).
 */
import { javaRegex } from "../fhirpath/regex.ts"
import { bidiProblem, htmlTagIn, markdownHtmlAt } from "./security.ts"
import { isDefiningUrl, uriProblems } from "./uris.ts"

/** Why a value is not of the type, or undefined when it is. */
export type PrimitiveCheck = (value: unknown) => string | undefined

const ws = "[ \\t\\n\\x0B\\f\\r]"
const nws = "[^ \\t\\n\\x0B\\f\\r]"

const year = "([0-9]([0-9]([0-9][1-9]|[1-9]0)|[1-9]00)|[1-9]000)"
const month = "(0[1-9]|1[0-2])"
const day = "(0[1-9]|[1-2][0-9]|3[0-1])"
const clock = "([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\\.[0-9]+)?"
const zone = "(Z|(\\+|-)((0[0-9]|1[0-3]):[0-5][0-9]|14:00))"

/** The regexes of R4, anchored. */
export const regexes: Readonly<Record<string, string>> = {
  base64Binary: "(\\s*([0-9a-zA-Z\\+/=]){4}\\s*)+",
  boolean: "true|false",
  canonical: `${nws}*`,
  code: `${nws}+(${ws}${nws}+)*`,
  date: `${year}(-${month}(-${day})?)?`,
  dateTime: `${year}(-${month}(-${day}(T${clock}${zone})?)?)?`,
  decimal: "-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?",
  id: "[A-Za-z0-9\\-\\.]{1,64}",
  instant: `${year}-${month}-${day}T${clock}${zone}`,
  integer: "-?([0]|([1-9][0-9]*))",
  markdown: "[^\\x0B\\f]+",
  oid: "urn:oid:[0-2](\\.(0|[1-9][0-9]*))+",
  positiveInt: "[1-9][0-9]*",
  string: "[^\\x0B\\f]+",
  time: clock,
  unsignedInt: "[0]|([1-9][0-9]*)",
  uri: `${nws}*`,
  url: `${nws}*`,
  uuid: "urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
}

const anchored = (source: string): RegExp => new RegExp(`^(?:${source})$`)

const withoutZone = anchored(`${year}-${month}-${day}T${clock}`)

const maxStringLength = 1_048_576

const daysIn = (y: number, m: number): number =>
  m === 2 ? (y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0) ? 29 : 28) : [4, 6, 9, 11].includes(m) ? 30 : 31

/** A day that the regex lets through but the calendar does not have: 2021-02-29, 2020-04-31. */
const badDay = (text: string): boolean => {
  if (text.length < 10) return false
  const y = Number(text.slice(0, 4))
  const m = Number(text.slice(5, 7))
  const d = Number(text.slice(8, 10))
  return d > daysIn(y, m)
}

const describe = (value: unknown): string => {
  if (value === null) return "null"
  if (Array.isArray(value)) return "an array"
  if (typeof value === "string") return `the string ${JSON.stringify(value.length > 60 ? value.slice(0, 60) + "..." : value)}`
  if (typeof value === "object") return "an object"
  return `${typeof value} ${String(value)}`
}

const textual = (
  type: string,
  extra?: (text: string) => string | undefined,
  explain?: (text: string) => string | undefined
): PrimitiveCheck => {
  const source = regexes[type]
  const pattern = source === undefined ? undefined : anchored(source)
  return (value) => {
    if (typeof value !== "string") return `a ${type} is written as a JSON string, not ${describe(value)}`
    if (value.length === 0) return `a ${type} cannot be an empty string`
    if (type === "string" && value.length > maxStringLength) return `a string is at most ${maxStringLength} characters long`
    if (pattern !== undefined && !pattern.test(value)) return explain?.(value) ?? `${describe(value)} is not a valid ${type}`
    return extra?.(value)
  }
}

const calendar = (type: string) => (text: string) =>
  badDay(text) ? `${JSON.stringify(text)} is not a valid ${type}: that day does not exist` : undefined

const numeric = (type: string, low: number, high: number): PrimitiveCheck => (value) => {
  if (typeof value !== "number") return `a ${type} is written as a JSON number, not ${describe(value)}`
  if (!Number.isInteger(value)) return `${value} is not a valid ${type}: it is not a whole number`
  if (value < low || value > high) return `${value} is not a valid ${type}: it must be between ${low} and ${high}`
  return undefined
}

const int32 = 2_147_483_647

const decimal: PrimitiveCheck = (value) => {
  if (typeof value !== "number") return `a decimal is written as a JSON number, not ${describe(value)}`
  if (!Number.isFinite(value)) return `${value} is not a valid decimal`
  return undefined
}

const boolean: PrimitiveCheck = (value) =>
  typeof value === "boolean" ? undefined : `a boolean is written as JSON true or false, not ${describe(value)}`

const checks: ReadonlyMap<string, PrimitiveCheck> = new Map<string, PrimitiveCheck>([
  ["boolean", boolean],
  ["integer", numeric("integer", -int32 - 1, int32)],
  ["unsignedInt", numeric("unsignedInt", 0, int32)],
  ["positiveInt", numeric("positiveInt", 1, int32)],
  ["decimal", decimal],
  ["date", textual("date", calendar("date"))],
  ["dateTime", textual("dateTime", calendar("dateTime"), (text) =>
    withoutZone.test(text) ? `${describe(text)} is not a valid dateTime: a dateTime with a time must have a timezone` : undefined)],
  ["instant", textual("instant", calendar("instant"))],
  ...(["base64Binary", "canonical", "code", "id", "markdown", "oid", "string", "time", "uri", "url", "uuid"] as const).map(
    (type): [string, PrimitiveCheck] => [type, textual(type)]
  ),
  ["xhtml", textual("xhtml")]
])

/** The check of an R4 primitive type, or undefined for a type that is not one. */
export const primitiveCheck = (type: string): PrimitiveCheck | undefined => checks.get(type)

export const isPrimitiveType = (type: string): boolean => checks.has(type)

/** Receives what the value checks find. */
export interface ValueReporter {
  report(severity: "error" | "warning" | "information", code: string, expression: string, diagnostics: string): void
  /** The year of the check (UTC), for the years far ahead; without it only years before 1800 are flagged. */
  readonly year: number | undefined
}

interface Limits {
  readonly maxLength: number | undefined
  /** The minLength extension (http://hl7.org/fhir/StructureDefinition/minLength). */
  readonly minLength: number | undefined
  /** The regex extension on the element itself (http://hl7.org/fhir/StructureDefinition/regex), as a profile states it. */
  readonly regex: { readonly source: string; readonly pattern: RegExp } | undefined
  readonly min: { readonly key: string; readonly value: unknown } | undefined
  readonly max: { readonly key: string; readonly value: unknown } | undefined
}

const limitTypes = ["Integer", "Decimal", "PositiveInt", "UnsignedInt", "Date", "DateTime", "Instant", "Time"]

const noLimits: Limits = { maxLength: undefined, minLength: undefined, regex: undefined, min: undefined, max: undefined }

const minLengthUrl = "http://hl7.org/fhir/StructureDefinition/minLength"
const regexUrl = "http://hl7.org/fhir/StructureDefinition/regex"
const limitsCache = new WeakMap<object, Limits>()

/** ElementDefinition.maxLength, minValue[x] and maxValue[x] of an element, read once per definition. */
const limitsOf = (definition: Readonly<Record<string, unknown>>): Limits => {
  let limits = limitsCache.get(definition)
  if (limits !== undefined) return limits
  const maxLength = definition["maxLength"]
  let min: Limits["min"]
  let max: Limits["max"]
  for (const type of limitTypes) {
    if (definition[`minValue${type}`] !== undefined) min = { key: type, value: definition[`minValue${type}`] }
    if (definition[`maxValue${type}`] !== undefined) max = { key: type, value: definition[`maxValue${type}`] }
  }
  let minLength: number | undefined
  let regex: Limits["regex"]
  const extensions = definition["extension"]
  if (Array.isArray(extensions)) {
    for (const extension of extensions as ReadonlyArray<Record<string, unknown>>) {
      if (extension?.["url"] === minLengthUrl && typeof extension["valueInteger"] === "number") minLength = extension["valueInteger"]
      if (extension?.["url"] === regexUrl && typeof extension["valueString"] === "string") {
        try {
          regex = { source: extension["valueString"], pattern: javaRegex(extension["valueString"]) }
        } catch {
          // A regex JavaScript cannot read is not judged.
        }
      }
    }
  }
  limits = typeof maxLength === "number" && maxLength > 0 || minLength !== undefined || regex !== undefined || min !== undefined || max !== undefined
    ? { maxLength: typeof maxLength === "number" && maxLength > 0 ? maxLength : undefined, minLength, regex, min, max }
    : noLimits
  limitsCache.set(definition, limits)
  return limits
}

/**
 * Compares a date, dateTime, instant or time with a limit of its kind, on the precision both have:
 * negative when the value is before the limit, positive when after, 0 when equal or not comparable.
 * Times of day with zones are compared on their written digits, as most limits state no zone.
 */
const compareTemporal = (value: string, limit: string): number => {
  const length = Math.min(value.length, limit.length, value.includes("T") && limit.includes("T") ? 19 : 10)
  const a = value.slice(0, length)
  const b = limit.slice(0, length)
  return a < b ? -1 : a > b ? 1 : 0
}

/** The maxValue and minValue of an element (https://hl7.org/fhir/R4/elementdefinition-definitions.html#ElementDefinition.maxValue_x_). */
const checkRange = (limits: Limits, code: string, value: unknown, path: string, reporter: ValueReporter): void => {
  const numeric = typeof value === "number"
  const kind = numeric ? (code === "decimal" ? "decimal" : "integer") : "date/time"
  const beyond = (limit: unknown): number | undefined => {
    if (numeric && typeof limit === "number") return Math.sign(value - limit)
    if (typeof value === "string" && typeof limit === "string") return compareTemporal(value, limit)
    return undefined
  }
  if (limits.max !== undefined && (beyond(limits.max.value) ?? 0) > 0) {
    reporter.report("error", "value", path, `${kind} value ${String(value)} is greater than permitted maximum value of ${String(limits.max.value)}`)
  }
  if (limits.min !== undefined && (beyond(limits.min.value) ?? 0) < 0) {
    reporter.report("error", "value", path, `${kind} value ${String(value)} is less than permitted minimum value of ${String(limits.min.value)}`)
  }
}

const isWhitespace = (c: number): boolean => c === 32 || c === 9 || c === 10 || c === 13

const shown = (text: string): string => JSON.stringify(text.length > 60 ? `${text.slice(0, 60)}...` : text)


/**
 * The rules on a primitive value that its type's regex does not state (run once the value has passed it):
 * maxLength, minLength, a profile's regex, minValue and maxValue
 * (https://hl7.org/fhir/R4/elementdefinition.html), leading and trailing whitespace in strings, HTML in strings and
 * markdown and unbalanced bidirectional controls (security.ts), URI forms (uris.ts), whitespace in
 * base64, and years far from now in dates. Dispatched by type; most values cost a switch and a property
 * read.
 */
export const checkValue = (
  reporter: ValueReporter,
  code: string,
  value: unknown,
  path: string,
  /** The element's path in its definition (`ValueSet.url`) and the definition, for maxLength and min/maxValue. */
  elementPath: string,
  definition: Readonly<Record<string, unknown>>,
  /** Whether the value is in a contained resource. */
  contained: boolean,
  /** The url of the extension the value belongs to, if any. */
  extensionUrl: string | undefined
): void => {
  const limits = limitsOf(definition)
  if (limits !== noLimits) {
    if (limits.maxLength !== undefined && typeof value === "string" && value.length > limits.maxLength) {
      reporter.report("error", "value", path, `value is longer than permitted maximum length of ${limits.maxLength} (${value.length} characters)`)
    }
    if (limits.minLength !== undefined && typeof value === "string" && value.length < limits.minLength) {
      reporter.report("error", "value", path, `Value '${value.slice(0, 60)}' is shorter than permitted minimum length of ${limits.minLength}`)
    }
    if (limits.regex !== undefined && !limits.regex.pattern.test(typeof value === "string" ? value : String(value))) {
      reporter.report("error", "value", path, `Element value ${shown(String(value))} does not meet regex '${limits.regex.source}'`)
    }
    if (limits.min !== undefined || limits.max !== undefined) checkRange(limits, code, value, path, reporter)
  }
  if (typeof value !== "string") return
  switch (code) {
    case "string": {
      const first = value.charCodeAt(0)
      const last = value.charCodeAt(value.length - 1)
      if (isWhitespace(first) || isWhitespace(last)) {
        if (value.trim() === "") reporter.report("warning", "value", path, `value should not be all whitespace ${shown(value)}`)
        else reporter.report("warning", "value", path, `value should not start or finish with whitespace ${shown(value)}`)
      }
      const tag = extensionUrl === renderingXhtml ? undefined : htmlTagIn(value)
      if (tag !== undefined) {
        reporter.report("warning", "security", path,
          `The string value contains text that looks like an embedded HTML tag (${tag}). If this content is rendered to HTML without escaping, it may be a security risk`)
      }
      bidi(value, path, reporter)
      return
    }
    case "markdown": {
      const at = markdownHtmlAt(value)
      if (at !== undefined) {
        reporter.report("warning", "security", path,
          `The markdown contains content that appears to be an embedded HTML tag starting at '${at}'. FHIR markdown has no HTML: a presentation layer will (or should) escape it; check that this is what is meant`)
      }
      bidi(value, path, reporter)
      return
    }
    case "uri":
    case "url":
    case "canonical":
    case "oid":
    case "uuid":
      for (const problem of uriProblems(code, value, isDefiningUrl(elementPath), contained)) {
        reporter.report(problem.severity, "value", path, problem.diagnostics)
      }
      return
    case "base64Binary":
      if (/\s/.test(value)) {
        reporter.report("warning", "value", path, "Base64 encoded values SHOULD not contain any whitespace (per RFC 4648). Note that non-validating readers are encouraged to accept whitespace anyway")
      }
      return
    case "date":
    case "dateTime":
    case "instant": {
      const year = Number(value.slice(0, 4))
      if (year < 1800 || (reporter.year !== undefined && year > reporter.year + 80)) {
        reporter.report("warning", "value", path, `The value '${value}' is outside the range of reasonable years - check for data entry error`)
      }
      return
    }
  }
}

/** http://hl7.org/fhir/StructureDefinition/rendering-xhtml: a string extension that carries XHTML on purpose. */
const renderingXhtml = "http://hl7.org/fhir/StructureDefinition/rendering-xhtml"

const bidi = (value: string, path: string, reporter: ValueReporter): void => {
  const problem = bidiProblem(value)
  if (problem !== undefined) {
    reporter.report("warning", "security", path, `The Unicode sequence has unterminated bi-di control characters (see CVE-2021-42574): ${problem}`)
  }
}

/** Whether an element is a resource's id (its base is Resource.id), which takes no extensions (https://hl7.org/fhir/R4/resource.html#id). */
export const isResourceId = (definition: Readonly<Record<string, unknown>>): boolean => {
  const base = definition["base"]
  return typeof base === "object" && base !== null && (base as Record<string, unknown>)["path"] === "Resource.id"
}
