/** Plain JSON values as both patch formats see them. */
import { cloneJson } from "../../json/lexical.ts"

export type JsonObject = Record<string, unknown>

export const isJsonObject = (value: unknown): value is JsonObject =>
  typeof value === "object" && value !== null && !Array.isArray(value)

export const hasMember = (object: JsonObject, key: string): boolean => Object.hasOwn(object, key)

export const member = (object: JsonObject, key: string): unknown => (Object.hasOwn(object, key) ? object[key] : undefined)

/** Defines rather than assigns, so that a key such as `__proto__` stays an ordinary member. */
export const setMember = (object: JsonObject, key: string, value: unknown): void => {
  Object.defineProperty(object, key, { value, enumerable: true, writable: true, configurable: true })
}

export const removeMember = (object: JsonObject, key: string): void => {
  delete object[key]
}

/** RFC 6902 section 4.6: same JSON type, arrays element-wise, objects member-wise regardless of order. */
export const jsonEqual = (a: unknown, b: unknown): boolean => {
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((item, i) => jsonEqual(item, b[i]))
  }
  if (isJsonObject(a)) {
    if (!isJsonObject(b)) return false
    const keys = Object.keys(a)
    return keys.length === Object.keys(b).length &&
      keys.every((key) => hasMember(b, key) && jsonEqual(a[key], b[key]))
  }
  return a === b
}

/** A deep copy; decimals keep their text (docs/formats.md). */
export const copyJson = <A>(value: A): A => cloneJson(value)
