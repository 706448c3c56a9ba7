import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Ref, TestClock } from "effect"
import { cachedProbe, make, Reasons } from "../../src/http/Readiness.ts"

describe("readiness", () => {
  it.effect("is starting with the step's reason until serving, then asks the probe", () =>
    Effect.gen(function*() {
      const readiness = yield* make
      expect(yield* readiness.check).toEqual({ status: "starting", reason: Reasons.starting })
      yield* readiness.starting(Reasons.migrating)
      expect(yield* readiness.check).toEqual({ status: "starting", reason: Reasons.migrating })
      yield* readiness.serving(Effect.succeed({ status: "ok" }), Effect.succeed({}))
      expect(yield* readiness.check).toEqual({ status: "ok" })
      yield* readiness.stopping
      expect((yield* readiness.check).status).toBe("unavailable")
    }))

  it.effect("reuses the probe result for one second", () =>
    Effect.gen(function*() {
      const queries = yield* Ref.make(0)
      const probe = yield* cachedProbe(Ref.update(queries, (n) => n + 1))
      expect(yield* probe).toEqual({ status: "ok" })
      yield* TestClock.adjust("500 millis")
      expect(yield* probe).toEqual({ status: "ok" })
      expect(yield* Ref.get(queries)).toBe(1)
      yield* TestClock.adjust("600 millis")
      yield* probe
      expect(yield* Ref.get(queries)).toBe(2)
    }))

  it.effect("shares one query among overlapping probes", () =>
    Effect.gen(function*() {
      const queries = yield* Ref.make(0)
      const gate = yield* Deferred.make<void>()
      const probe = yield* cachedProbe(Ref.update(queries, (n) => n + 1).pipe(Effect.zipRight(Deferred.await(gate))))
      const fibers = yield* Effect.forEach([1, 2, 3], () => Effect.fork(probe))
      yield* Effect.yieldNow()
      yield* Deferred.succeed(gate, undefined)
      const results = yield* Effect.forEach(fibers, Fiber.join)
      expect(results).toEqual([{ status: "ok" }, { status: "ok" }, { status: "ok" }])
      expect(yield* Ref.get(queries)).toBe(1)
    }))

  it.effect("is unavailable when the query fails, with a fixed reason", () =>
    Effect.gen(function*() {
      const probe = yield* cachedProbe(Effect.fail(new Error("disk I/O error at /secret/path")))
      expect(yield* probe).toEqual({ status: "unavailable", reason: Reasons.databaseFailed })
    }))

  it.effect("is unavailable when the query takes more than two seconds, and recovers", () =>
    Effect.gen(function*() {
      const slow = yield* Ref.make(true)
      const probe = yield* cachedProbe(Effect.flatMap(Ref.get(slow), (isSlow) => (isSlow ? Effect.never : Effect.void)))
      const fiber = yield* Effect.fork(probe)
      yield* TestClock.adjust("1999 millis")
      expect(fiber.unsafePoll()).toBeNull()
      yield* TestClock.adjust("2 millis")
      expect(yield* Fiber.join(fiber)).toEqual({ status: "unavailable", reason: Reasons.databaseTimeout })
      yield* Ref.set(slow, false)
      yield* TestClock.adjust("1 second")
      expect(yield* probe).toEqual({ status: "ok" })
    }))
})
