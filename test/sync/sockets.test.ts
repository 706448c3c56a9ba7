/**
 * The `/sync` connection layer (src/sync/SyncSockets.ts; docs/sync.md) on the real HTTP edge and front door,
 * with a real WebSocket client, in front of a stand-in live-query engine that answers as the protocol says and
 * records what it was asked. Time (heartbeats) is the test clock.
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Context, Deferred, Effect, Exit, Layer, Option, Queue, Ref, Schema, Scope, TestClock } from "effect"
import { WebSocket } from "ws"
import { edgeOptions } from "../../src/app/Start.ts"
import { AppConfig } from "../../src/config/AppConfig.ts"
import { GovernanceSettings, settingsOf } from "../../src/governance/Governance.ts"
import * as RateLimit from "../../src/governance/RateLimit.ts"
import { Door } from "../../src/http/FrontDoor.ts"
import type { Authorized } from "../../src/http/Principal.ts"
import { SyncTokens, type TokenRefused } from "../../src/sync/SyncTokens.ts"
import { Readiness, layer as readinessLayer } from "../../src/http/Readiness.ts"
import * as RootRoutes from "../../src/http/RootRoutes.ts"
import { listen, ServingApp, servingAppLayer } from "../../src/http/Server.ts"
import * as Log from "../../src/logging/Log.ts"
import { LiveQueries, type SyncConnection } from "../../src/sync/LiveQueries.ts"
import type { ServerMessage } from "../../src/sync/protocol.ts"
import * as SyncSockets from "../../src/sync/SyncSockets.ts"

/** The stand-in engine, and what it was asked. */
interface Engine {
  /** `subscribe <id> <query>`, `unsubscribe <id>`, `reload <ids>`, `disconnect`, in order. */
  readonly calls: Array<string>
  /** What each `send` of the flood returned. */
  readonly flood: Array<boolean>
  /** The connections it was told had closed. */
  readonly disconnected: Queue.Queue<SyncConnection>
  /** The connection of each subscribe. */
  readonly subscribers: Array<SyncConnection>
}

const result = (id: string, commitTs: number): ServerMessage => ({ type: "result", id, commitTs, resources: [], total: 0 })

/**
 * A query `Type?order` gets its result and two changes; `Type?flood-<bytes>` its result and then 300 changes of
 * a resource of `<bytes>` characters, sent at once; `Unknown?x` is refused, as the engine refuses an unknown type.
 */
const fakeEngine = (engine: Engine) => {
  const held = new Map<SyncConnection, Set<string>>()
  const of = (connection: SyncConnection) => held.get(connection) ?? held.set(connection, new Set()).get(connection)!
  return LiveQueries.of({
    subscribe: (connection, id, query) =>
      Effect.sync(() => {
        engine.calls.push(`subscribe ${id} ${query}`)
        engine.subscribers.push(connection)
        if (query.startsWith("Unknown")) {
          of(connection).delete(id)
          connection.send({ type: "QueryFailed", id, code: "NotSupported", outcome: { resourceType: "OperationOutcome" } })
          return { _tag: "Failed", code: "NotSupported" } as const
        }
        of(connection).add(id)
        connection.send(result(id, 1))
        const flood = /flood-(\d+)/.exec(query)
        if (flood !== null) {
          const text = "x".repeat(Number(flood[1]))
          for (let i = 0; i < 300; i++) {
            const changed = [{ resourceType: "Basic", id: `b${i}`, text }]
            engine.flood.push(connection.send({ type: "changes", commitTs: 2 + i, queries: { [id]: { entered: [], changed, left: [] } } }))
          }
        } else if (query.endsWith("?order")) {
          connection.send({ type: "changes", commitTs: 2, queries: { [id]: { entered: [{ resourceType: "Patient", id: "p1" }], changed: [], left: [] } } })
          connection.send({ type: "changes", commitTs: 3, queries: { [id]: { entered: [], changed: [], left: ["Patient/p1"] } } })
        }
        return { _tag: "Held" } as const
      }),
    unsubscribe: (connection, id) => Effect.sync(() => void (engine.calls.push(`unsubscribe ${id}`), of(connection).delete(id))),
    reload: (connection, ids) =>
      Effect.sync(() => {
        engine.calls.push(`reload ${ids.join(",")}`)
        for (const id of ids) connection.send(result(id, 500))
      }),
    reauthorize: (_connection, fresh) => Effect.sync(() => void engine.calls.push(`reauthorize ${fresh}`)),
    closeAll: (connection, code, reason) =>
      Effect.sync(() => {
        engine.calls.push(`closeAll ${code}`)
        for (const id of of(connection)) connection.send({ type: "closed", id, code, reason })
        held.delete(connection)
      }),
    disconnect: (connection) =>
      Effect.sync(() => {
        engine.calls.push("disconnect")
        held.delete(connection)
        engine.disconnected.unsafeOffer(connection)
      }),
    held: (connection) => of(connection).size,
    handled: Effect.succeed(42),
    woken: Effect.succeed(0)
  })
}

