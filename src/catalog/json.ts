/** Tolerant readers for fields of parsed FHIR JSON: a field of the wrong shape reads as absent. */

export type Json = Record<string, unknown>

export const isObject = (value: unknown): value is Json =>
  typeof value === "object" && value !== null && !Array.isArray(value)

export const str = (json: Json, key: string): string | undefined => {
  const value = json[key]
  return typeof value === "string" ? value : undefined
}

export const bool = (json: Json, key: string): boolean | undefined => {
  const value = json[key]
  return typeof value === "boolean" ? value : undefined
}

export const int = (json: Json, key: string): number | undefined => {
  const value = json[key]
  return typeof value === "number" && Number.isInteger(value) ? value : undefined
}

const empty: ReadonlyArray<never> = []

const isString = (value: unknown): value is string => typeof value === "string"

export const strings = (json: Json, key: string): ReadonlyArray<string> => {
  const value = json[key]
  if (!Array.isArray(value)) return empty
  return value.every(isString) ? value : value.filter(isString)
}

export const objects = (json: Json, key: string): ReadonlyArray<Json> => {
  const value = json[key]
  if (!Array.isArray(value)) return empty
  return value.every(isObject) ? value : value.filter(isObject)
}

export const object = (json: Json, key: string): Json | undefined => {
  const value = json[key]
  return isObject(value) ? value : undefined
}

const isUpper = (code: number): boolean => code >= 65 && code <= 90

/** The value of a choice element `name[x]` (e.g. `fixedCode`), or undefined when there is none. */
export const choice = (json: Json, name: string): unknown => {
  for (const key in json) {
    if (key.length > name.length && key.startsWith(name) && isUpper(key.charCodeAt(name.length))) return json[key]
  }
  return undefined
}
