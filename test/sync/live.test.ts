/**
 * `/sync` end to end: the real server (SQLite and Postgres) and a real WebSocket client (`ws`): a query's result,
 * then results entering, changing and leaving, a transaction as one message, QueryFailed at once, resume after a
 * reconnect with nothing missed, and a patient-scoped caller kept to its compartment.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer, Queue } from "effect"
import { WebSocket } from "ws"
import { PrincipalResolution } from "../../src/http/FrontDoor.ts"
import { anonymous, type Authorized } from "../../src/http/Principal.ts"
import type { ServerMessage } from "../../src/sync/protocol.ts"
import { backends } from "../support/backends.ts"
import { call, startServer, type TestServer } from "../support/server.ts"

class Server extends Context.Tag("test/SyncLiveServer")<Server, TestServer>() {}

const patientA: Authorized = { _tag: "Authorized", address: "127.0.0.1", clientId: "sync-live", user: undefined, scopes: ["patient/*.rs"], patient: "la" }
const resolution = Layer.succeed(PrincipalResolution, (headers, address) => headers["x-test-principal"] === "patientA" ? patientA : anonymous(address))

/** A client on `/sync`: its messages in a queue, `send` a message. */
const client = (headers: Record<string, string> = {}) =>
  Effect.gen(function*() {
    const { url } = yield* Server
    const messages = yield* Queue.unbounded<ServerMessage>()
    const socket = yield* Effect.acquireRelease(
      Effect.async<WebSocket>((resume) => {
        const ws = new WebSocket(`${url.replace(/^http/, "ws")}/sync`, "svc.sync.v1", { headers })
        ws.on("message", (data) => messages.unsafeOffer(JSON.parse(String(data)) as ServerMessage))
        ws.once("open", () => resume(Effect.succeed(ws)))
        ws.once("error", (error) => resume(Effect.die(error)))
      }),
      (ws) => Effect.sync(() => ws.terminate())
    )
    return { socket, messages, send: (message: unknown) => socket.send(JSON.stringify(message)) }
  })

const put = (resource: Record<string, unknown>) =>
  Effect.gen(function*() {
    const { base } = yield* Server
    const reply = yield* call("PUT", `${base}/${String(resource["resourceType"])}/${String(resource["id"])}`, { body: resource })
    expect(reply.status, reply.text).toBeLessThan(300)
    return Number(reply.headers.get("x-svc-commit-ts"))
  })

const ids = (resources: ReadonlyArray<unknown>) => resources.map((r) => (r as { id: string }).id).sort()

