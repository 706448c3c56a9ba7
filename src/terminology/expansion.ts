/**
 * The expansion engine (https://hl7.org/fhir/R4/valueset.html#expansion): the codes of a ValueSet from
 * its `compose` over the CodeSystems and ValueSets of the catalog (includes and excludes of listed
 * concepts, filters, whole code systems, imported value sets), or from its stored `expansion` when it has
 * no compose. `$expand`, `$expandability`, token search's `:in`/`:not-in` and binding validation all read
 * it. Every reason an expansion cannot be made is collected (`$expandability` lists them); notes say what
 * was taken on trust (a `fragment` code system, codes listed for a system the server does not hold).
 * The result for a ValueSet of the catalog with the default options is kept per catalog snapshot. The way
 * through a ValueSet is walk.ts; which ValueSet a canonical names, resolveValueSet.ts.
 */
import type { Catalog } from "../catalog/Catalog.ts"
import type { CodeSystemDef, ConceptDef } from "../catalog/definitions.ts"
import type { Json } from "../catalog/json.ts"
import { resolveValueSet } from "./resolveValueSet.ts"
import { buildTextIndex, type TextIndex } from "./textIndex.ts"
import { compute, usable } from "./walk.ts"

export { resolveValueSet, valueSetName } from "./resolveValueSet.ts"

/** One code of an expansion. */
export interface Entry {
  readonly system: string
  /** The version of the code system it was taken from (held), or the one the value set names. */
  readonly version: string | undefined
  readonly code: string
  readonly display: string | undefined
  readonly abstract: boolean
  readonly inactive: boolean
  /** The designations the value set itself gives the code (its compose, or its stored expansion). */
  readonly designations: ReadonlyArray<Json>
}

export type ProblemKind =
  | "unknown-value-set"
  | "unknown-code-system"
  | "no-content"
  | "unsupported-filter"
  | "invalid-filter"
  | "cycle"
  | "too-costly"
  | "no-definition"
  | "version-conflict"

/** Why an expansion cannot be made. */
export interface Problem {
  readonly kind: ProblemKind
  readonly message: string
  /** The code system or value set it is about. */
  readonly subject: string | undefined
}

export type NoteKind = "fragment" | "unverified" | "version-not-held" | "unknown-code"

/** What an expansion took on trust or left out. */
export interface Note {
  readonly kind: NoteKind
  readonly message: string
  readonly subject: string
}

/** A code system an expansion read, at the version read. */
export interface UsedSystem {
  readonly system: string
  readonly version: string | undefined
  readonly content: string | undefined
}

export type Outcome =
  | { readonly ok: true; readonly entries: ReadonlyArray<Entry>; readonly used: ReadonlyArray<UsedSystem>; readonly notes: ReadonlyArray<Note> }
  | { readonly ok: false; readonly problems: ReadonlyArray<Problem> }

/** A ValueSet to expand: one of the catalog's, one stored, or one given inline. */
export interface Source {
  readonly url: string | undefined
  readonly version: string | undefined
  readonly json: Json
}

/** `system-version`, `force-system-version` and `check-system-version` of `$expand`, by system. */
export interface VersionRules {
  readonly system: ReadonlyMap<string, string>
  readonly force: ReadonlyMap<string, string>
  readonly check: ReadonlyMap<string, string>
}

export const noVersionRules: VersionRules = { system: new Map(), force: new Map(), check: new Map() }

/** A test applied to each code as it is selected: what is left out never counts towards the limit. */
export type Accept = (entry: Entry, concept: ConceptDef | undefined) => boolean

export interface Options {
  readonly versions: VersionRules
  /** Beyond this many codes at any step the expansion is refused (too-costly). */
  readonly limit: number
  readonly accept: Accept | undefined
}

/** The most codes an expansion holds: `$expand` and `$expandability` refuse more (docs/terminology.md, "Limits"). */
export const maxExpansionCodes = 100_000

export const defaultOptions: Options = { versions: noVersionRules, limit: maxExpansionCodes, accept: undefined }

/** Whether the options are the default ones: only then are imports read from the kept expansions. */
const isDefault = (options: Options): boolean =>
  options.accept === undefined && options.limit === maxExpansionCodes &&
  options.versions.system.size === 0 && options.versions.force.size === 0 && options.versions.check.size === 0

interface Cached {
  readonly outcome: Outcome
  /** The word index of the entries' search texts (textIndex.ts), made when a filter first asks for it. */
  index: TextIndex | undefined
}

// Per catalog snapshot, keyed by the canonicals of its ValueSets only (never by arbitrary request text).
const caches = new WeakMap<Catalog, Map<string, Cached | "computing">>()

const cacheOf = (catalog: Catalog): Map<string, Cached | "computing"> => {
  let cache = caches.get(catalog)
  if (cache === undefined) caches.set(catalog, cache = new Map())
  return cache
}

const cachedEntry = (catalog: Catalog, canonical: string): Cached | "computing" | undefined => {
  const cache = cacheOf(catalog)
  const hit = cache.get(canonical)
  if (hit !== undefined) return hit
  const source = resolveValueSet(catalog, canonical)
  if (source === undefined) return undefined
  cache.set(canonical, "computing")
  try {
    const entry: Cached = { outcome: compute(catalog, source, defaultOptions, [canonical], (imported) => cachedExpansion(catalog, imported)), index: undefined }
    cache.set(canonical, entry)
    return entry
  } catch (error) {
    cache.delete(canonical)
    throw error
  }
}

/**
 * The expansion, with the default options, of the catalog's ValueSet at `canonical` (`url` or `url|version`):
 * kept per catalog snapshot. Undefined when the catalog knows no such ValueSet; "computing" when it is being
 * expanded already (an import cycle).
 */
export const cachedExpansion = (catalog: Catalog, canonical: string): Outcome | "computing" | undefined => {
  const entry = cachedEntry(catalog, canonical)
  return entry === undefined || entry === "computing" ? entry : entry.outcome
}

/** The word index of a kept expansion's search texts, made once per snapshot from the texts `make` gives. */
export const cachedTextIndex = (
  catalog: Catalog,
  canonical: string,
  make: (entries: ReadonlyArray<Entry>) => ReadonlyArray<string>
): TextIndex | undefined => {
  const entry = cachedEntry(catalog, canonical)
  if (entry === undefined || entry === "computing" || !entry.outcome.ok) return undefined
  entry.index ??= buildTextIndex(make(entry.outcome.entries))
  return entry.index
}

/** The expansion of any ValueSet (stored, inline, or of the catalog with other options), not kept. */
export const expandSource = (catalog: Catalog, source: Source, options: Options): Outcome =>
  compute(catalog, source, options, source.url === undefined ? [] : [source.url], isDefault(options) ? (imported) => cachedExpansion(catalog, imported) : undefined)

/** The concept an entry stands for, when the server holds its code system's codes. */
export const conceptOf = (catalog: Catalog, entry: Entry): ConceptDef | undefined => {
  const system = (entry.version === undefined ? undefined : catalog.codeSystem(`${entry.system}|${entry.version}`)) ?? catalog.codeSystem(entry.system)
  return system !== undefined && usable(system.content) ? system.concept(entry.code) : undefined
}

/** The code system an entry was taken from, when held. */
export const codeSystemOf = (catalog: Catalog, entry: Entry): CodeSystemDef | undefined =>
  (entry.version === undefined ? undefined : catalog.codeSystem(`${entry.system}|${entry.version}`)) ?? catalog.codeSystem(entry.system)
