import { describe, expect, it } from "@effect/vitest"
import { Chunk, type Duration, Effect, Ref, Stream, SubscriptionRef, TestClock } from "effect"
import { SqlError } from "@effect/sql/SqlError"
import { Writer } from "../../src/db/Writer.ts"
import { isRefused, make, type RequestLogOptions, type RequestLogStore } from "../../src/governance/RequestLogStore.ts"
import type { Completion } from "../../src/http/FrontDoor.ts"
import { anonymous, type Principal } from "../../src/http/Principal.ts"
import { classify } from "../../src/http/Route.ts"
import { backends } from "../support/backends.ts"
import { withStore } from "../support/store.ts"

const start = 1_700_000_000_000

const app = (user?: string): Principal => ({ _tag: "Authorized", address: "10.0.0.9", clientId: "app", user, scopes: [], patient: undefined })

let counter = 0

const completion = (overrides: Partial<Completion> & { readonly url?: string } = {}): Completion => {
  const method = overrides.method ?? "GET"
  const url = overrides.url ?? "/fhir/Patient/p1"
  return {
    principal: anonymous("10.0.0.1"),
    route: classify(method, url),
    requestId: `req-${++counter}`,
    client: "10.0.0.1",
    method,
    path: url.split("?")[0]!,
    url,
    status: 200,
    bytesIn: undefined,
    bytesOut: 120,
    durationMs: 1.5,
    aborted: false,
    ...overrides
  }
}

const options: RequestLogOptions = { retentionHours: 24, refusedPerSecond: 20, smart: false }

/**
 * Waits until both fibers of the store sleep on the test clock until a time still to come: every round an
 * adjustment woke has finished, and the next adjustment wakes them again.
 */
const settled = Effect.gen(function*() {
  while (true) {
    const now = yield* TestClock.currentTimeMillis
    const sleeps = Chunk.toReadonlyArray(yield* TestClock.sleeps())
    if (sleeps.length >= 2 && sleeps.every((deadline) => deadline > now)) return
    yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
  }
})

/** Moves the clock on by `by` and waits for the rounds of the store's fibers it wakes. */
const advance = (by: Duration.DurationInput) =>
  Effect.gen(function*() {
    yield* settled
    yield* TestClock.adjust(by)
    yield* settled
  })

const reached = (ref: SubscriptionRef.SubscriptionRef<number>, n: number) =>
  ref.changes.pipe(Stream.filter((value) => value >= n), Stream.runHead)

const all = (store: RequestLogStore) => Effect.map(store.query({ count: 1000 }), (page) => page.rows)

describe("which completions are refusals", () => {
  it("are 429 and 401 always; under --smart, any failure of a caller without a token", () => {
    expect(isRefused(429, app(), false)).toBe(true)
    expect(isRefused(401, anonymous("a"), false)).toBe(true)
    expect(isRefused(404, anonymous("a"), false)).toBe(false)
    expect(isRefused(500, anonymous("a"), false)).toBe(false)
    expect(isRefused(404, anonymous("a"), true)).toBe(true)
    expect(isRefused(403, { _tag: "Unresolved", address: "a", token: "t" }, true)).toBe(true)
    expect(isRefused(404, app(), true)).toBe(false)
    expect(isRefused(403, app(), true)).toBe(false)
    expect(isRefused(200, anonymous("a"), true)).toBe(false)
  })
})

