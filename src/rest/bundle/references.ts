/**
 * Placeholder ids of a transaction (https://hl7.org/fhir/R4/bundle.html#references): every use of an
 * entry's fullUrl is replaced by the reference of the resource the server created or updated, in
 * `reference` elements, in uri/url values that equal a `urn:uuid:`/`urn:oid:` placeholder, and in
 * the narrative's `href` and `src` attributes.
 */
import { carryLexical } from "../../json/lexical.ts"

const isPlaceholder = (value: string): boolean => value.startsWith("urn:uuid:") || value.startsWith("urn:oid:")

const escapeRegExp = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

export interface Rewrite {
  /** fullUrl → `Type/id` */
  readonly replacements: ReadonlyMap<string, string>
  /** `urn:uuid:`/`urn:oid:` references that no entry defines. */
  readonly unresolved: Array<string>
  /** Set when a `reference` is written as `Type?search` (a conditional reference, resolved elsewhere). */
  conditional?: boolean
}

/** A conditional reference: `Type?search`. */
export const conditionalReference = /^([A-Z][A-Za-z]*)\?/

const rewriteNarrative = (div: string, replacements: ReadonlyMap<string, string>): string => {
  if (!div.includes("urn:") && !div.includes("://")) return div
  let out = div
  for (const [from, to] of replacements) {
    if (!out.includes(from)) continue
    out = out.replace(new RegExp(`((?:href|src)\\s*=\\s*["'])${escapeRegExp(from)}(["'])`, "g"), `$1${to}$2`)
  }
  return out
}

/**
 * `value` with the placeholders replaced, unresolved `urn:` references collected: an object or array that holds
 * a replacement is a copy; one that holds none is `value` itself, shared (a resource's codings, quantities and
 * narrative are mostly untouched, and copying them all cost a Synthea ingest more in garbage collection than the
 * rewrite itself). Nothing on the write path changes a resource in place.
 */
export const rewrite = (value: unknown, state: Rewrite, key = ""): unknown => {
  if (typeof value === "string") {
    if (key === "reference" && state.conditional !== true && conditionalReference.test(value)) state.conditional = true
    const replaced = state.replacements.get(value)
    if (replaced !== undefined && (key === "reference" || isPlaceholder(value))) return replaced
    if (key === "reference" && isPlaceholder(value)) state.unresolved.push(value)
    if (key === "div") return rewriteNarrative(value, state.replacements)
    return value
  }
  if (Array.isArray(value)) {
    let out: Array<unknown> | undefined
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i]
      const rewritten = rewrite(item, state, key)
      if (rewritten !== item && out === undefined) out = value.slice(0, i)
      if (out !== undefined) out.push(rewritten)
    }
    return out === undefined ? value : carryLexical(value, out)
  }
  if (typeof value === "object" && value !== null) {
    const object = value as Record<string, unknown>
    let out: Record<string, unknown> | undefined
    // for-in visits what Object.entries would (a parsed JSON object has no inherited enumerable keys), without its arrays.
    for (const name in object) {
      const member = object[name]
      const rewritten = rewrite(member, state, name)
      if (rewritten !== member && out === undefined) {
        out = {}
        for (const before in object) {
          if (before === name) break
          out[before] = object[before]
        }
      }
      if (out !== undefined) out[name] = rewritten
    }
    return out === undefined ? value : carryLexical(object, out)
  }
  return value
}
