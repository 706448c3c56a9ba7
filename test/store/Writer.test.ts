import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, PubSub, Queue, TestClock } from "effect"
import { Database } from "../../src/db/Database.ts"
import { putVersion } from "../../src/store/ResourceStore.ts"
import { currentOfTypes, readCurrent } from "../../src/store/reads.ts"
import { nextCommitTs, Writer } from "../../src/store/Writer.ts"
import { backends } from "../support/backends.ts"
import { withStore } from "../support/store.ts"


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
    it.scoped("publishes what a commit changed, and tells the timestamp of the last commit it published", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const writer = yield* Writer
        const { writer: sql } = yield* Database
        const subscription = yield* PubSub.subscribe(writer.committed)
        expect(yield* writer.lastPublishedTs).toBe(0)
        const written = yield* writer.commit(({ commitTs: ts, record }) =>
          Effect.tap(putVersion(sql, { type: "Basic", id: "c", resource: { resourceType: "Basic" }, commitTs: ts }), (stored) =>
            record({ type: "Basic", id: "c", version: stored.version, op: "create" })))
        const quiet = yield* writer.commit(() => Effect.void)
        expect(yield* Queue.takeAll(subscription)).toEqual(Chunk.of({ commitTs: written.commitTs, changes: [{ type: "Basic", id: "c", version: 1, op: "create" }] }))
        expect(yield* writer.lastPublishedTs).toBe(written.commitTs)
        expect(yield* writer.lastCommitTs).toBe(quiet.commitTs)
      })))
  })
}
