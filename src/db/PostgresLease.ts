/**
 * The writer lease on Postgres (docs/cluster.md, "The writer lease"): one row, `svc_writer_lease`, names the
 * process that may commit (`holder`), the lease's `epoch` (one more at each take-over) and when it expires. All
 * times are the database's (`clock_timestamp()`), never a process's clock.
 *
 * - A process takes the lease when it has expired, or when its holder's lease session is gone from the database
 *   (`pg_stat_activity`: a process killed outright loses its connections at once, so a standby need not wait for
 *   the expiry). Taking it adds one to the epoch.
 * - The holder renews it every `renewEvery` on a session of its own (not a pool connection, which a busy pool
 *   could withhold); a renewal that finds another holder or epoch means the lease was taken: the process must stop
 *   writing (`lost`). A renewal that cannot reach the database is tried again on a new session.
 * - Fencing: every write transaction reads the row `FOR SHARE` with the holder and epoch it took (WriterLease.ts,
 *   `check`). A take-over is an UPDATE of that row, so it waits for any write transaction of the old holder to end,
 *   and every later one of the old holder finds another epoch and commits nothing. A holder paused inside a
 *   transaction cannot hold the row for ever: the database ends a session idle in a transaction after the lease's
 *   length (`idle_in_transaction_session_timeout`, set on the pool by Database.ts).
 * - The table is made here, not by a migration: the lease decides which process migrates.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import { Data, Deferred, Duration, Effect, Exit, type Scope, Schema } from "effect"
import type pg from "pg"
import { openSession } from "./postgresOpen.ts"
import { causeText, DatabaseOpenError } from "./errors.ts"
import { type CommitRow, LeaseLost, WriterLease } from "./WriterLease.ts"
import { maskUrl } from "./postgresTls.ts"

/** How long a lease lasts without renewal, how often its holder renews it, how often a standby tries to take it. */
export interface LeaseTimes {
  readonly length: Duration.Duration
  readonly renewEvery: Duration.Duration
  readonly pollEvery: Duration.Duration
}

/** The times of a lease of `seconds` (`cluster.lease_seconds`): renewed five times in its length, polled twenty times. */
export const leaseTimes = (seconds: number): LeaseTimes => ({
  length: Duration.seconds(seconds),
  renewEvery: Duration.millis(seconds * 200),
  pollEvery: Duration.millis(Math.max(100, seconds * 50))
})

/** Another process holds a live lease: a second primary must not start. Exit status 3. */
export class LeaseHeld extends Schema.TaggedError<LeaseHeld>()("LeaseHeld", {
  database: Schema.String,
  holder: Schema.String,
  secondsLeft: Schema.Number
}) {
  override get message(): string {
    return `database ${this.database} has a primary already: svc process ${this.holder} holds the writer lease ` +
      `(it expires in ${Math.ceil(this.secondsLeft)} s unless renewed); start this process as a standby (--standby) or a replica, or stop the other first`
  }
}

/** What a lease's session answered when the process tried to take it. */
export type Attempt =
  | { readonly _tag: "Taken"; readonly epoch: number }
  | { readonly _tag: "Held"; readonly holder: string; readonly secondsLeft: number }

/** The advisory lock the table is made under ("svcL"), so that processes starting together make it once. */
const tableLock = 0x7376634c

const tableStatements = [
  `CREATE TABLE IF NOT EXISTS svc_writer_lease (
    id smallint PRIMARY KEY CHECK (id = 1),
    holder text NOT NULL,
    epoch bigint NOT NULL,
    expires_at timestamptz NOT NULL,
    holder_pid integer,
    holder_since timestamptz,
    watermark bigint NOT NULL DEFAULT 0
  )`,
  `INSERT INTO svc_writer_lease (id, holder, epoch, expires_at) VALUES (1, '', 0, '-infinity') ON CONFLICT (id) DO NOTHING`
]

/** Whether the row's lease is free: expired, or its holder's session is no longer connected. */
const free = `(expires_at <= clock_timestamp() OR NOT EXISTS (
  SELECT 1 FROM pg_stat_activity a WHERE a.pid = svc_writer_lease.holder_pid AND a.backend_start = svc_writer_lease.holder_since))`

/** This session, as the row remembers its holder's. */
const thisSession = `holder_pid = pg_backend_pid(), holder_since = (SELECT backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid())`

const query = <R extends Record<string, unknown>>(session: pg.Client, text: string, values: ReadonlyArray<unknown> = []) =>
  Effect.tryPromise({ try: () => session.query<R>(text, [...values]), catch: (cause) => new SessionFailed({ reason: causeText(cause) }) })

/** The lease's session failed (the database went away, the connection broke). */
export class SessionFailed extends Data.TaggedError("SessionFailed")<{ readonly reason: string }> {}

