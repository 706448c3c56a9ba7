/** The Postgres primary's read cache (src/rest/readCache.ts): what it holds follows the commits exactly. */
import { describe, expect, it } from "vitest"
import type { Change, Committed } from "../../src/db/ChangeFeed.ts"
import { ReadCache } from "../../src/rest/readCache.ts"

const commit = (commitTs: number, ...changes: Array<Change>): Committed => ({ _tag: "Committed", commitTs, actor: "test", requestId: null, changes })
const change = (id: string, version: number, resource: string | null, extra: Partial<Change> = {}): Change =>
  ({ type: "Patient", id, version, op: resource === null ? "delete" : version === 1 ? "create" : "update", resource, ...extra })

describe("the read cache", () => {
  it("holds what each commit wrote, the newest version of each resource, and drops a deleted one", () => {
    const cache = new ReadCache()
    cache.apply(commit(10, change("a", 1, '{"v":1}'), change("b", 1, '{"b":1}')))
    expect(cache.get("Patient", "a")).toEqual({ version: 1, commit_ts: "10", content: '{"v":1}' })
    cache.apply(commit(11, change("a", 2, '{"v":2}')))
    expect(cache.get("Patient", "a")).toEqual({ version: 2, commit_ts: "11", content: '{"v":2}' })
    cache.apply(commit(12, change("a", 3, null)))
    expect(cache.get("Patient", "a")).toBeUndefined()
    expect(cache.get("Observation", "b")).toBeUndefined()
    expect(cache.get("Patient", "b")?.content).toBe('{"b":1}')
  })

  it("replaces the text of a version changed in place, keeping its timestamp, and lets go of what an older version's edit leaves unsure", () => {
    const cache = new ReadCache()
    cache.apply(commit(10, change("a", 2, '{"v":2}')))
    cache.apply(commit(20, change("a", 2, '{"v":2,"tag":1}', { inPlace: true })))
    expect(cache.get("Patient", "a")).toEqual({ version: 2, commit_ts: "10", content: '{"v":2,"tag":1}' })
    // An edit of an older version leaves the current one as it is.
    cache.apply(commit(21, change("a", 1, '{"v":1,"tag":1}', { inPlace: true })))
    expect(cache.get("Patient", "a")?.content).toBe('{"v":2,"tag":1}')
    // Of a version the cache does not hold: nothing is made up.
    cache.apply(commit(22, change("c", 4, '{"c":4}', { inPlace: true })))
    expect(cache.get("Patient", "c")).toBeUndefined()
  })

  it("keeps what a read of the database found only when no commit came since the read began", () => {
    const cache = new ReadCache()
    const early = cache.ticket()
    cache.apply(commit(10, change("other", 1, "{}")))
    cache.fill("Patient", "a", { version: 1, commit_ts: "5", content: "old" }, early)
    expect(cache.get("Patient", "a")).toBeUndefined()
    const late = cache.ticket()
    cache.fill("Patient", "a", { version: 1, commit_ts: "5", content: "found" }, late)
    expect(cache.get("Patient", "a")?.content).toBe("found")
    // Never over what a commit put there.
    cache.apply(commit(11, change("b", 2, "new")))
    cache.fill("Patient", "b", { version: 1, commit_ts: "5", content: "stale" }, cache.ticket())
    expect(cache.get("Patient", "b")?.content).toBe("new")
  })

  it("lets go of the least recently read beyond its size", () => {
    const text = "x".repeat(1000)
    const cache = new ReadCache(3 * (2 * (text.length + 20) + 160))
    cache.apply(commit(1, change("a", 1, text), change("b", 1, text), change("c", 1, text)))
    expect(cache.get("Patient", "a")).toBeDefined()
    cache.apply(commit(2, change("d", 1, text)))
    // b was the least recently used: a was read, c and d written after it.
    expect(cache.get("Patient", "b")).toBeUndefined()
    expect(["a", "c", "d"].map((id) => cache.get("Patient", id) !== undefined)).toEqual([true, true, true])
    expect(cache.size.entries).toBe(3)
    expect(cache.size.bytes).toBeLessThanOrEqual(cache.maxBytes)
    // One larger than the whole cache is not kept.
    cache.apply(commit(3, change("huge", 1, "y".repeat(cache.maxBytes))))
    expect(cache.get("Patient", "huge")).toBeUndefined()
  })
})
