/** The R4 catalog for the parse tests, and helpers to read a query against it. */
import { Either } from "effect"
import { beforeAll, it } from "vitest"
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

/** Loads the catalog before the file's tests; `withCatalog(name, body)` skips when it cannot be had. */
export const catalogTests = () => {
  let loaded: Catalog | undefined
  beforeAll(async () => {
    loaded = await loadCatalog()
  }, 300_000)
  return (name: string, body: (c: Catalog) => void) =>
    it(name, (context) => {
      if (loaded === undefined) return context.skip()
      body(loaded)
    })
}
