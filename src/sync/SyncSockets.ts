/**
 * The connections of `/sync` (docs/sync.md, protocol version 1): the WebSocket upgrade, the client's messages
 * read one at a time in order and handed to the live-query engine (LiveQueries.ts), each connection's bounded
 * outbox (Outbox.ts: a client that falls behind gets `reload`, never a silent gap), heartbeats, and the limits
 * of `[rate_limit]`: `max_sync_connections` per caller (one more upgrade is refused with 429) and
 * `max_live_queries` per connection (one more `subscribe` is answered `QueryFailed` `TooManyQueries`).
 *
 * The same stack as the Subscriptions' `/ws` (src/subscriptions/SubscriptionSockets.ts): the `ws` package with
 * a server of its own, so that a message over `maxMessageBytes` closes the socket (1009) as soon as its length
 * is read, on the socket the front door admitted.
 */
import { HttpServerResponse } from "@effect/platform"
import { Clock, Context, Deferred, Duration, Effect, Either, Layer, Queue } from "effect"
import { WebSocket, WebSocketServer } from "ws"
import { acceptUpgrade, hangUp as closeSocket, isUpgrade, takeSocket } from "../http/webSocket.ts"
import { GovernanceSettings } from "../governance/Governance.ts"
import { limiterOf } from "../governance/RateLimit.ts"
import { admissionOf } from "../http/FrontDoor.ts"
import { operationOutcome, outcomeResponse } from "../http/OperationOutcome.ts"
import { callerKey, type Principal } from "../http/Principal.ts"
import type { RootHandler, RootRequest } from "../http/RootRoutes.ts"
import { readClientMessage } from "./clientMessages.ts"
import { LiveQueries, type SyncConnection } from "./LiveQueries.ts"
import * as Outbox from "./Outbox.ts"
import { type ClientMessage, protocolName, type ServerMessage } from "./protocol.ts"

/** The largest client message, in bytes (a larger one closes the connection with 1009). */
export const maxMessageBytes = 16 * 1024
/** The most client messages waiting for their answer on one connection (more: closed with 1008). */
export const maxWaitingMessages = 64
/** A connection that sent nothing for this long is sent a `heartbeat`. */
export const heartbeatInterval = Duration.seconds(30)

/** The close codes the server sends (4000-4999 are the application's; RFC 6455, 7.4.2). */
export const closeCodes = {
  /** The client did not read even the answers to its own messages. */
  notReading: 4003,
  /** More messages arrived than wait for an answer (RFC 6455: policy violation). */
  tooManyMessages: 1008,
  /** The server is stopping (RFC 6455: going away). */
  stopping: 1001
} as const

export class SyncSockets extends Context.Tag("svc/sync/SyncSockets")<SyncSockets, {
  /** Answers a request to `/sync`: the connection, for as long as it is open, or the 426 or 429 that refuses it. */
  readonly serve: (request: RootRequest) => Effect.Effect<HttpServerResponse.HttpServerResponse>
  /** Connections open now. */
  readonly open: Effect.Effect<number>
}>() {}

/** Work for a connection's one reader: a client message (null for a binary one), or the reload it is due. */
type Work = { readonly _tag: "message"; readonly text: string | null } | { readonly _tag: "reload" }

/** One open connection. */
interface Connection extends SyncConnection {
  readonly ws: WebSocket
  /** The ids of the live queries it holds, as its messages and the engine's answers say. */
  readonly ids: Set<string>
  readonly outbox: Outbox.Outbox
  /** When a message was last queued, in milliseconds on the server's clock. */
  lastSent: number
}

/** The answer to a plain GET of `/sync` (426 Upgrade Required, RFC 9110 15.5.22). */
const upgradeRequired = outcomeResponse(
  "not-supported",
  "/sync is the live-query endpoint: open it as a WebSocket (a GET with Upgrade: websocket), then send JSON messages (docs/sync.md)",
  { status: 426, headers: { upgrade: "websocket" } }
)

const tooManyConnections = (max: number | undefined) =>
  outcomeResponse(
    "throttled",
    `this caller has ${max ?? "the most"} /sync connections open, the most it may (rate_limit.max_sync_connections): close one first`,
    { status: 429 }
  )

