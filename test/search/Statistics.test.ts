/**
 * The planner statistics refresh themselves: once at start (before the layer is ready), then after enough
 * writes or a large search index backfill, in the background,
 * on every backend. Followed through `refreshes` (no waiting on the clock).
 */
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Clock, Context, Effect, Fiber, Layer, Schedule, Stream, SubscriptionRef, TestClock } from "effect"
import { Database } from "../../src/db/Database.ts"
import { layer as statisticsLayer, Statistics } from "../../src/search/Statistics.ts"
import { Writer } from "../../src/db/Writer.ts"
import { build } from "../../src/catalog/Catalog.ts"
import { createCommand, runCommand } from "../../src/store/commands.ts"
import { Backfill, layer as backfillLayer } from "../../src/search/Backfill.ts"
import { referenceCheck } from "../../src/validation/referencePolicy.ts"
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { backends, pgAvailable } from "../support/backends.ts"
import { withStore } from "../support/store.ts"

/** Waits until `refreshes` has reached `n`. */
const refreshed = (n: number) =>
  Effect.flatMap(Statistics, ({ refreshes }) =>
    refreshes.changes.pipe(Stream.filter((done) => done >= n), Stream.take(1), Stream.runDrain))

/** One commit that records `n` changes (the rows themselves do not matter to the counting). */
const commitChanges = (n: number, from: number) =>
  Effect.flatMap(Writer, (writer) =>
    writer.commit(({ commitTs, record }) =>
      Effect.gen(function*() {
        const sql = (yield* Database).writer
        for (let i = 0; i < n; i++) {
          const id = `s${from + i}`
          yield* sql`INSERT INTO resources (type, id, version, commit_ts) VALUES ('Basic', ${id}, 1, ${commitTs})`
          record({ type: "Basic", id, version: 1, op: "create", resource: null })
        }
      })))

/** Whether the database holds planner statistics for the resources table. */
const hasStatistics = Effect.gen(function*() {
  const db = yield* Database
  if (db.dialect === "pg") {
    const rows = yield* db.writer<{ readonly n: number | string }>`SELECT reltuples AS n FROM pg_class WHERE relname = 'resources'`
    return Number(rows[0]?.n) >= 0
  }
  const rows = yield* db.writer<{ readonly n: number | string }>`SELECT count(*) AS n FROM sqlite_stat1 WHERE tbl = 'resources'`
  return Number(rows[0]?.n) > 0
})

/** On Postgres, how many times some tables were analysed (what pg_stat_user_tables counts). */
const analyses = Effect.gen(function*() {
  const db = yield* Database
  if (db.dialect !== "pg") return {} as Record<string, number>
  const rows = yield* db.writer<{ readonly relname: string; readonly n: number | string }>`
    SELECT relname, analyze_count AS n FROM pg_stat_user_tables
    WHERE relname IN ('resources', 'search_token', 'svc_request_log', 'svc_audit')`
  return Object.fromEntries(rows.map((row) => [row.relname, Number(row.n)])) as Record<string, number>
})

// "#" would start a URL fragment: join the folder name as a path.
const folder = join(fileURLToPath(new URL("../fixtures/packages/mirror/", import.meta.url)), "hl7.fhir.r4.core#4.0.1", "package")
const core = readdirSync(folder).filter((file) => file !== "package.json").map((file) => JSON.parse(readFileSync(join(folder, file), "utf8")))
const surname = {
  resourceType: "SearchParameter", id: "patient-surname", url: "http://example.org/fhir/SearchParameter/patient-surname",
  status: "active", code: "surname", base: ["Patient"], type: "string", expression: "Patient.name.family"
}
/** The fixture catalog, then the same with a new Patient parameter, which a backfill indexes. */
const before = build(core, 1)
const after = build([...core, surname], 2)

const createPatients = (count: number) =>
  Effect.gen(function*() {
    const { writer: sql } = yield* Database
    const writer = yield* Writer
    for (let i = 0; i < count; i++) {
      yield* writer.commit((commit) =>
        runCommand({ sql, catalog: before, updateAsCreate: false, base: "", references: referenceCheck("fhir", "", before), commit }, (env) =>
          createCommand(env, "Patient", { resourceType: "Patient", name: [{ family: `F${i}` }] })))
    }
  })

