/**
 * Changes to one element of a FHIR JSON object. A primitive keeps its id and extensions in a companion
 * member `_name` (https://hl7.org/fhir/R4/json.html#primitive), a parallel array for a list, so every
 * change to a list changes its companion the same way. A decimal keeps its text (src/json/lexical.ts) where
 * it goes; a value set takes the text the patch gives.
 */
import { lexicalOf, setLexical, spliceLexical } from "../../json/lexical.ts"
import { hasMember, type JsonObject, removeMember, setMember } from "./json.ts"

const companionKey = (key: string): string => `_${key}`

const listAt = (container: JsonObject, key: string): Array<unknown> => {
  const existing = container[key]
  if (Array.isArray(existing)) return existing
  const created: Array<unknown> = []
  setMember(container, key, created)
  return created
}

/** The companion list, padded to `length`, or undefined when there is none and none is needed. */
const companionsOf = (container: JsonObject, key: string, length: number, needed: boolean) => {
  const existing = container[companionKey(key)]
  if (!Array.isArray(existing) && !needed) return undefined
  const list = Array.isArray(existing) ? existing : []
  while (list.length < length) list.push(null)
  setMember(container, companionKey(key), list)
  return list
}

/** Drops what FHIR JSON does not allow to stay: empty lists, and companions without content. */
const tidy = (container: JsonObject, key: string): void => {
  const values = container[key]
  if (Array.isArray(values) && values.length === 0) removeMember(container, key)
  const companions = container[companionKey(key)]
  if (Array.isArray(companions) && companions.every((item) => item === null)) {
    removeMember(container, companionKey(key))
  }
}

export const itemCount = (container: JsonObject, key: string): number => {
  const values = container[key]
  const companions = container[companionKey(key)]
  return Math.max(Array.isArray(values) ? values.length : 0, Array.isArray(companions) ? companions.length : 0)
}

export const insertItem = (
  container: JsonObject,
  key: string,
  position: number,
  json: unknown,
  extra: JsonObject | undefined,
  lexeme?: string
): void => {
  const length = itemCount(container, key)
  const values = listAt(container, key)
  while (values.length < length) values.push(null)
  spliceLexical(values, position, 0, [lexeme])
  values.splice(position, 0, json)
  companionsOf(container, key, length, extra !== undefined)?.splice(position, 0, extra ?? null)
  tidy(container, key)
}

export const removeItem = (container: JsonObject, key: string, index: number | undefined): void => {
  if (index === undefined) {
    removeMember(container, key)
    removeMember(container, companionKey(key))
    return
  }
  const values = container[key]
  if (Array.isArray(values)) {
    spliceLexical(values, index, 1, [])
    values.splice(index, 1)
  }
  const companions = container[companionKey(key)]
  if (Array.isArray(companions)) companions.splice(index, 1)
  tidy(container, key)
}

export const setItem = (
  container: JsonObject,
  key: string,
  index: number | undefined,
  json: unknown,
  extra: JsonObject | undefined,
  lexeme?: string
): void => {
  if (index === undefined) {
    setMember(container, key, json)
    setLexical(container, key, lexeme)
    if (extra === undefined) removeMember(container, companionKey(key))
    else setMember(container, companionKey(key), extra)
    return
  }
  const length = itemCount(container, key)
  const values = listAt(container, key)
  while (values.length < length) values.push(null)
  values[index] = json
  setLexical(values, index, lexeme)
  const companions = companionsOf(container, key, length, extra !== undefined)
  if (companions !== undefined) companions[index] = extra ?? null
  tidy(container, key)
}

export const moveItem = (container: JsonObject, key: string, source: number, destination: number): void => {
  const length = itemCount(container, key)
  for (const name of [key, companionKey(key)]) {
    const list = container[name]
    if (!Array.isArray(list)) continue
    while (list.length < length) list.push(null)
    const lexeme = lexicalOf(list, source)
    spliceLexical(list, source, 1, [])
    const moved = list.splice(source, 1)
    spliceLexical(list, destination, 0, [lexeme])
    list.splice(destination, 0, ...moved)
  }
  tidy(container, key)
}

export const holdsAny = (container: JsonObject, keys: ReadonlyArray<string>): boolean =>
  keys.some((key) => hasMember(container, key) || hasMember(container, companionKey(key)))

/** Empties the id and extensions of a primitive, keeping its value. */
export const clearCompanion = (container: JsonObject, key: string, index: number | undefined): void => {
  const companions = container[companionKey(key)]
  if (index === undefined || !Array.isArray(companions)) removeMember(container, companionKey(key))
  else if (index < companions.length) companions[index] = null
  tidy(container, key)
}
