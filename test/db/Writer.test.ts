import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Layer, Ref, TestClock } from "effect"
import { Database } from "../../src/db/Database.ts"
import { putVersion } from "../../src/store/versions.ts"
import { currentOfTypes, readCurrent } from "../../src/store/reads.ts"
import { type CommitContext, layer as writerLayer, nextCommitTs, Writer } from "../../src/db/Writer.ts"
import { LeaseLost, WriterLease } from "../../src/db/WriterLease.ts"
import { backends } from "../support/backends.ts"
import { following, idsOf } from "../support/feed.ts"
import { withStore } from "../support/store.ts"
import type * as SqlClient from "@effect/sql/SqlClient"


describe("commit timestamps", () => {
  it("follow the clock, and step past the last one when the clock has not moved on", () => {
    expect(nextCommitTs(5_000, 10)).toBe(5_000)
    expect(nextCommitTs(5_000, 5_000)).toBe(5_001)
    expect(nextCommitTs(4_000, 5_000)).toBe(5_001)
  })
})

for (const backend of backends) {
  describe.skipIf(backend.skip)(`resource versions on ${backend.kind}`, () => {
    it.scoped("writes versions with server meta and strictly increasing commit timestamps", () =>
      withStore(backend.kind, Effect.gen(function*() {
        yield* TestClock.setTime(1_700_000_000_000)
        const writer = yield* Writer
        const { writer: sql } = yield* Database
        const first = yield* writer.commit(({ commitTs: ts }) => putVersion(sql, { type: "Basic", id: "a", resource: { resourceType: "Basic", id: "ignored", code: { text: "x" } }, commitTs: ts }))
        const second = yield* writer.commit(({ commitTs: ts }) => putVersion(sql, { type: "Basic", id: "a", resource: { resourceType: "Basic", code: { text: "y" } }, commitTs: ts }))
        expect(first.commitTs).toBe(1_700_000_000_000_000)
        expect(second.commitTs).toBe(first.commitTs + 1)
        expect(second.value.version).toBe(2)
        const current = yield* readCurrent(sql, "Basic", "a")
        expect(JSON.parse(current!.content!)).toEqual({
          resourceType: "Basic",
          id: "a",
          code: { text: "y" },
          meta: { versionId: "2", lastUpdated: "2023-11-14T22:13:20.000Z" }
        })
        const all = yield* currentOfTypes(sql, ["Basic", "Patient"])
        expect(all.map((row) => row.type)).toEqual(["Basic"])
        expect(yield* writer.commits).toBe(2)
      })))

    it.scoped("rolls a failed command back whole", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const writer = yield* Writer
        const { writer: sql } = yield* Database
        const failed = yield* writer.commit(({ commitTs: ts }) =>
          putVersion(sql, { type: "Basic", id: "b", resource: { resourceType: "Basic" }, commitTs: ts }).pipe(
            Effect.zipRight(Effect.fail("stop" as const))
          )
        ).pipe(Effect.flip)
        expect(failed).toBe("stop")
        expect(yield* readCurrent(sql, "Basic", "b")).toBeUndefined()
      })))
    it.scoped("publishes what a commit changed on the change feed, and tells the timestamp of the last commit published", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const writer = yield* Writer
        const { writer: sql } = yield* Database
        const { take, feed } = yield* following()
        expect(yield* feed.published).toBe(0)
        const written = yield* writer.commit(({ commitTs: ts, record }) =>
          Effect.tap(putVersion(sql, { type: "Basic", id: "c", resource: { resourceType: "Basic" }, commitTs: ts }), (stored) =>
            record({ type: "Basic", id: "c", version: stored.version, op: "create", resource: stored.content })))
        const quiet = yield* writer.commit(() => Effect.void)
        const content = (yield* readCurrent(sql, "Basic", "c"))!.content
        expect(yield* take(1)).toEqual([{
          _tag: "Committed",
          commitTs: written.commitTs,
          actor: "system",
          requestId: null,
          changes: [{ type: "Basic", id: "c", version: 1, op: "create", resource: content }]
        }])
        expect(yield* feed.published).toBe(written.commitTs)
        expect(yield* writer.lastCommitTs).toBe(quiet.commitTs)
      })))

    it.scoped("commits nothing once the writer lease is lost: not the command in flight, not any later one", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const { writer: sql } = yield* Database
        const held = yield* Ref.make(true)
        const checks = yield* Ref.make(0)
        // A fake lease, lost when the test says so; the Writer checks it on its connection, in the transaction.
        const lease = Layer.succeed(WriterLease, WriterLease.of({
          check: (connection: SqlClient.SqlClient) =>
            Effect.gen(function*() {
              yield* Ref.update(checks, (n) => n + 1)
              yield* connection`SELECT 1`
              if (!(yield* Ref.get(held))) return yield* Effect.fail(new LeaseLost({ reason: "taken by another process" }))
            })
        }))
        const context = yield* Layer.build(writerLayer.pipe(Layer.provide(Layer.merge(Layer.succeed(Database, yield* Database), lease))))
        const writer = Layer.succeedContext(context)
        const fenced = yield* Effect.gen(function*() {
          const w = yield* Writer
          const { take, feed } = yield* following()
          const put = (id: string) => ({ commitTs: ts, record }: CommitContext) =>
            Effect.tap(putVersion(sql, { type: "Basic", id, resource: { resourceType: "Basic" }, commitTs: ts }), (stored) =>
              record({ type: "Basic", id, version: 1, op: "create", resource: stored.content }))
          const before = yield* w.commit(put("before"))
          // The lease is lost while a command runs: it wrote its row, and yet nothing of it is committed.
          const inFlight = yield* w.commit((context) => Effect.zipRight(put("during")(context), Ref.set(held, false))).pipe(Effect.flip)
          const later = yield* w.commit(put("after")).pipe(Effect.flip)
          // Nothing was published after the first commit.
          expect(yield* feed.published).toBe(before.commitTs)
          return { inFlight, later, published: idsOf(yield* take(1)) }
        }).pipe(Effect.provide(writer))
        expect(fenced.inFlight).toEqual(new LeaseLost({ reason: "taken by another process" }))
        expect(fenced.later._tag).toBe("LeaseLost")
        expect(fenced.published).toEqual(["before"])
        expect(yield* readCurrent(sql, "Basic", "before")).toBeDefined()
        expect(yield* readCurrent(sql, "Basic", "during")).toBeUndefined()
        expect(yield* readCurrent(sql, "Basic", "after")).toBeUndefined()
        // Checked before each command and again before COMMIT: 2 for the first, 2 for the one in flight, 1 for the later one.
        expect(yield* Ref.get(checks)).toBe(5)
      })))

    it.scoped("a command interrupted before COMMIT rolls back and publishes nothing", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const writer = yield* Writer
        const { writer: sql } = yield* Database
        const { take, feed } = yield* following()
        const started = yield* Deferred.make<void>()
        const fiber = yield* Effect.fork(writer.commit(({ commitTs: ts, record }) =>
          putVersion(sql, { type: "Basic", id: "gone", resource: { resourceType: "Basic" }, commitTs: ts }).pipe(
            Effect.tap((stored) => record({ type: "Basic", id: "gone", version: 1, op: "create", resource: stored.content })),
            Effect.zipRight(Deferred.succeed(started, undefined)),
            Effect.zipRight(Effect.never)
          )))
        yield* Deferred.await(started)
        const exit = yield* Fiber.interrupt(fiber)
        expect(Exit.isInterrupted(exit)).toBe(true)
        expect(yield* readCurrent(sql, "Basic", "gone")).toBeUndefined()
        expect(yield* feed.published).toBe(0)
        // The Writer goes on, and the next event is the next commit's.
        const next = yield* writer.commit(({ commitTs: ts, record }) =>
          Effect.tap(putVersion(sql, { type: "Basic", id: "next", resource: { resourceType: "Basic" }, commitTs: ts }), (stored) =>
            record({ type: "Basic", id: "next", version: 1, op: "create", resource: stored.content })))
        expect(next.value.version).toBe(1)
        expect(idsOf(yield* take(1))).toEqual(["next"])
      })))

    it.scoped("runs queued commands one at a time; a caller that gives up while its command waits leaves nothing", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const writer = yield* Writer
        const { writer: sql } = yield* Database
        const { take } = yield* following()
        const put = (id: string) => ({ commitTs: ts, record }: CommitContext) =>
          Effect.tap(putVersion(sql, { type: "Basic", id, resource: { resourceType: "Basic" }, commitTs: ts }), (stored) =>
            record({ type: "Basic", id, version: 1, op: "create", resource: stored.content }))
        const started = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        const running = yield* Effect.fork(writer.commit((context) =>
          Deferred.succeed(started, undefined).pipe(Effect.zipRight(Deferred.await(release)), Effect.zipRight(put("first")(context)))))
        yield* Deferred.await(started)
        // Queued behind the first, then abandoned by its caller.
        const waiting = yield* Effect.fork(writer.commit(put("abandoned")))
        const queued = yield* Effect.fork(writer.commit(put("third")))
        yield* Effect.yieldNow()
        expect(Exit.isInterrupted(yield* Fiber.interrupt(waiting))).toBe(true)
        yield* Deferred.succeed(release, undefined)
        const first = yield* Fiber.join(running)
        const third = yield* Fiber.join(queued)
        expect(third.commitTs).toBeGreaterThan(first.commitTs)
        expect(idsOf(yield* take(2))).toEqual(["first", "third"])
        expect(yield* readCurrent(sql, "Basic", "abandoned")).toBeUndefined()
        expect(yield* writer.commits).toBe(2)
      })))
  })
}