/** Makes the table and its row if they are missing. */
export const ensureTable = (session: pg.Client) =>
  Effect.acquireUseRelease(
    query(session, "BEGIN"),
    () => Effect.zipRight(query(session, "SELECT pg_advisory_xact_lock($1)", [tableLock]), Effect.forEach(tableStatements, (text) => query(session, text), { discard: true })),
    (_, exit) => Effect.ignore(query(session, Exit.isSuccess(exit) ? "COMMIT" : "ROLLBACK"))
  )

/** One try at taking the lease for `holder`. */
export const tryTake = (session: pg.Client, holder: string, length: Duration.Duration): Effect.Effect<Attempt, SessionFailed> =>
  Effect.gen(function*() {
    const taken = yield* query<{ epoch: string }>(session, `
      UPDATE svc_writer_lease SET holder = $1, epoch = epoch + 1, expires_at = clock_timestamp() + make_interval(secs => $2), ${thisSession}
      WHERE id = 1 AND ${free} RETURNING epoch`, [holder, Duration.toSeconds(length)])
    const row = taken.rows[0]
    if (row !== undefined) return { _tag: "Taken", epoch: Number(row.epoch) }
    const held = yield* query<{ holder: string; seconds_left: number | string }>(session, `
      SELECT holder, greatest(0, extract(epoch FROM expires_at - clock_timestamp())) AS seconds_left FROM svc_writer_lease WHERE id = 1`)
    return { _tag: "Held", holder: held.rows[0]?.holder ?? "", secondsLeft: Number(held.rows[0]?.seconds_left ?? 0) }
  })

/** Renews the lease `holder` took at `epoch`: false when it is no longer theirs. */
export const renew = (session: pg.Client, holder: string, epoch: number, length: Duration.Duration): Effect.Effect<boolean, SessionFailed> =>
  Effect.map(
    query(session, `
      UPDATE svc_writer_lease SET expires_at = clock_timestamp() + make_interval(secs => $3), ${thisSession}
      WHERE id = 1 AND holder = $1 AND epoch = $2 RETURNING epoch`, [holder, epoch, Duration.toSeconds(length)]),
    (result) => result.rows.length === 1
  )

/** Gives the lease up (a process that stops): a standby takes it at its next try. */
export const release = (session: pg.Client, holder: string, epoch: number) =>
  query(session, `UPDATE svc_writer_lease SET expires_at = '-infinity', holder_pid = NULL WHERE id = 1 AND holder = $1 AND epoch = $2`, [holder, epoch])

/**
 * Records the holder's published watermark: the commit timestamp at and below which every commit is visible
 * (one writer commits one at a time, so its last commit's). Replicas read it to tell how far behind they are.
 */
export const recordWatermark = (sql: SqlClient.SqlClient, holder: string, epoch: number, watermark: number) =>
  Effect.map(
    sql`UPDATE svc_writer_lease SET watermark = ${watermark} WHERE id = 1 AND holder = ${holder} AND epoch = ${epoch} RETURNING epoch`,
    (rows) => rows.length === 1
  )

/** Whether a process holds a live lease (a primary serves): what a replica follows. */
export const primaryLive = (sql: SqlClient.SqlClient) =>
  Effect.map(sql.unsafe<{ live: boolean }>(`SELECT NOT ${free} AS live FROM svc_writer_lease WHERE id = 1`), (rows) => rows[0]?.live === true)

/** The primary's published watermark, as a replica reads it (0 before any). */
export const readWatermark = (sql: SqlClient.SqlClient) =>
  Effect.map(sql<{ watermark: string | number }>`SELECT watermark FROM svc_writer_lease WHERE id = 1`, (rows) => Number(rows[0]?.watermark ?? 0))

/**
 * The check of a write transaction that changes no resource: the row, still this holder's at this epoch, locked
 * against a take-over until COMMIT.
 */
export const check = (holder: string, epoch: number) => (sql: SqlClient.SqlClient) =>
  Effect.flatMap(
    sql<{ epoch: string }>`SELECT epoch FROM svc_writer_lease WHERE id = 1 AND holder = ${holder} AND epoch = ${epoch} FOR SHARE`,
    (rows) => rows.length === 1 ? Effect.void : Effect.fail(new LeaseLost({ reason: "another process took the writer lease: this one commits nothing more" }))
  )

/**
 * The last statement of a write transaction that changes resources: its commits' rows of the change log (one, or
 * several in a group commit), written only while the row of the lease is this holder's at this epoch, which it
 * locks against a take-over until COMMIT. A transaction costs one statement for the lease and its log rows together.
 */
