/**
 * Gives memory back once the server falls idle. V8 collects its old generation when it grows past a limit
 * that rises with use, and an idle process is seldom made to: after an ingest and a run of searches the
 * heap held some 160 MB of which about 70 MB was live, and it stayed so while the server sat idle (the
 * server's resident memory with it, docs/performance.md). When the event loop has been idle for
 * `idleTicks` ticks in a row and the heap has grown by `minGrowthBytes` since the last collection, one full
 * collection runs; V8 then returns the pages it emptied. It runs only when no request is being served, so it
 * costs no request any time; while requests come, V8 collects as it always does.
 */
import { Duration, Effect, Schedule } from "effect"
import { performance } from "node:perf_hooks"
import v8 from "node:v8"
import vm from "node:vm"

export interface IdleCollectOptions {
  /** How often the event loop and the heap are looked at. */
  readonly tick: Duration.DurationInput
  /** Ticks in a row with the event loop busy less than `maxBusyShare` of the time before a collection. */
  readonly idleTicks: number
  readonly maxBusyShare: number
  /** How much the heap must have grown since the last collection (or its lowest since) to be worth one. */
  readonly minGrowthBytes: number
}

export const defaultOptions: IdleCollectOptions = { tick: "1 second", idleTicks: 2, maxBusyShare: 0.05, minGrowthBytes: 32 * 1024 * 1024 }

/** What the collector reads and does; the process's own by default (`processProbes`). */
export interface Probes {
  /** The share of the time since the last call the event loop was busy (0 to 1). */
  readonly busyShare: () => number
  readonly heapUsed: () => number
  /** Runs a full collection; false when none can be run. */
  readonly collect: () => boolean
}

/** The collector's state between ticks. */
export interface State {
  readonly idleTicks: number
  /** The heap's size after the last collection, or its lowest since. */
  readonly baseline: number
}

/** One tick: whether to collect now, and the state after it (after a collection, `run` sets the baseline anew). */
export const step = (
  state: State,
  options: IdleCollectOptions,
  reading: { readonly busyShare: number; readonly heapUsed: number }
): { readonly collect: boolean; readonly state: State } => {
  const idleTicks = reading.busyShare < options.maxBusyShare ? state.idleTicks + 1 : 0
  const baseline = Math.min(state.baseline, reading.heapUsed)
  const collect = idleTicks >= options.idleTicks && reading.heapUsed - baseline >= options.minGrowthBytes
  return { collect, state: { idleTicks: collect ? 0 : idleTicks, baseline } }
}

/**
 * The process's probes. `gc` is reached by turning V8's `--expose-gc` on at run time and taking the
 * function from a new context (the main context was made before the flag); undefined where that fails.
 */
export const processProbes = (): Probes => {
  let gc: (() => void) | undefined
  try {
    v8.setFlagsFromString("--expose-gc")
    const found: unknown = vm.runInNewContext("typeof gc === 'function' ? gc : undefined")
    gc = typeof found === "function" ? (found as () => void) : undefined
  } catch {
    gc = undefined
  }
  let last = performance.eventLoopUtilization()
  return {
    busyShare: () => {
      const now = performance.eventLoopUtilization()
      const share = performance.eventLoopUtilization(now, last).utilization
      last = now
      return share
    },
    heapUsed: () => v8.getHeapStatistics().used_heap_size,
    collect: () => {
      if (gc === undefined) return false
      // The first collection frees the dead objects; pages it emptied are given back by the next one.
      gc()
      gc()
      return true
    }
  }
}

/**
 * Runs the collector until interrupted (fork it in the server's scope); `collections` counts the
 * collections it ran, for `/healthz?verbose=1`.
 */
export const run = (probes: Probes, options: IdleCollectOptions = defaultOptions, counter: { collections: number } = { collections: 0 }) => {
  let state: State = { idleTicks: 0, baseline: probes.heapUsed() }
  const tick = Effect.sync(() => {
    const next = step(state, options, { busyShare: probes.busyShare(), heapUsed: probes.heapUsed() })
    state = next.state
    if (next.collect && probes.collect()) {
      state = { ...state, baseline: probes.heapUsed() }
      counter.collections++
    }
  })
  return Effect.repeat(tick, Schedule.spaced(options.tick))
}
