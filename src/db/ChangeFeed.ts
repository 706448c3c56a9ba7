/**
 * The change feed (ARCHITECTURE.md, "Writes and the change feed"): every commit that changed resources, in
 * commit order, exactly once, to every follower (the catalog reload, statistics, and later subscriptions,
 * `/sync`, export and replicas).
 *
 * Each follower has a bounded queue. Publishing never waits for a follower: when a follower's queue is full
 * it is marked behind and gets nothing more from memory; once it has taken what its queue holds it is told
 * (`FellBehind`) and reads what it missed from the durable change log (`resource_versions`, `resource_edits`
 * and `svc_commits` by `commit_ts`), then follows the queue again. Memory stays bounded however slow a follower is.
 *
 * Two sources feed it: the Writer of this process (`inProcess`, which publishes after each COMMIT), and a
 * poller of the database (`polling`), which is how a process that does not write follows the one that does.
 * Commits are made one at a time by the one Writer of a database, so a commit timestamp seen in the log means
 * every earlier commit is visible too.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Chunk, Context, Duration, Effect, Layer, Option, Queue, Schedule, type Scope, Stream, SubscriptionRef } from "effect"
import { Database } from "./Database.ts"


/** How a version came to be: what history shows as its `request.method` (POST, PUT, PATCH, DELETE). */
export type Operation = "create" | "update" | "patch" | "delete"

/**
 * One resource changed by a commit: a new version, or a version changed in place (`$meta-add` and
 * `$meta-delete` change a version's meta without a new one), which is an `update` of that same version
 * with its new text.
 */
export interface Change {
  readonly type: string
  readonly id: string
  readonly version: number
  readonly op: Operation
  /** The version's JSON text as stored and served; null for a delete. */
  readonly resource: string | null
  /** The version existed before this commit, which changed its text in place (`$meta-add`, `$meta-delete`). */
  readonly inPlace?: boolean
}

/** One commit that changed resources. */
export interface Committed {
  readonly _tag: "Committed"
  readonly commitTs: number
  /** Who made it: the caller's key (`address:...` for an anonymous caller), or `system` for the server's own writes. */
  readonly actor: string
  /** The request it answered, when it answered one. */
  readonly requestId: string | null
  /**
   * What changed, in the order written; read back from the log, in the order of the resources' internal keys.
   * A transaction Bundle is one commit.
   */
  readonly changes: ReadonlyArray<Change>
}

/** The follower's queue overflowed after `afterTs`: what follows is read from the log. */
export interface FellBehind {
  readonly _tag: "FellBehind"
  readonly afterTs: number
}

export type FeedEvent = Committed | FellBehind

/** Who a write is made for; set by the edge for the request it answers, `system` otherwise. */
export interface WriteOrigin {
  readonly actor: string
  readonly requestId: string | null
  /** The caller's network address, for the audit trail; absent for the server's own writes. */
  readonly client?: string
}

export const systemOrigin: WriteOrigin = { actor: "system", requestId: null }

export interface FollowOptions {
  /** How many commits the follower's queue holds before the follower is behind (default 1024). */
  readonly capacity?: number
  /** Start after this commit timestamp, reading the log first; default: from now on. */
  readonly after?: number
}

export class ChangeFeed extends Context.Tag("svc/db/ChangeFeed")<ChangeFeed, {
  /** The commits after the follower joins (or after `options.after`), for as long as the scope lasts. */
  readonly follow: (options?: FollowOptions) => Effect.Effect<Stream.Stream<FeedEvent>, never, Scope.Scope>
  /**
   * The same as `follow`, as a pull: each call waits for the next events (at least one) and returns all that
   * are ready, in order. For followers on the write path, where a Stream's machinery per event costs.
   */
  readonly pull: (options?: FollowOptions) => Effect.Effect<Effect.Effect<Chunk.Chunk<FeedEvent>>, never, Scope.Scope>
  /** The commits in the log after `afterTs`, up to the last one visible while it is read. */
  readonly stream: (afterTs: number) => Stream.Stream<Committed, SqlError>
  /** The commit timestamp up to which every commit has been published (0 before the first). */
  readonly published: Effect.Effect<number>
  /** Waits until every commit up to `commitTs` has been published. */
  readonly settled: (commitTs: number) => Effect.Effect<void>
  /**
   * Calls `listener` with each commit as it is published, before the followers get it and, on a process that
   * writes, before the commit's caller is answered; for the scope's life. It must be quick and must not fail
   * (what it throws is dropped): the read cache of a Postgres primary (src/rest/readCache.ts).
   */
  readonly onPublish: (listener: (committed: Committed) => void) => Effect.Effect<void, never, Scope.Scope>
}>() {}