for (const backend of backends.filter((b) => b.kind !== "memory")) {
  describe.skipIf(backend.skip)(`/sync on ${backend.kind}`, () => {
    layer(Layer.scoped(Server, startServer(backend.kind, { conformance: { update_as_create: true } }).pipe(Effect.provide(resolution))), {
      timeout: 60_000,
      excludeTestServices: true
    })((it) => {
      it.scoped("a result, then what enters, changes and leaves it; a transaction is one message; QueryFailed at once", () =>
        Effect.gen(function*() {
          const { socket, messages, send } = yield* client()
          expect(socket.protocol).toBe("svc.sync.v1")
          yield* put({ resourceType: "Patient", id: "w1", gender: "female", name: [{ family: "Wire" }] })
          send({ type: "subscribe", id: "women", query: "Patient?family=Wire&gender=female" })
          const result = yield* Queue.take(messages)
          expect(result.type === "result" && ids(result.resources)).toEqual(["w1"])
          const ts = yield* put({ resourceType: "Patient", id: "w2", gender: "female", name: [{ family: "Wire" }] })
          const entered = yield* Queue.take(messages)
          expect(entered).toMatchObject({ type: "changes", commitTs: ts })
          expect(entered.type === "changes" && ids(entered.queries["women"]!.entered)).toEqual(["w2"])
          yield* put({ resourceType: "Patient", id: "w1", gender: "male", name: [{ family: "Wire" }] })
          expect(yield* Queue.take(messages)).toMatchObject({ type: "changes", queries: { women: { entered: [], changed: [], left: ["Patient/w1"] } } })
          const { base } = yield* Server
          const bundle = yield* call("POST", base, {
            body: {
              resourceType: "Bundle",
              type: "transaction",
              entry: [
                { resource: { resourceType: "Patient", id: "w2", gender: "female", name: [{ family: "Wire", given: ["Z"] }] }, request: { method: "PUT", url: "Patient/w2" } },
                { resource: { resourceType: "Patient", id: "w3", gender: "female", name: [{ family: "Wire" }] }, request: { method: "PUT", url: "Patient/w3" } }
              ]
            }
          })
          expect(bundle.status, bundle.text).toBe(200)
          const step = yield* Queue.take(messages)
          expect(step).toMatchObject({ type: "changes", commitTs: Number(bundle.headers.get("x-svc-commit-ts")) })
          expect(step.type === "changes" && [ids(step.queries["women"]!.entered), ids(step.queries["women"]!.changed)]).toEqual([["w3"], ["w2"]])
          send({ type: "subscribe", id: "bad", query: "Patient?no-such-parameter=1" })
          expect(yield* Queue.take(messages)).toMatchObject({ type: "QueryFailed", id: "bad", code: "InvalidQuery", outcome: { resourceType: "OperationOutcome" } })
          send({ type: "unsubscribe", id: "women" })
          expect(yield* Queue.take(messages)).toEqual({ type: "unsubscribed", id: "women" })
        }))

      it.scoped("a client that reconnects with its last commit timestamp gets what it missed", () =>
        Effect.gen(function*() {
          const first = yield* client()
          yield* put({ resourceType: "Patient", id: "m1", name: [{ family: "Missed" }] })
          first.send({ type: "subscribe", id: "q", query: "Patient?family=Missed" })
          const result = yield* Queue.take(first.messages)
          const last = result.type === "result" ? result.commitTs : 0
          first.socket.terminate()
          yield* put({ resourceType: "Patient", id: "m2", name: [{ family: "Missed" }] })
          yield* put({ resourceType: "Patient", id: "m1", name: [{ family: "Found" }] })
          const again = yield* client()
          again.send({ type: "subscribe", id: "q", query: "Patient?family=Missed", since: last })
          const missed = yield* Queue.take(again.messages)
          expect(missed.type === "changes" && ids(missed.queries["q"]!.entered)).toEqual(["m2"])
          expect(missed.type === "changes" && missed.queries["q"]!.left).toEqual(["Patient/m1"])
          expect(yield* Queue.take(again.messages)).toMatchObject({ type: "caughtUp", id: "q" })
        }))

      it.scoped("a patient-scoped caller sees its own patient's resources only", () =>
        Effect.gen(function*() {
          for (const id of ["la", "lb"]) yield* put({ resourceType: "Patient", id })
          const { messages, send } = yield* client({ "x-test-principal": "patientA" })
          send({ type: "subscribe", id: "obs", query: "Observation" })
          expect(yield* Queue.take(messages)).toMatchObject({ type: "result", total: 0 })
          yield* put({ resourceType: "Observation", id: "lb-1", status: "final", code: { text: "x" }, subject: { reference: "Patient/lb" } })
          yield* put({ resourceType: "Observation", id: "la-1", status: "final", code: { text: "x" }, subject: { reference: "Patient/la" } })
          const change = yield* Queue.take(messages)
          expect(change.type === "changes" && ids(change.queries["obs"]!.entered)).toEqual(["la-1"])
          send({ type: "subscribe", id: "other", query: "Patient/lb/Observation" })
          expect(yield* Queue.take(messages)).toMatchObject({ type: "QueryFailed", id: "other", code: "Forbidden" })
        }))
    })
  })
}