interface Server {
  readonly url: string
  readonly engine: Engine
  /** The log lines written (the request log's among them). */
  readonly lines: ReadonlyArray<string>
}

/**
 * Stand-in tokens, as `--smart` verifies them: `good:<client>:<patient>:<expires at, ms>` names that client
 * (user `u`, scopes `patient/*.rs`) until it expires, unless it is in `revoked`; anything else is unknown.
 */
const fakeTokens = (revoked: Set<string>) =>
  SyncTokens.of({
    verify: (token, address) =>
      Effect.flatMap(Clock.currentTimeMillis, (now): Effect.Effect<Authorized, TokenRefused> => {
        const [kind, clientId, patient, expires] = token.split(":")
        if (kind !== "good" || clientId === undefined || expires === undefined) return Effect.fail({ code: "Unauthorized" as const, reason: "the token is not a well-formed access token of this server" })
        if (revoked.has(token)) return Effect.fail({ code: "TokenRevoked" as const, reason: "the token was revoked" })
        if (Number(expires) <= now) return Effect.fail({ code: "TokenExpired" as const, reason: "the token has expired" })
        const principal: Authorized = { _tag: "Authorized", address, clientId, user: "u", scopes: ["patient/*.rs"], patient, expiresAt: Number(expires) }
        return Effect.succeed(principal)
      })
  })

interface ServerOptions {
  /** Serve as under `--smart`, with the stand-in tokens (revoked: those in the set). */
  readonly revoked?: Set<string>
}

/** The HTTP edge with `/sync` served by SyncSockets over the stand-in engine, stopped when `scope` closes. */
const startServer = (rateLimit: Record<string, unknown> = {}, options: ServerOptions = {}) =>
  Effect.gen(function*() {
    const config = Schema.decodeUnknownSync(AppConfig)({ rate_limit: rateLimit })
    const lines: Array<string> = []
    const context = yield* Layer.build(
      Layer.mergeAll(Log.layer("warning"), readinessLayer, servingAppLayer).pipe(Layer.provideMerge(Log.memorySink(lines)))
    )
    const { address, door } = yield* listen({ host: "127.0.0.1", port: 0 }, edgeOptions(config)).pipe(Effect.provide(context))
    const settings = { ...settingsOf(config), smart: options.revoked !== undefined }
    if (config.rate_limit.enabled && config.rate_limit.requests_per_second !== undefined) {
      const { policy } = RateLimit.buckets({ limits: RateLimit.limitsOf(config.rate_limit, false), clock: yield* Effect.clock, share: () => 1 })
      door.install({ policies: [policy], listeners: [] })
    }
    const engine: Engine = { calls: [], flood: [], disconnected: yield* Queue.unbounded<SyncConnection>(), subscribers: [] }
    // Built after the server listens, so that its connections close (1001) before the server drains.
    const sockets = yield* Layer.build(SyncSockets.layer.pipe(Layer.provide(Layer.mergeAll(
      Layer.succeed(LiveQueries, fakeEngine(engine)),
      Layer.succeed(GovernanceSettings, settings),
      Layer.succeed(Door, door),
      options.revoked === undefined ? Layer.empty : Layer.succeed(SyncTokens, fakeTokens(options.revoked))
    ))))
    const handlers = { "/sync": (request: RootRoutes.RootRequest) => SyncSockets.handler(request).pipe(Effect.provide(sockets)) }
    yield* Ref.set(Context.get(context, ServingApp), Option.some(RootRoutes.app(RootRoutes.withHandlers(RootRoutes.rootRoutes, handlers))))
    yield* Effect.flatMap(Readiness, (readiness) => readiness.serving(Effect.succeed({ status: "ok" }), Effect.succeed({}))).pipe(Effect.provide(context))
    const port = address._tag === "TcpAddress" ? address.port : 0
    const server: Server = { url: `http://127.0.0.1:${port}`, engine, lines }
    return server
  })