/** What the source of the feed (the Writer, or the poller) calls after each commit, in commit order. */
export class ChangeSink extends Context.Tag("svc/db/ChangeSink")<ChangeSink, {
  /** Never waits and never fails. */
  readonly publish: (committed: Committed) => Effect.Effect<void>
}>() {}

export const defaultCapacity = 1024

/** Rows read from the log at a time; a commit larger than this is read whole. */
const logPageRows = 1000

interface LogRow {
  readonly commit_ts: number | string
  readonly type: string
  readonly id: string
  readonly rkey: number | string
  readonly version: number | string
  readonly op: string
  readonly content: string | null
  readonly actor: string | null
  readonly request_id: string | null
  readonly in_place: number | string | boolean
}

/**
 * The log's rows after (or at) `ts`: the versions committed then, and the versions changed in place then
 * (`resource_edits`: `$meta-add`, `$meta-delete`), which read as an update of that same version with its text
 * as stored now.
 */
const logRows = (sql: SqlClient.SqlClient, where: "after" | "at", ts: number) => {
  const at = (column: string) => where === "after" ? sql`${sql.literal(column)} > ${ts}` : sql`${sql.literal(column)} = ${ts}`
  return sql<LogRow>`
    SELECT v.commit_ts AS commit_ts, r.type AS type, r.id AS id, v.rkey AS rkey, v.version AS version, v.op AS op,
      v.content AS content, c.actor AS actor, c.request_id AS request_id, 0 AS in_place
    FROM resource_versions v
    JOIN resources r ON r.rkey = v.rkey
    LEFT JOIN svc_commits c ON c.commit_ts = v.commit_ts
    WHERE ${at("v.commit_ts")}
    UNION ALL
    SELECT e.commit_ts, r.type, r.id, e.rkey, e.version, 'update' AS op, v.content, c.actor, c.request_id, 1 AS in_place
    FROM resource_edits e
    JOIN resource_versions v ON v.rkey = e.rkey AND v.version = e.version
    JOIN resources r ON r.rkey = e.rkey
    LEFT JOIN svc_commits c ON c.commit_ts = e.commit_ts
    WHERE ${at("e.commit_ts")}
    ORDER BY commit_ts, rkey, version
    ${where === "after" ? sql`LIMIT ${logPageRows}` : sql``}`
}

/** Groups log rows (ordered by commit timestamp) into commits. */
const commitsOf = (rows: ReadonlyArray<LogRow>): Array<Committed> => {
  const out: Array<Committed> = []
  let current: { commitTs: number; actor: string; requestId: string | null; changes: Array<Change> } | undefined
  for (const row of rows) {
    const commitTs = Number(row.commit_ts)
    if (current === undefined || current.commitTs !== commitTs) {
      current = { commitTs, actor: row.actor ?? "system", requestId: row.request_id, changes: [] }
      out.push({ _tag: "Committed", ...current, changes: current.changes })
    }
    const change: Change = { type: row.type, id: row.id, version: Number(row.version), op: row.op as Operation, resource: row.content }
    current.changes.push(Number(row.in_place) === 1 ? { ...change, inPlace: true } : change)
  }
  return out
}

