/**
 * The bounds of a GraphQL query (src/graphql/bounds.ts): fields nested deeper than `maxDepth` are refused before the
 * query runs, fragments followed (a fragment that spreads itself cannot loop), and a query past `maxResources`
 * resolved resources fails the fields that would pass it.
 */
import { parse, specifiedRules, validate } from "graphql"
import { beforeAll, describe, expect, it } from "vitest"
import type { Catalog } from "../../src/catalog/Catalog.ts"
import { depthLimit, maxDepth, resourceBudget } from "../../src/graphql/bounds.ts"
import { buildSchema } from "../../src/graphql/schema.ts"
import { loadCatalog } from "../validation/support.ts"

let catalog: Catalog | undefined
beforeAll(async () => {
  catalog = await loadCatalog()
})

/** `{ Patient(id: "x") { extension { extension { ... url } } } }` with `levels` levels of `extension`. */
const nested = (levels: number) => `{ Patient(id: "x") { ${"extension { ".repeat(levels)}url${" }".repeat(levels)} } }`

describe("the bounds of a GraphQL query", () => {
  it("refuse fields nested deeper than the limit, fragments included", () => {
    if (catalog === undefined) return
    const schema = buildSchema(catalog)
    const messages = (query: string) => validate(schema, parse(query), [...specifiedRules, depthLimit]).map((error) => error.message)
    // Patient, then the extensions, then url: levels + 2 deep.
    expect(messages(nested(maxDepth - 2))).toEqual([])
    expect(messages(nested(maxDepth - 1))).toEqual([`The query nests its fields ${maxDepth + 1} deep; at most ${maxDepth} are allowed`])
    const viaFragments = `{ Patient(id: "x") { ...deep } } fragment deep on Patient { ${"extension { ".repeat(maxDepth)}url${" }".repeat(maxDepth)} }`
    expect(messages(viaFragments)).toEqual([`The query nests its fields ${maxDepth + 2} deep; at most ${maxDepth} are allowed`])
    const cycle = `{ Patient(id: "x") { extension { ...again } } } fragment again on Extension { extension { ...again } }`
    expect(messages(cycle)).toContain('Cannot spread fragment "again" within itself.')
  })

  it("count the resources a query resolves and fail past the limit", () => {
    const budget = resourceBudget(3)
    budget.take(2)
    budget.take(1)
    expect(() => budget.take(1)).toThrow("The query resolves more than 3 resources; ask for fewer (a smaller _count, fewer references)")
  })
})
