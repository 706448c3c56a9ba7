/**
 * Gives memory back once the server falls idle. V8 collects its old generation when it grows past a limit
 * that rises with use, and an idle process is seldom made to. Its collections during a load also leave
 * behind what the process's resident memory does not show in the heap's used size: pages V8 keeps
 * committed after emptying them, and native memory (request bodies, response buffers) held by JavaScript
 * objects that are garbage but not yet collected. After a Synthea ingest the heap's used size was back near
 * where it started (67 MB), while the process held 186 MB of V8 pages and 98 MB of native heap, and it stayed
 * so while the server sat idle. So the measure is the resident memory: when the event loop has been idle for
 * `idleTicks` ticks in a row and the process's resident memory has grown by `minGrowthBytes` since the last
 * collection (or its lowest since), one full collection runs; V8 then returns the pages it emptied, and the
 * native memory the garbage held is freed. It runs only when no request is being served, so it costs no
 * request any time; while requests come, V8 collects as it always does. A collection that gives nothing back
 * (the growth was live data) sets the baseline anew, so it is not repeated until the process grows again.
 */
import { Duration, Effect, Schedule } from "effect"
import { createRequire } from "node:module"
import { performance } from "node:perf_hooks"
import v8 from "node:v8"
import vm from "node:vm"

export interface IdleCollectOptions {
  /** How often the event loop and the heap are looked at. */
  readonly tick: Duration.DurationInput
  /** Ticks in a row with the event loop busy less than `maxBusyShare` of the time before a collection. */
  readonly idleTicks: number
  readonly maxBusyShare: number
  /** How much the resident memory must have grown since the last collection (or its lowest since) to be worth one. */
  readonly minGrowthBytes: number
}

export const defaultOptions: IdleCollectOptions = { tick: "1 second", idleTicks: 2, maxBusyShare: 0.05, minGrowthBytes: 32 * 1024 * 1024 }

/** What the collector reads and does; the process's own by default (`processProbes`). */
export interface Probes {
  /** The share of the time since the last call the event loop was busy (0 to 1). */
  readonly busyShare: () => number
  /** The process's resident memory, in bytes. */
  readonly resident: () => number
  /** Runs a full collection; false when none can be run. */
  readonly collect: () => boolean
  /**
   * Gives the free pages of the native heap back to the system (glibc's `malloc_trim`); false where that
   * cannot be done. Run a tick after a collection, once V8 has freed the native memory the garbage held.
   */
  readonly release: () => boolean
}

/** The collector's state between ticks. */
export interface State {
  readonly idleTicks: number
  /** The resident memory after the last collection, or its lowest since. */
  readonly baseline: number
}

/** One tick: whether to collect now, and the state after it (after a collection, `run` sets the baseline anew). */
export const step = (
  state: State,
  options: IdleCollectOptions,
  reading: { readonly busyShare: number; readonly resident: number }
): { readonly collect: boolean; readonly state: State } => {
  const idleTicks = reading.busyShare < options.maxBusyShare ? state.idleTicks + 1 : 0
  const baseline = Math.min(state.baseline, reading.resident)
  const collect = idleTicks >= options.idleTicks && reading.resident - baseline >= options.minGrowthBytes
  return { collect, state: { idleTicks: collect ? 0 : idleTicks, baseline } }
}

/**
 * glibc's `malloc_trim`, from the optional addon `native/malloc-trim` (built by `npm install`); undefined
 * where it was not built or is not glibc's.
 */
export const mallocTrim = (): (() => boolean) | undefined => {
  try {
    const addon: unknown = createRequire(import.meta.url)("svc-malloc-trim")
    const trim = typeof addon === "object" && addon !== null && "trim" in addon ? addon.trim : undefined
    return typeof trim === "function" ? () => trim() === true : undefined
  } catch {
    return undefined
  }
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
  const trim = mallocTrim()
  let last = performance.eventLoopUtilization()
  return {
    busyShare: () => {
      const now = performance.eventLoopUtilization()
      const share = performance.eventLoopUtilization(now, last).utilization
      last = now
      return share
    },
    resident: () => process.memoryUsage.rss(),
    collect: () => {
      if (gc === undefined) return false
      // The first collection frees the dead objects; pages it emptied are given back by the next one.
      gc()
      gc()
      return true
    },
    release: () => trim?.() ?? false
  }
}

/**
 * Runs the collector until interrupted (fork it in the server's scope); `collections` counts the
 * collections it ran, `releases` the times the native heap's free pages were given back, for
 * `/healthz?verbose=1`.
 */
export const run = (
  probes: Probes,
  options: IdleCollectOptions = defaultOptions,
  counter: { collections: number; releases: number } = { collections: 0, releases: 0 }
) => {
  let state: State = { idleTicks: 0, baseline: probes.resident() }
  let collected = false
  const tick = Effect.sync(() => {
    if (collected) {
      // The tick after a collection: V8 has freed the native memory its garbage held (it does so after the
      // collection, partly on other threads); the pages that left free in the native heap go back.
      collected = false
      if (probes.release()) counter.releases++
      state = { ...state, baseline: probes.resident() }
      return
    }
    const next = step(state, options, { busyShare: probes.busyShare(), resident: probes.resident() })
    state = next.state
    if (next.collect && probes.collect()) {
      state = { ...state, baseline: probes.resident() }
      counter.collections++
      collected = true
    }
  })
  return Effect.repeat(tick, Schedule.spaced(options.tick))
}
