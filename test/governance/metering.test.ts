/**
 * Metering (src/governance/Metering.ts) on each database: counting per caller, UTC day and class on the
 * TestClock, the flush that adds (across flushes and across servers on one database), the flush at the
 * scope's end, a failed flush that keeps its counts, the bound on callers held, and the totals for quotas.
 */
import { SqlError } from "@effect/sql/SqlError"
import { describe, expect, it } from "@effect/vitest"
import { type Duration, Effect, Exit, Scope, TestClock } from "effect"
import { Database } from "../../src/db/Database.ts"
import { Writer } from "../../src/db/Writer.ts"
import { make, parseUsageQuery, type UsageQuery } from "../../src/governance/Metering.ts"
import type { Completion } from "../../src/http/FrontDoor.ts"
import { anonymous, type Principal } from "../../src/http/Principal.ts"
import { classify } from "../../src/http/Route.ts"
import { backends } from "../support/backends.ts"
import { withStore } from "../support/store.ts"

const token = (clientId: string, user?: string): Principal => ({ _tag: "Authorized", address: "127.0.0.1", clientId, user, scopes: [], patient: undefined })

const requests = {
  read: ["GET", "/fhir/Patient/1"],
  search: ["GET", "/fhir/Patient?name=a"],
  write: ["POST", "/fhir/Patient"],
  bundle: ["POST", "/fhir"]
} as const

const completion = (principal: Principal, kind: keyof typeof requests, extra: Partial<Completion> = {}): Completion => ({
  principal,
  route: classify(requests[kind][0], requests[kind][1]),
  url: requests[kind][1],
  requestId: "r",
  client: principal.address,
  method: requests[kind][0],
  path: requests[kind][1],
  status: 200,
  bytesIn: 10,
  bytesOut: 100,
  durationMs: 1,
  aborted: false,
  ...extra
})

const start = Date.parse("2026-11-26T23:59:58Z")

const all: UsageQuery = { limit: 1000, offset: 0 }

/** The stored rows without the flush `usage` makes first. */
const stored = Effect.flatMap(Database, (db) =>
  db.withReader((sql) => sql<{ day: string; client: string; class: string; requests: number | string; refused: number | string; bytes_in: number | string; bytes_out: number | string }>`
    SELECT day, client, class, requests, refused, bytes_in, bytes_out FROM svc_usage ORDER BY day, client, class`)).pipe(
    Effect.map((rows) => rows.map((r) => `${r.day} ${r.client} ${r.class} ${Number(r.requests)} ${Number(r.refused)} ${Number(r.bytes_in)} ${Number(r.bytes_out)}`)),
    Effect.orDie
  )

/**
 * The stored rows once there are `n`: a flush the clock starts commits on its own fiber, and on Postgres its
 * write takes a round trip after the clock has moved, so the test waits for the database (never for time).
 */
const storedAtLeast = (n: number) =>
  Effect.gen(function*() {
    for (let turn = 0; turn < 10_000; turn++) {
      const rows = yield* stored
      if (rows.length >= n) return rows
      yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
    }
    return yield* stored
  })

const metering = (options: { readonly maxEntries?: number; readonly flushEvery?: Duration.DurationInput } = {}) =>
  make({ enabled: true, smart: false, ...options })

