/**
 * `/sync` under `--smart` on the real server (SQLite file and Postgres), with real tokens got over HTTP and a
 * real WebSocket client (`ws`): the token in the upgrade's Authorization header, or in an `auth` message for a
 * client that cannot set headers; a patient token from an EHR launch kept to its patient's compartment in every
 * result and every change; each subscribe audited like a search of its query and metered as class `sync`.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Deferred, Effect, Layer, Queue } from "effect"
import { WebSocket } from "ws"
import { SmartSecrets } from "../../src/auth/SmartSecrets.ts"
import type { ServerMessage } from "../../src/sync/protocol.ts"
import { backends } from "../support/backends.ts"
import { call, startServer, type TestServer } from "../support/server.ts"
import { launchToken, secrets, systemToken } from "../support/smartTokens.ts"

class Server extends Context.Tag("test/SyncSmartServer")<Server, { readonly server: TestServer; readonly system: string }>() {}

type Opened =
  | { readonly _tag: "open"; readonly messages: Queue.Queue<ServerMessage>; readonly send: (message: unknown) => void; readonly closed: Effect.Effect<number> }
  | { readonly _tag: "refused"; readonly status: number; readonly body: string }

/** A WebSocket on `/sync` with `headers` on the upgrade: its messages in a queue, or the refusal of the upgrade. */
const open = (headers: Record<string, string> = {}) =>
  Effect.gen(function*() {
    const { server } = yield* Server
    const messages = yield* Queue.unbounded<ServerMessage>()
    const closed = yield* Deferred.make<number>()
    return yield* Effect.acquireRelease(
      Effect.async<Opened>((resume) => {
        const ws = new WebSocket(`${server.url.replace(/^http/, "ws")}/sync`, "svc.sync.v1", { headers })
        ws.on("message", (data) => messages.unsafeOffer(JSON.parse(String(data)) as ServerMessage))
        ws.on("close", (code) => Deferred.unsafeDone(closed, Effect.succeed(code)))
        ws.on("unexpected-response", (_request, response) => {
          let body = ""
          response.on("data", (chunk: Buffer) => (body += chunk.toString("utf8")))
          response.on("end", () => resume(Effect.succeed({ _tag: "refused", status: response.statusCode ?? 0, body })))
        })
        ws.once("error", (error) => resume(Effect.die(error)))
        ws.once("open", () =>
          resume(Effect.succeed({ _tag: "open", messages, send: (message: unknown) => ws.send(JSON.stringify(message)), closed: Deferred.await(closed) })))
        return Effect.sync(() => ws.terminate())
      }),
      () => Effect.void
    )
  })

const client = (headers: Record<string, string> = {}) =>
  Effect.flatMap(open(headers), (opened) => (opened._tag === "open" ? Effect.succeed(opened) : Effect.die(new Error(`refused ${opened.status}: ${opened.body}`))))

const put = (resource: Record<string, unknown>) =>
  Effect.gen(function*() {
    const { server, system } = yield* Server
    const reply = yield* call("PUT", `${server.base}/${String(resource["resourceType"])}/${String(resource["id"])}`, {
      body: resource,
      headers: { authorization: `Bearer ${system}` }
    })
    expect(reply.status, reply.text).toBeLessThan(300)
  })

const ids = (resources: ReadonlyArray<unknown>) => resources.map((r) => (r as { id: string }).id).sort()

const started = (kind: "sqlite" | "postgres") =>
  Effect.gen(function*() {
    const server = yield* startServer(kind, {
      smart: { enabled: true, demo_login: true },
      conformance: { update_as_create: true }
    }).pipe(Effect.provideService(SmartSecrets, secrets))
    const system = yield* systemToken(server, "system/*.cruds system/AuditEvent.read")
    return { server, system }
  })

