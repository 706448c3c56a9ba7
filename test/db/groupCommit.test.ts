/**
 * Group commit on Postgres (src/db/Writer.ts, `groupLimit`; docs/database.md, "Group commit"): commits queued
 * together share one transaction, each in a savepoint of its own, with one lease check and one COMMIT.
 */
import { describe, expect, it } from "@effect/vitest"
import { Cause, Deferred, Effect, Exit, Fiber, Layer, Ref, type Scope } from "effect"
import { SqlError } from "@effect/sql/SqlError"
import { Database, layer as databaseLayer } from "../../src/db/Database.ts"
import { migrate } from "../../src/db/Migrations.ts"
import type { ChangeFeed } from "../../src/db/ChangeFeed.ts"
import { type CommitChanges, type CommitContext, CommitHook, layer as writerLayer, pipelineFromRows, Writer } from "../../src/db/Writer.ts"
import { WriterLease } from "../../src/db/WriterLease.ts"
import * as PostgresLease from "../../src/db/PostgresLease.ts"
import { putVersion } from "../../src/store/versions.ts"
import { readCurrent } from "../../src/store/reads.ts"
import { backends, freshDatabase } from "../support/backends.ts"
import { following, idsOf } from "../support/feed.ts"

const postgres = backends.find((b) => b.kind === "postgres")!

/** A migrated Postgres database, its writer lease held, and a Writer on it whose CommitHook notes each call. */
const withGroupingWriter = <A, E>(
  body: (hookCalls: Ref.Ref<ReadonlyArray<ReadonlyArray<CommitChanges>>>) => Effect.Effect<A, E, Writer | ChangeFeed | Database | Scope.Scope>,
  /** Run by the CommitHook too, after the call is noted: it may hold a group before its COMMIT. */
  inHook: (commits: ReadonlyArray<CommitChanges>) => Effect.Effect<void> = () => Effect.void
): Effect.Effect<A, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    const options = yield* freshDatabase("postgres")
    const database = yield* Layer.build(databaseLayer(options))
    yield* migrate({ fhirVersion: "r4" }).pipe(Effect.provide(database))
    const held = yield* PostgresLease.acquire({ url: options.postgresUrl!, times: PostgresLease.leaseTimes(30), holder: "test-holder", wait: false })
    const hookCalls = yield* Ref.make<ReadonlyArray<ReadonlyArray<CommitChanges>>>([])
    const hook = Layer.succeed(CommitHook, (_sql, commits) => Effect.zipRight(Ref.update(hookCalls, (calls) => [...calls, commits]), inHook(commits)))
    const writer = yield* Layer.build(writerLayer.pipe(
      Layer.provide(Layer.mergeAll(Layer.succeedContext(database), Layer.succeed(WriterLease, held.writerLease), hook))
    ))
    return yield* body(hookCalls).pipe(Effect.provide(database), Effect.provide(writer))
  })

/** A command writing Basic/`id` with its version row in the group's batch, noting the change and the transaction it ran in. */
const put = (id: string, then: (context: CommitContext) => Effect.Effect<void, unknown, Database> = () => Effect.void) => (context: CommitContext) =>
  Effect.gen(function*() {
    const { writer: sql } = yield* Database
    const stored = yield* putVersion(sql, { type: "Basic", id, resource: { resourceType: "Basic" }, commitTs: context.commitTs }, context.writes)
    context.record({ type: "Basic", id, version: stored.version, op: "create", resource: stored.content })
    yield* then(context)
    const rows = yield* sql<{ readonly txid: string }>`SELECT txid_current()::text AS txid`
    return rows[0]!.txid
  })

/**
 * Holds the Writer with a first commit until `release`, queues `commands` behind it (in this order), then lets it go:
 * the queued ones are taken together.
 */
const queuedBehindOne = <A, E>(commands: ReadonlyArray<Effect.Effect<A, E, Writer | Database>>) =>
  Effect.gen(function*() {
    const writer = yield* Writer
    const started = yield* Deferred.make<void>()
    const release = yield* Deferred.make<void>()
    const first = yield* Effect.fork(writer.commit((context) =>
      Effect.zipRight(Effect.zipRight(Deferred.succeed(started, undefined), Deferred.await(release)), put("first")(context))))
    yield* Deferred.await(started)
    const fibers: Array<Fiber.RuntimeFiber<A, E>> = []
    for (const command of commands) fibers.push(yield* Effect.fork(command))
    yield* Effect.yieldNow()
    return { first, fibers, release: Deferred.succeed(release, undefined) }
  })