interface Client {
  readonly ws: WebSocket
  /** Every message received, parsed, in order. */
  readonly received: ReadonlyArray<any>
  /** The next message not taken yet. */
  readonly next: Effect.Effect<any>
  readonly send: (message: unknown) => void
  readonly closed: Effect.Effect<{ readonly code: number; readonly reason: string }>
}

type Opened = { readonly _tag: "open"; readonly ws: WebSocket } | { readonly _tag: "refused"; readonly status: number; readonly body: string }

/** Opens a WebSocket on `/sync`: the client, or the status and body of the refusal. */
const open = (server: Server, protocols: ReadonlyArray<string> = []) =>
  Effect.gen(function*() {
    const inbox = yield* Queue.unbounded<any>()
    const closed = yield* Deferred.make<{ readonly code: number; readonly reason: string }>()
    const received: Array<any> = []
    const opened = yield* Effect.acquireRelease(
      Effect.async<Opened>((resume) => {
        const ws = new WebSocket(`${server.url.replace(/^http/, "ws")}/sync`, [...protocols])
        ws.on("message", (data, isBinary) => {
          const message = isBinary ? "<binary>" : JSON.parse(String(data))
          received.push(message)
          inbox.unsafeOffer(message)
        })
        ws.on("close", (code, reason) => Deferred.unsafeDone(closed, Effect.succeed({ code, reason: reason.toString("utf8") })))
        ws.on("unexpected-response", (_request, response) => {
          let body = ""
          response.on("data", (chunk: Buffer) => (body += chunk.toString("utf8")))
          response.on("end", () => resume(Effect.succeed({ _tag: "refused", status: response.statusCode ?? 0, body })))
        })
        ws.on("error", (error) => resume(Effect.die(error)))
        ws.once("open", () => resume(Effect.succeed({ _tag: "open", ws })))
      }),
      (opened) => Effect.sync(() => opened._tag === "open" && opened.ws.terminate())
    )
    if (opened._tag === "refused") return opened
    const client: Client = {
      ws: opened.ws,
      received,
      next: Queue.take(inbox),
      send: (message) => opened.ws.send(typeof message === "string" || Buffer.isBuffer(message) ? message : JSON.stringify(message)),
      closed: Deferred.await(closed)
    }
    return { _tag: "client" as const, client }
  })

const connect = (server: Server, protocols: ReadonlyArray<string> = []) =>
  Effect.flatMap(open(server, protocols), (opened) => {
    if (opened._tag === "refused") return Effect.die(new Error(`refused with ${opened.status}: ${opened.body}`))
    return Effect.succeed(opened.client)
  })

/** Sends `message` and gives the next message received. */
const ask = (client: Client, message: unknown) => Effect.suspend(() => (client.send(message), client.next))

