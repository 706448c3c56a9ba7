/**
 * The Writer (ARCHITECTURE.md, "Writes and the change feed"): every write of a primary goes through it, an
 * actor: commands are queued to one fiber, which runs each alone, in one database transaction, with the next commit timestamp (microseconds since the
 * epoch, strictly increasing per database); the transaction checks the writer lease (WriterLease.ts)
 * before the command and before COMMIT, so a fenced process commits nothing. After the commit the Writer
 * publishes what changed on the change feed (ChangeFeed.ts), uninterruptibly: a caller that goes away (a client
 * that disconnects) takes its command off the queue or stops it before COMMIT, which then rolls back, but
 * cannot stop what follows a COMMIT.
 */
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Context, Effect, Fiber, FiberRef, Layer, Option, Ref } from "effect"
import { Database } from "./Database.ts"
import { type Change, ChangeSink, inProcess, polling, type PollingOptions, systemOrigin, type WriteOrigin } from "./ChangeFeed.ts"
import { type LeaseLost, WriterLease } from "./WriterLease.ts"

export type { Change } from "./ChangeFeed.ts"

/** Who the commits of the current fiber are made for (the change feed's `actor` and `requestId`). */
export const currentOrigin: FiberRef.FiberRef<WriteOrigin> = FiberRef.unsafeMake(systemOrigin)

/** Runs `effect` with its commits made for `origin`. */
export const withOrigin = (origin: WriteOrigin) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.locally(effect, currentOrigin, origin)

export interface CommitContext {
  readonly commitTs: number
  /** Notes a change for the `Committed` event; nothing is published when the command fails. */
  readonly record: (change: Change) => void
}

export interface Result<A> {
  readonly value: A
  readonly commitTs: number
}

export class Writer extends Context.Tag("svc/db/Writer")<Writer, {
  readonly commit: <A, E, R>(
    command: (context: CommitContext) => Effect.Effect<A, E, R>
  ) => Effect.Effect<Result<A>, E | SqlError | LeaseLost, R>
  /** The timestamp of the last commit (0 for an empty database). */
  readonly lastCommitTs: Effect.Effect<number>
  /** Commits since the process started. */
  readonly commits: Effect.Effect<number>
  /**
   * Runs `f` on the writer connection with no commit running and none starting until it ends, outside any
   * transaction and without a commit timestamp: maintenance such as refreshing the planner's statistics.
   */
  readonly exclusive: <A, E, R>(f: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}>() {}

/**
 * What else a commit that changed resources writes in its own transaction, after the command and before the
 * lease's last check and COMMIT: the audit trail's rows (src/governance/audit/), so that an acknowledged write
 * always has its row and a rolled-back one has none. Looked up once when the Writer is made; undefined (or
 * absent) writes nothing.
 */
export class CommitHook extends Context.Tag("svc/db/CommitHook")<CommitHook, ((
  sql: Database["Type"]["writer"],
  commitTs: number,
  origin: WriteOrigin,
  changes: ReadonlyArray<Change>
) => Effect.Effect<void, SqlError>) | undefined>() {}

/**
 * SQLite's WAL is copied back into the database file (a checkpoint, with its fsync of the file) by the
 * commit that takes it past this many pages; SQLite's default is 1000 (4 MB), which a transaction Bundle
 * of a few hundred resources passes at nearly every commit. At 10000 pages (40 MB) a checkpoint comes
 * about one commit in ten, and the index pages that several commits rewrote are copied once: on a
 * Synthea ingest (4 clients) the commits took a third less time and the server about 8% less CPU. Durability is unchanged (the checkpoint copies
 * what the WAL already holds durably; `synchronous` is left alone).
 */
const walAutocheckpointPages = 10000

/** A command waiting for the actor, running (its fiber), or given up by its caller before it ran. */
interface Job {
  readonly run: Effect.Effect<void>
  /** Its caller was interrupted. */
  cancelled: boolean
  /** Where it runs, once it does. */
  fiber: Fiber.RuntimeFiber<void> | undefined
}

/** Commands waiting beyond this many make their callers wait to queue theirs. */
const queueCapacity = 4096

/** The next timestamp: the clock's microseconds, or one past the last when the clock has not moved on. */
export const nextCommitTs = (nowMicros: number, last: number): number => Math.max(nowMicros, last + 1)

export const make = Effect.gen(function*() {
  const db = yield* Database
  const sql = db.writer
  // A process without a lease service is the only writer of its database (SQLite, tests).
  const leaseService = Option.getOrUndefined(yield* Effect.serviceOption(WriterLease))
  const lease = (changes?: number) => (leaseService === undefined ? Effect.void : leaseService.check(sql, changes))
  const recordCommit = leaseService?.recordCommit
  if (db.dialect === "sqlite") yield* sql.unsafe(`PRAGMA wal_autocheckpoint = ${walAutocheckpointPages}`)
  const rows = yield* sql<{ readonly ts: number | string | null }>`
    SELECT max(ts) AS ts FROM (
      SELECT max(commit_ts) AS ts FROM resource_versions
      UNION ALL SELECT max(commit_ts) AS ts FROM resource_edits
      UNION ALL SELECT max(commit_ts) AS ts FROM svc_packages
    ) AS t`
  const last = yield* Ref.make(Number(rows[0]?.ts ?? 0))
  const count = yield* Ref.make(0)
  const sink = yield* ChangeSink
  const hook = Option.getOrUndefined(yield* Effect.serviceOption(CommitHook))

  /** One commit, on the actor's turn: only the command may be interrupted, before COMMIT. */
  const run = <A, E, R>(command: (context: CommitContext) => Effect.Effect<A, E, R>, origin: WriteOrigin) =>
    Effect.uninterruptibleMask((restore) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeNanos
        const commitTs = nextCommitTs(Number(now / 1000n), yield* Ref.get(last))
        const changes: Array<Change> = []
        // The transaction rolls back when the command fails or is interrupted; the lease is checked before
        // the command and again right before COMMIT, after the commit's audit rows and its row of the change log.
        // A lease that records the commit's row itself checks once, in that statement (PostgresLease.ts).
        const value = yield* sql.withTransaction(
          (recordCommit === undefined ? lease() : Effect.void).pipe(
            Effect.zipRight(restore(command({ commitTs, record: (change) => void changes.push(change) }))),
            Effect.tap(() => hook === undefined || changes.length === 0 ? Effect.void : hook(sql, commitTs, origin, changes)),
            Effect.tap(() =>
              changes.length === 0
                ? lease(0)
                : recordCommit !== undefined
                ? recordCommit(sql, commitTs, origin.actor, origin.requestId)
                : Effect.zipRight(
                  sql`
                    INSERT INTO svc_commits (commit_ts, actor, request_id)
                    VALUES (${commitTs}, ${origin.actor}, ${origin.requestId})`,
                  lease(changes.length)
                )
            )
          )
        )
        // Committed: what follows runs whole, whoever waits for it.
        yield* Ref.set(last, commitTs)
        yield* Ref.update(count, (n) => n + 1)
        if (changes.length > 0) {
          yield* sink.publish({ _tag: "Committed", commitTs, actor: origin.actor, requestId: origin.requestId, changes })
        }
        return { value, commitTs }
      })
    )

