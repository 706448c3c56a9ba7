/**
 * The codes one `$expand` returns before paging: the expansion (expansion.ts) narrowed by the request's
 * `filter` (textFilter.ts), `activeOnly`, `excludeNotForUI` and `exclude-system`. A ValueSet of the catalog
 * with the default versions is expanded once per snapshot and narrowed per request over search texts
 * kept beside it; one larger than the limit, a stored or inline one, or one with version rules, is expanded
 * for the request with the narrowing applied as each code is selected, so that a filter that leaves fewer
 * codes than the limit works whatever the size of the whole.
 */
import type { Catalog } from "../catalog/Catalog.ts"
import type { ConceptDef } from "../catalog/definitions.ts"
import { type Json, str } from "../catalog/json.ts"
import { designationsOf } from "./concepts.ts"
import {
  type Accept,
  cachedExpansion,
  cachedTextIndex,
  conceptOf,
  type Entry,
  expandSource,
  maxExpansionCodes,
  type Outcome,
  resolveValueSet,
  type Source,
  type VersionRules
} from "./expansion.ts"
import { filterWords, searchText, textMatcher } from "./textFilter.ts"
import { lookupText } from "./textIndex.ts"

export interface Narrowing {
  /** The text filter (`filter`), undefined or blank for none. */
  readonly filter: string | undefined
  readonly activeOnly: boolean
  readonly excludeNotForUI: boolean
  /** `exclude-system`: a system, or `system|version`. */
  readonly excludeSystems: ReadonlyArray<string>
  readonly versions: VersionRules
}

/** The ValueSet to expand: one of the catalog's by canonical, or a resource (stored or inline). */
export type Target =
  | { readonly kind: "catalog"; readonly canonical: string }
  | { readonly kind: "resource"; readonly source: Source }

const valuesOf = (designations: ReadonlyArray<Json>): ReadonlyArray<string | undefined> => designations.map((d) => str(d, "value"))

/** What the text filter compares for an entry: its code, displays and designations. */
export const entryText = (entry: Entry, concept: ConceptDef | undefined): string =>
  searchText([
    entry.code,
    entry.display,
    concept?.display === entry.display ? undefined : concept?.display,
    ...valuesOf(entry.designations),
    ...(concept === undefined ? [] : valuesOf(designationsOf(concept.json)))
  ])

const excludedBy = (excludes: ReadonlyArray<string>) => {
  if (excludes.length === 0) return undefined
  return (entry: Entry): boolean =>
    excludes.some((exclude) => {
      const bar = exclude.indexOf("|")
      return bar < 0 ? entry.system === exclude : entry.system === exclude.slice(0, bar) && entry.version === exclude.slice(bar + 1)
    })
}

const hasVersionRules = (versions: VersionRules): boolean => versions.system.size + versions.force.size + versions.check.size > 0

const narrows = (narrowing: Narrowing): boolean =>
  textMatcher(narrowing.filter ?? "") !== undefined || narrowing.activeOnly || narrowing.excludeNotForUI || narrowing.excludeSystems.length > 0

/** The flags' test (activeOnly, excludeNotForUI, exclude-system) of an entry, or undefined when none is asked. */
const flagsTest = (narrowing: Narrowing): ((entry: Entry) => boolean) | undefined => {
  const excluded = excludedBy(narrowing.excludeSystems)
  if (!narrowing.activeOnly && !narrowing.excludeNotForUI && excluded === undefined) return undefined
  return (entry) =>
    !(narrowing.activeOnly && entry.inactive) && !(narrowing.excludeNotForUI && entry.abstract) && !(excluded !== undefined && excluded(entry))
}

const accepting = (narrowing: Narrowing): Accept | undefined => {
  const flags = flagsTest(narrowing)
  const matcher = textMatcher(narrowing.filter ?? "")
  if (flags === undefined && matcher === undefined) return undefined
  return (entry, concept) => (flags === undefined || flags(entry)) && (matcher === undefined || matcher(entryText(entry, concept)))
}

/** The expansion of `target` narrowed as asked; `limit` bounds the codes it holds. */
export const expansionQuery = (catalog: Catalog, target: Target, narrowing: Narrowing, limit: number = maxExpansionCodes): Outcome | undefined => {
  const accept = accepting(narrowing)
  if (target.kind === "catalog" && !hasVersionRules(narrowing.versions) && limit === maxExpansionCodes) {
    const whole = cachedExpansion(catalog, target.canonical)
    if (whole === undefined) return undefined
    if (whole === "computing") return { ok: false, problems: [{ kind: "cycle", subject: target.canonical, message: `the ValueSet ${target.canonical} imports itself` }] }
    const onlyTooCostly = !whole.ok && whole.problems.every((problem) => problem.kind === "too-costly")
    if (whole.ok) {
      if (accept === undefined) return whole
      const flags = flagsTest(narrowing)
      const needles = filterWords(narrowing.filter ?? "")
      let candidates: ReadonlyArray<Entry> = whole.entries
      if (needles.length > 0) {
        const index = cachedTextIndex(catalog, target.canonical, (entries) => entries.map((entry) => entryText(entry, conceptOf(catalog, entry))))
        candidates = index === undefined ? [] : lookupText(index, needles).map((i) => whole.entries[i]!)
      }
      const entries = flags === undefined ? candidates : candidates.filter(flags)
      return { ...whole, entries }
    }
    if (!onlyTooCostly || !narrows(narrowing)) return whole
  }
  const source = target.kind === "resource" ? target.source : resolveValueSet(catalog, target.canonical)
  return source === undefined ? undefined : expandSource(catalog, source, { versions: narrowing.versions, limit, accept })
}