export const recordCommit = (holder: string, epoch: number) =>
(sql: SqlClient.SqlClient, commits: ReadonlyArray<CommitRow>) =>
  Effect.flatMap(
    sql.unsafe<{ commit_ts: string }>(
      `INSERT INTO svc_commits (commit_ts, actor, request_id)
      SELECT c.commit_ts, c.actor, c.request_id FROM unnest($1::bigint[], $2::text[], $3::text[]) AS c(commit_ts, actor, request_id),
        (SELECT 1 FROM svc_writer_lease WHERE id = 1 AND holder = $4 AND epoch = $5 FOR SHARE) AS held
      RETURNING commit_ts`,
      [commits.map((c) => c.commitTs), commits.map((c) => c.actor), commits.map((c) => c.requestId), holder, epoch]
    ),
    (rows) => rows.length === commits.length ? Effect.void : Effect.fail(new LeaseLost({ reason: "another process took the writer lease: this one commits nothing more" }))
  )

/** A lease this process holds. */
export interface HeldLease {
  readonly holder: string
  readonly epoch: number
  readonly times: LeaseTimes
  /** The check every write transaction makes (WriterLease). */
  readonly writerLease: WriterLease["Type"]
  /** Fails once the lease is found taken by another process: this one must stop. */
  readonly lost: Effect.Effect<never, LeaseLost>
}

export interface AcquireOptions {
  readonly url: string
  readonly times: LeaseTimes
  /** This process, as the row names it (host, pid and a random part). */
  readonly holder: string
  /** A primary fails with LeaseHeld when another holds a live lease; a standby waits for it. */
  readonly wait: boolean
  /** Told each time a standby finds the lease held. */
  readonly onHeld?: (holder: string, secondsLeft: number) => Effect.Effect<void>
}

/**
 * Takes the lease (or fails, or waits, as `options.wait` says) and holds it for the scope's life: renewed on a
 * fiber of the scope, given up when the scope closes.
 */
export const acquire = (options: AcquireOptions): Effect.Effect<HeldLease, LeaseHeld | DatabaseOpenError, Scope.Scope> =>
  Effect.gen(function*() {
    const database = maskUrl(options.url)
    const opened = (reason: string) => new DatabaseOpenError({ database, reason: `the writer lease: ${reason}` })
    let session = yield* openSession(options.url)
    yield* ensureTable(session).pipe(Effect.mapError((failed) => opened(failed.reason)))
    const first = yield* Effect.mapError(tryTake(session, options.holder, options.times.length), (failed) => opened(failed.reason))
    let attempt: Attempt = first
    while (attempt._tag === "Held") {
      if (!options.wait) return yield* new LeaseHeld({ database, holder: attempt.holder, secondsLeft: attempt.secondsLeft })
      if (options.onHeld !== undefined) yield* options.onHeld(attempt.holder, attempt.secondsLeft)
      yield* Effect.sleep(options.times.pollEvery)
      const next = yield* Effect.either(tryTake(session, options.holder, options.times.length))
      if (next._tag === "Right") attempt = next.right
      else {
        yield* Effect.logWarning("the writer lease could not be read; trying again on a new session", { reason: next.left.reason })
        session = yield* openSession(options.url).pipe(Effect.catchAll(() => Effect.succeed(session)))
      }
    }
    const epoch = attempt.epoch
    const lost = yield* Deferred.make<never, LeaseLost>()
    yield* Effect.logInfo("holding the writer lease", { holder: options.holder, epoch })

    // Renewal: a session of its own, replaced when it fails; a renewal that finds the row another's ends it.
    const renewing = Effect.gen(function*() {
      while (true) {
        yield* Effect.sleep(options.times.renewEvery)
        const renewed = yield* Effect.either(renew(session, options.holder, epoch, options.times.length))
        if (renewed._tag === "Right") {
          if (renewed.right) continue
          yield* Effect.logError("the writer lease was taken by another process: this one stops writing", { epoch })
          return yield* Deferred.fail(lost, new LeaseLost({ reason: `another process took the writer lease (this process held epoch ${epoch})` }))
        }
        yield* Effect.logWarning("the writer lease could not be renewed; trying again on a new session", { reason: renewed.left.reason })
        const fresh = yield* Effect.either(openSession(options.url))
        if (fresh._tag === "Right") session = fresh.right
      }
    })
    yield* Effect.forkScoped(renewing)
    // Given up when the process stops, so that a standby need not wait for the expiry.
    yield* Effect.addFinalizer(() => Effect.ignore(Effect.timeout(release(session, options.holder, epoch), "1 second")))
    const held: HeldLease = {
      holder: options.holder,
      epoch,
      times: options.times,
      writerLease: WriterLease.of({ check: check(options.holder, epoch), recordCommit: recordCommit(options.holder, epoch) }),
      lost: Deferred.await(lost)
    }
    return held
  })
