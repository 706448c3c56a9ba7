/**
 * The query planner's statistics, kept fresh by the server itself (docs/database.md, "Planner statistics").
 * Both databases plan joins from statistics about the tables; without them a search that follows references
 * (a chain, `_has`) can be planned as nested loops over every row and take minutes instead of milliseconds.
 * Postgres gathers them with autovacuum only where it is on; SQLite only when asked. So the server refreshes
 * them once at start and again in the background whenever the resources written since the last refresh
 * exceed a share of what was there (Postgres's autovacuum rule, in resources rather than rows), and after a
 * search index backfill that indexed as many resources (it rewrites index rows without writing a resource).
 * A refresh in the background waits after the one before for some multiple of that one's time, so that
 * refreshing takes a bounded share of the database's time however fast the database grows: during a bulk load
 * from a small database the share rule alone asked for one every few seconds, each reading its sample of
 * every searched table, and the analyses took two fifths of the database's work (docs/performance.md).
 * The refresh at start finishes before the server serves where the database has no statistics yet: one loaded
 * or restored without them gets them before its first search is planned; a database that has them (a restart)
 * is served at once and refreshed in the background.
 */
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Context, Effect, Layer, Option, Queue, Ref, Stream, SubscriptionRef } from "effect"
import { Database } from "../db/Database.ts"
import { ChangeFeed } from "../db/ChangeFeed.ts"
import { Writer } from "../db/Writer.ts"
import { Backfill } from "./Backfill.ts"
import { indexTables } from "./IndexWriter.ts"

export interface StatisticsOptions {
  /** Changes that always ask for a refresh, however small the database. */
  readonly base: number
  /** The share of the resources at the last refresh that asks for one. */
  readonly fraction: number
  /**
   * A refresh in the background starts no sooner than this many times the last refresh's duration after its
   * end: refreshes take at most 1 / (1 + pause) of the time. A refresh asked for meanwhile comes then.
   */
  readonly pause: number
}

export const defaultStatisticsOptions: StatisticsOptions = { base: 1000, fraction: 0.1, pause: 9 }

export class Statistics extends Context.Tag("svc/search/Statistics")<Statistics, {
  /** Refreshes the statistics now, with the writer held (SQLite writes them into the file). */
  readonly refresh: Effect.Effect<void, SqlError>
  /** Refreshes done since start, as it changes: a test or a status page can follow it. */
  readonly refreshes: SubscriptionRef.SubscriptionRef<number>
}>() {}

/** What the refresh vacuums where autovacuum is off: the tables searches read with index-only scans. */
const vacuumedTables = ["resources", ...indexTables]

/** What a refresh in the background analyses on Postgres: the tables searches read. */
const searchedTables = ["resources", "resource_versions", ...indexTables]

/** Whether this Postgres server runs no autovacuum (`autovacuum = off`); a failed look counts as on. */
const autovacuumOff = (sql: Database["Type"]["writer"]) =>
  sql<{ readonly autovacuum: string }>`SELECT current_setting('autovacuum') AS autovacuum`.pipe(
    Effect.map((rows) => rows[0]?.autovacuum === "off"),
    Effect.orElseSucceed(() => false)
  )

/** SQLite reads at most this many index entries per index: approximate, and quick on a large file. */
const sqliteAnalysisLimit = 1000

