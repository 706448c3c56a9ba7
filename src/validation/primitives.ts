/**
 * The R4 primitive types (https://hl7.org/fhir/R4/datatypes.html#primitive): the JSON type each is written
 * as and the regex its StructureDefinition gives (`<type>.value`, extension
 * `http://hl7.org/fhir/StructureDefinition/regex`), copied here so that no regex is built per request.
 * `\s` and `\S` in those regexes are Java's, ASCII only: a no-break space is not whitespace to FHIR.
 * Dates are also checked against the calendar (no 30 February).
 */

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
