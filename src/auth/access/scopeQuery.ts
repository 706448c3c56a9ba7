/**
 * A v2 scope's query (`patient/Observation.rs?category=laboratory`) read as a search on a resource type, by
 * search's own parser (src/search/parse/), so that it means what the same query means as a search
 * (SMART App Launch 2.2, scopes-and-launch-context.html, "Finer-grained resource constraints using search
 * parameters").
 */
import { Either } from "effect"
import type { Catalog } from "../../catalog/Catalog.ts"
import { parseSearch } from "../../search/parse/parseSearch.ts"
import { resultCodes } from "../../search/parse/result.ts"
import type { SearchRequest } from "../../search/parse/SearchRequest.ts"

const queries = new WeakMap<Catalog, Map<string, SearchRequest | undefined>>()

/**
 * A scope's query read as a search on `type` (without result parameters, with at least one criterion), or
 * undefined when it cannot be: such a grant grants nothing on that type.
 */
export const scopeQuery = (catalog: Catalog, type: string, query: ReadonlyArray<readonly [string, string]>): SearchRequest | undefined => {
  let byKey = queries.get(catalog)
  if (byKey === undefined) {
    byKey = new Map()
    queries.set(catalog, byKey)
  }
  const params = new URLSearchParams(query.map(([name, value]): [string, string] => [name, value]))
  const key = `${type}?${params.toString()}`
  if (byKey.has(key)) return byKey.get(key)
  let request: SearchRequest | undefined
  if (!query.some(([name]) => resultCodes.has(name.split(":")[0]!))) {
    const parsed = parseSearch(type, params, catalog, { lenient: false })
    if (Either.isRight(parsed) && parsed.right.clauses.length + parsed.right.links.length + parsed.right.filters.length > 0) request = parsed.right
  }
  byKey.set(key, request)
  return request
}