for (const backend of backends) {
  describe.skipIf(backend.skip)(`the stored request log on ${backend.kind}`, () => {
    it.scoped("writes the buffer every second of the clock, one row per completion with its fields", () =>
      withStore(backend.kind, Effect.gen(function*() {
        yield* TestClock.setTime(start)
        const store = yield* make(options)
        store.listener(completion({ principal: app("Practitioner/7"), client: "10.0.0.9", status: 201, method: "POST", url: "/fhir/Patient", bytesIn: 300, bytesOut: 410 }))
        store.listener(completion({ aborted: true, status: 499, bytesOut: 0 }))
        expect(store.buffered()).toBe(2)
        expect(yield* all(store)).toEqual([])
        yield* advance("1 second")
        expect(store.buffered()).toBe(0)
        const rows = yield* all(store)
        expect(rows.map((row) => row.status)).toEqual([499, 201])
        const [aborted, created] = rows
        expect(created).toMatchObject({
          time: start,
          method: "POST",
          path: "/fhir/Patient",
          status: 201,
          durationMs: 1.5,
          client: "10.0.0.9",
          caller: "client:app/user:Practitioner/7",
          interaction: "create",
          resourceType: "Patient",
          cost: "write",
          bytesIn: 300,
          bytesOut: 410,
          aborted: false
        })
        expect(aborted).toMatchObject({ caller: "address:10.0.0.1", interaction: "read", cost: "read", bytesIn: null, bytesOut: 0, aborted: true })
      })))

    it.scoped("writes a full batch without waiting for the clock, and the rest on shutdown", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(start)
        yield* withStore(backend.kind, Effect.gen(function*() {
          const inner = yield* Effect.scoped(Effect.gen(function*() {
            const store = yield* make({ ...options, batchRows: 3 })
            for (let i = 0; i < 3; i++) store.listener(completion())
            yield* reached(store.flushRounds, 1)
            expect(yield* all(store)).toHaveLength(3)
            store.listener(completion())
            store.listener(completion())
            return store
          }))
          // The scope closed: its last flush wrote the two that waited.
          expect(inner.buffered()).toBe(0)
          expect(yield* all(inner)).toHaveLength(5)
        }))
      }))

    it.scoped("pages newest first by (time, id) and filters", () =>
      withStore(backend.kind, Effect.gen(function*() {
        yield* TestClock.setTime(start)
        const store = yield* make(options)
        store.listener(completion({ requestId: "a", status: 200 }))
        store.listener(completion({ requestId: "b", status: 404, url: "/fhir/Observation/o" }))
        yield* TestClock.setTime(start + 1000)
        store.listener(completion({ requestId: "c", status: 201, method: "POST", url: "/fhir/Patient", principal: app(), client: "10.0.0.9" }))
        store.listener(completion({ requestId: "d", status: 429, principal: app(), client: "10.0.0.9" }))
        yield* TestClock.setTime(start + 2000)
        store.listener(completion({ requestId: "e", status: 500, url: "/_usage" }))
        yield* store.flush
        const first = yield* store.query({ count: 2 })
        expect(first.rows.map((row) => row.requestId)).toEqual(["e", "d"])
        expect(first.more).toBe(true)
        const last = first.rows[1]!
        const second = yield* store.query({ count: 2, after: { time: last.time, id: last.id } })
        expect(second.rows.map((row) => row.requestId)).toEqual(["c", "b"])
        const third = yield* store.query({ count: 2, after: { time: second.rows[1]!.time, id: second.rows[1]!.id } })
        expect(third.rows.map((row) => row.requestId)).toEqual(["a"])
        expect(third.more).toBe(false)

        const ids = (filter: Parameters<RequestLogStore["query"]>[0]) =>
          Effect.map(store.query(filter), (page) => page.rows.map((row) => row.requestId))
        expect(yield* ids({ count: 10, client: "10.0.0.9" })).toEqual(["d", "c"])
        expect(yield* ids({ count: 10, caller: "client:app" })).toEqual(["d", "c"])
        expect(yield* ids({ count: 10, status: { low: 400, high: 499 } })).toEqual(["d", "b"])
        expect(yield* ids({ count: 10, method: "POST" })).toEqual(["c"])
        expect(yield* ids({ count: 10, pathPrefix: "/fhir/Pat" })).toEqual(["d", "c", "a"])
        expect(yield* ids({ count: 10, requestId: "b" })).toEqual(["b"])
        expect(yield* ids({ count: 10, since: start + 1000 })).toEqual(["e", "d", "c"])
        expect(yield* ids({ count: 10, since: start + 1000, until: start + 2000 })).toEqual(["d", "c"])
      })))

    it.scoped("deletes rows older than the retention on its round, and keeps the newer", () =>
      withStore(backend.kind, Effect.gen(function*() {
        yield* TestClock.setTime(start)
        // Rounds an hour apart: the test clock wakes a fiber at each of its rounds within an adjustment.
        const store = yield* make({ ...options, retentionHours: 24, pruneRows: 2, flushEvery: "1 hour", pruneEvery: "1 hour" })
        for (let i = 0; i < 5; i++) store.listener(completion({ requestId: `old-${i}` }))
        yield* advance("5 hours")
        store.listener(completion({ requestId: "new" }))
        yield* store.flush
        expect(yield* all(store)).toHaveLength(6)
        // Now 28 hours after the first five: they go, in batches of two; the last is 23 hours old and stays.
        yield* advance("23 hours")
        expect((yield* all(store)).map((row) => row.requestId)).toEqual(["new"])
        expect(yield* store.prune).toBe(0)
      })))

    it.scoped("stores at most refused_per_second refusals a second and counts the rest", () =>
      withStore(backend.kind, Effect.gen(function*() {
        yield* TestClock.setTime(start)
        const store = yield* make({ ...options, refusedPerSecond: 2 })
        for (let i = 0; i < 5; i++) store.listener(completion({ status: 429 }))
        store.listener(completion({ status: 401 }))
        store.listener(completion({ status: 404 }))
        store.listener(completion({ status: 200 }))
        expect(store.notStored()).toEqual({ refused: 4, dropped: 0 })
        yield* advance("1 second")
        for (let i = 0; i < 3; i++) store.listener(completion({ status: 429 }))
        yield* store.flush
        expect(store.notStored()).toEqual({ refused: 5, dropped: 0 })
        expect((yield* all(store)).map((row) => row.status).sort()).toEqual([200, 404, 429, 429, 429, 429])
      })))

    it.scoped("keeps every refusal with refused_per_second = 0", () =>
      withStore(backend.kind, Effect.gen(function*() {
        yield* TestClock.setTime(start)
        const store = yield* make({ ...options, refusedPerSecond: 0, smart: true })
        for (let i = 0; i < 30; i++) store.listener(completion({ status: i % 2 === 0 ? 429 : 401 }))
        yield* store.flush
        expect(store.notStored()).toEqual({ refused: 0, dropped: 0 })
        expect(yield* all(store)).toHaveLength(30)
      })))

    it.scoped("keeps the rows of a failed write, drops and counts those past the bound, and writes them later", () =>
      withStore(backend.kind, Effect.gen(function*() {
        yield* TestClock.setTime(start)
        const failing = yield* Ref.make(true)
        const real = yield* Writer
        const flaky: Writer["Type"] = {
          ...real,
          commit: (command) =>
            Effect.flatMap(Ref.get(failing), (fail) =>
              fail ? Effect.fail(new SqlError({ message: "the database is away" })) : real.commit(command))
        }
        const store = yield* make({ ...options, bufferRows: 5, batchRows: 10 }).pipe(Effect.provideService(Writer, flaky))
        for (let i = 0; i < 4; i++) store.listener(completion({ requestId: `r${i}` }))
        yield* store.flush
        expect(store.buffered()).toBe(4)
        for (let i = 4; i < 7; i++) store.listener(completion({ requestId: `r${i}` }))
        expect(store.buffered()).toBe(5)
        expect(store.notStored()).toEqual({ refused: 0, dropped: 2 })
        yield* advance("1 second")
        expect(store.buffered()).toBe(5)
        yield* Ref.set(failing, false)
        yield* advance("1 second")
        expect(store.buffered()).toBe(0)
        expect((yield* all(store)).map((row) => row.requestId)).toEqual(["r4", "r3", "r2", "r1", "r0"])
        expect(store.notStored()).toEqual({ refused: 0, dropped: 2 })
      })))
  })
}
