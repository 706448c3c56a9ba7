/** `extractIndexPaced`, the extraction of a write: the same rows as `extractIndex`, in pieces, and a bound. */
import { beforeAll, describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import type { Catalog } from "../../../src/catalog/Catalog.ts"
import { extractIndex, extractIndexPaced } from "../../../src/search/extract/extractIndex.ts"
import { Pacer } from "../../../src/db/EventLoop.ts"
import { loadCatalog } from "./catalog.ts"

let loaded: Catalog | undefined

beforeAll(async () => {
  loaded = await loadCatalog()
}, 300_000)

const catalogOnce = Effect.sync(() => loaded!)

/** A Patient with `n` names: `name`, `family` and `phonetic` rows for each, besides `_id` and the rest. */
const patient = (n: number) => ({
  resourceType: "Patient",
  id: "many",
  gender: "female",
  name: Array.from({ length: n }, (_, i) => ({ family: `Family${i}`, given: [`Given${i}`] }))
})

describe("extractIndexPaced", () => {
  it.effect("gives the rows extractIndex gives, in the same order, whatever the pace", () =>
    Effect.gen(function*() {
      const catalog = yield* catalogOnce
      const resource = patient(300)
      const expected = extractIndex(resource, catalog)
      expect(expected.length).toBeGreaterThan(1000)
      for (const every of [1, 100, 1_000_000]) {
        expect(yield* extractIndexPaced(resource, catalog, 1_000_000, new Pacer(every))).toEqual(expected)
      }
    }), 300_000)

  it.effect("lets a macrotask queued before it run before it ends, when its rows pass the pacer's count", () =>
    Effect.gen(function*() {
      const catalog = yield* catalogOnce
      let ran = false
      setImmediate(() => {
        ran = true
      })
      yield* extractIndexPaced(patient(300), catalog, 1_000_000, new Pacer(100))
      expect(ran).toBe(true)
    }), 300_000)

  it.effect("fails with TooManyIndexRows past the limit, and succeeds at it", () =>
    Effect.gen(function*() {
      const catalog = yield* catalogOnce
      const rows = extractIndex(patient(20), catalog).length
      expect(Either.isRight(yield* Effect.either(extractIndexPaced(patient(20), catalog, rows, new Pacer(1_000_000))))).toBe(true)
      const over = yield* Effect.flip(extractIndexPaced(patient(20), catalog, rows - 1, new Pacer(1_000_000)))
      expect(over._tag).toBe("TooManyIndexRows")
      expect(over.limit).toBe(rows - 1)
    }), 300_000)
})
