import { describe, expect, it } from "@effect/vitest"
import { Effect, Stream } from "effect"
import { ChangeFeed, type Committed } from "../../src/db/ChangeFeed.ts"
import { pgAvailable } from "../support/backends.ts"
import { call, startServer } from "../support/server.ts"
import { following } from "../support/feed.ts"

for (const kind of ["sqlite", "postgres"] as const) {
  describe.skipIf(kind === "postgres" && !pgAvailable)(`what REST writes on ${kind} reaches the change feed`, () => {
    it.scoped("once per commit, made for the caller and the request, with the versions as stored", () =>
      Effect.gen(function*() {
        const server = yield* startServer(kind)
        const { take } = yield* following().pipe(Effect.provideService(ChangeFeed, server.changeFeed))
        const created = yield* call("POST", `${server.base}/Patient`, {
          body: { resourceType: "Patient", name: [{ family: "Feed" }] },
          headers: { "x-request-id": "feed-create-1" }
        })
        expect(created.status).toBe(201)
        const [first] = (yield* take(1)) as Array<Committed>
        expect(first).toMatchObject({ _tag: "Committed", actor: "address:127.0.0.1", requestId: "feed-create-1" })
        expect(first!.changes).toHaveLength(1)
        expect(first!.changes[0]).toMatchObject({ type: "Patient", id: created.json.id, version: 1, op: "create" })
        expect(JSON.parse(first!.changes[0]!.resource!)).toEqual(created.json)

        // A transaction Bundle is one commit.
        const bundle = yield* call("POST", server.base, {
          body: {
            resourceType: "Bundle",
            type: "transaction",
            entry: [
              { fullUrl: "urn:uuid:0a6c5f3e-7d1b-4c8e-9f00-000000000001", resource: { resourceType: "Patient", name: [{ family: "One" }] }, request: { method: "POST", url: "Patient" } },
              { resource: { resourceType: "Observation", status: "final", code: { text: "x" }, subject: { reference: "urn:uuid:0a6c5f3e-7d1b-4c8e-9f00-000000000001" } }, request: { method: "POST", url: "Observation" } }
            ]
          }
        })
        expect(bundle.status).toBe(200)
        const [second] = (yield* take(1)) as Array<Committed>
        expect(second!.commitTs).toBeGreaterThan(first!.commitTs)
        expect(second!.changes.map((change) => `${change.op} ${change.type}`).sort()).toEqual(["create Observation", "create Patient"])

        const deleted = yield* call("DELETE", `${server.base}/Patient/${created.json.id}`)
        expect(deleted.status).toBeLessThan(300)
        const [third] = (yield* take(1)) as Array<Committed>
        expect(third!.changes).toEqual([{ type: "Patient", id: created.json.id, version: 2, op: "delete", resource: null }])
        // The log holds the same three commits.
        const logged = yield* Stream.runCollect(server.changeFeed.stream(first!.commitTs - 1))
        expect([...logged].map((event) => event.commitTs)).toEqual([first!.commitTs, second!.commitTs, third!.commitTs])
        expect([...logged].map((event) => event.requestId)[0]).toBe("feed-create-1")
      }), { timeout: 120_000 })
  })
}
