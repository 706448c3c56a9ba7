/**
 * The Writer (ARCHITECTURE.md, "Writes and the change feed"): every write of a primary goes through it, an
 * actor: commands are queued to one fiber, which runs each alone, in one database transaction, with the next commit timestamp (microseconds since the
 * epoch, strictly increasing per database); the transaction checks the writer lease (WriterLease.ts)
 * before the command and before COMMIT, so a fenced process commits nothing. After the commit the Writer
 * publishes what changed on the change feed (ChangeFeed.ts), uninterruptibly: a caller that goes away (a client
 * that disconnects) takes its command off the queue or stops it before COMMIT, which then rolls back, but
 * cannot stop what follows a COMMIT.
 */
import { type SqlClient, TransactionConnection } from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Context, Deferred, Effect, Exit, Fiber, FiberRef, Layer, Option, Ref, Stream } from "effect"
import { Database } from "./Database.ts"
import { type Change, ChangeSink, inProcess, polling, type PollingOptions, systemOrigin, type WriteOrigin } from "./ChangeFeed.ts"
import { WriteBatch } from "./WriteBatch.ts"
import { type CommitRow, type LeaseLost, WriterLease } from "./WriterLease.ts"

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
  /**
   * In a group commit (see `groupLimit`), the group's batch of rows: a command adds its rows and leaves them there
   * (the Writer inserts them before COMMIT, with the other commands' rows, a table at a time); a command that reads
   * what it wrote flushes it first. Undefined when the command commits alone: it inserts its own rows.
   */
  readonly writes?: WriteBatch
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
  commits: ReadonlyArray<CommitChanges>
) => Effect.Effect<void, SqlError>) | undefined>() {}

/** What one commit changed, for the CommitHook: a transaction holds one, or several in a group commit. */
export interface CommitChanges {
  readonly commitTs: number
  readonly origin: WriteOrigin
  readonly changes: ReadonlyArray<Change>
}

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
  fiber: Fiber.RuntimeFiber<unknown, unknown> | undefined
  /** A commit that may share its transaction with the commits queued beside it (`groupLimit`). */
  readonly grouped?: Grouped
  /** In a group: done once the command's outcome is final (it failed, or the group's transaction ended). */
  settled?: Deferred.Deferred<void>
}

/** A commit as a group runs it: its command, for whom, with the caller's services, and where its answer goes. */
interface Grouped {
  readonly command: (context: CommitContext) => Effect.Effect<unknown, unknown, unknown>
  readonly origin: WriteOrigin
  readonly context: Context.Context<never>
  readonly resume: (exit: Exit.Exit<Result<unknown>, unknown>) => void
}

/**
 * `command` inside the group's transaction, in a savepoint of its own that is set only when the command sends its
 * first statement (what `withTransaction` nested in a transaction does, less the round trip for a command that
 * sends none: a create of an id the server chose only adds rows to the group's batch, and the savepoint was a
 * third of a group's round trips). A command that fails after a statement is rolled back to its savepoint; one
 * that sent none has nothing in the database to undo (its batched rows are taken out by the caller). Nested
 * transactions inside the command take the depths below, as they would. `before` is waited for ahead of the first
 * statement: the end of the group before (see `runGroup`), so that what the command reads includes what it wrote.
 */
const inSavepoint = <A, E, R>(sql: SqlClient, command: Effect.Effect<A, E, R>, before: Effect.Effect<void> = Effect.void): Effect.Effect<A, E | SqlError, R> =>
  Effect.flatMap(Effect.serviceOption(TransactionConnection), (held) => {
    // Outside a transaction (never in a group): a transaction of its own.
    if (Option.isNone(held)) return sql.withTransaction(command)
    const [conn, depth] = held.value
    const name = `effect_sql_${depth + 1}`
    let set = false
    return Effect.flatMap(
      Effect.cached(Effect.zipRight(before, Effect.map(conn.executeUnprepared(`SAVEPOINT ${name}`, [], undefined), () => void (set = true)))),
      (savepoint) => {
        const inside: Connection = {
          execute: (text, params, transform) => Effect.zipRight(savepoint, conn.execute(text, params, transform)),
          executeRaw: (text, params) => Effect.zipRight(savepoint, conn.executeRaw(text, params)),
          executeStream: (text, params, transform) => Stream.unwrap(Effect.as(savepoint, conn.executeStream(text, params, transform))),
          executeValues: (text, params) => Effect.zipRight(savepoint, conn.executeValues(text, params)),
          executeUnprepared: (text, params, transform) => Effect.zipRight(savepoint, conn.executeUnprepared(text, params, transform))
        }
        return Effect.onExit(
          Effect.provideService(command, TransactionConnection, [inside, depth + 1] as const),
          (exit) => Exit.isFailure(exit) && set ? Effect.orDie(conn.executeUnprepared(`ROLLBACK TO SAVEPOINT ${name}`, [], undefined)) : Effect.void
        )
      }
    )
  })

