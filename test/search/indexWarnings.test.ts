/** The warning a search carries while the backfill rebuilds the index of its resource type. */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Stream } from "effect"
import { indexWarnings } from "../../src/search/Search.ts"
import { Backfill, type Progress } from "../../src/search/Backfill.ts"

const withProgress = (progress: Progress) =>
  Backfill.of({ run: () => Effect.die("unused"), request: () => Effect.void, idle: Effect.void, progress: Effect.succeed(progress), changes: Stream.make(progress) })

describe("searches during a backfill", () => {
  it.effect("warn for the types being rebuilt, with the progress, and only for those", () =>
    Effect.gen(function*() {
      const running = withProgress({ running: true, types: ["Patient"], generation: 2, done: 500, total: 1200, failed: 0 })
      const [warning] = yield* indexWarnings("Patient").pipe(Effect.provideService(Backfill, running))
      expect(warning).toContain("The search index of Patient is being rebuilt")
      expect(warning).toContain("500 of 1200")
      expect(yield* indexWarnings("Observation").pipe(Effect.provideService(Backfill, running))).toEqual([])
      const idle = withProgress({ running: false, types: [], generation: 2, done: 1200, total: 1200, failed: 0 })
      expect(yield* indexWarnings("Patient").pipe(Effect.provideService(Backfill, idle))).toEqual([])
      expect(yield* indexWarnings("Patient")).toEqual([])
    }))
})