/** The next whole commits after `afterTs` (none when the log has nothing newer). */
export const readLogPage = (db: Database["Type"], afterTs: number): Effect.Effect<Array<Committed>, SqlError> =>
  db.withReader((sql) =>
    Effect.gen(function*() {
      const rows = yield* logRows(sql, "after", afterTs)
      if (rows.length < logPageRows) return commitsOf(rows)
      // A full page may end inside a commit: that commit is read whole, alone if it is all the page holds.
      const lastTs = Number(rows[rows.length - 1]!.commit_ts)
      const whole = rows.filter((row) => Number(row.commit_ts) !== lastTs)
      if (whole.length > 0) return commitsOf(whole)
      return commitsOf(yield* logRows(sql, "at", lastTs))
    })
  )

/** The log after `afterTs`, page by page, up to the last commit visible. */
export const logStream = (db: Database["Type"], afterTs: number): Stream.Stream<Committed, SqlError> =>
  Stream.paginateChunkEffect(afterTs, (after) =>
    Effect.map(readLogPage(db, after), (page) => {
      const last = page[page.length - 1]
      return [Chunk.unsafeFromArray(page), last === undefined ? Option.none() : Option.some(last.commitTs)] as const
    }))

interface Follower {
  readonly queue: Queue.Queue<Committed>
  /** Set by a publish the queue had no room for; from then on the follower reads the log. */
  behind: boolean
}

/** A log read that failed is tried again, with a growing pause, rather than ending a follower. */
const logRetry = Schedule.exponential(Duration.millis(50), 2).pipe(Schedule.either(Schedule.spaced(Duration.seconds(5))))

/** The feed itself: followers, their queues and the published watermark; `publish` is its source's. */
export const makeHub = (db: Database["Type"], startTs: number) =>
  Effect.gen(function*() {
    const followers = new Set<Follower>()
    const listeners = new Set<(committed: Committed) => void>()
    const watermark = yield* SubscriptionRef.make(startTs)

    const publish = (committed: Committed) =>
      Effect.suspend(() => {
        for (const listener of listeners) {
          try {
            listener(committed)
          } catch {
            // A listener's failure is its own; the feed goes on.
          }
        }
        for (const follower of followers) {
          if (!follower.behind && !follower.queue.unsafeOffer(committed)) follower.behind = true
        }
        return SubscriptionRef.set(watermark, committed.commitTs)
      })

    const readPage = (after: number) =>
      readLogPage(db, after).pipe(
        Effect.tapError((error) => Effect.logWarning("the change log could not be read; trying again", error)),
        Effect.retry(logRetry),
        Effect.orDie
      )

    const pull = (options: FollowOptions = {}) =>
      Effect.gen(function*() {
        const queue = yield* Effect.acquireRelease(
          Queue.bounded<Committed>(options.capacity ?? defaultCapacity),
          (queue) => Queue.shutdown(queue)
        )
        const joinedAt = yield* SubscriptionRef.get(watermark)
        const follower: Follower = { queue, behind: false }
        yield* Effect.acquireRelease(Effect.sync(() => followers.add(follower)), () => Effect.sync(() => followers.delete(follower)))
        let last = options.after ?? joinedAt
        // Reading the log: from `options.after` first, and after each overflow.
        let catchingUp = options.after !== undefined && options.after < joinedAt
        const fresh = (commits: Iterable<Committed>): Array<FeedEvent> => {
          const out: Array<FeedEvent> = []
          for (const committed of commits) {
            if (committed.commitTs <= last) continue
            last = committed.commitTs
            out.push(committed)
          }
          return out
        }
        const step: Effect.Effect<Chunk.Chunk<FeedEvent>> = Effect.gen(function*() {
          if (catchingUp) {
            const page = yield* readPage(last)
            if (page.length === 0) catchingUp = false
            return Chunk.unsafeFromArray(fresh(page))
          }
          const ready = yield* Queue.takeAll(queue)
          if (Chunk.isNonEmpty(ready)) return Chunk.unsafeFromArray(fresh(ready))
          if (follower.behind) {
            // The queue is empty and nothing has been offered to it since it overflowed: from now on it
            // receives again, and the log covers everything before (commits are published after they are visible).
            follower.behind = false
            catchingUp = true
            return Chunk.of<FeedEvent>({ _tag: "FellBehind", afterTs: last })
          }
          return Chunk.unsafeFromArray(fresh([yield* Queue.take(queue)]))
        })
        // Never empty: a page of the log that held only commits already seen is followed by the next step.
        const next: Effect.Effect<Chunk.Chunk<FeedEvent>> = Effect.flatMap(step, (chunk) => Chunk.isEmpty(chunk) ? next : Effect.succeed(chunk))
        return next
      })

    const settled = (commitTs: number) =>
      Effect.asVoid(watermark.changes.pipe(Stream.filter((ts) => ts >= commitTs), Stream.runHead))

    const feed = ChangeFeed.of({
      follow: (options) => Effect.map(pull(options), Stream.repeatEffectChunk),
      pull,
      stream: (afterTs) => logStream(db, afterTs),
      published: SubscriptionRef.get(watermark),
      settled,
      onPublish: (listener) =>
        Effect.asVoid(Effect.acquireRelease(Effect.sync(() => listeners.add(listener)), () => Effect.sync(() => listeners.delete(listener))))
    })
    return { feed, sink: ChangeSink.of({ publish }) }
  })

