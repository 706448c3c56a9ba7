import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, TestClock } from "effect"
import { spawnSync } from "node:child_process"
import { fileURLToPath } from "node:url"
import v8 from "node:v8"
import { defaultOptions, mallocTrim, processProbes, run, step } from "../../src/app/IdleCollect.ts"

const root = fileURLToPath(new URL("../../", import.meta.url))

/** Whether this process runs on glibc, where the release (malloc_trim, `native/malloc-trim`) is built. */
const glibc = process.platform === "linux" &&
  typeof (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header?.glibcVersionRuntime === "string"

const MB = 1024 * 1024
const options = { ...defaultOptions, tick: "1 second", idleTicks: 2, maxBusyShare: 0.05, minGrowthBytes: 32 * MB } as const

/**
 * Probes whose readings a test sets, counting the collections and releases asked for: a collection brings the
 * resident memory (`rss`) down to `collected`, and a release (the native heap's free pages) on to `live`.
 */
const fakeProbes = (start: { busy: number; rss: number; collected: number; live: number }) => {
  const probes = {
    ...start,
    collections: 0,
    releases: 0,
    busyShare: () => probes.busy,
    resident: () => probes.rss,
    collect: () => {
      probes.collections++
      probes.rss = probes.collected
      return true
    },
    release: () => {
      probes.releases++
      probes.rss = probes.live
      return true
    }
  }
  return probes
}

describe("IdleCollect.step", () => {
  const fresh = { idleTicks: 0, baseline: 100 * MB }

  it("collects after enough idle ticks once the resident memory has grown past the threshold", () => {
    const first = step(fresh, options, { busyShare: 0.01, resident: 180 * MB })
    expect(first.collect).toBe(false)
    const second = step(first.state, options, { busyShare: 0.01, resident: 180 * MB })
    expect(second.collect).toBe(true)
  })

  it("does not collect while the event loop is busy, and a busy tick starts the count again", () => {
    let state = fresh
    for (const busyShare of [0.01, 0.5, 0.01]) {
      const next = step(state, options, { busyShare, resident: 200 * MB })
      expect(next.collect).toBe(false)
      state = next.state
    }
    expect(step(state, options, { busyShare: 0.01, resident: 200 * MB }).collect).toBe(true)
  })

  it("does not collect when the resident memory has grown less than the threshold since its lowest", () => {
    const low = step(fresh, options, { busyShare: 0.01, resident: 60 * MB })
    expect(low.state.baseline).toBe(60 * MB)
    // 60 MB → 90 MB is under 32 MB of growth, though 90 MB is within the old baseline too.
    expect(step(low.state, options, { busyShare: 0.01, resident: 90 * MB }).collect).toBe(false)
    expect(step(low.state, options, { busyShare: 0.01, resident: 93 * MB }).collect).toBe(true)
  })
})

describe("IdleCollect.run", () => {
  it.effect("collects once when the server falls idle after growing, releases the native heap a tick later, then waits for growth again", () =>
    Effect.gen(function*() {
      const probes = fakeProbes({ busy: 0.9, rss: 180 * MB, collected: 180 * MB, live: 180 * MB })
      const counter = { collections: 0, releases: 0 }
      const fiber = yield* Effect.fork(run(probes, options, counter))
      // Busy while the process grows: no collection, however long.
      probes.rss = 400 * MB
      probes.collected = 300 * MB
      yield* TestClock.adjust("10 seconds")
      expect(probes.collections).toBe(0)
      // Idle: the second idle tick collects; the native heap is released at the next tick, not before.
      probes.busy = 0
      yield* TestClock.adjust("1 second")
      expect(probes.collections).toBe(0)
      yield* TestClock.adjust("1 second")
      expect(probes.collections).toBe(1)
      expect(counter.collections).toBe(1)
      expect(probes.releases).toBe(0)
      expect(probes.rss).toBe(300 * MB)
      yield* TestClock.adjust("1 second")
      expect(probes.releases).toBe(1)
      expect(counter.releases).toBe(1)
      expect(probes.rss).toBe(180 * MB)
      // Still idle, nothing new allocated: no more collections or releases.
      yield* TestClock.adjust("30 seconds")
      expect(probes.collections).toBe(1)
      expect(probes.releases).toBe(1)
      // Busy again, the process grows, idle again: one more of each.
      probes.busy = 0.8
      probes.rss = 250 * MB
      probes.collected = 220 * MB
      yield* TestClock.adjust("5 seconds")
      probes.busy = 0.01
      yield* TestClock.adjust("2 seconds")
      expect(probes.collections).toBe(2)
      yield* TestClock.adjust("1 second")
      expect(probes.releases).toBe(2)
      yield* Fiber.interrupt(fiber)
    }))

  it.effect("a collection that gives nothing back is not repeated until the process grows again", () =>
    Effect.gen(function*() {
      // The growth is live data: the collection and the release leave the resident memory where it was.
      const probes = fakeProbes({ busy: 0.9, rss: 100 * MB, collected: 100 * MB, live: 100 * MB })
      const fiber = yield* Effect.fork(run(probes, options))
      probes.rss = probes.collected = probes.live = 200 * MB
      yield* TestClock.adjust("3 seconds")
      probes.busy = 0
      yield* TestClock.adjust("60 seconds")
      expect(probes.collections).toBe(1)
      expect(probes.releases).toBe(1)
      yield* Fiber.interrupt(fiber)
    }))

  it("the process's probes read the event loop and the resident memory, and can run a collection", () => {
    const probes = processProbes()
    const share = probes.busyShare()
    expect(share).toBeGreaterThanOrEqual(0)
    expect(share).toBeLessThanOrEqual(1)
    expect(probes.resident()).toBeGreaterThan(0)
    // Garbage made here is gone after the collection.
    let garbage: Array<Array<number>> | undefined = Array.from({ length: 2000 }, (_, n) => Array.from({ length: 500 }, () => n))
    const before = v8.getHeapStatistics().used_heap_size
    garbage = undefined
    expect(garbage).toBeUndefined()
    expect(probes.collect()).toBe(true)
    expect(v8.getHeapStatistics().used_heap_size).toBeLessThan(before)
  })

  it.runIf(glibc)("on glibc, the release gives back native memory that garbage held between memory still in use", () => {
    // In a process of its own, so that nothing else in it frees or allocates meanwhile: 64 MB of buffers in
    // the native heap (each under glibc's threshold for a mapping of its own), each followed by a small one
    // that is kept. Collected, they leave free pages inside the heap, never at its top, which glibc keeps
    // until a trim.
    const script = `
      const v8 = require("node:v8"), vm = require("node:vm")
      v8.setFlagsFromString("--expose-gc")
      const gc = vm.runInNewContext("gc")
      const { trim } = require("svc-malloc-trim")
      const rss = () => process.memoryUsage.rss()
      let garbage = []
      const kept = []
      for (let n = 0; n < 1024; n++) {
        garbage.push(Buffer.allocUnsafeSlow(64 * 1024).fill(1))
        kept.push(Buffer.allocUnsafeSlow(512).fill(2))
      }
      garbage = undefined
      gc(); gc(); gc()
      const collected = rss()
      const released = trim()
      const after = rss()
      console.log(JSON.stringify({ released, freed: collected - after, intact: kept.every((b) => b[0] === 2 && b[511] === 2) }))`
    const child = spawnSync(process.execPath, ["-e", script], { cwd: root, encoding: "utf8" })
    expect(child.stderr).toBe("")
    const result = JSON.parse(child.stdout) as { released: boolean; freed: number; intact: boolean }
    expect(result.released).toBe(true)
    expect(result.freed).toBeGreaterThan(40 * 1024 * 1024)
    expect(result.intact).toBe(true)
    // The server's probes reach the same addon.
    expect(mallocTrim()).toBeTypeOf("function")
  })
})
