/**
 * One expansion's way through a ValueSet (expansion.ts says what an expansion is): its includes and excludes
 * over the catalog's code systems (listed concepts, filters, whole systems, at the version the rules choose),
 * the ValueSets it imports (through the kept expansions when the options are the default ones), its stored
 * expansion when it has no compose; every problem and note gathered on the way, and a stop once more codes
 * than the limit are held at any step.
 */
import type { Catalog } from "../catalog/Catalog.ts"
import type { CodeSystemDef, ConceptDef } from "../catalog/definitions.ts"
import { type Json, object, objects, str } from "../catalog/json.ts"
import { type ComposeInclude, readCompose } from "./compose.ts"
import { designationsOf, isAbstract, isInactive } from "./concepts.ts"
import type { Entry, Note, Options, Outcome, Problem, Source, UsedSystem } from "./expansion.ts"
import { filterCodes } from "./filters.ts"
import { resolveValueSet, valueSetName, withoutVersion } from "./resolveValueSet.ts"

/**
 * The kept expansion of a ValueSet of the catalog (expansion.ts `cachedExpansion`), read for imports when the
 * options are the default ones; undefined: imports are expanded afresh, under the options.
 */
export type Kept = ((canonical: string) => Outcome | "computing" | undefined) | undefined

export const entryKey = (system: string, code: string): string => `${system}\u0000${code}`

export const usable = (content: string | undefined): boolean => content === "complete" || content === "fragment"

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
const walker = (catalog: Catalog, options: Options, walk: Walk, rootName: string, kept: Kept) => {
  const { accept, limit } = options
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
    if (kept !== undefined) {
      const outcome = kept(canonical)
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
export const compute = (catalog: Catalog, source: Source, options: Options, stack: ReadonlyArray<string>, kept: Kept): Outcome => {
  const walk: Walk = { problems: [], notes: new Map(), used: new Map() }
  try {
    const entries = walker(catalog, options, walk, valueSetName(source), kept)(source, stack)
    if (entries === undefined || walk.problems.length > 0) return { ok: false, problems: walk.problems }
    return { ok: true, entries: [...entries.values()], used: [...walk.used.values()], notes: [...walk.notes.values()] }
  } catch (error) {
    if (!(error instanceof TooCostly)) throw error
    return { ok: false, problems: [...walk.problems, error.problem] }
  }
}
