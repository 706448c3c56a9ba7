/**
 * The expansion engine (https://hl7.org/fhir/R4/valueset.html#expansion): the codes of a ValueSet from
 * its `compose` over the CodeSystems and ValueSets of the catalog (includes and excludes of listed
 * concepts, filters, whole code systems, imported value sets), or from its stored `expansion` when it has
 * no compose. `$expand`, `$expandability`, token search's `:in`/`:not-in` and binding validation all read
 * it. Every reason an expansion cannot be made is collected (`$expandability` lists them); notes say what
 * was taken on trust (a `fragment` code system, codes listed for a system the server does not hold).
 * The result for a ValueSet of the catalog with the default options is kept per catalog snapshot.
 */
import type { Catalog } from "../catalog/Catalog.ts"
import type { CodeSystemDef, ConceptDef } from "../catalog/definitions.ts"
import { type Json, object, objects, str } from "../catalog/json.ts"
import { type ComposeInclude, readCompose } from "./compose.ts"
import { designationsOf, isAbstract, isInactive } from "./concepts.ts"
import { filterCodes } from "./filters.ts"
import { buildTextIndex, type TextIndex } from "./textIndex.ts"

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

const isDefault = (options: Options): boolean =>
  options.accept === undefined && options.limit === maxExpansionCodes &&
  options.versions.system.size === 0 && options.versions.force.size === 0 && options.versions.check.size === 0

const entryKey = (system: string, code: string): string => `${system}\u0000${code}`

const usable = (content: string | undefined): boolean => content === "complete" || content === "fragment"

class TooCostly {
  constructor(readonly problem: Problem) {}
}

/** What one expansion gathers besides its codes. */
interface Walk {
  readonly problems: Array<Problem>
  readonly notes: Map<string, Note>
  readonly used: Map<string, UsedSystem>
}

const noteOf = (walk: Walk, note: Note): void => {
  if (!walk.notes.has(note.message)) walk.notes.set(note.message, note)
}

const problemOf = (walk: Walk, problem: Problem): void => {
  if (!walk.problems.some((known) => known.message === problem.message)) walk.problems.push(problem)
}

const withoutVersion = (canonical: string): string => {
  const bar = canonical.indexOf("|")
  return bar < 0 ? canonical : canonical.slice(0, bar)
}

// Code systems by the url of their whole-system value set (CodeSystem.valueSet), per catalog.
const implicitSets = new WeakMap<Catalog, ReadonlyMap<string, CodeSystemDef>>()

const implicitSet = (catalog: Catalog, url: string): CodeSystemDef | undefined => {
  let byUrl = implicitSets.get(catalog)
  if (byUrl === undefined) {
    const map = new Map<string, CodeSystemDef>()
    for (const system of catalog.codeSystems) if (system.valueSet !== undefined) map.set(withoutVersion(system.valueSet), system)
    implicitSets.set(catalog, byUrl = map)
  }
  return byUrl.get(url)
}

/**
 * The ValueSet a canonical (`url` or `url|version`) names in the catalog: a ValueSet resource, or else the
 * whole of the CodeSystem whose `valueSet` it is (R4: "defined implicitly by some code system").
 */
export const resolveValueSet = (catalog: Catalog, canonical: string): Source | undefined => {
  const valueSet = catalog.valueSet(canonical)
  if (valueSet !== undefined) return { url: valueSet.url, version: valueSet.version, json: valueSet.resource }
  if (canonical.includes("|")) return undefined
  const system = implicitSet(catalog, canonical)
  if (system === undefined) return undefined
  const resource = system.resource
  return {
    url: canonical,
    version: system.version,
    json: {
      resourceType: "ValueSet",
      url: canonical,
      ...(system.version === undefined ? {} : { version: system.version }),
      ...(system.name === undefined ? {} : { name: system.name }),
      status: str(resource, "status") ?? "active",
      compose: { include: [{ system: system.url }] }
    }
  }
}

/** A name for a value set in messages. */
export const valueSetName = (source: Source): string => (source.url === undefined ? "the ValueSet given" : `the ValueSet ${source.url}`)

