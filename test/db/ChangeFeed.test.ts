import { describe, expect, it } from "@effect/vitest"
import { Chunk, Deferred, Effect, Exit, Fiber, Layer, Option, Ref, Stream } from "effect"
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { Database } from "../../src/db/Database.ts"
import { ChangeFeed, type Committed, type FeedEvent } from "../../src/db/ChangeFeed.ts"
import { putVersion } from "../../src/store/versions.ts"
import { type CommitContext, layer as writerLayer, withOrigin, Writer } from "../../src/db/Writer.ts"
import { WriterLease } from "../../src/db/WriterLease.ts"
import { backends, freshDatabase } from "../support/backends.ts"
import { following, idsOf } from "../support/feed.ts"
import { withStore } from "../support/store.ts"
import { layer as databaseLayer } from "../../src/db/Database.ts"
import { migrate } from "../../src/db/Migrations.ts"

/** A command that creates `Basic/<id>` for each id and records each change. */
const creates = (ids: ReadonlyArray<string>) => ({ commitTs, record }: CommitContext) =>
  Effect.gen(function*() {
    const { writer: sql } = yield* Database
    for (const id of ids) {
      const stored = yield* putVersion(sql, { type: "Basic", id, resource: { resourceType: "Basic", id }, commitTs })
      record({ type: "Basic", id, version: stored.version, op: stored.version === 1 ? "create" : "update", resource: stored.content })
    }
  })

const commitsOf = (events: ReadonlyArray<FeedEvent>): Array<Committed> =>
  events.filter((event): event is Committed => event._tag === "Committed")

for (const backend of backends) {
  describe.skipIf(backend.skip)(`the change feed on ${backend.kind}`, () => {
    it.scoped("gives a follower every commit of concurrent writers once, in commit order, as the log holds them", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const writer = yield* Writer
        const { take, feed } = yield* following()
        // 8 callers writing at once, 5 commits each, some of two resources (one of them written twice).
        const written = yield* Effect.forEach(
          Array.from({ length: 8 }, (_, caller) => caller),
          (caller) =>
            Effect.forEach([0, 1, 2, 3, 4], (n) =>
              writer.commit(creates(n % 2 === 0 ? [`c${caller}-${n}`] : [`c${caller}-${n}`, `c${caller}-0`])).pipe(
                withOrigin({ actor: `caller-${caller}`, requestId: `r${caller}-${n}` }),
                Effect.map((result) => ({ commitTs: result.commitTs, caller, n }))
              )),
          { concurrency: "unbounded" }
        ).pipe(Effect.map((all) => all.flat()))
        const events = commitsOf(yield* take(40))
        const stamps = events.map((event) => event.commitTs)
        expect(stamps).toEqual([...stamps].sort((a, b) => a - b))
        expect(new Set(stamps).size).toBe(40)
        expect(stamps).toEqual(written.map((w) => w.commitTs).sort((a, b) => a - b))
        for (const w of written) {
          const event = events.find((e) => e.commitTs === w.commitTs)!
          expect(event.actor).toBe(`caller-${w.caller}`)
          expect(event.requestId).toBe(`r${w.caller}-${w.n}`)
          expect(event.changes.map((change) => change.id)).toEqual(w.n % 2 === 0 ? [`c${w.caller}-${w.n}`] : [`c${w.caller}-${w.n}`, `c${w.caller}-0`])
        }
        expect(yield* feed.published).toBe(stamps[stamps.length - 1])
        // The durable log holds the same commits with the same changes (in the order of the resources' keys).
        const logged = Chunk.toArray(yield* Stream.runCollect(feed.stream(0)))
        expect(logged.map((event) => event.commitTs)).toEqual(stamps)
        const sorted = (event: Committed) => [...event.changes].sort((a, b) => a.id.localeCompare(b.id))
        expect(logged.map(sorted)).toEqual(events.map(sorted))
        expect(logged.map((event) => [event.actor, event.requestId])).toEqual(events.map((event) => [event.actor, event.requestId]))
      })))

    it.scoped("publishes a create whose caller goes away while it commits: what is committed is published", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const { writer: sql } = yield* Database
        // The caller is interrupted at the last moment before COMMIT (the lease's second check, which runs right
        // before it), as a request is when its client disconnects.
        const caller = yield* Deferred.make<Fiber.RuntimeFiber<unknown, unknown>>()
        const checks = yield* Ref.make(0)
        const lease = Layer.succeed(WriterLease, WriterLease.of({
          check: () =>
            Effect.gen(function*() {
              if ((yield* Ref.updateAndGet(checks, (n) => n + 1)) !== 2) return
              const fiber = yield* Deferred.await(caller)
              yield* Effect.forkDaemon(Fiber.interrupt(fiber))
              yield* Effect.yieldNow()
            })
        }))
        const context = yield* Layer.build(writerLayer.pipe(Layer.provide(Layer.merge(Layer.succeed(Database, yield* Database), lease))))
        const exit = yield* Effect.gen(function*() {
          const writer = yield* Writer
          const own = yield* following()
          const fiber = yield* Effect.fork(writer.commit(creates(["left"])))
          yield* Deferred.succeed(caller, fiber)
          const exit = yield* Fiber.await(fiber)
          expect(idsOf(yield* own.take(1))).toEqual(["left"])
          return exit
        }).pipe(Effect.provide(context))
        expect(Exit.isInterrupted(exit)).toBe(true)
        const rows = yield* sql<{ readonly n: number | string }>`SELECT count(*) AS n FROM resources WHERE id = 'left'`
        expect(Number(rows[0]!.n)).toBe(1)
      })))

    it.scoped("tells a slow follower it fell behind, and it catches up from the log with nothing missing", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const writer = yield* Writer
        const slow = yield* following({ capacity: 3 })
        const ids = Array.from({ length: 12 }, (_, n) => `s${n}`)
        const stamps: Array<number> = []
        for (const id of ids) stamps.push((yield* writer.commit(creates([id]))).commitTs)
        // Three from its queue, then the notice, then the nine it missed, from the log.
        const events = yield* slow.take(13)
        expect(events.slice(0, 3).map((event) => event._tag)).toEqual(["Committed", "Committed", "Committed"])
        expect(events[3]).toEqual({ _tag: "FellBehind", afterTs: stamps[2] })
        expect(idsOf(events)).toEqual(ids)
        expect(commitsOf(events).map((event) => event.commitTs)).toEqual(stamps)
        expect(commitsOf(events).every((event) => event.changes[0]!.resource !== null)).toBe(true)
        // Then it follows the live commits again.
        yield* writer.commit(creates(["live"]))
        expect(idsOf(yield* slow.take(1))).toEqual(["live"])
      })))

    it.scoped("starts a follower from a past commit, reading the log first", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const writer = yield* Writer
        const first = yield* writer.commit(creates(["a"]))
        yield* writer.commit(creates(["b", "c"]))
        yield* writer.commit(creates(["d"]))
        const late = yield* following({ after: first.commitTs })
        expect(idsOf(yield* late.take(2))).toEqual(["b", "c", "d"])
        yield* writer.commit(creates(["e"]))
        expect(idsOf(yield* late.take(1))).toEqual(["e"])
      })))

    it.scoped("settled waits until a commit is published", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const writer = yield* Writer
        const feed = yield* ChangeFeed
        const published = yield* writer.commit(creates(["x"]))
        yield* feed.settled(published.commitTs)
        const waiting = yield* Effect.fork(feed.settled(published.commitTs + 1))
        yield* Effect.yieldNow()
        expect(Option.isNone(yield* Fiber.poll(waiting))).toBe(true)
        const next = yield* writer.commit(creates(["y"]))
        expect(next.commitTs).toBeGreaterThan(published.commitTs)
        yield* Fiber.join(waiting)
      })))
  })
}