  // The actor: one job at a time, each on a fiber of its own so that its caller can interrupt it. The queue is
  // a plain array with a resume function for the actor when it waits on an empty queue and for callers that
  // wait for room: a queued command costs no Deferred, Queue or fiber-local copy (see docs/performance.md).
  const jobs: Array<Job> = []
  let idle: ((resume: Effect.Effect<void>) => void) | undefined
  const waitingForRoom: Array<(resume: Effect.Effect<void>) => void> = []
  const nextJob: Effect.Effect<Job> = Effect.suspend(() => {
    const job = jobs.shift()
    if (job === undefined) return Effect.zipRight(Effect.async<void>((resume) => void (idle = resume)), nextJob)
    waitingForRoom.shift()?.(Effect.void)
    return Effect.succeed(job)
  })
  yield* Effect.gen(function*() {
    const job = yield* nextJob
    if (job.cancelled) return
    const fiber = yield* Effect.fork(job.run)
    job.fiber = fiber
    // A caller interrupted just as its job started.
    if (job.cancelled) yield* Fiber.interruptFork(fiber)
    yield* Fiber.await(fiber)
  }).pipe(
    Effect.forever,
    // No tracer exports spans (src/http/Server.ts): none are made for the statements of a commit either.
    Effect.withTracerEnabled(false),
    Effect.forkScoped
  )

  /** Waits while `queueCapacity` commands are queued. */
  const room: Effect.Effect<void> = Effect.suspend(() =>
    jobs.length < queueCapacity ? Effect.void : Effect.zipRight(Effect.async<void>((resume) => void waitingForRoom.push(resume)), room)
  )

  /**
   * Queues `effect` for the actor and waits for it. It runs with the caller's services; a caller interrupted while it waits takes its job off the queue, or interrupts
   * it where it runs (which, for a commit, stops only the command before COMMIT) and waits for it to end.
   */
  const submit = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.zipRight(room, Effect.flatMap(Effect.context<R>(), (context) =>
      // The caller's services; the rest of its fiber-local state is the actor's (copying all of it cost a
      // tenth of a create's time).
      Effect.async<A, E>((resume) => {
        const job: Job = {
          cancelled: false,
          fiber: undefined,
          run: Effect.map(Effect.exit(Effect.provide(effect, context)), resume)
        }
        jobs.push(job)
        const wake = idle
        idle = undefined
        wake?.(Effect.void)
        // Run when the caller is interrupted: the job is skipped if it has not started, interrupted if it has.
        return Effect.suspend(() => {
          job.cancelled = true
          return job.fiber === undefined ? Effect.void : Effect.asVoid(Fiber.interrupt(job.fiber))
        })
      })))

  return Writer.of({
    commit: (command) => Effect.flatMap(FiberRef.get(currentOrigin), (origin) => submit(run(command, origin))),
    lastCommitTs: Ref.get(last),
    commits: Ref.get(count),
    exclusive: submit
  })
})

/** The Writer with the change feed it publishes to (ChangeFeed and ChangeSink). */
export const layer = Layer.provideMerge(Layer.scoped(Writer, make), inProcess)

/**
 * The Writer of a replica (docs/cluster.md), with the change feed it follows: the database's log, read every
 * `interval` (ChangeFeed.ts, `polling`). It commits only what changes no resource (`replicaLease`).
 */
export const followerLayer = (options: PollingOptions) => Layer.provideMerge(Layer.scoped(Writer, make), polling(options))
