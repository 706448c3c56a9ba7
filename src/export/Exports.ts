/**
 * The export service (docs/export.md): records kick-offs as jobs, answers what a job is, cancels it, and, on the
 * server that holds the writer lease, works on the jobs one at a time (jobRun.ts) with a lease on each (jobs.ts).
 * Where the files go is `export.dir`, or a default by storage (below). A replica runs no worker: its kick-offs
 * and `/export` requests go to the primary (src/cluster/forwardRules.ts).
 */
import { Cause, Context, Duration, Effect, Fiber, Layer, PubSub, Queue, Schedule, type Scope } from "effect"
import { randomBytes, randomUUID } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import type { SqlError } from "@effect/sql/SqlError"
import { CatalogService } from "../catalog/CatalogService.ts"
import { Database } from "../db/Database.ts"
import { Writer } from "../db/Writer.ts"
import { LeaseLost } from "../db/WriterLease.ts"
import {
  cancelJob,
  deleteJobs,
  finishedBefore,
  insertJob,
  type Job,
  readJob,
  releaseJob,
  renewLease,
  renewMillis,
  takeJob,
  type WorkerId
} from "./jobs.ts"
import { removeJobFiles, runJob } from "./jobRun.ts"

/** `export.*` and what the default directory depends on. */
export interface ExportOptions {
  readonly dir: string | undefined
  readonly maxFileBytes: number
  readonly kind: "sqlite" | "memory" | "postgres"
  readonly sqlitePath: string
  /** The Postgres database's name, for the default directory. */
  readonly databaseName?: string | undefined
  /** Whether this process works on jobs (it holds the writer lease): false on a replica. */
  readonly works: boolean
  /** The writer lease's holder and epoch on Postgres; undefined on SQLite, where this process alone opens the database. */
  readonly lease?: { readonly holder: string; readonly epoch: number } | undefined
}

export class ExportSettings extends Context.Tag("svc/export/ExportSettings")<ExportSettings, ExportOptions>() {}

/** Finished jobs and their files are kept this long (docs/export.md, "Where the files are"). */
export const keptMillis = 24 * 3600 * 1000

/** How often the worker looks for jobs it was not told of (taken over from another server, leases run out). */
const pollEvery = Duration.seconds(1)

export interface NewJob {
  readonly owner: Job["owner"]
  readonly caller: Job["caller"]
  readonly request: string
  readonly spec: Job["spec"]
}

export class Exports extends Context.Tag("svc/export/Exports")<Exports, {
  /** Records a job, consistent with the last commit, and wakes the worker: its id. */
  readonly kickOff: (job: NewJob) => Effect.Effect<string, SqlError | LeaseLost>
  readonly job: (id: string) => Effect.Effect<Job | undefined, SqlError>
  /** Cancels or discards the job and removes its files; false when there was none to cancel. */
  readonly cancel: (id: string) => Effect.Effect<boolean, SqlError | LeaseLost>
  /**
   * Waits at most `wait` for the job to end (completed, failed or cancelled) when it is queued or running on this
   * server: a status request with `Prefer: wait=N` (docs/export.md, "Status").
   */
  readonly awaitEnd: (id: string, wait: Duration.Duration) => Effect.Effect<void>
  /** The directory the jobs' files are in. */
  readonly dir: string
}>() {}

/** The directory of `options`: `export.dir`, else `export` beside the SQLite file, else a temporary one. */
const directoryOf = (options: ExportOptions): Effect.Effect<string, never, Scope.Scope> => {
  if (options.dir !== undefined) return Effect.succeed(resolve(options.dir))
  if (options.kind === "sqlite") return Effect.succeed(join(dirname(resolve(options.sqlitePath)), "export"))
  if (options.kind === "postgres") return Effect.succeed(join(tmpdir(), `svc-export-${(options.databaseName ?? "postgres").replace(/[^A-Za-z0-9_-]/g, "_")}`))
  // --memory: nothing survives the process, files included.
  return Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), "svc-export-"))),
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  )
}

/** Whether an id can be a job's: what `randomUUID` makes, so that no other text reaches a path. */
export const isJobId = (id: string): boolean => /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(id)