for (const backend of backends.filter((b) => b.kind !== "memory")) {
  describe.skipIf(backend.skip)(`/sync under --smart on ${backend.kind}`, () => {
    layer(Layer.scoped(Server, started(backend.kind as "sqlite" | "postgres")), { timeout: 120_000, excludeTestServices: true })((it) => {
      it.scoped("serves the caller of the upgrade's bearer token, refuses a bad one with 401, and audits and meters each subscribe", () =>
        Effect.gen(function*() {
          const { server, system } = yield* Server
          const refused = yield* open({ authorization: "Bearer not-a-token" })
          expect(refused._tag === "refused" && refused.status).toBe(401)
          const { messages, send } = yield* client({ authorization: `Bearer ${system}` })
          yield* put({ resourceType: "Patient", id: "h1", name: [{ family: "Header" }] })
          send({ type: "subscribe", id: "q", query: "Patient?family=Header" })
          const result = yield* Queue.take(messages)
          expect(result.type === "result" && ids(result.resources)).toEqual(["h1"])
          yield* put({ resourceType: "Patient", id: "h2", name: [{ family: "Header" }] })
          const entered = yield* Queue.take(messages)
          expect(entered.type === "changes" && ids(entered.queries["q"]!.entered)).toEqual(["h2"])
          send({ type: "subscribe", id: "bad", query: "Patient?no-such-parameter=1" })
          expect(yield* Queue.take(messages)).toMatchObject({ type: "QueryFailed", id: "bad", code: "InvalidQuery" })

          const audit = yield* call("GET", `${server.url}/_audit?type=search-type&agent=client:svc-confidential&_count=100`, { headers: { authorization: `Bearer ${system}` } })
          expect(audit.status, audit.text).toBe(200)
          const events = (audit.json.entry ?? []).map((entry: any) => entry.resource)
          const queries = events.map((event: any) => [
            event.outcome,
            event.outcomeDesc,
            Buffer.from(event.entity.find((entity: any) => entity.query !== undefined).query, "base64").toString("utf8")
          ])
          // Newest first.
          expect(queries).toEqual([
            ["4", "SUBSCRIBE /fhir/Patient: HTTP 400", "no-such-parameter=1"],
            ["0", undefined, "family=Header"]
          ])
          const usage = yield* call("GET", `${server.url}/_usage?class=sync&client=client:svc-confidential`, { headers: { authorization: `Bearer ${system}` } })
          expect(usage.status, usage.text).toBe(200)
          // The two subscribes (the upgrade counts when the connection closes).
          expect(usage.json.usage).toEqual([expect.objectContaining({ class: "sync", requests: 2 })])
          expect(usage.json.usage[0].bytes_out).toBeGreaterThan(0)
        }))

      it.scoped("takes a patient token in an auth message and keeps every result and change to its patient's compartment", () =>
        Effect.gen(function*() {
          const { server } = yield* Server
          for (const id of ["sa", "sb"]) yield* put({ resourceType: "Patient", id })
          const token = yield* launchToken(server, "sa", "launch openid fhirUser patient/*.rs")

          const early = yield* client()
          early.send({ type: "subscribe", id: "obs", query: "Observation" })
          expect(yield* Queue.take(early.messages)).toMatchObject({ type: "error", code: "Unauthorized" })
          expect(yield* early.closed).toBe(4401)

          const { messages, send } = yield* client()
          send({ type: "auth", token })
          const authorized = yield* Queue.take(messages)
          expect(authorized.type).toBe("authorized")
          expect(authorized.type === "authorized" && authorized.expiresIn).toBeGreaterThan(3000)
          send({ type: "subscribe", id: "obs", query: "Observation" })
          expect(yield* Queue.take(messages)).toMatchObject({ type: "result", id: "obs", total: 0 })
          yield* put({ resourceType: "Observation", id: "sb-1", status: "final", code: { text: "x" }, subject: { reference: "Patient/sb" } })
          yield* put({ resourceType: "Observation", id: "sa-1", status: "final", code: { text: "x" }, subject: { reference: "Patient/sa" } })
          const change = yield* Queue.take(messages)
          expect(change.type === "changes" && ids(change.queries["obs"]!.entered)).toEqual(["sa-1"])
          send({ type: "subscribe", id: "other", query: "Patient/sb/Observation" })
          expect(yield* Queue.take(messages)).toMatchObject({ type: "QueryFailed", id: "other", code: "Forbidden" })
          // Another patient's observation moved into this patient's record enters it.
          yield* put({ resourceType: "Observation", id: "sb-1", status: "final", code: { text: "x" }, subject: { reference: "Patient/sa" } })
          const moved = yield* Queue.take(messages)
          expect(moved.type === "changes" && ids(moved.queries["obs"]!.entered)).toEqual(["sb-1"])
        }))
    })
  })
}
