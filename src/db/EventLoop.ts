/**
 * Letting other requests in while one does a lot of work on the main thread. Effect's own yields
 * (`Effect.yieldNow`, the fiber's yield every 2048 operations) resume in a microtask nearly always, and
 * microtasks run before Node reads another socket: a large write would keep every other request waiting
 * until it ends. `yieldToEventLoop` resumes in `setImmediate`, after the I/O that came in meanwhile has
 * been read and its handlers have run up to their own first wait.
 */
import { Effect } from "effect"

/** Resumes after the event loop has taken in the I/O waiting (a macrotask). */
export const yieldToEventLoop: Effect.Effect<void> = Effect.async<void>((resume) => {
  const handle = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(handle))
})

/**
 * Counts units of work (resources validated, index rows extracted or inserted) and yields to the event
 * loop each time `every` more have been done: a Bundle of a few resources never yields, a large one
 * lets other requests in every few milliseconds. Counting work rather than time keeps it the same under
 * a test clock.
 */
export class Pacer {
  private done = 0
  constructor(private readonly every: number) {}

  /** Notes `units` more work; true when `every` have gathered since the last yield (and counts from 0 again). */
  due(units: number): boolean {
    this.done += units
    if (this.done < this.every) return false
    this.done = 0
    return true
  }

  /** Notes `units` more work; yields when `every` have gathered since the last yield. */
  step(units: number): Effect.Effect<void> {
    return this.due(units) ? yieldToEventLoop : Effect.void
  }
}

/**
 * Units of work between yields: about 500 index rows extracted or inserted, or ten average resources
 * validated, take a millisecond or two on one core. With 2,000 the reads during a large transaction waited
 * a median of 13 ms on Postgres instead of 3 to 5; the yields themselves cost a few µs each.
 */
export const workPerYield = 500

/** Runs `steps` to their end, each step's units counted by `pacer`, yielding to the event loop when it says so. */
export const paced = <A>(pacer: Pacer, steps: Generator<number, A, undefined>): Effect.Effect<A> =>
  Effect.suspend(() => {
    const loop = (): Effect.Effect<A> => {
      for (;;) {
        const step = steps.next()
        if (step.done) return Effect.succeed(step.value)
        if (pacer.due(step.value)) return Effect.flatMap(yieldToEventLoop, loop)
      }
    }
    return loop()
  })
