/** The fleet share: `servers`, or servers counting one another's heartbeats on one database. */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Scope, TestClock } from "effect"
import { Database } from "../../src/db/Database.ts"
import * as Fleet from "../../src/governance/Fleet.ts"
import { backends } from "../support/backends.ts"
import { withStore } from "../support/store.ts"

/**
 * Moves the test clock on by `seconds`, ten at a time, and after each step waits (for the database, not the
 * clock) until `members` have beaten: a heartbeat's next wait starts only once its write is done.
 */
const after = (seconds: number, ...members: ReadonlyArray<Fleet.FleetMember>) =>
  Effect.gen(function*() {
    for (let step = 0; step < seconds / 10; step++) {
      const before = members.map((member) => member.beats())
      yield* TestClock.adjust("10 seconds")
      while (members.some((member, i) => member.beats() <= before[i]!)) {
        yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
      }
    }
  })

for (const backend of backends.filter((b) => b.kind !== "memory")) {
  describe.skipIf(backend.skip)(`the fleet on ${backend.kind}`, () => {
    it.scoped("a configured servers count stands, and writes no heartbeat", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const member = yield* Fleet.make(3)
        expect(member.size()).toBe(3)
        const db = yield* Database
        const rows = yield* db.writer`SELECT COUNT(*) AS n FROM svc_servers`
        expect(Number(rows[0]!["n"])).toBe(0)
      })))

    it.scoped("servers count one another as the fleet grows and shrinks; a server deletes its row when it stops", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const db = yield* Database
        const scopeA = yield* Scope.make()
        const a = yield* Fleet.make(undefined, "server-a").pipe(Scope.extend(scopeA))
        expect(a.size()).toBe(1)

        // B joins: it sees both at once; A sees B at its next heartbeat.
        const scopeB = yield* Scope.make()
        const b = yield* Fleet.make(undefined, "server-b").pipe(Scope.extend(scopeB))
        expect(b.size()).toBe(2)
        expect(a.size()).toBe(1)
        yield* after(10, a)
        expect(a.size()).toBe(2)
        expect(b.size()).toBe(2)
        yield* after(20, a, b)
        expect([a.size(), b.size()]).toEqual([2, 2])

        // B stops: its row goes, and A is alone at its next heartbeat.
        yield* Scope.close(scopeB, Exit.void)
        const ids = yield* db.writer`SELECT server_id FROM svc_servers`
        expect(ids.map((row) => row["server_id"])).toEqual(["server-a"])
        yield* after(10, a)
        expect(a.size()).toBe(1)
        yield* Scope.close(scopeA, Exit.void)
        const left = yield* db.writer`SELECT COUNT(*) AS n FROM svc_servers`
        expect(Number(left[0]!["n"])).toBe(0)
      })))

    it.scoped("a server that stops beating without leaving stops counting after thirty seconds", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const db = yield* Database
        const a = yield* Fleet.make(undefined, "server-a")
        // A row as a killed server leaves it: seen now, never again.
        const now = yield* TestClock.currentTimeMillis
        yield* db.writer`INSERT INTO svc_servers (server_id, seen_at) VALUES (${"killed"}, ${now})`
        yield* after(10, a)
        expect(a.size()).toBe(2)
        yield* after(20, a)
        expect(a.size()).toBe(2)
        yield* after(10, a)
        expect(a.size()).toBe(1)
      })))
  })
}