/** The code system `include` reads at the version the rules choose, or undefined with the problem recorded. */
const codeSystemFor = (
  catalog: Catalog,
  walk: Walk,
  options: Options,
  include: ComposeInclude & { readonly system: string },
  what: string
): { readonly codeSystem: CodeSystemDef | undefined; readonly version: string | undefined } | undefined => {
  const system = include.system
  const forced = options.versions.force.get(system)
  const checked = options.versions.check.get(system)
  if (checked !== undefined && include.version !== undefined && include.version !== checked) {
    problemOf(walk, { kind: "version-conflict", subject: system, message: `${what} names version ${include.version} of ${system}, not ${checked} (check-system-version)` })
    return undefined
  }
  const current = catalog.codeSystem(system)
  const wanted = forced ?? include.version ?? options.versions.system.get(system)
  if (wanted === undefined || current === undefined) return { codeSystem: current, version: current?.version ?? wanted }
  const exact = current.version === wanted ? current : catalog.codeSystem(`${system}|${wanted}`)
  if (exact !== undefined) return { codeSystem: exact, version: wanted }
  if (forced === undefined && include.version !== undefined) {
    // Value sets often name a version of a code system older than the one held: the held one is read, and said so.
    noteOf(walk, {
      kind: "version-not-held",
      subject: system,
      message: `${what} names version ${include.version} of ${system}; this server holds ${current.version === undefined ? "it without a version" : `version ${current.version}`}, which is used`
    })
    return { codeSystem: current, version: current.version }
  }
  problemOf(walk, {
    kind: "unknown-code-system",
    subject: system,
    message: `version ${wanted} of ${system} was asked for; this server holds ${current.version === undefined ? "it without a version" : `version ${current.version}`}`
  })
  return undefined
}

const markUsed = (walk: Walk, codeSystem: CodeSystemDef): void => {
  walk.used.set(`${codeSystem.url}|${codeSystem.version ?? ""}`, { system: codeSystem.url, version: codeSystem.version, content: codeSystem.content })
}