/** A create of Basic/`id` under an id the server chose: its rows all in the batch, no statement sent. */
const putFresh = (id: string) => (context: CommitContext) =>
  Effect.gen(function*() {
    const { writer: sql } = yield* Database
    const stored = yield* putVersion(sql, { type: "Basic", id, resource: { resourceType: "Basic" }, commitTs: context.commitTs, fresh: true }, context.writes)
    context.record({ type: "Basic", id, version: stored.version, op: "create", resource: stored.content })
  })

describe.skipIf(postgres.skip)("group commit on postgres", () => {
  it.scoped("a group's commands run while a large group before is written; a statement waits for its COMMIT and sees it", () =>
    Effect.gen(function*() {
      const hookEntered = yield* Deferred.make<void>()
      const gate = yield* Deferred.make<void>()
      // The group of `a` is held in its CommitHook, after its rows were inserted and before its COMMIT.
      const holdA = (commits: ReadonlyArray<CommitChanges>) =>
        commits.some((commit) => commit.changes.some((change) => change.id === "a"))
          ? Effect.zipRight(Deferred.succeed(hookEntered, undefined), Deferred.await(gate))
          : Effect.void
      yield* withGroupingWriter(() =>
        Effect.gen(function*() {
          const writer = yield* Writer
          const { writer: sql } = yield* Database
          const { take } = yield* following()
          // Enough rows (two each) for the group of `a` to let the next one run while it is written.
          const many = Array.from({ length: pipelineFromRows / 2 }, (_, n) => `a-${n}`)
          const a = yield* Effect.fork(writer.commit((context) => Effect.forEach(["a", ...many], (id) => putFresh(id)(context), { discard: true })))
          yield* Deferred.await(hookEntered)
          // Queued together while `a`'s group is held: `b` sends no statement, `c` reads.
          const bRan = yield* Deferred.make<void>()
          const b = yield* Effect.fork(writer.commit((context) => Effect.zipRight(putFresh("b")(context), Deferred.succeed(bRan, undefined))))
          const c = yield* Effect.fork(writer.commit((context) =>
            Effect.gen(function*() {
              yield* putFresh("c")(context)
              const rows = yield* sql<{ readonly n: string }>`SELECT count(*)::text AS n FROM resources WHERE type = 'Basic' AND id = 'a'`
              return Number(rows[0]!.n)
            })))
          // `b`'s command has run though `a` has not committed; `c` waits at its statement.
          yield* Deferred.await(bRan)
          for (let i = 0; i < 20; i++) yield* Effect.yieldNow()
          expect(c.unsafePoll()).toBeNull()
          yield* Deferred.succeed(gate, undefined)
          const [ra, rb, rc] = [yield* Fiber.join(a), yield* Fiber.join(b), yield* Fiber.join(c)]
          // `c` saw `a` committed; the commits and their events keep the order of their timestamps.
          expect(rc.value).toBe(1)
          expect(ra.commitTs).toBeLessThan(rb.commitTs)
          expect(rb.commitTs).toBeLessThan(rc.commitTs)
          expect(idsOf(yield* take(3))).toEqual(["a", ...many, "b", "c"])
          for (const id of ["a", "b", "c"]) expect((yield* readCurrent(sql, "Basic", id))?.version).toBe(1)
        }), holdA)
    }))


  it.scoped("commits queued together share one transaction; each keeps its commit timestamp, its event and its row of the change log", () =>
    withGroupingWriter((hookCalls) =>
      Effect.gen(function*() {
        const writer = yield* Writer
        const { writer: sql } = yield* Database
        const { take } = yield* following()
        const ids = ["a", "b", "c", "d", "e"]
        const { first, fibers, release } = yield* queuedBehindOne(ids.map((id) => writer.commit(put(id))))
        yield* release
        const alone = yield* Fiber.join(first)
        const results = yield* Effect.forEach(fibers, Fiber.join)
        // One transaction for the five, not the first's.
        expect(new Set(results.map((r) => r.value)).size).toBe(1)
        expect(results[0]!.value).not.toBe(alone.value)
        const stamps = results.map((r) => r.commitTs)
        expect(stamps).toEqual([...stamps].sort((x, y) => x - y))
        expect(new Set([alone.commitTs, ...stamps]).size).toBe(6)
        expect(stamps[0]!).toBeGreaterThan(alone.commitTs)
        // One event per commit, in commit order, each at its own timestamp.
        const events = yield* take(6)
        expect(idsOf(events)).toEqual(["first", ...ids])
        expect(events.map((e) => e._tag === "Committed" ? e.commitTs : 0)).toEqual([alone.commitTs, ...stamps])
        const logged = yield* sql<{ readonly commit_ts: string }>`SELECT commit_ts::text FROM svc_commits ORDER BY commit_ts`
        expect(logged.map((row) => Number(row.commit_ts))).toEqual([alone.commitTs, ...stamps])
        // Versions inserted from the group's batch.
        for (const id of ids) expect((yield* readCurrent(sql, "Basic", id))?.version).toBe(1)
        // The hook: once for the first, once for the group's five.
        const calls = yield* Ref.get(hookCalls)
        expect(calls.map((call) => call.map((commit) => commit.changes[0]!.id))).toEqual([["first"], ids])
        expect(yield* writer.commits).toBe(6)
      })))

  it.scoped("a command that fails in a group rolls back alone, its rows taken out of the batch, those before it kept even when it flushed them", () =>
    withGroupingWriter(() =>
      Effect.gen(function*() {
        const writer = yield* Writer
        const { writer: sql } = yield* Database
        const { take } = yield* following()
        const failing = writer.commit(put("refused", (context) =>
          // Inserts the batch (its own row and the one before it) and then fails.
          Effect.zipRight(context.writes!.flush(sql), Effect.fail("refused by its command"))))
        const broken = writer.commit(put("broken", () => Effect.asVoid(sql`SELECT * FROM no_such_table`)))
        const { first, fibers, release } = yield* queuedBehindOne([
          writer.commit(put("kept-1")), failing, writer.commit(put("kept-2")), broken, writer.commit(put("kept-3"))
        ])
        yield* release
        yield* Fiber.join(first)
        const exits = yield* Effect.forEach(fibers, Fiber.await)
        expect(exits.map(Exit.isSuccess)).toEqual([true, false, true, false, true])
        expect(exits[1]).toEqual(Exit.fail("refused by its command"))
        const sqlFailure = Exit.isFailure(exits[3]!) ? Cause.squash(exits[3].cause) : undefined
        expect(sqlFailure).toBeInstanceOf(SqlError)
        expect(String((sqlFailure as SqlError).cause)).toContain("no_such_table")
        expect(idsOf(yield* take(4))).toEqual(["first", "kept-1", "kept-2", "kept-3"])
        for (const id of ["kept-1", "kept-2", "kept-3"]) expect((yield* readCurrent(sql, "Basic", id))?.version).toBe(1)
        for (const id of ["refused", "broken"]) expect(yield* readCurrent(sql, "Basic", id)).toBeUndefined()
        const versions = yield* sql<{ readonly n: string }>`SELECT count(*)::text AS n FROM resource_versions`
        expect(versions[0]!.n).toBe("4")
      })))

  it.scoped("a caller that gives up while its command runs in a group has it rolled back; the others commit", () =>
    withGroupingWriter(() =>
      Effect.gen(function*() {
        const writer = yield* Writer
        const { writer: sql } = yield* Database
        const { take } = yield* following()
        const running = yield* Deferred.make<void>()
        const slow = writer.commit(put("abandoned", () => Effect.zipRight(Deferred.succeed(running, undefined), Effect.never)))
        const { first, fibers, release } = yield* queuedBehindOne([writer.commit(put("before")), slow, writer.commit(put("after"))])
        yield* release
        yield* Fiber.join(first)
        yield* Deferred.await(running)
        expect(Exit.isInterrupted(yield* Fiber.interrupt(fibers[1]!))).toBe(true)
        const before = yield* Fiber.join(fibers[0]!)
        const after = yield* Fiber.join(fibers[2]!)
        expect(before.value).toBe(after.value)
        expect(idsOf(yield* take(3))).toEqual(["first", "before", "after"])
        expect(yield* readCurrent(sql, "Basic", "abandoned")).toBeUndefined()
      })))

  it.scoped("a group whose lease was taken before COMMIT commits nothing, and each caller is told", () =>
    withGroupingWriter(() =>
      Effect.gen(function*() {
        const writer = yield* Writer
        const db = yield* Database
        const { feed } = yield* following()
        // Another process takes the lease while the group's second command runs (its own session, not the transaction's).
        const takeOver = writer.commit(put("taken", () => Effect.promise(() => db.pgPool!.query("UPDATE svc_writer_lease SET epoch = epoch + 1 WHERE id = 1"))))
        const { first, fibers, release } = yield* queuedBehindOne([writer.commit(put("x")), takeOver, writer.commit(put("y"))])
        yield* release
        const alone = yield* Fiber.join(first)
        const exits = yield* Effect.forEach(fibers, Fiber.await)
        for (const exit of exits) expect(Exit.isFailure(exit) && String(exit.cause)).toContain("LeaseLost")
        expect(yield* feed.published).toBe(alone.commitTs)
        for (const id of ["x", "taken", "y"]) expect(yield* readCurrent(db.writer, "Basic", id)).toBeUndefined()
      })))

  it.scoped("a group whose connection is lost answers every caller with a failure and commits nothing", () =>
    withGroupingWriter(() =>
      Effect.gen(function*() {
        const writer = yield* Writer
        const db = yield* Database
        // The second command's session is ended from outside while the group's transaction is open.
        const cut = writer.commit(put("cut", () =>
          Effect.gen(function*() {
            const [row] = yield* db.writer<{ readonly pid: number }>`SELECT pg_backend_pid() AS pid`
            yield* Effect.promise(() => db.pgPool!.query("SELECT pg_terminate_backend($1)", [row!.pid]))
          })))
        const { first, fibers, release } = yield* queuedBehindOne([writer.commit(put("p")), cut, writer.commit(put("q"))])
        yield* release
        yield* Fiber.join(first)
        const exits = yield* Effect.forEach(fibers, Fiber.await)
        expect(exits.map(Exit.isFailure)).toEqual([true, true, true])
        for (const id of ["p", "cut", "q"]) expect(yield* readCurrent(db.writer, "Basic", id)).toBeUndefined()
        // The Writer goes on with a new connection.
        const next = yield* writer.commit(put("after"))
        expect(next.commitTs).toBeGreaterThan(0)
        expect((yield* readCurrent(db.writer, "Basic", "after"))?.version).toBe(1)
      })))

  it.scoped("creates of new ids have their own rows batched too, under row keys taken ahead; one that fails leaves none", () =>
    withGroupingWriter(() =>
      Effect.gen(function*() {
        const writer = yield* Writer
        const { writer: sql } = yield* Database
        const { take } = yield* following()
        const create = (id: string, fails = false) => writer.commit((context: CommitContext) =>
          Effect.gen(function*() {
            const stored = yield* putVersion(sql, { type: "Basic", id, resource: { resourceType: "Basic" }, commitTs: context.commitTs, fresh: true }, context.writes)
            context.record({ type: "Basic", id, version: stored.version, op: "create", resource: stored.content })
            if (fails) return yield* Effect.fail("refused")
            return stored.rkey
          }))
        const { first, fibers, release } = yield* queuedBehindOne([create("n1"), create("n2", true), create("n3")])
        yield* release
        yield* Fiber.join(first)
        const exits = yield* Effect.forEach(fibers, Fiber.await)
        expect(exits.map(Exit.isSuccess)).toEqual([true, false, true])
        expect(idsOf(yield* take(3))).toEqual(["first", "n1", "n3"])
        const rows = yield* sql<{ readonly id: string; readonly rkey: string }>`SELECT id, rkey::text AS rkey FROM resources WHERE id IN ('n1', 'n2', 'n3') ORDER BY id`
        expect(rows.map((row) => row.id)).toEqual(["n1", "n3"])
        const keys = exits.flatMap((exit) => Exit.isSuccess(exit) ? [String(exit.value.value)] : [])
        expect(rows.map((row) => row.rkey)).toEqual(keys)
        for (const id of ["n1", "n3"]) expect((yield* readCurrent(sql, "Basic", id))?.version).toBe(1)
        // The row keys taken ahead come from the column's own sequence: a row inserted without one follows them.
        const later = yield* writer.commit(put("later"))
        expect(later.commitTs).toBeGreaterThan(0)
        const [max] = yield* sql<{ readonly rkey: string }>`SELECT max(rkey)::text AS rkey FROM resources`
        const [own] = yield* sql<{ readonly rkey: string }>`SELECT rkey::text AS rkey FROM resources WHERE id = 'later'`
        expect(own!.rkey).toBe(max!.rkey)
      })))
})