for (const backend of backends) {
  describe.skipIf(backend.skip)(`metering on ${backend.kind}`, () => {
    it.scoped("counts per caller, UTC day and class, with bytes, and refusals apart; the day turns at UTC midnight", () =>
      withStore(backend.kind, Effect.gen(function*() {
        yield* TestClock.setTime(start)
        const m = yield* metering()
        m.listener(completion(token("app", "u1"), "read"))
        m.listener(completion(token("app", "u1"), "read", { bytesIn: undefined, bytesOut: null }))
        m.listener(completion(token("app"), "search"))
        m.listener(completion(anonymous("10.0.0.9"), "write", { bytesIn: 500, bytesOut: 50 }))
        m.listener(completion(anonymous("10.0.0.9"), "write", { status: 429 }))
        yield* TestClock.adjust("3 seconds")
        m.listener(completion(token("app", "u1"), "read"))
        m.listener(completion(token("app", "u1"), "bundle"))
        yield* m.flush
        expect(yield* stored).toEqual([
          "2026-11-26 address:10.0.0.9 write 1 1 500 50",
          "2026-11-26 client:app search 1 0 10 100",
          "2026-11-26 client:app/user:u1 read 2 0 10 100",
          "2026-11-27 client:app/user:u1 bundle 1 0 10 100",
          "2026-11-27 client:app/user:u1 read 1 0 10 100"
        ])
        expect(m.held()).toBe(0)
      })))

    it.scoped("adds each flush to the stored rows, and two servers on one database add to the same rows", () =>
      withStore(backend.kind, Effect.gen(function*() {
        yield* TestClock.setTime(start)
        const one = yield* metering()
        const two = yield* metering()
        one.listener(completion(token("app"), "read"))
        yield* one.flush
        one.listener(completion(token("app"), "read"))
        two.listener(completion(token("app"), "read"))
        two.listener(completion(token("app"), "read", { status: 429 }))
        yield* one.flush
        yield* two.flush
        // Nothing held: a flush with no counts writes nothing.
        yield* two.flush
        expect(yield* stored).toEqual(["2026-11-26 client:app read 3 1 30 300"])
      })))

    it.scoped("flushes on its own every five seconds of the clock, and once more when its scope closes", () =>
      withStore(backend.kind, Effect.gen(function*() {
        yield* TestClock.setTime(Date.parse("2026-11-26T12:00:00Z"))
        const scope = yield* Scope.make()
        const m = yield* metering().pipe(Scope.extend(scope))
        m.listener(completion(token("app"), "read"))
        yield* TestClock.adjust("4 seconds")
        expect(yield* stored).toEqual([])
        yield* TestClock.adjust("1 second")
        expect(yield* storedAtLeast(1)).toEqual(["2026-11-26 client:app read 1 0 10 100"])
        m.listener(completion(token("app"), "search"))
        yield* Scope.close(scope, Exit.void)
        expect(yield* stored).toEqual(["2026-11-26 client:app read 1 0 10 100", "2026-11-26 client:app search 1 0 10 100"])
      })))

    it.scoped("keeps the counts of a flush that fails and stores them with the next one", () =>
      withStore(backend.kind, Effect.gen(function*() {
        yield* TestClock.setTime(start)
        const writer = yield* Writer
        let down = true
        const flaky: Writer["Type"] = {
          ...writer,
          commit: (command) => down ? Effect.fail(new SqlError({ cause: new Error("database down"), message: "database down" })) : writer.commit(command)
        }
        const m = yield* metering().pipe(Effect.provideService(Writer, flaky))
        m.listener(completion(token("app"), "read"))
        m.listener(completion(token("app"), "write"))
        const failed = yield* Effect.exit(m.flush)
        expect(Exit.isFailure(failed)).toBe(true)
        expect(m.held()).toBe(2)
        // The clock's flush fails too, and is tried again.
        yield* TestClock.adjust("10 seconds")
        m.listener(completion(token("app"), "read"))
        expect(m.held()).toBe(3)
        down = false
        yield* m.flush
        const rows = yield* stored
        expect(rows).toEqual([
          "2026-11-26 client:app read 1 0 10 100",
          "2026-11-26 client:app write 1 0 10 100",
          "2026-11-27 client:app read 1 0 10 100"
        ])
      })))

    it.scoped("holds a bounded number of callers; counts past the bound go to `other`, none lost", () =>
      withStore(backend.kind, Effect.gen(function*() {
        yield* TestClock.setTime(Date.parse("2026-11-26T12:00:00Z"))
        const m = yield* metering({ maxEntries: 3 })
        for (const address of ["a", "b", "c", "d", "e"]) m.listener(completion(anonymous(address), "read"))
        m.listener(completion(anonymous("a"), "read"))
        expect(m.held()).toBe(4)
        yield* m.flush
        expect(yield* stored).toEqual([
          "2026-11-26 address:a read 2 0 20 200",
          "2026-11-26 address:b read 1 0 10 100",
          "2026-11-26 address:c read 1 0 10 100",
          "2026-11-26 other read 2 0 20 200"
        ])
      })))

    it.scoped("gives a client's totals for the UTC day and month, all its users, stored and not yet flushed", () =>
      withStore(backend.kind, Effect.gen(function*() {
        yield* TestClock.setTime(Date.parse("2026-10-31T23:00:00Z"))
        // The clock jumps weeks here: the flushes are this test's own.
        const m = yield* metering({ flushEvery: "1000 days" })
        m.listener(completion(token("app", "u1"), "read"))
        yield* TestClock.setTime(Date.parse("2026-11-25T10:00:00Z"))
        m.listener(completion(token("app", "u1"), "write"))
        m.listener(completion(token("other-app"), "write"))
        yield* m.flush
        yield* TestClock.setTime(Date.parse("2026-11-26T10:00:00Z"))
        m.listener(completion(token("app"), "bundle"))
        m.listener(completion(token("app", "u2"), "search", { bytesIn: 0, bytesOut: 1000 }))
        m.listener(completion(token("app", "u2"), "search", { status: 429 }))
        yield* m.flush
        m.listener(completion(token("app", "u1"), "read"))
        const totals = yield* m.totals("app")
        expect(totals.day).toEqual({ requests: 3, writes: 1, bytes: 110 + 1000 + 110 })
        expect(totals.month).toEqual({ requests: 4, writes: 2, bytes: 110 * 3 + 1000 })
        expect((yield* m.totals("client:app/user:u2")).day).toEqual({ requests: 1, writes: 0, bytes: 1000 })
        expect((yield* m.totals("other-app")).month).toEqual({ requests: 1, writes: 1, bytes: 110 })
        // A new month starts from nothing.
        yield* TestClock.setTime(Date.parse("2026-12-01T00:00:01Z"))
        expect(yield* m.totals("app")).toEqual({ day: { requests: 0, writes: 0, bytes: 0 }, month: { requests: 0, writes: 0, bytes: 0 } })
      })))

    it.scoped("off, adds no listener and starts no flushes", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const m = yield* make({ enabled: false, smart: false })
        expect(m.rules.listeners).toEqual([])
        expect(Object.keys(m.rules.routes)).toEqual(["/_usage"])
        yield* TestClock.adjust("1 minute")
        expect(yield* stored).toEqual([])
      })))

    it.scoped("answers the rows a query selects, newest day first, after storing its own counts", () =>
      withStore(backend.kind, Effect.gen(function*() {
        yield* TestClock.setTime(start)
        const m = yield* metering()
        m.listener(completion(token("app", "u1"), "read"))
        m.listener(completion(token("application"), "read"))
        m.listener(completion(anonymous("10.0.0.1"), "search"))
        yield* TestClock.adjust("3 seconds")
        m.listener(completion(token("app"), "write"))
        const keys = (rows: ReadonlyArray<{ day: string; client: string; class: string }>) => rows.map((r) => `${r.day} ${r.client} ${r.class}`)
        expect(keys(yield* m.usage(all))).toEqual([
          "2026-11-27 client:app write",
          "2026-11-26 address:10.0.0.1 search",
          "2026-11-26 client:app/user:u1 read",
          "2026-11-26 client:application read"
        ])
        expect(keys(yield* m.usage({ ...all, client: "app" }))).toEqual(["2026-11-27 client:app write", "2026-11-26 client:app/user:u1 read"])
        expect(keys(yield* m.usage({ ...all, client: "client:app/user:u1" }))).toEqual(["2026-11-26 client:app/user:u1 read"])
        expect(keys(yield* m.usage({ ...all, client: "address:10.0.0.1" }))).toEqual(["2026-11-26 address:10.0.0.1 search"])
        expect(keys(yield* m.usage({ ...all, from: "2026-11-27" }))).toEqual(["2026-11-27 client:app write"])
        expect(keys(yield* m.usage({ ...all, to: "2026-11-26", classes: ["read", "write"] }))).toEqual([
          "2026-11-26 client:app/user:u1 read",
          "2026-11-26 client:application read"
        ])
        expect(keys(yield* m.usage({ ...all, limit: 2, offset: 1 }))).toEqual(["2026-11-26 address:10.0.0.1 search", "2026-11-26 client:app/user:u1 read"])
      })))
  })
}