/** The last commit timestamp of the log (0 when empty). */
export const lastLoggedTs = (db: Database["Type"]): Effect.Effect<number, SqlError> =>
  db.withReader((sql) =>
    Effect.map(
      sql<{ readonly ts: number | string | null }>`
        SELECT max(ts) AS ts FROM (
          SELECT max(commit_ts) AS ts FROM resource_versions
          UNION ALL SELECT max(commit_ts) AS ts FROM resource_edits
        ) AS t`,
      (rows) => Number(rows[0]?.ts ?? 0)
    )
  )

/** The feed of a process that writes: its Writer publishes each commit (src/db/Writer.ts). */
export const inProcess = Layer.effectContext(
  Effect.gen(function*() {
    const db = yield* Database
    const { feed, sink } = yield* makeHub(db, yield* lastLoggedTs(db))
    return Context.make(ChangeFeed, feed).pipe(Context.add(ChangeSink, sink))
  })
)

export interface PollingOptions {
  /** How often the log is read for new commits. */
  readonly interval: Duration.DurationInput
}

/** How a polling feed is doing: when it last read the log, in milliseconds on the process's clock. */
export class PollingStatus extends Context.Tag("svc/db/PollingStatus")<PollingStatus, {
  /** When the last read of the log succeeded (before the first, when the feed started). */
  readonly lastRead: () => number
}>() {}

/**
 * The feed of a process that follows another's writes: the log is read every `interval` from the last commit
 * seen (the last in the log when the process starts) and each new commit published, in order.
 */
export const polling = (options: PollingOptions) =>
  Layer.scopedContext(
    Effect.gen(function*() {
      const db = yield* Database
      const clock = yield* Effect.clock
      const start = yield* lastLoggedTs(db)
      const { feed, sink } = yield* makeHub(db, start)
      let lastRead = clock.unsafeCurrentTimeMillis()
      const poll = (after: number): Effect.Effect<number> =>
        readLogPage(db, after).pipe(
          Effect.tap(() => Effect.sync(() => void (lastRead = clock.unsafeCurrentTimeMillis()))),
          Effect.flatMap((page) =>
            page.length === 0
              ? Effect.succeed(after)
              : Effect.zipRight(Effect.forEach(page, sink.publish, { discard: true }), poll(page[page.length - 1]!.commitTs))
          ),
          Effect.catchAll((error) => Effect.as(Effect.logWarning("the change log could not be read", error), after))
        )
      yield* Effect.iterate(start, { while: () => true, body: (after) => Effect.zipLeft(poll(after), Effect.sleep(options.interval)) }).pipe(
        Effect.forkScoped
      )
      // The process writes no resource (a replica): its Writer never publishes.
      return Context.make(ChangeFeed, feed).pipe(
        Context.add(ChangeSink, ChangeSink.of({ publish: () => Effect.void })),
        Context.add(PollingStatus, PollingStatus.of({ lastRead: () => lastRead }))
      )
    })
  )
