/** The R4 catalog for the parse tests, and helpers to read a query against it. */
import { Either } from "effect"
import { build, type Catalog } from "../../../src/catalog/Catalog.ts"
import { parseSearch, type Problem, type SearchRequest } from "../../../src/search/parse/parseSearch.ts"
import { loadR4Conformance } from "../../support/r4Examples.ts"

let catalog: Catalog | undefined

/** The catalog, or undefined (the notice is printed by the loader) when the R4 package cannot be had outside CI. */
export const loadCatalog = async (): Promise<Catalog | undefined> => {
  if (catalog !== undefined) return catalog
  const resources = await loadR4Conformance()
  catalog = resources === undefined ? undefined : build(resources, 1)
  return catalog
}

export const accepted = (c: Catalog, type: string, query: string, lenient = false): SearchRequest => {
  const result = parseSearch(type, query, c, { lenient })
  if (Either.isLeft(result)) throw new Error(`expected ${type}?${query} to be read, got ${JSON.stringify(result.left)}`)
  return result.right
}

export const refused = (c: Catalog, type: string, query: string, lenient = false): ReadonlyArray<Problem> => {
  const result = parseSearch(type, query, c, { lenient })
  if (Either.isRight(result)) throw new Error(`expected ${type}?${query} to be refused`)
  return result.left
}
