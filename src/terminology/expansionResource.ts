/**
 * The ValueSet `$expand` answers (https://hl7.org/fhir/R4/valueset-definitions.html#ValueSet.expansion):
 * the source's metadata (url, version, name, status, ...; its `compose` only with `includeDefinition`), and
 * `expansion` with `identifier` (a urn:uuid), `timestamp`, `total`, `offset` when paged, `parameter` (what
 * the request asked, and each code system version used), and `contains`: each code with its system, the
 * code system's version, code, display, `abstract`/`inactive` when so, and designations when asked. Flat
 * and paged by default; nested along the code systems' hierarchies with `excludeNested=false`, which R4
 * leaves unpaged.
 */
import type { Catalog } from "../catalog/Catalog.ts"
import { type Json, str } from "../catalog/json.ts"
import { designationsOf } from "./concepts.ts"
import { codeSystemOf, conceptOf, type Entry, type UsedSystem } from "./expansion.ts"

/** `designation`: a language (`urn:ietf:bcp:47|de`, or a bare code) or a use (`system|code`). */
export interface DesignationWanted {
  readonly system: string | undefined
  readonly code: string
}

export interface Layout {
  readonly count: number | undefined
  readonly offset: number
  /** `excludeNested=false`: follow the code systems' hierarchies. */
  readonly nested: boolean
  readonly includeDesignations: boolean
  readonly designations: ReadonlyArray<DesignationWanted>
  readonly displayLanguage: string | undefined
  readonly includeDefinition: boolean
  /** The `expansion.parameter` entries that echo the request. */
  readonly parameters: ReadonlyArray<Json>
  readonly identifier: string
  readonly timestamp: string
}

export const languageSystem = "urn:ietf:bcp:47"

const primary = (tag: string): string => tag.toLowerCase().split("-")[0] ?? ""

/** Whether a designation's language answers for the language asked: the same tag, or the same primary language. */
const languageRank = (language: string | undefined, wanted: string): number => {
  if (language === undefined) return 0
  if (language.toLowerCase() === wanted.toLowerCase()) return 2
  return primary(language) === primary(wanted) ? 1 : 0
}

const designationWanted = (designation: Json, wanted: ReadonlyArray<DesignationWanted>): boolean => {
  if (wanted.length === 0) return true
  const language = str(designation, "language")
  const use = designation["use"]
  return wanted.some((w) => {
    if (w.system === languageSystem) return language !== undefined && languageRank(language, w.code) > 0
    const useMatches = typeof use === "object" && use !== null && (use as Json)["code"] === w.code &&
      (w.system === undefined || (use as Json)["system"] === w.system)
    return useMatches || (w.system === undefined && language !== undefined && languageRank(language, w.code) > 0)
  })
}

/** A designation reduced to what `contains.designation` holds. */
const designationItem = (designation: Json): Json => {
  const language = str(designation, "language")
  const use = designation["use"]
  return {
    ...(language === undefined ? {} : { language }),
    ...(typeof use === "object" && use !== null ? { use } : {}),
    value: designation["value"]
  }
}

interface Rendered {
  readonly item: Json
  readonly parents: ReadonlyArray<string>
}

const keyOf = (system: string, code: string): string => `${system}\u0000${code}`

