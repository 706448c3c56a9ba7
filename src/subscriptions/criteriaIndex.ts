/**
 * Which Subscriptions a change could match, without testing each (docs/subscriptions.md, "Matching"). A
 * Subscription is filed under its criteria's type and, when one of its criteria's plain token or reference
 * parameters names values, under those values: `Observation?code=http://loinc.org|1234-5&status=final` is
 * filed under `code` = `1234-5`, and only an Observation with that code reaches the exact test. A change is
 * read for the values of the parameters its type's Subscriptions are filed under (and no others), so that ten
 * thousand Subscriptions that name other codes cost a change a few lookups in a map. A Subscription whose
 * criteria name no such value is tested with every change of its type.
 *
 * The index only narrows: a Subscription it returns is then tested exactly (matching.ts). Its keys are lower
 * case and leave the system out, so that a value it files can only be found too often, never missed.
 */
import type { Catalog } from "../catalog/Catalog.ts"
import { extractParameters } from "../search/extract/extractIndex.ts"
import type { Clause } from "../search/parse/SearchRequest.ts"
import type { Criteria } from "./criteria.ts"

/** The parameter and value a Subscription is filed under, as the key of a map. */
const key = (code: string, value: string): string => `${code}\u0000${value.toLowerCase()}`

/** The values of `clause` a matching resource must hold one of, or undefined when it cannot file a Subscription. */
const clauseKeys = (clause: Clause): ReadonlyArray<string> | undefined => {
  if (typeof clause.param === "string" || clause.exclude || clause.modifier !== undefined || clause.values.length === 0) return undefined
  const keys: Array<string> = []
  for (const value of clause.values) {
    if (clause.param.type === "token" && value.kind === "token" && value.code !== undefined && value.code !== "") keys.push(key(clause.code, value.code))
    else if (clause.param.type === "reference" && value.kind === "reference" && value.id !== undefined) keys.push(key(clause.code, value.id))
    else return undefined
  }
  return keys
}

/** The clause a Subscription is filed under: the one with the fewest values, so that fewer changes reach the test. */
export const anchorOf = (criteria: Criteria): { readonly code: string; readonly keys: ReadonlyArray<string> } | undefined => {
  let best: { readonly code: string; readonly keys: ReadonlyArray<string> } | undefined
  for (const clause of criteria.search.clauses) {
    const keys = clauseKeys(clause)
    if (keys !== undefined && (best === undefined || keys.length < best.keys.length)) best = { code: clause.code, keys }
  }
  return best
}

interface TypeIndex {
  /** Subscriptions tested with every change of the type. */
  readonly everyChange: Set<string>
  /** Subscription ids by key. */
  readonly byValue: Map<string, Set<string>>
  /** How many Subscriptions are filed under each parameter: the parameters a change is read for. */
  readonly parameters: Map<string, number>
}

/** The index itself: Subscription ids by type and value. Mutable, owned by the one fiber that follows the feed. */
export class CriteriaIndex {
  private readonly types = new Map<string, TypeIndex>()
  private readonly filed = new Map<string, { readonly type: string; readonly code: string | undefined; readonly keys: ReadonlyArray<string> }>()

  get size(): number {
    return this.filed.size
  }

  /** Files (or files again) Subscription `id` under its criteria. */
  add(id: string, criteria: Criteria): void {
    this.remove(id)
    let index = this.types.get(criteria.type)
    if (index === undefined) {
      index = { everyChange: new Set(), byValue: new Map(), parameters: new Map() }
      this.types.set(criteria.type, index)
    }
    const anchor = anchorOf(criteria)
    if (anchor === undefined) {
      index.everyChange.add(id)
      this.filed.set(id, { type: criteria.type, code: undefined, keys: [] })
      return
    }
    for (const k of anchor.keys) {
      let ids = index.byValue.get(k)
      if (ids === undefined) index.byValue.set(k, ids = new Set())
      ids.add(id)
    }
    index.parameters.set(anchor.code, (index.parameters.get(anchor.code) ?? 0) + 1)
    this.filed.set(id, { type: criteria.type, code: anchor.code, keys: anchor.keys })
  }

  remove(id: string): void {
    const filed = this.filed.get(id)
    if (filed === undefined) return
    this.filed.delete(id)
    const index = this.types.get(filed.type)
    if (index === undefined) return
    index.everyChange.delete(id)
    for (const k of filed.keys) {
      const ids = index.byValue.get(k)
      ids?.delete(id)
      if (ids?.size === 0) index.byValue.delete(k)
    }
    if (filed.code !== undefined) {
      const left = (index.parameters.get(filed.code) ?? 1) - 1
      if (left === 0) index.parameters.delete(filed.code)
      else index.parameters.set(filed.code, left)
    }
    if (index.everyChange.size === 0 && index.byValue.size === 0) this.types.delete(filed.type)
  }

  /** Whether any Subscription watches `type`: a change of another type is not even read. */
  watches(type: string): boolean {
    return this.types.has(type)
  }

  /** The Subscriptions `resource` (of `type`, parsed) could match. */
  candidates(type: string, resource: Readonly<Record<string, unknown>>, catalog: Catalog): ReadonlySet<string> {
    const index = this.types.get(type)
    if (index === undefined) return new Set()
    if (index.parameters.size === 0) return index.everyChange
    const found = new Set(index.everyChange)
    for (const row of extractParameters(resource, catalog, index.parameters)) {
      const values = row.kind === "token"
        ? [row.value]
        : row.kind === "reference"
        ? [row.targetId, row.url === null ? null : row.url.slice(row.url.lastIndexOf("/") + 1)]
        : []
      for (const value of values) {
        if (value === null || value === "") continue
        const ids = index.byValue.get(key(row.code, value))
        if (ids !== undefined) for (const id of ids) found.add(id)
      }
    }
    return found
  }
}
