import { describe, expect, it } from "@effect/vitest"
import { pack, unpackCache } from "../../src/catalog/source.ts"

const packed = (id: string, size: number) => pack(JSON.stringify({ resourceType: "ValueSet", id, filler: "x".repeat(size) }))

describe("packed sources", () => {
  it("unpack a resource when first asked for and keep what was derived from it while it is held", () => {
    const cache = unpackCache(1024 * 1024)
    const source = cache.source(packed("a", 10))
    expect(source.json()["id"]).toBe("a")
    let computed = 0
    const derive = () => source.derived("ids", (json) => [json["id"], ++computed])
    expect(derive()).toBe(derive())
    expect(computed).toBe(1)
  })

  it("let the least recently used go beyond the budget and read them again alike", () => {
    const cache = unpackCache(3000)
    const a = cache.source(packed("a", 1000))
    const b = cache.source(packed("b", 1000))
    const c = cache.source(packed("c", 1000))
    let computed = 0
    const derive = () => a.derived("ids", (json) => [json["id"], ++computed])
    const first = derive()
    b.json()
    c.json()
    // Three resources of about 1 KB each exceed 3,000 bytes: `a`, used least recently, was let go.
    const again = derive()
    expect(again).not.toBe(first)
    expect(again).toEqual(["a", 2])
    expect(a.json()).toEqual({ resourceType: "ValueSet", id: "a", filler: "x".repeat(1000) })
  })

  it("keep the one most recently used even when it alone exceeds the budget", () => {
    const cache = unpackCache(10)
    const big = cache.source(packed("big", 1000))
    expect(big.json()).toBe(big.json())
  })
})