const tooManyQueries = (id: string, max: number | undefined): ServerMessage => ({
  type: "QueryFailed",
  id,
  code: "TooManyQueries",
  outcome: operationOutcome([{
    severity: "error",
    code: "too-costly",
    diagnostics: `this connection holds ${max ?? "the most"} live queries, the most it may (rate_limit.max_live_queries): unsubscribe one first`
  }])
})

const badMessage = (message: string): ServerMessage => ({ type: "error", code: "BadMessage", message })

export const make = Effect.gen(function*() {
  const engine = yield* LiveQueries
  const rateLimit = (yield* GovernanceSettings).rateLimit
  const limiter = limiterOf(rateLimit, yield* Effect.clock)
  const maxSyncConnections = rateLimit.enabled ? rateLimit.max_sync_connections : undefined
  const maxLiveQueries = rateLimit.enabled ? rateLimit.max_live_queries : undefined
  const open = new Set<Connection>()

  const server = yield* Effect.acquireRelease(
    Effect.sync(() => {
      const wss = new WebSocketServer({
        noServer: true,
        maxPayload: maxMessageBytes,
        clientTracking: false,
        perMessageDeflate: false,
        // The sub-protocol is answered only when asked for; a client asking only for others gets none.
        handleProtocols: (protocols) => (protocols.has(protocolName) ? protocolName : false)
      })
      wss.on("headers", (headers, request) => {
        const admission = admissionOf(request)
        if (admission !== undefined) headers.push(`x-request-id: ${admission.requestId}`)
      })
      return wss
    }),
    (wss) =>
      Effect.sync(() => {
        for (const connection of open) connection.ws.close(closeCodes.stopping, "the server is stopping")
        wss.close()
      })
  )

  /** The answer to one client message. */
  const answer = (connection: Connection, message: ClientMessage): Effect.Effect<void> => {
    const send = (reply: ServerMessage) => Effect.sync(() => void connection.send(reply))
    switch (message.type) {
      case "auth":
        return send({ type: "error", code: "NotSupported", message: "auth messages are not taken by this server yet" })
      case "ping":
        return send(message.nonce === undefined ? { type: "pong" } : { type: "pong", nonce: message.nonce })
      case "unsubscribe":
        return Effect.zipRight(
          engine.unsubscribe(connection, message.id),
          Effect.suspend(() => {
            connection.ids.delete(message.id)
            return send({ type: "unsubscribed", id: message.id })
          })
        )
      case "subscribe":
        return Effect.suspend(() => {
          if (!connection.ids.has(message.id) && !limiter.liveQueryAllowed(engine.held(connection))) {
            return send(tooManyQueries(message.id, maxLiveQueries))
          }
          // Held from now: a QueryFailed the engine sends for it removes it again (see `send`).
          connection.ids.add(message.id)
          return engine.subscribe(connection, message.id, message.query, message.since)
        })
    }
  }

  const work = (connection: Connection, item: Work): Effect.Effect<void> =>
    Effect.suspend(() => {
      if (item._tag === "reload") {
        connection.outbox.resume()
        const ids = [...connection.ids]
        connection.send({ type: "reload", ids, reason: "the connection fell behind" })
        return engine.reload(connection, ids)
      }
      if (item.text === null) return Effect.sync(() => void connection.send(badMessage("binary messages are not understood: send JSON text")))
      const read = readClientMessage(item.text)
      return Either.isLeft(read) ? Effect.sync(() => void connection.send(badMessage(read.left))) : answer(connection, read.right)
    })

  /** A new connection on `ws`, its messages queued in `inbox`, `closed` completed when it closes. */
  const connect = (ws: WebSocket, principal: Principal, clock: Clock.Clock, inbox: Queue.Queue<Work>, closed: Deferred.Deferred<void>) => {
    let waiting = 0
    const outbox = Outbox.make({
      write: (text, written) => {
        if (ws.readyState === WebSocket.OPEN) ws.send(text, written)
        else written()
      },
      onCaughtUp: () => void inbox.unsafeOffer({ _tag: "reload" }),
      onStuck: () => ws.close(closeCodes.notReading, "the client does not read its messages")
    })
    const connection: Connection = {
      ws,
      principal,
      ids: new Set(),
      outbox,
      lastSent: clock.unsafeCurrentTimeMillis(),
      send: (message) => {
        if (ws.readyState !== WebSocket.OPEN) return false
        if (message.type === "QueryFailed" || message.type === "closed") connection.ids.delete(message.id)
        const taken = outbox.offer(message)
        if (taken) connection.lastSent = clock.unsafeCurrentTimeMillis()
        return taken
      }
    }
    ws.on("message", (data, isBinary) => {
      if (waiting >= maxWaitingMessages) return ws.close(closeCodes.tooManyMessages, "too many messages waiting for an answer")
      waiting++
      const bytes = Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data)
      inbox.unsafeOffer({ _tag: "message", text: isBinary ? null : bytes.toString("utf8") })
    })
    // `ws` closes the socket itself on a protocol error (a message over maxPayload: 1009); without a listener
    // the error would be thrown.
    ws.on("error", () => undefined)
    ws.once("close", () => Deferred.unsafeDone(closed, Effect.void))
    open.add(connection)
    return { connection, answered: () => void waiting-- }
  }

  /** Closes a connection whose session ends (the server stops, or the request was interrupted), waiting a moment for the client's close. */
  const hangUp = (connection: Connection) => {
    open.delete(connection)
    return closeSocket(connection.ws, closeCodes.stopping, "the server is stopping")
  }

  /** A heartbeat whenever `heartbeatInterval` passed since the last message, while the client keeps up. */
  const heartbeats = (connection: Connection) =>
    Effect.forever(Effect.gen(function*() {
      const due = connection.lastSent + Duration.toMillis(heartbeatInterval)
      const now = yield* Clock.currentTimeMillis
      if (now < due) return yield* Effect.sleep(Duration.millis(due - now))
      // Behind, the results are not current: no heartbeat until the reload.
      const sent = connection.outbox.taking() && connection.send({ type: "heartbeat", commitTs: yield* engine.handled })
      if (!sent) yield* Effect.sleep(heartbeatInterval)
    }))

  const serve = (request: RootRequest): Effect.Effect<HttpServerResponse.HttpServerResponse> =>
    Effect.suspend(() => {
      if (!isUpgrade(request.http)) return Effect.succeed(upgradeRequired)
      const caller = callerKey(request.principal)
      return Effect.scoped(Effect.gen(function*() {
        const admitted = yield* Effect.acquireRelease(
          Effect.sync(() => limiter.syncConnections.open(caller)),
          (taken) => Effect.sync(() => taken && limiter.syncConnections.close(caller))
        )
        if (!admitted) return tooManyConnections(maxSyncConnections)
        const incoming = takeSocket(request.http)
        const clock = yield* Effect.clock
        const inbox = yield* Queue.unbounded<Work>()
        const closed = yield* Deferred.make<void>()
        const opened = yield* Effect.acquireRelease(
          acceptUpgrade(server, incoming, (ws) => connect(ws, request.principal, clock, inbox, closed)),
          (opened) => (opened === undefined ? Effect.void : hangUp(opened.connection))
        )
        // The status is for the request log: `ws` wrote the handshake's refusal itself.
        if (opened === undefined) return HttpServerResponse.empty({ status: 400 })
        const { answered, connection } = opened
        // Runs after the reader and the heartbeats have stopped.
        yield* Effect.addFinalizer(() => engine.disconnect(connection))
        // One message at a time, in the order they came.
        yield* Effect.forkScoped(Effect.forever(Effect.flatMap(Queue.take(inbox), (item) =>
          Effect.ensuring(work(connection, item), Effect.sync(() => item._tag === "message" && answered())))))
        yield* Effect.forkScoped(heartbeats(connection))
        yield* Deferred.await(closed)
        return HttpServerResponse.empty({ status: 101 })
      }))
    })

  return SyncSockets.of({ serve, open: Effect.sync(() => open.size) })
})

/** The connections of a server, closed (1001) when its scope closes. */
export const layer = Layer.scoped(SyncSockets, make)

/** The `/sync` root route's handler (src/http/RootRoutes.ts), served with the server's `SyncSockets`. */
export const handler: RootHandler<never, SyncSockets> = (request) => Effect.flatMap(SyncSockets, (sockets) => sockets.serve(request))
