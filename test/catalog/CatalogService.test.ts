import { describe, expect, it } from "@effect/vitest"
import { Chunk, Deferred, Effect, Fiber, Stream } from "effect"
import { build } from "../../src/catalog/Catalog.ts"
import { CatalogService, current, layer, replace } from "../../src/catalog/CatalogService.ts"
import { searchParameter, structures } from "./fixtures.ts"

const initial = build(structures, 7)

describe("CatalogService", () => {
  it.effect("swaps in the next generation on replace, and readers holding the old one keep it whole", () =>
    Effect.gen(function*() {
      const before = yield* current
      expect(before.generation).toBe(7)
      const next = yield* replace([...structures, searchParameter("Patient-gender", "gender", ["Patient"])])
      expect(next.generation).toBe(8)
      expect((yield* current)).toBe(next)
      expect(next.searchParameter("Patient", "gender")).toBeDefined()
      expect(before.searchParameter("Patient", "gender")).toBeUndefined()
    }).pipe(Effect.provide(layer(initial))))

  it.effect("numbers concurrent replaces one after the other", () =>
    Effect.gen(function*() {
      const results = yield* Effect.all([replace(structures), replace(structures), replace(structures)], { concurrency: 3 })
      expect(results.map((c) => c.generation).sort((a, b) => a - b)).toEqual([8, 9, 10])
      expect((yield* current).generation).toBe(10)
    }).pipe(Effect.provide(layer(initial))))

  it.effect("publishes each swapped-in catalog on changes", () =>
    Effect.gen(function*() {
      const service = yield* CatalogService
      const subscribed = yield* Deferred.make<void>()
      const seen = yield* service.changes.pipe(
        Stream.tap(() => Deferred.succeed(subscribed, undefined)),
        Stream.take(3),
        Stream.runCollect,
        Effect.fork
      )
      yield* Deferred.await(subscribed)
      yield* service.replace(structures)
      yield* service.replace(structures)
      const generations = Chunk.toReadonlyArray(yield* Fiber.join(seen)).map((c) => c.generation)
      expect(generations).toEqual([7, 8, 9])
    }).pipe(Effect.provide(layer(initial))))
})