const follower = fileURLToPath(new URL("../support/followFeed.ts", import.meta.url))

/** The child process's JSON lines, as they come; `next(test)` waits for the first line after the last one read that passes. */
const childLines = (options: unknown) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const child = spawn(process.execPath, ["--import", "tsx", follower, JSON.stringify(options)], { stdio: ["ignore", "pipe", "pipe"] })
      const lines: Array<Record<string, unknown>> = []
      let buffered = ""
      let stderr = ""
      let wake: (() => void) | undefined
      child.stdout.on("data", (chunk) => {
        buffered += chunk
        const parts = buffered.split("\n")
        buffered = parts.pop()!
        for (const part of parts) if (part.startsWith("{")) lines.push(JSON.parse(part))
        wake?.()
      })
      child.stderr.on("data", (chunk) => (stderr += chunk))
      child.on("close", () => wake?.())
      let read = 0
      const next = Effect.async<Record<string, unknown>, Error>((resume) => {
        const check = () => {
          if (read < lines.length) {
            wake = undefined
            resume(Effect.succeed(lines[read++]!))
          } else if (child.exitCode !== null || child.signalCode !== null) {
            resume(Effect.fail(new Error(`the follower exited: ${stderr}`)))
          } else wake = check
        }
        check()
      })
      return { child, next }
    }),
    ({ child }) => Effect.sync(() => child.kill())
  )

for (const backend of backends.filter((b) => b.kind !== "memory")) {
  describe.skipIf(backend.skip)(`the polling change feed on ${backend.kind}`, () => {
    it.scoped("in a second process, follows the commits of the process that writes", () =>
      Effect.gen(function*() {
        const options = yield* freshDatabase(backend.kind)
        const database = yield* Layer.build(databaseLayer(options))
        yield* migrate({ fhirVersion: "r4" }).pipe(Effect.provide(database))
        const store = yield* Layer.build(writerLayer.pipe(Layer.provide(Layer.succeedContext(database))))
        const writer = (yield* Effect.provide(Writer, store))
        const before = yield* writer.commit(creates(["before"])).pipe(Effect.provide(database))
        const { next } = yield* childLines(options)
        // It starts at the last commit in the log when it starts: earlier commits are not replayed.
        expect(yield* next).toEqual({ ready: before.commitTs })
        const stamps: Array<number> = []
        for (const ids of [["p1"], ["p2", "p3"], ["p4"]]) {
          stamps.push((yield* writer.commit(creates(ids)).pipe(withOrigin({ actor: "address:127.0.0.1", requestId: null }), Effect.provide(database))).commitTs)
        }
        const seen = [yield* next, yield* next, yield* next]
        expect(seen).toEqual([
          { commitTs: stamps[0], actor: "address:127.0.0.1", ids: ["p1"] },
          { commitTs: stamps[1], actor: "address:127.0.0.1", ids: ["p2", "p3"] },
          { commitTs: stamps[2], actor: "address:127.0.0.1", ids: ["p4"] }
        ])
      }), { timeout: 60_000 })
  })
}