/** One expansion's way through a ValueSet and what it imports. */
const walker = (catalog: Catalog, options: Options, walk: Walk, rootName: string) => {
  const { accept, limit } = options
  const cacheable = isDefault(options)
  const tooCostly = (): TooCostly =>
    new TooCostly({ kind: "too-costly", subject: undefined, message: `the expansion of ${rootName} has more than ${limit} codes` })

  const adder = (out: Map<string, Entry>) => (entry: Entry, concept: ConceptDef | undefined): void => {
    if (accept !== undefined && !accept(entry, concept)) return
    const key = entryKey(entry.system, entry.code)
    if (out.has(key)) return
    out.set(key, entry)
    if (out.size > limit) throw tooCostly()
  }

  const systemEntries = (include: ComposeInclude & { readonly system: string }, what: string, excluding: boolean): Map<string, Entry> | undefined => {
    const system = include.system
    const resolved = codeSystemFor(catalog, walk, options, include, what)
    if (resolved === undefined) return undefined
    const { codeSystem, version } = resolved
    const out = new Map<string, Entry>()
    const add = adder(out)
    if (include.filters.length === 0 && include.concepts.length > 0) {
      const held = codeSystem !== undefined && usable(codeSystem.content) ? codeSystem : undefined
      if (held !== undefined) {
        markUsed(walk, held)
        if (held.content === "fragment") noteOf(walk, { kind: "fragment", subject: system, message: `${system} is held as a fragment: codes it does not have are taken as listed` })
      } else if (!excluding) {
        noteOf(walk, {
          kind: "unverified",
          subject: system,
          message: codeSystem === undefined
            ? `the codes of ${system} that ${what} lists are taken as listed: this server does not hold that code system`
            : `the codes of ${system} that ${what} lists are taken as listed: this server holds that code system without its codes (content '${codeSystem.content ?? "unknown"}')`
        })
      }
      for (const listed of include.concepts) {
        const concept = held?.concept(listed.code)
        if (held !== undefined && concept === undefined && held.content === "complete") {
          if (!excluding) noteOf(walk, { kind: "unknown-code", subject: system, message: `${what} lists the code '${listed.code}', which ${system} does not have: it is left out` })
          continue
        }
        add({
          system,
          version,
          code: concept?.code ?? listed.code,
          display: listed.display ?? concept?.display,
          abstract: concept === undefined ? false : isAbstract(concept.json),
          inactive: concept === undefined ? false : isInactive(concept.json),
          designations: listed.designations
        }, concept)
      }
      return out
    }
    if (codeSystem === undefined) {
      problemOf(walk, { kind: "unknown-code-system", subject: system, message: `${what} needs the code system ${system}, which this server does not hold` })
      return undefined
    }
    if (!usable(codeSystem.content)) {
      problemOf(walk, {
        kind: "no-content",
        subject: system,
        message: `${what} needs the codes of ${system}, which this server holds without its content (content '${codeSystem.content ?? "unknown"}')`
      })
      return undefined
    }
    markUsed(walk, codeSystem)
    if (codeSystem.content === "fragment") noteOf(walk, { kind: "fragment", subject: system, message: `${system} is held as a fragment: the expansion holds only the codes this server has` })
    let selected: ReadonlySet<string> | undefined
    let failed = false
    for (const filter of include.filters) {
      const result = filterCodes(codeSystem, filter)
      if ("problem" in result) {
        problemOf(walk, { kind: result.kind, subject: system, message: `${what}: ${result.problem}` })
        failed = true
        continue
      }
      if (selected === undefined) selected = result.codes
      else {
        const both = new Set<string>()
        for (const code of result.codes) if (selected.has(code)) both.add(code)
        selected = both
      }
    }
    if (failed) return undefined
    let listed: Map<string, { readonly display: string | undefined; readonly designations: ReadonlyArray<Json> }> | undefined
    if (include.concepts.length > 0) {
      listed = new Map()
      for (const item of include.concepts) {
        const concept = codeSystem.concept(item.code)
        if (concept !== undefined) listed.set(concept.code, item)
      }
    }
    const none: ReadonlyArray<Json> = []
    for (const concept of codeSystem.concepts()) {
      if (selected !== undefined && !selected.has(concept.code)) continue
      const given = listed?.get(concept.code)
      if (listed !== undefined && given === undefined) continue
      add({
        system,
        version,
        code: concept.code,
        display: given?.display ?? concept.display,
        abstract: isAbstract(concept.json),
        inactive: isInactive(concept.json),
        designations: given?.designations ?? none
      }, concept)
    }
    return out
  }

  const imported = (given: string, stack: ReadonlyArray<string>, what: string): Map<string, Entry> | undefined => {
    // An import naming a version the server does not hold reads the version it holds, and says so.
    let canonical = given
    if (given.includes("|") && resolveValueSet(catalog, given) === undefined) {
      canonical = withoutVersion(given)
      const held = catalog.valueSet(canonical)
      if (held !== undefined) {
        noteOf(walk, {
          kind: "version-not-held",
          subject: canonical,
          message: `${what} imports ${given}; this server holds ${held.version === undefined ? "it without a version" : `version ${held.version}`}, which is used`
        })
      }
    }
    if (stack.includes(canonical)) {
      problemOf(walk, { kind: "cycle", subject: canonical, message: `${what} imports the ValueSet ${canonical}, which imports it in turn` })
      return undefined
    }
    if (cacheable) {
      const outcome = cachedExpansion(catalog, canonical)
      if (outcome === undefined) {
        problemOf(walk, { kind: "unknown-value-set", subject: canonical, message: `${what} imports the ValueSet ${canonical}, which is not known to this server` })
        return undefined
      }
      if (outcome === "computing") {
        problemOf(walk, { kind: "cycle", subject: canonical, message: `${what} imports the ValueSet ${canonical}, which imports it in turn` })
        return undefined
      }
      if (!outcome.ok) {
        for (const problem of outcome.problems) problemOf(walk, problem)
        return undefined
      }
      for (const note of outcome.notes) noteOf(walk, note)
      for (const used of outcome.used) walk.used.set(`${used.system}|${used.version ?? ""}`, used)
      return new Map(outcome.entries.map((entry) => [entryKey(entry.system, entry.code), entry] as const))
    }
    const source = resolveValueSet(catalog, canonical)
    if (source === undefined) {
      problemOf(walk, { kind: "unknown-value-set", subject: canonical, message: `${what} imports the ValueSet ${canonical}, which is not known to this server` })
      return undefined
    }
    return valueSetEntries(source, [...stack, canonical])
  }

  const includeEntries = (include: ComposeInclude, stack: ReadonlyArray<string>, what: string, excluding: boolean): Map<string, Entry> | undefined => {
    let result: Map<string, Entry> | undefined
    let failed = false
    if (include.system !== undefined) {
      const part = systemEntries(include as ComposeInclude & { readonly system: string }, what, excluding)
      if (part === undefined) failed = true
      else result = part
    }
    for (const canonical of include.valueSets) {
      const nested = imported(canonical, stack, what)
      if (nested === undefined) {
        failed = true
        continue
      }
      if (result === undefined) result = nested
      else {
        const both = new Map<string, Entry>()
        for (const [key, entry] of result) if (nested.has(key)) both.set(key, entry)
        result = both
      }
    }
    return failed ? undefined : result ?? new Map()
  }

  const fromExpansion = (expansion: Json): Map<string, Entry> => {
    const out = new Map<string, Entry>()
    const add = adder(out)
    const visit = (items: ReadonlyArray<Json>) => {
      for (const item of items) {
        const system = str(item, "system")
        const code = str(item, "code")
        if (system !== undefined && code !== undefined) {
          add({
            system,
            version: str(item, "version"),
            code,
            display: str(item, "display"),
            abstract: item["abstract"] === true,
            inactive: item["inactive"] === true,
            designations: designationsOf(item)
          }, undefined)
        }
        visit(objects(item, "contains"))
      }
    }
    visit(objects(expansion, "contains"))
    return out
  }

  const valueSetEntries = (source: Source, stack: ReadonlyArray<string>): Map<string, Entry> | undefined => {
    const what = valueSetName(source)
    const compose = readCompose(source.json)
    if (compose === undefined) {
      const expansion = object(source.json, "expansion")
      if (expansion !== undefined) return fromExpansion(expansion)
      problemOf(walk, { kind: "no-definition", subject: source.url, message: `${what} has neither a compose nor an expansion` })
      return undefined
    }
    const out = new Map<string, Entry>()
    let failed = false
    for (const include of compose.include) {
      const part = includeEntries(include, stack, what, false)
      if (part === undefined) {
        failed = true
        continue
      }
      if (failed) continue
      for (const [key, entry] of part) {
        if (out.has(key)) continue
        out.set(key, entry)
        if (out.size > limit) throw tooCostly()
      }
    }
    for (const exclude of compose.exclude) {
      const part = includeEntries(exclude, stack, what, true)
      if (part === undefined) failed = true
      else if (!failed) for (const key of part.keys()) out.delete(key)
    }
    if (failed) return undefined
    if (compose.inactive === false) for (const [key, entry] of out) if (entry.inactive) out.delete(key)
    return out
  }

  return valueSetEntries
}

