/**
 * Membership in value sets and code hierarchies, for token search's `:in`, `:not-in`, `:above` and `:below`
 * (https://hl7.org/fhir/R4/search.html#token) and binding validation: the codes of the expansion engine
 * (expansion.ts) as bare `{system, code}` pairs. A ValueSet that cannot be expanded (it needs SNOMED CT,
 * LOINC, ...) says why. Results are kept per catalog snapshot, for the ValueSets and codes it holds only.
 */
import type { Catalog } from "../catalog/Catalog.ts"
import type { CodeSystemDef } from "../catalog/definitions.ts"
import { closure } from "./concepts.ts"
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

/** The members of a value set, looked up by code: what `$validate-code` and binding validation ask. */
export interface Members {
  readonly codes: ReadonlyArray<Code>
  /** Whether `system|code` is a member. */
  readonly has: (system: string, code: string) => boolean
  /** The systems in which `code` is a member; with `ignoreCase`, compared without regard to case. */
  readonly systemsOf: (code: string, ignoreCase?: boolean) => ReadonlyArray<string>
}

const key = (system: string, code: string): string => `${system}\u0000${code}`

// The lookups of each expansion's entries, made once per expansion kept.
const memberLookups = new WeakMap<ReadonlyArray<Entry>, Members>()

const membersOf = (entries: ReadonlyArray<Entry>): Members => {
  const known = memberLookups.get(entries)
  if (known !== undefined) return known
  const codes = pairsOf(entries)
  const pairSet = new Set<string>()
  const byCode = new Map<string, Array<string>>()
  const byLowerCode = new Map<string, Array<string>>()
  const add = (map: Map<string, Array<string>>, code: string, system: string) => {
    const list = map.get(code)
    if (list === undefined) map.set(code, [system])
    else if (!list.includes(system)) list.push(system)
  }
  for (const { system, code } of codes) {
    pairSet.add(key(system, code))
    add(byCode, code, system)
    add(byLowerCode, code.toLowerCase(), system)
  }
  const members: Members = {
    codes,
    has: (system, code) => pairSet.has(key(system, code)),
    systemsOf: (code, ignoreCase = false) => (ignoreCase ? byLowerCode.get(code.toLowerCase()) : byCode.get(code)) ?? []
  }
  memberLookups.set(entries, members)
  return members
}

/**
 * The members of the ValueSet at `url`, up to the expansion engine's own limit (`maxExpansionCodes`, as
 * `$expand`), not search's: membership is looked up, never sent to the database as a list.
 */
export const valueSetMembers = (catalog: Catalog, url: string): Members | { readonly problem: string } => {
  let outcome = cachedExpansion(catalog, url)
  if (outcome === undefined && url.includes("|")) outcome = cachedExpansion(catalog, withoutVersion(url))
  if (outcome === undefined) return { problem: `the ValueSet ${withoutVersion(url)} is not known to this server` }
  if (outcome === "computing") return { problem: `the ValueSet ${withoutVersion(url)} includes itself` }
  if (!outcome.ok) return { problem: outcome.problems.map((problem) => problem.message).join("; ") }
  return membersOf(outcome.entries)
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
