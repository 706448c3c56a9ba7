/**
 * Deadlines and cancels on Postgres (docs/database.md, "Deadlines"), over HTTP: a statement that runs past
 * `database.statement_timeout_ms` answers 503 `too-costly`; a client that goes away has its statement
 * cancelled even when every pool connection is busy; a request that finds no free pool connection in time
 * answers 503 `transient` with Retry-After. A statement is held up the way a slow one would be: the test
 * holds a lock on the resources table in a transaction of its own, so nothing depends on how fast a query is.
 */
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Schedule } from "effect"
import pg from "pg"
import { poolWait } from "../../src/db/postgresOpen.ts"
import { freshDatabase, pgAvailable } from "../support/backends.ts"
import { call, startServerOn } from "../support/server.ts"

/** A session of the test's own on the database, closed with the scope. */
const session = (url: string) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const client = new pg.Client({ connectionString: url, application_name: "svc-test" })
      await client.connect()
      return client
    }),
    (client) => Effect.promise(() => client.end())
  )

/** Holds every statement that reads `resources` until the scope closes (the transaction rolls back). */
const holdResources = (url: string) =>
  Effect.gen(function*() {
    const client = yield* session(url)
    yield* Effect.promise(() => client.query("BEGIN").then(() => client.query("LOCK TABLE resources IN ACCESS EXCLUSIVE MODE")))
    yield* Effect.addFinalizer(() => Effect.promise(() => client.query("ROLLBACK")))
  })

/** The server's statements waiting on that lock now. */
const waiting = (observer: pg.Client) =>
  Effect.promise(() =>
    observer.query<{ pid: number }>(
      "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'svc' AND state = 'active' AND wait_event_type = 'Lock'"
    ).then((result) => result.rows.length)
  )

/** Polls until `count` of the server's statements are waiting on the lock (no sleeping: a retry on a schedule). */
const untilWaiting = (observer: pg.Client, count: number) =>
  waiting(observer).pipe(
    Effect.filterOrFail((n) => n === count, (n) => `${n} statements wait, not ${count}`),
    Effect.retry(Schedule.spaced("20 millis").pipe(Schedule.upTo("20 seconds")))
  )

const patient = { resourceType: "Patient", name: [{ family: "Deadline" }] }

describe.skipIf(!pgAvailable)("deadlines and cancels on Postgres", () => {
  it.live("a statement held past database.statement_timeout_ms answers 503 too-costly, and the server answers again after", () =>
    Effect.gen(function*() {
      const database = yield* freshDatabase("postgres")
      const server = yield* startServerOn(database, { database: { statement_timeout_ms: 300 } })
      expect((yield* call("POST", `${server.base}/Patient`, { body: patient })).status).toBe(201)
      const reply = yield* Effect.scoped(Effect.zipRight(holdResources(database.postgresUrl!), call("GET", `${server.base}/Patient?family=Deadline`)))
      expect(reply.status).toBe(503)
      expect(reply.json).toMatchObject({ resourceType: "OperationOutcome", issue: [{ severity: "error", code: "too-costly" }] })
      expect(reply.json.issue[0].diagnostics).toContain("database.statement_timeout_ms")
      const after = yield* call("GET", `${server.base}/Patient?family=Deadline`)
      expect([after.status, after.json.total ?? after.json.entry?.length]).toEqual([200, 1])
    }).pipe(Effect.scoped), 120_000)

  it.live("a client that goes away has its statement cancelled, though it held the only pool connection", () =>
    Effect.gen(function*() {
      const database = yield* freshDatabase("postgres")
      const server = yield* startServerOn(database, { cluster: { db_pool: 1 } })
      const observer = yield* session(database.postgresUrl!)
      yield* Effect.scoped(Effect.gen(function*() {
        yield* holdResources(database.postgresUrl!)
        const abort = new AbortController()
        const request = fetch(`${server.base}/Patient?family=Gone`, { signal: abort.signal }).catch(() => "aborted")
        yield* untilWaiting(observer, 1)
        abort.abort()
        expect(yield* Effect.promise(() => request)).toBe("aborted")
        // Still inside the lock: without a cancel the statement would wait for it until the deadline.
        yield* untilWaiting(observer, 0)
      }))
      // The one pool connection was closed after the cancel; the next request gets a fresh one, uncancelled.
      const after = yield* call("GET", `${server.base}/Patient?family=Gone`)
      expect(after.status).toBe(200)
    }).pipe(Effect.scoped), 120_000)

  it.live("a request that finds no free pool connection in time answers 503 transient with Retry-After", () =>
    Effect.gen(function*() {
      const database = yield* freshDatabase("postgres")
      const server = yield* startServerOn(database, { cluster: { db_pool: 1 } })
      const observer = yield* session(database.postgresUrl!)
      yield* holdResources(database.postgresUrl!)
      const abort = new AbortController()
      const first = fetch(`${server.base}/Patient?family=First`, { signal: abort.signal }).catch(() => "aborted")
      yield* untilWaiting(observer, 1)
      // A read by id goes the fast way first: it waits the pool's wait once, and the general path answers at
      // once rather than wait as long again (two waits take twice poolWait at the least).
      const sent = performance.now()
      const second = yield* call("GET", `${server.base}/Patient/some-id`)
      expect(performance.now() - sent).toBeLessThan(1.8 * Duration.toMillis(poolWait))
      expect(second.status).toBe(503)
      expect(second.headers.get("retry-after")).toBe("1")
      expect(second.json).toMatchObject({ resourceType: "OperationOutcome", issue: [{ severity: "error", code: "transient" }] })
      abort.abort()
      yield* Effect.promise(() => first)
    }).pipe(Effect.scoped), 120_000)
})