/**
 * `effect` on a connection of the pool rather than the Writer's transaction the fiber is in: for a statement that
 * needs no transaction (taking keys from a sequence), so that a command of a pipelined group does not wait at it for
 * the group before (`runGroup`).
 */
export const outsideTransaction = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.mapInputContext(effect, (context: Context.Context<R>) => Context.omit(TransactionConnection)(context) as Context.Context<R>)

/**
 * Commits queued together that one transaction takes at most (group commit; docs/database.md, "Group commit"):
 * each command runs in a savepoint of its own, so one that fails rolls back alone, and the rows they batch,
 * their audit rows and their rows of the change log are written a table at a time, with one lease check and
 * one COMMIT for all. Each keeps its own commit timestamp and `Committed` event. Postgres subtransactions
 * beyond 64 in one transaction spill out of each backend's cache: a group stays well under.
 */
export const groupLimit = 32

/**
 * A group that batched this many rows or more lets the next group's commands run while its rows are written
 * (`runGroup`): a Synthea transaction Bundle batches some 2,000 to 5,000 rows, 30 ms and more of Postgres's time. A
 * group with fewer (creates of single resources: about 10 rows each) is written in a few ms, and the next group
 * is formed after it, of all the commands queued meanwhile: started early, it took only those queued at once, and
 * each of the smaller groups paid its BEGIN, audit append, change log row and COMMIT (creates at 16 connections:
 * 0.67x to 0.99x).
 */
export const pipelineFromRows = 1000

/** What `runGroup` tells the actor once its commands have run. */
interface GroupRun {
  /** The last commit timestamp given out. */
  readonly assigned: number
  /** The next group may start before this one has ended. */
  readonly pipelined: boolean
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
  // Where a statement is a round trip to another process (Postgres), queued commits share a transaction; a
  // lease without `recordCommit` (a replica's, which refuses changes at the last check) commits one at a time.
  const grouping = db.dialect === "pg" && recordCommit !== undefined
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

  /** The rows of the change log of `commits` and the lease's last check, as the transaction's last statements. */
  const finish = (commits: ReadonlyArray<CommitChanges>) => {
    const changed = commits.filter((commit) => commit.changes.length > 0)
    if (changed.length === 0) return lease(0)
    const rows: Array<CommitRow> = changed.map((commit) => ({ commitTs: commit.commitTs, actor: commit.origin.actor, requestId: commit.origin.requestId }))
    if (recordCommit !== undefined) return recordCommit(sql, rows)
    return Effect.zipRight(
      Effect.forEach(rows, (row) =>
        sql`
          INSERT INTO svc_commits (commit_ts, actor, request_id)
          VALUES (${row.commitTs}, ${row.actor}, ${row.requestId})`, { discard: true }),
      lease(changed.reduce((sum, commit) => sum + commit.changes.length, 0))
    )
  }

  /** What follows a COMMIT, for each commit it made: run whole, whoever waits for it. */
  const committed = (commit: CommitChanges) =>
    Effect.zipRight(
      Effect.zipRight(Ref.set(last, commit.commitTs), Ref.update(count, (n) => n + 1)),
      commit.changes.length === 0
        ? Effect.void
        : sink.publish({ _tag: "Committed", commitTs: commit.commitTs, actor: commit.origin.actor, requestId: commit.origin.requestId, changes: commit.changes })
    )

  const nextTs = Effect.flatMap(Clock.currentTimeNanos, (now) => Effect.map(Ref.get(last), (previous) => nextCommitTs(Number(now / 1000n), previous)))