describe("/sync connections", () => {
  it.scoped("answers a plain GET with 426 and an OperationOutcome, and gives the sub-protocol only to a client that asks for it", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const plain = yield* Effect.promise(() => fetch(`${server.url}/sync`))
      expect(plain.status).toBe(426)
      expect(plain.headers.get("upgrade")).toBe("websocket")
      const body = (yield* Effect.promise(() => plain.json())) as { resourceType: string; issue: Array<{ code: string }> }
      expect(body.resourceType).toBe("OperationOutcome")
      expect(body.issue[0].code).toBe("not-supported")
      const asking = yield* connect(server, ["svc.sync.v1"])
      expect(asking.ws.protocol).toBe("svc.sync.v1")
      const notAsking = yield* connect(server)
      expect(notAsking.ws.protocol).toBe("")
    }))

  it.scoped("forwards a subscribe to the engine, whose messages reach the client in order, before the answer to the next message", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const client = yield* connect(server)
      client.send({ type: "subscribe", id: "q-1", query: "Patient?order" })
      client.send({ type: "ping", nonce: "after" })
      const messages = [yield* client.next, yield* client.next, yield* client.next, yield* client.next]
      expect(messages).toEqual([
        { type: "result", id: "q-1", commitTs: 1, resources: [], total: 0 },
        { type: "changes", commitTs: 2, queries: { "q-1": { entered: [{ resourceType: "Patient", id: "p1" }], changed: [], left: [] } } },
        { type: "changes", commitTs: 3, queries: { "q-1": { entered: [], changed: [], left: ["Patient/p1"] } } },
        { type: "pong", nonce: "after", commitTs: 42 }
      ])
      expect(server.engine.calls).toEqual(["subscribe q-1 Patient?order"])
      expect(yield* ask(client, { type: "ping" })).toEqual({ type: "pong", commitTs: 42 })
    }))

  it.scoped("answers unsubscribe with unsubscribed once the engine has let the query go", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const client = yield* connect(server)
      expect(yield* ask(client, { type: "subscribe", id: "a", query: "Patient?name=x" })).toMatchObject({ type: "result", id: "a" })
      expect(yield* ask(client, { type: "unsubscribe", id: "a" })).toEqual({ type: "unsubscribed", id: "a" })
      expect(server.engine.calls).toEqual(["subscribe a Patient?name=x", "unsubscribe a"])
    }))

  it.scoped("answers QueryFailed TooManyQueries past rate_limit.max_live_queries, and takes a subscribe again once one is ended", () =>
    Effect.gen(function*() {
      const server = yield* startServer({ max_live_queries: 2 })
      const client = yield* connect(server)
      expect(yield* ask(client, { type: "subscribe", id: "a", query: "Patient?name=a" })).toMatchObject({ type: "result", id: "a" })
      expect(yield* ask(client, { type: "subscribe", id: "b", query: "Patient?name=b" })).toMatchObject({ type: "result", id: "b" })
      const refused = yield* ask(client, { type: "subscribe", id: "c", query: "Patient?name=c" })
      expect(refused).toMatchObject({ type: "QueryFailed", id: "c", code: "TooManyQueries" })
      expect(refused.outcome.resourceType).toBe("OperationOutcome")
      expect(refused.outcome.issue[0].diagnostics).toMatch(/max_live_queries/)
      // Subscribing again with a held id replaces that query: not one more.
      expect(yield* ask(client, { type: "subscribe", id: "a", query: "Patient?name=a2" })).toMatchObject({ type: "result", id: "a" })
      expect(yield* ask(client, { type: "unsubscribe", id: "b" })).toEqual({ type: "unsubscribed", id: "b" })
      expect(yield* ask(client, { type: "subscribe", id: "c", query: "Patient?name=c" })).toMatchObject({ type: "result", id: "c" })
      expect(server.engine.calls).toEqual([
        "subscribe a Patient?name=a",
        "subscribe b Patient?name=b",
        "subscribe a Patient?name=a2",
        "unsubscribe b",
        "subscribe c Patient?name=c"
      ])
    }))

  it.scoped("refuses one more connection than rate_limit.max_sync_connections with 429 before the upgrade", () =>
    Effect.gen(function*() {
      const server = yield* startServer({ max_sync_connections: 2 })
      const first = yield* connect(server)
      yield* connect(server)
      const third = yield* open(server)
      if (third._tag !== "refused") return expect.unreachable("a third connection was opened")
      expect(third.status).toBe(429)
      const outcome = JSON.parse(third.body)
      expect(outcome.resourceType).toBe("OperationOutcome")
      expect(outcome.issue[0]).toMatchObject({ code: "throttled" })
      expect(outcome.issue[0].diagnostics).toMatch(/max_sync_connections/)
      // A closed connection no longer counts.
      first.ws.close()
      yield* first.closed
      yield* Queue.take(server.engine.disconnected)
      let again = yield* open(server)
      for (let attempt = 0; again._tag === "refused" && attempt < 100; attempt++) again = yield* open(server)
      expect(again._tag).toBe("client")
    }))

  it.scoped("answers error BadMessage to what is not a client message, NotSupported to auth, and stays open", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const client = yield* connect(server)
      const bad = (message: unknown) => Effect.map(ask(client, message), (answer) => {
        expect(answer).toMatchObject({ type: "error", code: "BadMessage" })
        return answer.message as string
      })
      expect(yield* bad("not json")).toMatch(/not JSON/)
      expect(yield* bad("[1, 2]")).toMatch(/not a JSON object/)
      expect(yield* bad({ type: "hello" })).toMatch(/unknown message type "hello"/)
      expect(yield* bad({ id: "a" })).toMatch(/unknown message type/)
      expect(yield* bad({ type: "subscribe", id: "no spaces", query: "Patient" })).toMatch(/a query id is 1 to 64/)
      expect(yield* bad({ type: "subscribe", id: "x".repeat(65), query: "Patient" })).toMatch(/a query id is 1 to 64/)
      expect(yield* bad({ type: "subscribe", id: "a" })).toMatch(/query/)
      expect(yield* bad({ type: "subscribe", id: "a", query: 7 })).toMatch(/query/)
      expect(yield* bad({ type: "unsubscribe" })).toMatch(/id/)
      expect(yield* bad(Buffer.from(JSON.stringify({ type: "ping" })))).toMatch(/binary/)
      expect(yield* ask(client, { type: "auth", token: "t" })).toMatchObject({ type: "error", code: "NotSupported" })
      expect(server.engine.calls).toEqual([])
      expect(yield* ask(client, { type: "ping", nonce: "still" })).toEqual({ type: "pong", nonce: "still", commitTs: 42 })
    }))

  it.scoped("takes a message of 16 KiB and closes the connection with 1009 on a larger one", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const client = yield* connect(server)
      const frame = (bytes: number) => {
        const empty = JSON.stringify({ type: "ping", nonce: "" })
        return JSON.stringify({ type: "ping", nonce: "n".repeat(bytes - empty.length) })
      }
      expect(Buffer.byteLength(frame(16 * 1024))).toBe(16 * 1024)
      expect((yield* ask(client, frame(16 * 1024))).type).toBe("pong")
      client.send(frame(16 * 1024 + 1))
      expect((yield* client.closed).code).toBe(1009)
      expect(yield* Queue.take(server.engine.disconnected)).toBeDefined()
    }))

  for (const [bound, bytes, taken] of [["256 messages", 1024, 256], ["4 MiB", 64 * 1024, 64]] as const) {
    it.scoped(`stops taking the engine's messages past ${bound} unsent, then sends reload once the client has read its queue, and the engine reloads`, () =>
      Effect.gen(function*() {
        const server = yield* startServer()
        const client = yield* connect(server)
        expect(yield* ask(client, { type: "subscribe", id: "gone", query: "Unknown?x" })).toMatchObject({ type: "QueryFailed", id: "gone" })
        expect(yield* ask(client, { type: "subscribe", id: "kept", query: "Patient?order" })).toMatchObject({ type: "result", id: "kept" })
        yield* client.next
        yield* client.next
        // The client stops reading; the engine sends 300 changes at once; the client pings.
        client.ws.pause()
        client.send({ type: "subscribe", id: "flood", query: `Basic?flood-${bytes}` })
        client.send({ type: "ping", nonce: "sent" })
        client.ws.resume()
        // The result and the changes taken, the pong (always queued), the reload, and the engine's results.
        const messages: Array<any> = []
        while (messages.length < taken + 4) messages.push(yield* client.next)
        expect(server.engine.flood.filter((sent) => sent).length).toBe(taken - 1)
        // Once refused, every later message is too: the connection stopped taking them.
        expect(server.engine.flood.indexOf(false)).toBe(taken - 1)
        expect(messages[0]).toMatchObject({ type: "result", id: "flood" })
        expect(messages.slice(1, taken).map((message) => message.commitTs)).toEqual(Array.from({ length: taken - 1 }, (_, i) => 2 + i))
        expect(messages[taken]).toEqual({ type: "pong", nonce: "sent", commitTs: 42 })
        expect(messages[taken + 1]).toEqual({ type: "reload", ids: ["kept", "flood"], reason: "the connection fell behind" })
        expect(messages[taken + 2]).toMatchObject({ type: "result", id: "kept", commitTs: 500 })
        expect(messages[taken + 3]).toMatchObject({ type: "result", id: "flood", commitTs: 500 })
        expect(server.engine.calls.at(-1)).toBe("reload kept,flood")
        // The engine's messages are taken again.
        expect(yield* ask(client, { type: "subscribe", id: "more", query: "Patient?order" })).toMatchObject({ type: "result", id: "more" })
      }))
  }

  it.scoped("sends a heartbeat with the engine's handled commit after 30 s of the clock without another message", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const client = yield* connect(server)
      expect(yield* ask(client, { type: "ping" })).toEqual({ type: "pong", commitTs: 42 })
      yield* TestClock.adjust("29 seconds")
      // A message within the 30 s puts the next heartbeat 30 s after it.
      expect(yield* ask(client, { type: "ping", nonce: "at 29 s" })).toEqual({ type: "pong", nonce: "at 29 s", commitTs: 42 })
      yield* TestClock.adjust("29 seconds")
      expect(yield* ask(client, { type: "ping", nonce: "at 58 s" })).toEqual({ type: "pong", nonce: "at 58 s", commitTs: 42 })
      yield* TestClock.adjust("30 seconds")
      expect(yield* client.next).toEqual({ type: "heartbeat", commitTs: 42 })
      yield* TestClock.adjust("30 seconds")
      expect(yield* client.next).toEqual({ type: "heartbeat", commitTs: 42 })
      expect(client.received.filter((message) => message.type === "heartbeat")).toHaveLength(2)
    }))

  it.scoped("tells the engine when a connection closes, with the connection its queries were subscribed on", () =>
    Effect.gen(function*() {
      const server = yield* startServer()
      const client = yield* connect(server)
      expect(yield* ask(client, { type: "subscribe", id: "a", query: "Patient?name=a" })).toMatchObject({ type: "result" })
      client.ws.close(1000)
      expect(yield* Queue.take(server.engine.disconnected)).toBe(server.engine.subscribers[0])
      expect(server.engine.calls).toEqual(["subscribe a Patient?name=a", "disconnect"])
    }))

  it.scoped("closes its connections with 1001 when the server stops", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const server = yield* Scope.extend(startServer(), scope)
      const client = yield* connect(server)
      expect(yield* ask(client, { type: "ping" })).toEqual({ type: "pong", commitTs: 42 })
      yield* Scope.close(scope, Exit.void)
      expect(yield* client.closed).toEqual({ code: 1001, reason: "the server is stopping" })
      expect(yield* Queue.take(server.engine.disconnected)).toBeDefined()
    }))

  it.scoped("charges each subscribe as cost class sync: past the rate limit it is answered QueryFailed RateLimited with retryAfter, and each is a request log line", () =>
    Effect.gen(function*() {
      // A burst of 10 units: the upgrade (class sync, 5) and one subscribe (5) spend it.
      const server = yield* startServer({ requests_per_second: 1, burst: 10, cost: { export: 5 } })
      const client = yield* connect(server)
      expect(yield* ask(client, { type: "subscribe", id: "a", query: "Patient?name=a" })).toMatchObject({ type: "result", id: "a" })
      const refused = yield* ask(client, { type: "subscribe", id: "b", query: "Patient?name=b" })
      expect(refused).toMatchObject({ type: "QueryFailed", id: "b", code: "RateLimited", retryAfter: 5 })
      expect(refused.outcome.issue[0]).toMatchObject({ code: "throttled" })
      expect(refused.outcome.issue[0].diagnostics).toMatch(/class sync costs 5/)
      expect(server.engine.calls).toEqual(["subscribe a Patient?name=a"])
      // The bucket fills again with the clock.
      yield* TestClock.adjust("5 seconds")
      expect(yield* ask(client, { type: "subscribe", id: "b", query: "Patient?name=b" })).toMatchObject({ type: "result", id: "b" })
      const steps = server.lines.map((line) => JSON.parse(line)).filter((line) => line.message === "request" && line.method === "SUBSCRIBE")
      expect(steps.map((line) => [line.path, line.status])).toEqual([["/fhir/Patient", 200], ["/fhir/Patient", 429], ["/fhir/Patient", 200]])
      expect(new Set(steps.map((line) => line.request_id)).size).toBe(3)
    }))
})