export const make = (options: Partial<StatisticsOptions> = {}) =>
  Effect.gen(function*() {
    const { base, fraction, pause } = { ...defaultStatisticsOptions, ...options }
    const db = yield* Database
    const writer = yield* Writer
    const sql = db.writer
    const refreshes = yield* SubscriptionRef.make(0)
    const countResources = Effect.map(sql<{ readonly n: number | string }>`SELECT count(*) AS n FROM resources`, (rows) => Number(rows[0]?.n ?? 0))
    // Where autovacuum is off, nothing else marks the pages of new rows all-visible: an index-only scan then
    // reads each row's table page too, and planning probes past rows it cannot yet tell are visible. The refresh
    // then vacuums the tables searches read that way (the resources and the search index) before it analyses.
    const vacuum = db.dialect === "pg" && (yield* autovacuumOff(sql))
    // Both at autovacuum's pace (a pause of 2 ms after each unit of work, autovacuum's own setting since
    // Postgres 12): longer, but they take less from the requests served meanwhile.
    const analyzeTables = (tables: string) => sql.withTransaction(
      Effect.zipRight(sql`SET LOCAL statement_timeout = 0`, Effect.zipRight(sql`SET LOCAL vacuum_cost_delay = 2`, sql.unsafe(`ANALYZE ${tables}`)))
    ).pipe(Effect.asVoid)
    // VACUUM may not run in a transaction: statements of their own on one connection, the deadline lifted for them.
    const vacuumSearchTables = Effect.scoped(Effect.flatMap(sql.reserve, (connection) => {
      const run = (text: string) => connection.executeUnprepared(text, [], undefined)
      return Effect.ensuring(
        Effect.zipRight(Effect.zipRight(run("SET statement_timeout = 0"), run("SET vacuum_cost_delay = 2")), run(`VACUUM ${vacuumedTables.join(", ")}`)),
        Effect.ignore(Effect.zipRight(run("RESET statement_timeout"), run("RESET vacuum_cost_delay")))
      )
    }))
    // Postgres samples each table, and ANALYZE takes no lock that blocks reads or writes. The statement
    // deadline (database.statement_timeout_ms) is for requests: a large database may take longer. At start every
    // table; later only those searches read (the resources, their versions and the search index): the
    // governance tables grow with every request, and sampling them at each refresh during an ingest cost as
    // much as the rest together (their lookups are by key and time, which row counts scaled by the table's
    // size plan well).
    const analyze = (everything: boolean) => {
      if (db.dialect !== "pg") {
        return writer.exclusive(Effect.zipRight(sql.unsafe(`PRAGMA analysis_limit = ${sqliteAnalysisLimit}`), sql`ANALYZE`).pipe(Effect.asVoid))
      }
      const analyzed = analyzeTables(everything ? "" : searchedTables.join(", "))
      return vacuum ? Effect.zipRight(vacuumSearchTables, analyzed) : analyzed
    }
    // Whether the resources table has been analysed before (on Postgres, statistics of some column; on SQLite,
    // a row of sqlite_stat1, a table that exists once ANALYZE has run: looked for first, since a statement on a
    // missing table fails as it is prepared). A failed look counts as none.
    const hasStatistics = (db.dialect === "pg"
      ? sql<{ readonly n: number | string }>`SELECT count(*) AS n FROM pg_stats WHERE schemaname = current_schema() AND tablename = 'resources'`
      : sql<{ readonly n: number | string }>`SELECT count(*) AS n FROM sqlite_master WHERE name = 'sqlite_stat1'`.pipe(
        Effect.flatMap((rows) => Number(rows[0]?.n) > 0 ? sql<{ readonly n: number | string }>`SELECT count(*) AS n FROM sqlite_stat1 WHERE tbl = 'resources'` : Effect.succeed(rows))
      )
    ).pipe(Effect.map((rows) => Number(rows[0]?.n ?? 0) > 0), Effect.orElseSucceed(() => false))
    const sinceRefresh = yield* Ref.make(0)
    const atRefresh = yield* Ref.make(0)
    // One refresh at a time (two ANALYZEs of one table may collide on Postgres).
    const oneAtATime = yield* Effect.makeSemaphore(1)
    // When the next refresh in the background may start (epoch milliseconds): the last one's end plus `pause`
    // times its duration.
    const notBefore = yield* Ref.make(0)
    const refreshOf = (everything: boolean) => Effect.gen(function*() {
      yield* Ref.set(sinceRefresh, 0)
      const start = yield* Clock.currentTimeMillis
      yield* analyze(everything)
      yield* Ref.set(atRefresh, yield* countResources)
      const end = yield* Clock.currentTimeMillis
      yield* Ref.set(notBefore, end + (end - start) * pause)
      yield* SubscriptionRef.update(refreshes, (n) => n + 1)
    }).pipe(oneAtATime.withPermits(1), Effect.withSpan("Statistics.refresh"))
    const refresh = refreshOf(true)

    // One refresh at a time: a request made while one runs, or while the pause after one lasts, is served by the next.
    const wanted = yield* Queue.sliding<void>(1)
    const waitForTurn = Effect.flatMap(Effect.zip(Ref.get(notBefore), Clock.currentTimeMillis), ([at, now]) =>
      at > now ? Effect.sleep(at - now) : Effect.void)
    yield* Queue.take(wanted).pipe(
      Effect.zipRight(waitForTurn),
      Effect.zipRight(refreshOf(false).pipe(Effect.catchAllCause((cause) => Effect.logWarning("refreshing the planner statistics failed", cause)))),
      Effect.forever,
      Effect.forkScoped
    )
    const next = yield* (yield* ChangeFeed).pull()
    yield* next.pipe(
      Effect.flatMap((events) =>
        Effect.gen(function*() {
          let changed = 0
          for (const event of events) if (event._tag === "Committed") changed += event.changes.length
          if (changed === 0) return
          const since = yield* Ref.updateAndGet(sinceRefresh, (n) => n + changed)
          const size = yield* Ref.get(atRefresh)
          if (since >= base + fraction * size) {
            yield* Ref.set(sinceRefresh, 0)
            yield* Queue.offer(wanted, undefined)
          }
        })),
      Effect.forever,
      Effect.forkScoped
    )
    const backfill = yield* Effect.serviceOption(Backfill)
    if (Option.isSome(backfill)) {
      yield* backfill.value.changes.pipe(
        // The resources a job indexed, when it ends.
        Stream.mapAccum(false, (wasRunning, progress) => [progress.running, wasRunning && !progress.running ? progress.done : 0] as const),
        Stream.filter((indexed) => indexed >= base),
        Stream.runForEach(() => Queue.offer(wanted, undefined)),
        Effect.forkScoped
      )
    }
    // At start: before serving where the database has no statistics yet (new, loaded or restored without them);
    // in the background where it has (a restart: analysing a large database took seconds before readiness).
    const atStart = refresh.pipe(Effect.catchAllCause((cause) => Effect.logWarning("refreshing the planner statistics failed", cause)))
    if (yield* hasStatistics) yield* Effect.forkScoped(atStart)
    else yield* atStart
    return Statistics.of({ refresh, refreshes })
  })

/** Needs the Database and the Writer, and follows the Backfill when there is one; refreshes once at start. */
export const layer = (options: Partial<StatisticsOptions> = {}) => Layer.scoped(Statistics, make(options))