export const expansionResource = (
  catalog: Catalog,
  source: Json,
  id: string | undefined,
  entries: ReadonlyArray<Entry>,
  used: ReadonlyArray<UsedSystem>,
  layout: Layout
): Json => {
  const languages = new Map<string, string | undefined>()
  const systemLanguage = (entry: Entry): string | undefined => {
    const key = `${entry.system}|${entry.version ?? ""}`
    if (!languages.has(key)) {
      const system = codeSystemOf(catalog, entry)
      languages.set(key, system === undefined ? undefined : str(system.resource, "language"))
    }
    return languages.get(key)
  }
  const needConcept = layout.includeDesignations || layout.designations.length > 0 || layout.displayLanguage !== undefined || layout.nested

  const render = (entry: Entry): Rendered => {
    const concept = needConcept ? conceptOf(catalog, entry) : undefined
    const designations = needConcept ? [...entry.designations, ...(concept === undefined ? [] : designationsOf(concept.json))] : entry.designations
    let display = entry.display
    if (layout.displayLanguage !== undefined && languageRank(systemLanguage(entry), layout.displayLanguage) < 2) {
      let best: { rank: number; value: string } | undefined
      for (const designation of designations) {
        const rank = languageRank(str(designation, "language"), layout.displayLanguage)
        const value = str(designation, "value")
        if (rank > 0 && value !== undefined && (best === undefined || rank > best.rank)) best = { rank, value }
      }
      if (best !== undefined) display = best.value
    }
    const shown = layout.includeDesignations || layout.designations.length > 0
      ? designations.filter((designation) => designationWanted(designation, layout.designations)).map(designationItem)
      : []
    return {
      item: {
        system: entry.system,
        ...(entry.abstract ? { abstract: true } : {}),
        ...(entry.inactive ? { inactive: true } : {}),
        ...(entry.version === undefined ? {} : { version: entry.version }),
        code: entry.code,
        ...(display === undefined ? {} : { display }),
        ...(shown.length === 0 ? {} : { designation: shown })
      },
      parents: layout.nested && concept !== undefined ? concept.parents : []
    }
  }

  const total = entries.length
  let contains: ReadonlyArray<Json>
  let paged = false
  if (layout.nested) {
    // R4: paging applies to flat expansions only; count=0 still asks for the total alone.
    contains = layout.count === 0 ? [] : nest(entries.map(render), entries, (entry, code) => codeSystemOf(catalog, entry)?.concept(code)?.parents ?? [])
  } else {
    paged = layout.count !== undefined || layout.offset > 0
    const end = layout.count === undefined ? entries.length : layout.offset + layout.count
    contains = entries.slice(layout.offset, end).map((entry) => render(entry).item)
  }

  const { id: _id, meta: _meta, text: _text, expansion: _expansion, compose, ...metadata } = source
  const usedParameters = used.map((system) => ({ name: "used-codesystem", valueUri: system.version === undefined ? system.system : `${system.system}|${system.version}` }))
  const parameter = [...layout.parameters, ...usedParameters]
  return {
    resourceType: "ValueSet",
    ...(id === undefined ? {} : { id }),
    ...metadata,
    status: typeof metadata["status"] === "string" ? metadata["status"] : "unknown",
    ...(layout.includeDefinition && compose !== undefined ? { compose } : {}),
    expansion: {
      identifier: layout.identifier,
      timestamp: layout.timestamp,
      total,
      ...(paged ? { offset: layout.offset } : {}),
      ...(parameter.length === 0 ? {} : { parameter }),
      ...(contains.length === 0 ? {} : { contains })
    }
  }
}

/**
 * The items under their nearest ancestor in the expansion (same system, through codes left out of it), in
 * the expansion's order. A code with several parents hangs below the first one found.
 */
const nest = (
  rendered: ReadonlyArray<Rendered>,
  entries: ReadonlyArray<Entry>,
  parentsOf: (entry: Entry, code: string) => ReadonlyArray<string>
): ReadonlyArray<Json> => {
  const index = new Map<string, number>()
  entries.forEach((entry, i) => index.set(keyOf(entry.system, entry.code), i))
  const parentOf: Array<number | undefined> = entries.map(() => undefined)
  const children: Array<Array<number>> = entries.map(() => [])
  // Whether `candidate` hangs below `of` already: attaching `of` below it would make a loop.
  const below = (candidate: number, of: number): boolean => {
    let at: number | undefined = candidate
    for (let steps = 0; at !== undefined && steps <= entries.length; steps++) {
      if (at === of) return true
      at = parentOf[at]
    }
    return false
  }
  entries.forEach((entry, i) => {
    const seen = new Set<string>([entry.code])
    const queue = [...rendered[i]!.parents]
    while (queue.length > 0) {
      const code = queue.shift()!
      if (seen.has(code)) continue
      seen.add(code)
      const at = index.get(keyOf(entry.system, code))
      if (at !== undefined && !below(at, i)) {
        parentOf[i] = at
        children[at]!.push(i)
        return
      }
      if (at === undefined) queue.push(...parentsOf(entry, code))
    }
  })
  const build = (i: number): Json => {
    const item = rendered[i]!.item
    const under = children[i]!
    return under.length === 0 ? item : { ...item, contains: under.map(build) }
  }
  return entries.flatMap((_, i) => (parentOf[i] === undefined ? [build(i)] : []))
}