/** The expansion of `source` under `options`; `stack` holds the canonicals being expanded (cycles). */
const compute = (catalog: Catalog, source: Source, options: Options, stack: ReadonlyArray<string>): Outcome => {
  const walk: Walk = { problems: [], notes: new Map(), used: new Map() }
  try {
    const entries = walker(catalog, options, walk, valueSetName(source))(source, stack)
    if (entries === undefined || walk.problems.length > 0) return { ok: false, problems: walk.problems }
    return { ok: true, entries: [...entries.values()], used: [...walk.used.values()], notes: [...walk.notes.values()] }
  } catch (error) {
    if (!(error instanceof TooCostly)) throw error
    return { ok: false, problems: [...walk.problems, error.problem] }
  }
}

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
    const entry: Cached = { outcome: compute(catalog, source, defaultOptions, [canonical]), index: undefined }
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
  compute(catalog, source, options, source.url === undefined ? [] : [source.url])

/** The concept an entry stands for, when the server holds its code system's codes. */
export const conceptOf = (catalog: Catalog, entry: Entry): ConceptDef | undefined => {
  const system = (entry.version === undefined ? undefined : catalog.codeSystem(`${entry.system}|${entry.version}`)) ?? catalog.codeSystem(entry.system)
  return system !== undefined && usable(system.content) ? system.concept(entry.code) : undefined
}

/** The code system an entry was taken from, when held. */
export const codeSystemOf = (catalog: Catalog, entry: Entry): CodeSystemDef | undefined =>
  (entry.version === undefined ? undefined : catalog.codeSystem(`${entry.system}|${entry.version}`)) ?? catalog.codeSystem(entry.system)
