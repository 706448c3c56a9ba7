/**
 * Membership in value sets and code hierarchies, for token search's `:in`, `:not-in`, `:above` and `:below`
 * (https://hl7.org/fhir/R4/search.html#token) and binding validation: the codes of the expansion engine
 * (expansion.ts) as bare `{system, code}` pairs. A ValueSet that cannot be expanded (it needs SNOMED CT,
 * LOINC, ...) says why. Results are kept per catalog snapshot, for the ValueSets and codes it holds only.
 */
import type { Catalog } from "../catalog/Catalog.ts"
import type { CodeSystemDef } from "../catalog/definitions.ts"
import { closure } from "./conceptProperties.ts"
import { cachedExpansion, type Entry } from "./expansion.ts"

export interface Code {
  readonly system: string
  readonly code: string
}

/** An expansion, or why there is none. */
export type Expansion = { readonly codes: ReadonlyArray<Code> } | { readonly problem: string }

/** Beyond this many codes a search's expansion is refused rather than sent to the database as one long list. */
export const maxCodes = 10_000

const withoutVersion = (url: string): string => {
  const bar = url.indexOf("|")
  return bar < 0 ? url : url.slice(0, bar)
}

// The pairs of each expansion's entries, made once per expansion kept.
const pairs = new WeakMap<ReadonlyArray<Entry>, ReadonlyArray<Code>>()

const pairsOf = (entries: ReadonlyArray<Entry>): ReadonlyArray<Code> => {
  let codes = pairs.get(entries)
  if (codes === undefined) pairs.set(entries, codes = entries.map(({ system, code }) => ({ system, code })))
  return codes
}

/** The codes of the ValueSet at `url` (a `|version` the catalog does not hold reads the version it holds). */
export const expandValueSet = (catalog: Catalog, url: string): Expansion => {
  let outcome = cachedExpansion(catalog, url)
  if (outcome === undefined && url.includes("|")) outcome = cachedExpansion(catalog, withoutVersion(url))
  if (outcome === undefined) return { problem: `the ValueSet ${withoutVersion(url)} is not known to this server` }
  if (outcome === "computing") return { problem: `the ValueSet ${withoutVersion(url)} includes itself` }
  if (!outcome.ok) return { problem: outcome.problems.map((problem) => problem.message).join("; ") }
  if (outcome.entries.length > maxCodes) return { problem: `the ValueSet ${withoutVersion(url)} has more than ${maxCodes} codes` }
  return { codes: pairsOf(outcome.entries) }
}

const systemProblem = (system: CodeSystemDef | undefined, url: string, what: string): string | undefined => {
  if (system === undefined) return `${what} needs the code system ${url}, which this server does not hold`
  if (system.content !== "complete" && system.content !== "fragment") {
    return `${what} needs the codes of ${url}, which this server holds without its content (content '${system.content ?? "unknown"}')`
  }
  return undefined
}

const hierarchies = new WeakMap<Catalog, Map<string, Expansion>>()

/** `code` and its descendants (`below`) or ancestors (`above`) in the CodeSystem `system`. */
export const subsumed = (catalog: Catalog, system: string, code: string, direction: "above" | "below"): Expansion => {
  const codeSystem = catalog.codeSystem(system)
  const problem = systemProblem(codeSystem, system, `:${direction}`)
  if (problem !== undefined) return { problem }
  const concept = codeSystem!.concept(code)
  if (concept === undefined) return { problem: `the code system ${system} has no code '${code}'` }
  // Kept by the concept's own code: one entry per code the catalog holds, whatever a request writes.
  let cache = hierarchies.get(catalog)
  if (cache === undefined) hierarchies.set(catalog, cache = new Map())
  const key = `${direction} ${system} ${concept.code}`
  const hit = cache.get(key)
  if (hit !== undefined) return hit
  const codes = [...closure(codeSystem!, concept.code, direction === "below" ? "down" : "up")].map((c) => ({ system, code: c }))
  const result: Expansion = { codes }
  cache.set(key, result)
  return result
}