describe("the /_usage query", () => {
  it("reads client, from, to, class (repeated or a comma list), limit and offset", () => {
    expect(parseUsageQuery("/_usage")).toEqual({ client: undefined, from: undefined, to: undefined, classes: undefined, limit: 1000, offset: 0 })
    expect(parseUsageQuery("/_usage?client=app&from=2026-11-01&to=2026-11-30&class=read,search&class=write&limit=5&offset=10")).toEqual({
      client: "app",
      from: "2026-11-01",
      to: "2026-11-30",
      classes: ["read", "search", "write"],
      limit: 5,
      offset: 10
    })
  })

  it("names what it cannot read", () => {
    const cases: ReadonlyArray<readonly [string, string]> = [
      ["from=2026-02-30", "from"],
      ["from=2026-13-01", "from"],
      ["to=26-11-01", "to"],
      ["from=2026-11-02&to=2026-11-01", "from (2026-11-02) is after to (2026-11-01)"],
      ["class=reads", "class must be one of"],
      ["day=2026-11-01", "unknown parameter day"],
      ["limit=0", "limit"],
      ["limit=10001", "limit may be at most 10000"],
      ["offset=-1", "offset"],
      ["client=", "client"],
      ["client=a&client=b", "client may be given once"]
    ]
    for (const [query, message] of cases) {
      const parsed = parseUsageQuery(`/_usage?${query}`)
      expect(typeof parsed, query).toBe("string")
      expect(parsed as string, query).toContain(message)
    }
  })
})