  /** One commit, on the actor's turn: only the command may be interrupted, before COMMIT. */
  const run = <A, E, R>(command: (context: CommitContext) => Effect.Effect<A, E, R>, origin: WriteOrigin) =>
    Effect.uninterruptibleMask((restore) =>
      Effect.gen(function*() {
        const commitTs = yield* nextTs
        const changes: Array<Change> = []
        const commit: CommitChanges = { commitTs, origin, changes }
        // The transaction rolls back when the command fails or is interrupted; the lease is checked before
        // the command and again right before COMMIT, after the commit's audit rows and its row of the change log.
        // A lease that records the commit's row itself checks once, in that statement (PostgresLease.ts).
        const value = yield* sql.withTransaction(
          (recordCommit === undefined ? lease() : Effect.void).pipe(
            Effect.zipRight(restore(command({ commitTs, record: (change) => void changes.push(change) }))),
            Effect.tap(() => hook === undefined || changes.length === 0 ? Effect.void : hook(sql, [commit])),
            Effect.tap(() => finish([commit]))
          )
        )
        // Committed: what follows runs whole, whoever waits for it.
        yield* committed(commit)
        return { value, commitTs }
      })
    )

  /**
   * Several commits in one transaction (`groupLimit`), in their order: each command in a savepoint of its own, on
   * a fiber of its own so that its caller can interrupt it, with the group's batch of rows. One that fails is
   * rolled back to its savepoint (its rows taken out of the batch) and answered at once; the others are answered
   * after COMMIT, or all with the transaction's failure when it fails (the batch's insert, the audit rows, the
   * lease's check).
   *
   * Pipelined with the group before it (docs/database.md, "Group commit"): the commands run while that group's rows
   * are still being written and committed, on a connection of their own, and only up to their first statement,
   * which waits for that group's end (`previous`: committed or failed, its events published), as does this group's
   * own writing of its rows and its COMMIT. So a statement sees every commit before its group, the commits and
   * their events keep the order of their timestamps, and a group's commands that send no statement (creates of
   * ids the server chose, the bulk of an ingest) take Node's time while Postgres writes the group before.
   * `commandsDone` is completed when the commands have run (or the transaction failed before they all did), with the
   * last timestamp given out and whether the group batched `pipelineFromRows` rows or more: a group with fewer is
   * quick to write, and the next group forms once it has ended, so as to take all the commands queued meanwhile.
   */
  const runGroup = (group: ReadonlyArray<Job>, previous: Effect.Effect<void>, firstTs: number, commandsDone: Deferred.Deferred<GroupRun>) =>
    Effect.gen(function*() {
      const batch = new WriteBatch()
      const done: Array<{ readonly job: Job; readonly commit: CommitChanges; readonly value: unknown }> = []
      // Jobs whose outcome is final before the group's transaction ends (failed, or given up before they ran).
      const settledEarly = new Set<Job>()
      // The last timestamp given out: the group before may not have committed yet.
      let assigned = firstTs
      const transaction = Effect.gen(function*() {
        for (const job of group) {
          const grouped = job.grouped!
          if (job.cancelled) {
            settledEarly.add(job)
            yield* Deferred.succeed(job.settled!, undefined)
            continue
          }
          const now = yield* Clock.currentTimeNanos
          const commitTs = nextCommitTs(Number(now / 1000n), assigned)
          const changes: Array<Change> = []
          const mark = batch.mark()
          // The caller's services were given with its command (`submit`): it needs none of the actor's.
          const command = Effect.provide(
            grouped.command({ commitTs, record: (change) => void changes.push(change), writes: batch }),
            grouped.context
          ) as Effect.Effect<unknown, unknown>
          const fiber = yield* Effect.fork(Effect.interruptible(inSavepoint(sql, command, previous)))
          job.fiber = fiber
          if (job.cancelled) yield* Fiber.interruptFork(fiber)
          const exit = yield* Fiber.await(fiber)
          if (Exit.isSuccess(exit)) {
            assigned = commitTs
            done.push({ job, commit: { commitTs, origin: grouped.origin, changes }, value: exit.value })
          } else {
            batch.restore(mark)
            settledEarly.add(job)
            grouped.resume(exit as Exit.Exit<never, unknown>)
            yield* Deferred.succeed(job.settled!, undefined)
          }
        }
        yield* Deferred.succeed(commandsDone, { assigned, pipelined: batch.size >= pipelineFromRows })
        yield* previous
        yield* batch.flush(sql)
        const commits = done.map((d) => d.commit)
        if (hook !== undefined && commits.some((commit) => commit.changes.length > 0)) {
          yield* hook(sql, commits.filter((commit) => commit.changes.length > 0))
        }
        yield* finish(commits)
      })
      const exit = yield* Effect.exit(sql.withTransaction(transaction))
      // Failed before its commands were all run (BEGIN refused, say): the next group may start. Its own end is
      // still after the group before's, for the order of the events.
      yield* Deferred.succeed(commandsDone, { assigned, pipelined: false })
      yield* previous
      for (const { commit, job, value } of done) {
        if (Exit.isSuccess(exit)) {
          yield* committed(commit)
          job.grouped!.resume(Exit.succeed({ value, commitTs: commit.commitTs }))
        } else {
          job.grouped!.resume(exit as Exit.Exit<never, unknown>)
        }
        yield* Deferred.succeed(job.settled!, undefined)
      }
      // Those the transaction never reached (it failed to begin, or failed between commands) fail with it.
      const finished = new Set(done.map((d) => d.job))
      for (const job of group) {
        if (finished.has(job) || settledEarly.has(job)) continue
        job.grouped!.resume(Exit.isFailure(exit) ? exit as Exit.Exit<never, unknown> : Exit.die(new Error("a group commit ended without running this command")))
        yield* Deferred.succeed(job.settled!, undefined)
      }
    }).pipe(Effect.uninterruptible)

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
  /** The commits queued right behind `first` that may share its transaction, taken off the queue. */
  const groupOf = (first: Job): Array<Job> => {
    const group = [first]
    while (group.length < groupLimit && jobs.length > 0 && jobs[0]!.grouped !== undefined) {
      group.push(jobs.shift()!)
      waitingForRoom.shift()?.(Effect.void)
    }
    return group
  }
  // The groups whose transactions may be open (`runGroup`): the one before the last (writing its rows, committing)
  // and the last (its commands may still wait for that one); at most these two.
  let writing: Deferred.Deferred<void> | undefined
  let latest: Deferred.Deferred<void> | undefined
  // The last timestamp a group gave out, committed or not yet.
  let assigned = 0
  const ended = (group: Deferred.Deferred<void> | undefined): Effect.Effect<void> => (group === undefined ? Effect.void : Deferred.await(group))
  const scope = yield* Effect.scope
  yield* Effect.gen(function*() {
    const job = yield* nextJob
    if (job.cancelled) return
    if (grouping && job.grouped !== undefined) {
      const group = groupOf(job)
      for (const member of group) member.settled = yield* Deferred.make<void>()
      yield* ended(writing)
      const commandsDone = yield* Deferred.make<GroupRun>()
      const end = yield* Deferred.make<void>()
      const firstTs = Math.max(yield* Ref.get(last), assigned)
      yield* Effect.forkIn(Effect.ensuring(runGroup(group, ended(latest), firstTs, commandsDone), Deferred.succeed(end, undefined)), scope)
      const run = yield* Deferred.await(commandsDone)
      assigned = run.assigned
      writing = latest
      latest = end
      if (!run.pipelined) yield* Deferred.await(end)
      return
    }
    // A command that does not share a transaction runs once no group's is open.
    yield* ended(writing)
    yield* ended(latest)
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
  const submit = <A, E, R>(effect: Effect.Effect<A, E, R>, grouped?: (resume: (exit: Exit.Exit<A, E>) => void, context: Context.Context<R>) => Grouped): Effect.Effect<A, E, R> =>
    Effect.zipRight(room, Effect.flatMap(Effect.context<R>(), (context) =>
      // The caller's services; the rest of its fiber-local state is the actor's (copying all of it cost a
      // tenth of a create's time).
      Effect.async<A, E>((resume) => {
        const job: Job = {
          cancelled: false,
          fiber: undefined,
          run: Effect.map(Effect.exit(Effect.provide(effect, context)), resume),
          ...(grouped === undefined ? {} : { grouped: grouped(resume, context) })
        }
        jobs.push(job)
        const wake = idle
        idle = undefined
        wake?.(Effect.void)
        // Run when the caller is interrupted: the job is skipped if it has not started, interrupted if it has
        // (in a group, waited for until its outcome is final, as a commit alone is waited for to its end).
        return Effect.suspend(() => {
          job.cancelled = true
          if (job.fiber === undefined) return Effect.void
          const interrupted = Effect.asVoid(Fiber.interrupt(job.fiber))
          return job.settled === undefined ? interrupted : Effect.zipRight(interrupted, Deferred.await(job.settled))
        })
      })))

  return Writer.of({
    commit: (command) =>
      Effect.flatMap(FiberRef.get(currentOrigin), (origin) =>
        submit(run(command, origin), (resume, context) => ({
          command: command as Grouped["command"],
          origin,
          context: context as Context.Context<never>,
          resume: resume as Grouped["resume"]
        }))),
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