/** The worker: takes jobs as they come (or every `pollEvery`), works on each, removes what is past keeping. */
const work = (
  db: Database["Type"],
  writer: Writer["Type"],
  catalog: CatalogService["Type"],
  dir: string,
  options: ExportOptions,
  wake: Queue.Queue<void>,
  ended: PubSub.PubSub<string>
) => {
  const worker: WorkerId = options.lease === undefined
    ? { holder: `${process.pid}:${randomBytes(4).toString("hex")}`, epoch: 0, exclusive: true }
    : { holder: options.lease.holder, epoch: options.lease.epoch, exclusive: false }
  const context = { db, writer, catalog: catalog.get, dir, maxFileBytes: options.maxFileBytes, worker }

  /** Renews the lease every `renewMillis`; ends when the job is no longer this worker's. */
  const renewing = (id: string) =>
    Effect.repeat(renewLease(db, writer, id, worker), { schedule: Schedule.spaced(Duration.millis(renewMillis)), while: (held) => held })

  const one = (job: Job) =>
    Effect.gen(function*() {
      yield* Effect.logInfo("export job started", { job: job.id, start: job.starts, types: job.spec.types.length })
      const end = yield* Effect.raceFirst(runJob(context, job), Effect.as(renewing(job.id), "stopped" as const)).pipe(
        Effect.catchAllCause((cause) =>
          Effect.gen(function*() {
            const reason = reasonOf(cause)
            const now = yield* Effect.orElseSucceed(readJob(db.writer, job.id), () => undefined)
            if (now?.state === "cancelled") return "stopped" as const
            yield* Effect.logError("export job failed; it is started again unless it was started 3 times", { job: job.id, reason })
            yield* Effect.ignore(releaseJob(db, writer, job.id, worker, reason))
            return "failed" as const
          })
        )
      )
      if (end === "completed") yield* Effect.logInfo("export job completed", { job: job.id })
      yield* PubSub.publish(ended, job.id)
      if (end === "stopped") {
        const now = yield* Effect.orElseSucceed(readJob(db.writer, job.id), () => undefined)
        if (now?.state === "cancelled") yield* removeJobFiles(dir, job.id)
      }
    })

  const sweep = Effect.gen(function*() {
    const now = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
    const old = yield* finishedBefore(db.writer, now - keptMillis)
    for (const id of old) yield* removeJobFiles(dir, id)
    yield* deleteJobs(db, writer, old)
  })

  const loop = Effect.gen(function*() {
    yield* Effect.ignoreLogged(sweep)
    for (;;) {
      const job = yield* takeJob(db, writer, worker).pipe(
        Effect.catchAll((error) => Effect.as(Effect.logWarning("could not look for export jobs", { reason: error.message }), undefined))
      )
      if (job !== undefined) {
        yield* one(job)
        continue
      }
      yield* Effect.raceFirst(Queue.take(wake), Effect.sleep(pollEvery))
      yield* Queue.takeAll(wake)
    }
  })
  return Effect.zipRight(Effect.repeat(Effect.ignoreLogged(sweep), Schedule.spaced(Duration.hours(1))).pipe(Effect.forkScoped), loop)
}

/** What failed, for the job's message and the log. */
const reasonOf = (cause: Cause.Cause<unknown>): string => {
  const failure = Cause.squash(cause)
  return failure instanceof Error ? failure.message : typeof failure === "string" ? failure : "the export failed"
}

/** The export service of a process that writes its database: jobs recorded, and worked on by this process when `works`. */
export const layer = Layer.scoped(Exports, Effect.gen(function*() {
  const options = yield* ExportSettings
  const db = yield* Database
  const writer = yield* Writer
  const catalog = yield* CatalogService
  const dir = yield* directoryOf(options)
  if (options.works) yield* Effect.logInfo("export files", { dir })
  const wake = yield* Queue.sliding<void>(1)
  const ended = yield* PubSub.unbounded<string>()
  if (options.works) {
    const fiber = yield* Effect.forkScoped(work(db, writer, catalog, dir, options, wake, ended))
    yield* Effect.addFinalizer(() => Fiber.interrupt(fiber))
  }
  return Exports.of({
    kickOff: (job) =>
      Effect.gen(function*() {
        const id = randomUUID()
        const transactionTs = yield* writer.lastCommitTs
        yield* insertJob(db, writer, { id, ...job, transactionTs })
        yield* Queue.offer(wake, undefined)
        return id
      }),
    job: (id) => (isJobId(id) ? db.withReader((sql) => readJob(sql, id)) : Effect.succeed(undefined)),
    cancel: (id) =>
      isJobId(id)
        ? Effect.tap(cancelJob(db, writer, id), (cancelled) => (cancelled ? Effect.zipRight(removeJobFiles(dir, id), PubSub.publish(ended, id)) : Effect.void))
        : Effect.succeed(false),
    awaitEnd: (id, wait) =>
      Effect.scoped(Effect.gen(function*() {
        const endings = yield* PubSub.subscribe(ended)
        const now = yield* Effect.orElseSucceed(readJob(db.writer, id), () => undefined)
        if (now === undefined || (now.state !== "queued" && now.state !== "running")) return
        const ends = Effect.iterate(false, { while: (done) => !done, body: () => Effect.map(endings.take, (ended) => ended === id) })
        yield* Effect.raceFirst(Effect.asVoid(ends), Effect.sleep(wait))
      })),
    dir
  })
}))

/** A replica's: it records no job (kick-offs and `/export` go to the primary). */
export const replicaLayer = Layer.succeed(Exports, Exports.of({
  kickOff: () => Effect.fail(new LeaseLost({ reason: "a replica does not run export jobs: kick-offs go to the primary" })),
  job: () => Effect.succeed(undefined),
  cancel: () => Effect.succeed(false),
  awaitEnd: () => Effect.void,
  dir: ""
}))
