/**
 * The live-query engine of `/sync` on the real server (SQLite and Postgres), driven through a connection that
 * collects what it is sent: a query's result, then one `changes` message per commit with what entered, changed
 * and left (a transaction as one message); refusals at once; a write that is not relevant wakes nothing (the
 * engine's counter); a patient-scoped caller sees only its patient's resources, in results and in changes.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer, Queue } from "effect"
import type { Authorized, Principal } from "../../src/http/Principal.ts"
import type { SyncConnection } from "../../src/sync/LiveQueries.ts"
import type { ServerMessage } from "../../src/sync/protocol.ts"
import { backends } from "../support/backends.ts"
import { call, startServer, type TestServer } from "../support/server.ts"

class Server extends Context.Tag("test/SyncEngineServer")<Server, TestServer>() {}

const anonymous: Principal = { _tag: "Anonymous", address: "127.0.0.1" }
const patientA: Authorized = { _tag: "Authorized", address: "127.0.0.1", clientId: "sync-test", user: undefined, scopes: ["patient/*.rs"], patient: "pa" }

/** A connection whose messages go to a queue. */
const connection = (principal: Principal = anonymous) =>
  Effect.map(Queue.unbounded<ServerMessage>(), (messages) => {
    const conn: SyncConnection = { principal, send: (message) => messages.unsafeOffer(message) }
    return { conn, messages }
  })

const put = (server: TestServer, resource: Record<string, unknown>) =>
  Effect.gen(function*() {
    const reply = yield* call("PUT", `${server.base}/${String(resource["resourceType"])}/${String(resource["id"])}`, { body: resource })
    expect(reply.status, reply.text).toBeLessThan(300)
    return reply
  })

const ids = (resources: ReadonlyArray<unknown>) => resources.map((r) => (r as { id: string }).id).sort()

