import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, TestClock } from "effect"
import { defaultOptions, processProbes, run, step } from "../../src/app/IdleCollect.ts"

const MB = 1024 * 1024
const options = { ...defaultOptions, tick: "1 second", idleTicks: 2, maxBusyShare: 0.05, minGrowthBytes: 32 * MB } as const

/** Probes whose readings a test sets, counting the collections asked for; a collection brings the heap to `live`. */
const fakeProbes = (start: { busy: number; heap: number; live: number }) => {
  const probes = {
    ...start,
    collections: 0,
    busyShare: () => probes.busy,
    heapUsed: () => probes.heap,
    collect: () => {
      probes.collections++
      probes.heap = probes.live
      return true
    }
  }
  return probes
}

describe("IdleCollect.step", () => {
  const fresh = { idleTicks: 0, baseline: 100 * MB }

  it("collects after enough idle ticks once the heap has grown past the threshold", () => {
    const first = step(fresh, options, { busyShare: 0.01, heapUsed: 180 * MB })
    expect(first.collect).toBe(false)
    const second = step(first.state, options, { busyShare: 0.01, heapUsed: 180 * MB })
    expect(second.collect).toBe(true)
  })

  it("does not collect while the event loop is busy, and a busy tick starts the count again", () => {
    let state = fresh
    for (const busyShare of [0.01, 0.5, 0.01]) {
      const next = step(state, options, { busyShare, heapUsed: 200 * MB })
      expect(next.collect).toBe(false)
      state = next.state
    }
    expect(step(state, options, { busyShare: 0.01, heapUsed: 200 * MB }).collect).toBe(true)
  })

  it("does not collect when the heap has grown less than the threshold since its lowest", () => {
    const low = step(fresh, options, { busyShare: 0.01, heapUsed: 60 * MB })
    expect(low.state.baseline).toBe(60 * MB)
    // 60 MB → 90 MB is under 32 MB of growth, though 90 MB is within the old baseline too.
    expect(step(low.state, options, { busyShare: 0.01, heapUsed: 90 * MB }).collect).toBe(false)
    expect(step(low.state, options, { busyShare: 0.01, heapUsed: 93 * MB }).collect).toBe(true)
  })
})

describe("IdleCollect.run", () => {
  it.effect("collects once when the server falls idle after growing, then waits for the heap to grow again", () =>
    Effect.gen(function*() {
      const probes = fakeProbes({ busy: 0.9, heap: 80 * MB, live: 80 * MB })
      const counter = { collections: 0 }
      const fiber = yield* Effect.fork(run(probes, options, counter))
      // Busy while the heap grows: no collection, however long.
      probes.heap = 250 * MB
      yield* TestClock.adjust("10 seconds")
      expect(probes.collections).toBe(0)
      // Idle: the second idle tick collects, and the heap is back to what is live.
      probes.busy = 0
      yield* TestClock.adjust("1 second")
      expect(probes.collections).toBe(0)
      yield* TestClock.adjust("1 second")
      expect(probes.collections).toBe(1)
      expect(counter.collections).toBe(1)
      // Still idle, nothing new allocated: no more collections.
      yield* TestClock.adjust("30 seconds")
      expect(probes.collections).toBe(1)
      // Busy again, the heap grows, idle again: one more.
      probes.busy = 0.8
      probes.heap = 200 * MB
      yield* TestClock.adjust("5 seconds")
      probes.busy = 0.01
      yield* TestClock.adjust("2 seconds")
      expect(probes.collections).toBe(2)
      yield* Fiber.interrupt(fiber)
    }))

  it("the process's probes read the event loop and the heap, and can run a collection", () => {
    const probes = processProbes()
    const share = probes.busyShare()
    expect(share).toBeGreaterThanOrEqual(0)
    expect(share).toBeLessThanOrEqual(1)
    expect(probes.heapUsed()).toBeGreaterThan(0)
    // Garbage made here is gone after the collection.
    let garbage: Array<Array<number>> | undefined = Array.from({ length: 2000 }, (_, n) => Array.from({ length: 500 }, () => n))
    const before = probes.heapUsed()
    garbage = undefined
    expect(garbage).toBeUndefined()
    expect(probes.collect()).toBe(true)
    expect(probes.heapUsed()).toBeLessThan(before)
  })
})