describe("planner statistics", () => {
  for (const backend of backends) {
    it.scoped.skipIf(backend.skip)(`${backend.kind}: refreshed at start, then after base + 10% of the resources changed`, () =>
      withStore(backend.kind, Effect.gen(function*() {
        yield* commitChanges(5, 0)
        const statistics = yield* Layer.build(statisticsLayer({ base: 10, fraction: 0.1 }))
        yield* Effect.gen(function*() {
          const { refreshes } = yield* Statistics
          yield* refreshed(1)
          expect(yield* hasStatistics).toBe(true)
          const atStart = yield* analyses
          // 5 resources at the first refresh: the next comes after 10 + 0.5 changes, not before.
          yield* commitChanges(10, 100)
          expect(yield* SubscriptionRef.get(refreshes)).toBe(1)
          yield* commitChanges(1, 200)
          yield* refreshed(2)
          // On Postgres, at start every table was analysed; in the background only those searches read.
          if (backend.kind === "postgres") {
            const later = yield* analyses
            expect(atStart.svc_request_log).toBeGreaterThan(0)
            expect(later.resources).toBe(atStart.resources + 1)
            expect(later.search_token).toBe(atStart.search_token + 1)
            expect(later.svc_request_log).toBe(atStart.svc_request_log)
            expect(later.svc_audit).toBe(atStart.svc_audit)
          }
          // The count starts again from the refresh.
          yield* commitChanges(3, 300)
          expect(yield* SubscriptionRef.get(refreshes)).toBe(2)
          // An explicit refresh works too.
          yield* (yield* Statistics).refresh
          expect(yield* SubscriptionRef.get(refreshes)).toBe(3)
        }).pipe(Effect.provide(statistics))
      })), 60_000)
  }

  for (const backend of backends) {
    it.scoped.skipIf(backend.skip)(`${backend.kind}: a database that has statistics already is refreshed in the background at start`, () =>
      withStore(backend.kind, Effect.gen(function*() {
        yield* commitChanges(5, 0)
        // The first start: no statistics yet, so the refresh comes before the layer is ready.
        yield* Effect.scoped(Effect.gen(function*() {
          const first = yield* Layer.build(statisticsLayer({ base: 10, fraction: 0.1 }))
          expect(yield* SubscriptionRef.get(Context.get(first, Statistics).refreshes)).toBe(1)
        }))
        expect(yield* hasStatistics).toBe(true)
        const db = yield* Database
        // On Postgres a lock that ANALYZE waits for, held until the layer is ready: a refresh before readiness would never end.
        const held = db.dialect === "pg" ? yield* db.writer.reserve : undefined
        if (held !== undefined) {
          yield* held.executeUnprepared("BEGIN", [], undefined)
          yield* held.executeUnprepared("LOCK TABLE resources IN SHARE UPDATE EXCLUSIVE MODE", [], undefined)
        }
        const again = yield* Layer.build(statisticsLayer({ base: 10, fraction: 0.1 }))
        yield* Effect.gen(function*() {
          if (held !== undefined) {
            expect(yield* SubscriptionRef.get((yield* Statistics).refreshes)).toBe(0)
            yield* held.executeUnprepared("COMMIT", [], undefined)
          }
          yield* refreshed(1)
        }).pipe(Effect.provide(again))
      })), 60_000)
  }

  // The clock is the TestClock: a refresh takes clock time only where the test moves the clock while it waits on
  // a lock ANALYZE needs (Postgres; the rule is the same code on SQLite).
  it.scoped.skipIf(!pgAvailable)("postgres: a refresh in the background waits nine times the last refresh's duration after its end", () =>
    withStore("postgres", Effect.gen(function*() {
      yield* commitChanges(5, 0)
      const statistics = yield* Layer.build(statisticsLayer({ base: 10, fraction: 0.1 }))
      yield* Effect.gen(function*() {
        const { refresh, refreshes } = yield* Statistics
        yield* refreshed(1)
        const db = yield* Database
        const held = yield* db.writer.reserve
        yield* held.executeUnprepared("BEGIN", [], undefined)
        yield* held.executeUnprepared("LOCK TABLE resources IN SHARE UPDATE EXCLUSIVE MODE", [], undefined)
        const running = yield* Effect.fork(refresh)
        // Until the refresh's ANALYZE waits on the lock (it read the clock as it began), looked at on the
        // connection that holds it (the other of the pool's two is the refresh's).
        yield* held.executeUnprepared("SELECT count(*) AS n FROM pg_locks WHERE NOT granted AND relation = 'resources'::regclass", [], undefined).pipe(
          Effect.repeat({ schedule: Schedule.forever, until: (rows) => Number((rows[0] as { readonly n: unknown } | undefined)?.n) > 0 })
        )
        yield* TestClock.adjust("2 seconds")
        yield* held.executeUnprepared("COMMIT", [], undefined)
        yield* Fiber.join(running)
        expect(yield* SubscriptionRef.get(refreshes)).toBe(2)
        // Enough changes ask for a refresh at once; it waits 18 s (nine times 2 s) after the last one's end, at
        // 20 s on the clock: until the refresh is done or waits for its turn.
        const start = yield* Clock.currentTimeMillis
        yield* commitChanges(12, 100)
        const turn = start + 18_000
        yield* Effect.zip(SubscriptionRef.get(refreshes), TestClock.sleeps()).pipe(
          Effect.repeat({ schedule: Schedule.forever, until: ([done, sleeps]) => done > 2 || Chunk.some(sleeps, (at) => at === turn) })
        )
        expect(yield* SubscriptionRef.get(refreshes)).toBe(2)
        yield* TestClock.adjust("17 seconds")
        expect(yield* SubscriptionRef.get(refreshes)).toBe(2)
        yield* TestClock.adjust("1 second")
        yield* refreshed(3)
      }).pipe(Effect.provide(statistics))
    })), 60_000)

  for (const backend of backends) {
    it.scoped.skipIf(backend.skip)(`${backend.kind}: refreshed after a backfill that indexed at least the base count, which writes no resource`, () =>
      withStore(backend.kind, Effect.gen(function*() {
        yield* createPatients(4)
        const backfill = yield* Layer.build(backfillLayer({ batchSize: 2 }))
        const statistics = yield* Layer.build(statisticsLayer({ base: 3, fraction: 0.1 }).pipe(Layer.provide(Layer.succeedContext(backfill))))
        yield* Effect.gen(function*() {
          const { refreshes } = yield* Statistics
          expect(yield* SubscriptionRef.get(refreshes)).toBe(1)
          yield* (yield* Backfill).request(after)
          yield* (yield* Backfill).idle
          // No resource was written since the refresh at start: only the backfill asks for this one.
          yield* refreshed(2)
        }).pipe(Effect.provide(statistics), Effect.provide(backfill))
      })), 60_000)
  }
})