for (const backend of backends.filter((b) => b.kind !== "memory")) {
  describe.skipIf(backend.skip)(`live queries on ${backend.kind}`, () => {
    layer(Layer.scoped(Server, startServer(backend.kind, { conformance: { update_as_create: true } })), { timeout: 60_000, excludeTestServices: true })((it) => {
      it.scoped("send the result, then what entered, changed and left with each commit; a transaction is one message", () =>
        Effect.gen(function*() {
          const server = yield* Server
          yield* put(server, { resourceType: "Patient", id: "e1", gender: "female", name: [{ family: "Livequery" }] })
          yield* put(server, { resourceType: "Patient", id: "e2", gender: "male", name: [{ family: "Livequery" }] })
          const { conn, messages } = yield* connection()
          yield* server.liveQueries.subscribe(conn, "women", "Patient?family=Livequery&gender=female")
          const result = yield* Queue.take(messages)
          expect(result).toMatchObject({ type: "result", id: "women", total: 1 })
          expect(result.type === "result" && ids(result.resources)).toEqual(["e1"])

          const entered = yield* put(server, { resourceType: "Patient", id: "e3", gender: "female", name: [{ family: "Livequery" }] })
          const first = yield* Queue.take(messages)
          expect(first).toMatchObject({ type: "changes", commitTs: Number(entered.headers.get("x-svc-commit-ts")) })
          expect(first.type === "changes" && ids(first.queries["women"]!.entered)).toEqual(["e3"])

          yield* put(server, { resourceType: "Patient", id: "e1", gender: "female", name: [{ family: "Livequery", given: ["Ann"] }] })
          const second = yield* Queue.take(messages)
          expect(second.type === "changes" && second.queries["women"]).toMatchObject({ entered: [], left: [] })
          expect(second.type === "changes" && ids(second.queries["women"]!.changed)).toEqual(["e1"])

          yield* put(server, { resourceType: "Patient", id: "e3", gender: "male", name: [{ family: "Livequery" }] })
          const third = yield* Queue.take(messages)
          expect(third.type === "changes" && third.queries["women"]).toEqual({ entered: [], changed: [], left: ["Patient/e3"] })

          const bundle = yield* call("POST", server.base, {
            body: {
              resourceType: "Bundle",
              type: "transaction",
              entry: [
                { resource: { resourceType: "Patient", gender: "female", name: [{ family: "Livequery" }] }, request: { method: "POST", url: "Patient" } },
                { resource: { resourceType: "Patient", gender: "female", name: [{ family: "Livequery" }] }, request: { method: "POST", url: "Patient" } },
                { request: { method: "DELETE", url: "Patient/e1" } }
              ]
            }
          })
          expect(bundle.status, bundle.text).toBe(200)
          const fourth = yield* Queue.take(messages)
          expect(fourth).toMatchObject({ type: "changes", commitTs: Number(bundle.headers.get("x-svc-commit-ts")) })
          expect(fourth.type === "changes" && fourth.queries["women"]!.entered).toHaveLength(2)
          expect(fourth.type === "changes" && fourth.queries["women"]!.left).toEqual(["Patient/e1"])

          yield* server.liveQueries.unsubscribe(conn, "women")
          yield* put(server, { resourceType: "Patient", id: "e4", gender: "female", name: [{ family: "Livequery" }] })
          yield* server.searchIndexed
          expect(yield* Queue.size(messages)).toBe(0)
          expect(server.liveQueries.held(conn)).toBe(0)
        }))

      it.scoped("resume from a commit timestamp with what the result missed, from the change log; a full page gets a whole result", () =>
        Effect.gen(function*() {
          const server = yield* Server
          yield* put(server, { resourceType: "Patient", id: "r1", gender: "female", name: [{ family: "Resumed" }] })
          yield* put(server, { resourceType: "Patient", id: "r2", gender: "female", name: [{ family: "Resumed" }] })
          const first = yield* connection()
          yield* server.liveQueries.subscribe(first.conn, "q", "Patient?family=Resumed&gender=female")
          const result = yield* Queue.take(first.messages)
          const since = result.type === "result" ? result.commitTs : 0
          // The client goes away; meanwhile one enters, one changes, one leaves.
          yield* server.liveQueries.disconnect(first.conn)
          yield* put(server, { resourceType: "Patient", id: "r3", gender: "female", name: [{ family: "Resumed" }] })
          yield* put(server, { resourceType: "Patient", id: "r1", gender: "female", name: [{ family: "Resumed", given: ["B"] }] })
          yield* put(server, { resourceType: "Patient", id: "r2", gender: "male", name: [{ family: "Resumed" }] })
          yield* put(server, { resourceType: "Patient", id: "other", gender: "female", name: [{ family: "Elsewhere" }] })
          yield* server.searchIndexed
          const second = yield* connection()
          yield* server.liveQueries.subscribe(second.conn, "q", "Patient?family=Resumed&gender=female", since)
          const missed = yield* Queue.take(second.messages)
          expect(missed.type).toBe("changes")
          if (missed.type === "changes") {
            expect(ids(missed.queries["q"]!.entered)).toEqual(["r1", "r3"])
            expect([...missed.queries["q"]!.left].sort()).toEqual(["Patient/other", "Patient/r2"])
          }
          expect(yield* Queue.take(second.messages)).toMatchObject({ type: "caughtUp", id: "q" })
          // Live again: the next change follows.
          yield* put(server, { resourceType: "Patient", id: "r4", gender: "female", name: [{ family: "Resumed" }] })
          const live = yield* Queue.take(second.messages)
          expect(live.type === "changes" && ids(live.queries["q"]!.entered)).toEqual(["r4"])
          // A full page cannot be resumed exactly: a whole result.
          const third = yield* connection()
          yield* server.liveQueries.subscribe(third.conn, "page", "Patient?family=Resumed&_count=1", since)
          expect(yield* Queue.take(third.messages)).toMatchObject({ type: "result", id: "page", total: 1 })
        }))

      it.scoped("answer QueryFailed at once for a query that cannot be read or asks for what a live result is not", () =>
        Effect.gen(function*() {
          const server = yield* Server
          const { conn, messages } = yield* connection()
          for (const [query, code, text] of [
            ["Patient?no-such-parameter=1", "InvalidQuery", /no-such-parameter/],
            ["Patient?_include=Patient:link", "NotSupported", /_include/],
            ["NoSuchType?x=1", "InvalidQuery", /NoSuchType/],
            ["not a query", "InvalidQuery", /not a search/]
          ] as const) {
            yield* server.liveQueries.subscribe(conn, "q", query)
            const failed = yield* Queue.take(messages)
            expect(failed).toMatchObject({ type: "QueryFailed", id: "q", code, outcome: { resourceType: "OperationOutcome" } })
            expect(JSON.stringify(failed)).toMatch(text)
          }
          expect(server.liveQueries.held(conn)).toBe(0)
        }))

      it.scoped("are woken only by relevant writes: another patient's Observation wakes nothing", () =>
        Effect.gen(function*() {
          const server = yield* Server
          yield* put(server, { resourceType: "Patient", id: "rel-a" })
          yield* put(server, { resourceType: "Patient", id: "rel-b" })
          const { conn, messages } = yield* connection()
          yield* server.liveQueries.subscribe(conn, "obs", "Observation?subject=Patient/rel-a")
          expect(yield* Queue.take(messages)).toMatchObject({ type: "result", total: 0 })
          const before = yield* server.liveQueries.woken
          for (let n = 0; n < 5; n++) {
            yield* put(server, { resourceType: "Observation", id: `rel-b-${n}`, status: "final", code: { text: "x" }, subject: { reference: "Patient/rel-b" } })
          }
          yield* put(server, { resourceType: "Observation", id: "rel-a-1", status: "final", code: { text: "x" }, subject: { reference: "Patient/rel-a" } })
          const hit = yield* Queue.take(messages)
          expect(hit.type === "changes" && ids(hit.queries["obs"]!.entered)).toEqual(["rel-a-1"])
          expect((yield* server.liveQueries.woken) - before).toBe(1)
        }))

      it.scoped("keep a patient-scoped caller to its patient's compartment, in the result and in the changes", () =>
        Effect.gen(function*() {
          const server = yield* Server
          for (const id of ["pa", "pb"]) yield* put(server, { resourceType: "Patient", id })
          yield* put(server, { resourceType: "Observation", id: "pa-old", status: "final", code: { text: "scoped" }, subject: { reference: "Patient/pa" } })
          yield* put(server, { resourceType: "Observation", id: "pb-old", status: "final", code: { text: "scoped" }, subject: { reference: "Patient/pb" } })
          const { conn, messages } = yield* connection(patientA)
          yield* server.liveQueries.subscribe(conn, "mine", "Observation")
          const result = yield* Queue.take(messages)
          expect(result.type === "result" && ids(result.resources)).toEqual(["pa-old"])
          yield* put(server, { resourceType: "Observation", id: "pb-new", status: "final", code: { text: "scoped" }, subject: { reference: "Patient/pb" } })
          yield* put(server, { resourceType: "Observation", id: "pa-new", status: "final", code: { text: "scoped" }, subject: { reference: "Patient/pa" } })
          const change = yield* Queue.take(messages)
          expect(change.type === "changes" && ids(change.queries["mine"]!.entered)).toEqual(["pa-new"])
          yield* server.liveQueries.subscribe(conn, "theirs", "Patient/pb/Observation")
          expect(yield* Queue.take(messages)).toMatchObject({ type: "QueryFailed", id: "theirs", code: "Forbidden" })
        }))
    })
  })
}
