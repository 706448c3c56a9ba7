/**
 * The search index backfill (ARCHITECTURE.md, Catalog and packages): brings the index rows of existing
 * resources up to a catalog. Rows are written with every version, so only two kinds of resources can be
 * behind: those of a type whose search parameters changed (`backfill/fingerprint.ts`) and those a package
 * installed. A job goes through them a batch per Writer transaction, so it never races a normal write,
 * and writes its cursor with the rows: an interrupted job resumes after its last committed batch. A
 * resource written meanwhile is indexed by its write with the new catalog; indexing it again is harmless.
 */
import type { SqlError } from "@effect/sql/SqlError"
import type { LeaseLost } from "../db/WriterLease.ts"
import { Cause, Context, Effect, FiberHandle, Layer, Ref, Schedule, Stream, SubscriptionRef } from "effect"
import type { Catalog } from "../catalog/Catalog.ts"
import { Database } from "../db/Database.ts"
import { Writer } from "../db/Writer.ts"
import { type Progress, type Report, runJob } from "./backfill/runJob.ts"

export type { Progress, Report }

export interface BackfillOptions {
  /** Resources per Writer transaction. */
  readonly batchSize: number
  /** A progress log line every this many batches. */
  readonly logEvery: number
}

export const defaultOptions: BackfillOptions = { batchSize: 500, logEvery: 10 }

export class Backfill extends Context.Tag("svc/search/Backfill")<Backfill, {
  /** Brings the index up to `catalog` in the calling fiber. */
  readonly run: (catalog: Catalog) => Effect.Effect<Report, SqlError | LeaseLost>
  /** Brings it up to `catalog` in the background, replacing a job for an older catalog; retries on errors. */
  readonly request: (catalog: Catalog) => Effect.Effect<void>
  /** Waits until every background request so far has finished. */
  readonly idle: Effect.Effect<void>
  readonly progress: Effect.Effect<Progress>
  /** The progress now and at every change. */
  readonly changes: Stream.Stream<Progress>
}>() {}

/** Progress as `/healthz?verbose=1` shows it. */
export const progressDetails = (progress: Progress): Record<string, unknown> => ({
  state: progress.running ? "indexing" : "idle",
  generation: progress.generation ?? null,
  types: progress.types.length,
  done: progress.done,
  total: progress.total,
  failed: progress.failed
})

export const make = (options: Partial<BackfillOptions> = {}) =>
  Effect.gen(function*() {
    const { batchSize, logEvery } = { ...defaultOptions, ...options }
    const db = yield* Database
    const writer = yield* Writer
    const progress = yield* SubscriptionRef.make<Progress>({ running: false, types: [], generation: undefined, done: 0, total: 0, failed: 0 })
    const run = (catalog: Catalog) =>
      runJob({ db, writer, batchSize, logEvery, report: (update) => SubscriptionRef.update(progress, update) }, catalog)

    // One background job at a time: a request interrupts the job before it. `completed` catches up with
    // `requested` when the job of the last request has ended.
    const handle = yield* FiberHandle.make<void, never>()
    const requested = yield* Ref.make(0)
    const completed = yield* SubscriptionRef.make(0)

    const background = (catalog: Catalog) =>
      run(catalog).pipe(
        Effect.tapError((error) => Effect.logError("search index backfill failed; it will be retried", { reason: error.message })),
        Effect.retry(Schedule.exponential("1 second").pipe(Schedule.union(Schedule.spaced("1 minute")))),
        Effect.catchAllCause((cause) =>
          Cause.isInterruptedOnly(cause) ? Effect.void : Effect.logError("search index backfill stopped", cause)
        ),
        Effect.asVoid
      )

    const request = (catalog: Catalog) =>
      Effect.gen(function*() {
        const seq = yield* Ref.updateAndGet(requested, (n) => n + 1)
        yield* FiberHandle.run(handle, background(catalog).pipe(
          Effect.ensuring(SubscriptionRef.update(completed, (n) => Math.max(n, seq)))
        ))
      })

    const idle = Effect.flatMap(Ref.get(requested), (target) =>
      completed.changes.pipe(Stream.filter((n) => n >= target), Stream.runHead, Effect.asVoid))

    return Backfill.of({ run, request, idle, progress: SubscriptionRef.get(progress), changes: progress.changes })
  })

export const layer = (options: Partial<BackfillOptions> = {}) => Layer.scoped(Backfill, make(options))

const idleProgress: Progress = { running: false, types: [], generation: undefined, done: 0, total: 0, failed: 0 }

/**
 * A replica's backfill (docs/cluster.md): none. The primary writes every index row; a replica searches what it
 * has written, and while the primary backfills after a catalog change the replica's searches on the changed
 * types may miss what the primary has not indexed yet, as the primary's own do.
 */
export const followerLayer = Layer.succeed(Backfill, Backfill.of({
  run: () => Effect.succeed({ job: undefined, resumed: 0, indexed: 0, failed: 0, total: 0 }),
  request: () => Effect.void,
  idle: Effect.void,
  progress: Effect.succeed(idleProgress),
  changes: Stream.make(idleProgress)
}))