/** The next message that is not a heartbeat (the test clock moves past heartbeats too). */
const nextSaid = (client: Client): Effect.Effect<any> =>
  Effect.flatMap(client.next, (message) => (message.type === "heartbeat" ? nextSaid(client) : Effect.succeed(message)))

/** Sends `message` and gives the next message received that is not a heartbeat. */
const said = (client: Client, message: unknown) => Effect.suspend(() => (client.send(message), nextSaid(client)))

const good = (client: string, patient: string, expiresAt: number) => `good:${client}:${patient}:${expiresAt}`

describe("/sync connections under --smart", () => {
  it.scoped("serves no subscribe without a token: error Unauthorized, then closed with 4401", () =>
    Effect.gen(function*() {
      const server = yield* startServer({}, { revoked: new Set() })
      const client = yield* connect(server)
      expect(yield* said(client, { type: "ping" })).toEqual({ type: "pong", commitTs: 42 })
      expect(yield* said(client, { type: "subscribe", id: "a", query: "Patient" })).toMatchObject({ type: "error", code: "Unauthorized" })
      expect((yield* client.closed).code).toBe(4401)
      yield* Queue.take(server.engine.disconnected)
      expect(server.engine.calls).toEqual(["disconnect"])
    }))

  it.scoped("takes a token in an auth message: a bad one is refused and closes the connection (4401), a good one serves its caller", () =>
    Effect.gen(function*() {
      const server = yield* startServer({}, { revoked: new Set() })
      const refused = yield* connect(server)
      const answer = yield* said(refused, { type: "auth", token: "forged" })
      expect(answer).toEqual({ type: "error", code: "Unauthorized", message: "the token is not a well-formed access token of this server" })
      expect((yield* refused.closed).code).toBe(4401)
      const client = yield* connect(server)
      expect(yield* said(client, { type: "auth", token: good("app", "pa", 3_600_000) })).toEqual({ type: "authorized", expiresIn: 3600 })
      expect(yield* said(client, { type: "subscribe", id: "a", query: "Patient?name=a" })).toMatchObject({ type: "result", id: "a" })
      expect(server.engine.subscribers[0]!.principal).toMatchObject({ _tag: "Authorized", clientId: "app", patient: "pa" })
    }))

  it.scoped("closes a connection that sent no token within 30 s of the clock with 4401", () =>
    Effect.gen(function*() {
      const server = yield* startServer({}, { revoked: new Set() })
      const client = yield* connect(server)
      expect(yield* said(client, { type: "ping" })).toEqual({ type: "pong", commitTs: 42 })
      yield* TestClock.adjust("29 seconds")
      expect(yield* said(client, { type: "ping", nonce: "29 s" })).toEqual({ type: "pong", nonce: "29 s", commitTs: 42 })
      yield* TestClock.adjust("1 second")
      expect(yield* nextSaid(client)).toMatchObject({ type: "error", code: "Unauthorized", message: expect.stringMatching(/no token came within 30s/) })
      expect((yield* client.closed).code).toBe(4401)
    }))

  it.scoped("closes every query with closed TokenExpired when the token expires; a new token of the same caller serves again, another caller's is refused", () =>
    Effect.gen(function*() {
      const server = yield* startServer({}, { revoked: new Set() })
      const client = yield* connect(server)
      expect(yield* said(client, { type: "auth", token: good("app", "pa", 45_000) })).toEqual({ type: "authorized", expiresIn: 45 })
      expect(yield* said(client, { type: "subscribe", id: "a", query: "Patient?name=a" })).toMatchObject({ type: "result", id: "a" })
      expect(yield* said(client, { type: "subscribe", id: "b", query: "Patient?name=b" })).toMatchObject({ type: "result", id: "b" })
      yield* TestClock.adjust("44 seconds")
      expect(yield* said(client, { type: "ping", nonce: "44 s" })).toEqual({ type: "pong", nonce: "44 s", commitTs: 42 })
      yield* TestClock.adjust("1 second")
      expect([yield* nextSaid(client), yield* nextSaid(client), yield* nextSaid(client)]).toEqual([
        { type: "closed", id: "a", code: "TokenExpired", reason: "the token has expired" },
        { type: "closed", id: "b", code: "TokenExpired", reason: "the token has expired" },
        { type: "error", code: "TokenExpired", message: "the token has expired: send an auth message with a new token within 30s" }
      ])
      expect(server.engine.calls.at(-1)).toBe("closeAll TokenExpired")
      // Within 30 s, a new token of the same caller.
      yield* TestClock.adjust("20 seconds")
      expect(yield* said(client, { type: "auth", token: good("app", "pa", 3_600_000) })).toEqual({ type: "authorized", expiresIn: 3535 })
      expect(yield* said(client, { type: "subscribe", id: "a", query: "Patient?name=a" })).toMatchObject({ type: "result", id: "a" })
      // Renewed with the same scopes and patient, the queries stay as they are; with another patient they are checked and sent afresh.
      expect(yield* said(client, { type: "auth", token: good("app", "pa", 7_200_000) })).toMatchObject({ type: "authorized" })
      expect(yield* said(client, { type: "auth", token: good("app", "pb", 7_200_000) })).toMatchObject({ type: "authorized" })
      expect(server.engine.calls.filter((call) => call.startsWith("reauthorize"))).toEqual(["reauthorize false", "reauthorize true"])
      const other = yield* said(client, { type: "auth", token: good("other", "pa", 7_200_000) })
      expect(other).toMatchObject({ type: "error", code: "Unauthorized", message: expect.stringMatching(/serves client:app\/user:u/) })
      expect(server.engine.subscribers.at(-1)!.principal).toMatchObject({ clientId: "app", patient: "pb" })
      expect(yield* said(client, { type: "ping" })).toEqual({ type: "pong", commitTs: 42 })
    }))

  it.scoped("checks the token again every 30 s: a revoked one closes every query with closed TokenRevoked", () =>
    Effect.gen(function*() {
      const revoked = new Set<string>()
      const server = yield* startServer({}, { revoked })
      const token = good("app", "pa", 3_600_000)
      const client = yield* connect(server)
      expect(yield* said(client, { type: "auth", token })).toMatchObject({ type: "authorized" })
      expect(yield* said(client, { type: "subscribe", id: "a", query: "Patient?name=a" })).toMatchObject({ type: "result", id: "a" })
      yield* TestClock.adjust("30 seconds")
      expect(yield* said(client, { type: "ping", nonce: "still" })).toEqual({ type: "pong", nonce: "still", commitTs: 42 })
      revoked.add(token)
      yield* TestClock.adjust("30 seconds")
      expect(yield* nextSaid(client)).toEqual({ type: "closed", id: "a", code: "TokenRevoked", reason: "the token was revoked" })
      expect(yield* nextSaid(client)).toMatchObject({ type: "error", code: "TokenRevoked" })
      // No new token within 30 s: closed.
      yield* TestClock.adjust("30 seconds")
      expect(yield* nextSaid(client)).toMatchObject({ type: "error", code: "Unauthorized" })
      expect((yield* client.closed).code).toBe(4401)
    }))

  it.scoped("counts a connection opened without a token against its token's caller once it has one", () =>
    Effect.gen(function*() {
      const server = yield* startServer({ max_sync_connections: 1 }, { revoked: new Set() })
      const first = yield* connect(server)
      expect(yield* said(first, { type: "auth", token: good("app", "pa", 3_600_000) })).toMatchObject({ type: "authorized" })
      // The address's slot is free again: a second connection opens, but may not become the same caller's.
      const second = yield* connect(server)
      expect(yield* said(second, { type: "auth", token: good("app", "pa", 3_600_000) })).toMatchObject({ type: "error", code: "TooManyConnections" })
      expect((yield* second.closed).code).toBe(1008)
      const third = yield* connect(server)
      expect(yield* said(third, { type: "auth", token: good("another", "pa", 3_600_000) })).toMatchObject({ type: "authorized" })
    }))
})
