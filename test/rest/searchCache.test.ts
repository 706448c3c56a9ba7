/** The Postgres primary's search cache (src/rest/searchCache.ts): what it answers is what the database holds. */
import { describe, expect, it } from "vitest"
import type { Change, Committed } from "../../src/db/ChangeFeed.ts"
import { SearchCache } from "../../src/rest/searchCache.ts"

const commit = (...changes: Array<Change>): Committed => ({ _tag: "Committed", commitTs: 1, actor: "test", requestId: null, changes })
const created: Change = { type: "Patient", id: "a", version: 1, op: "create", resource: "{}" }
const rows = (...ids: Array<string>) => ids.map((id) => ({ rkey: "1", type: "Patient", id, version: 1, content: `{"id":"${id}"}` }))

describe("the search cache", () => {
  it("answers a statement's rows again for the same text and values, until a commit changes a resource", () => {
    const cache = new SearchCache()
    cache.fill("s1\u0000[\"x\"]", "SELECT 1", rows("a"), cache.ticket())
    expect(cache.get("s1\u0000[\"x\"]", "SELECT 1")).toEqual(rows("a"))
    // Other values, or another text under the same key (a hash that collided), are not it.
    expect(cache.get("s1\u0000[\"y\"]", "SELECT 1")).toBeUndefined()
    expect(cache.get("s1\u0000[\"x\"]", "SELECT 2")).toBeUndefined()
    expect([cache.hits, cache.misses]).toEqual([1, 2])
    cache.apply(commit(created))
    expect(cache.get("s1\u0000[\"x\"]", "SELECT 1")).toBeUndefined()
    expect(cache.size).toEqual({ entries: 0, bytes: 0 })
  })

  it("keeps what a search read only when nothing changed since it began", () => {
    const cache = new SearchCache()
    const early = cache.ticket()
    cache.apply(commit(created))
    cache.fill("k", "SELECT 1", rows("old"), early)
    expect(cache.get("k", "SELECT 1")).toBeUndefined()
    const beforeCatalog = cache.ticket()
    cache.invalidate()
    cache.fill("k", "SELECT 1", rows("old"), beforeCatalog)
    expect(cache.get("k", "SELECT 1")).toBeUndefined()
    cache.fill("k", "SELECT 1", rows("new"), cache.ticket())
    expect(cache.get("k", "SELECT 1")).toEqual(rows("new"))
  })

  it("lets go of the least recently used beyond its size", () => {
    const big = (id: string) => [{ id, content: "x".repeat(1000) }]
    // An entry's size: its rows' text (two bytes a character), its key, and what each row and the entry cost beyond.
    const one = 2 * (1 + 1000) + 2 * 2 + 96 + 256
    const cache = new SearchCache(3 * one)
    for (const key of ["k1", "k2", "k3"]) cache.fill(key, "t", big(key.slice(1)), cache.ticket())
    expect(cache.get("k1", "t")).toBeDefined()
    cache.fill("k4", "t", big("4"), cache.ticket())
    // k2 was the least recently used: k1 was read, k3 and k4 kept after it.
    expect(cache.get("k2", "t")).toBeUndefined()
    expect(["k1", "k3", "k4"].map((key) => cache.get(key, "t") !== undefined)).toEqual([true, true, true])
    expect(cache.size.bytes).toBeLessThanOrEqual(cache.maxBytes)
    // Rows larger than the whole cache are not kept.
    cache.fill("huge", "t", [{ content: "y".repeat(cache.maxBytes) }], cache.ticket())
    expect(cache.get("huge", "t")).toBeUndefined()
  })
})
