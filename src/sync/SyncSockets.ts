/**
 * The connections of `/sync` (docs/sync.md, protocol version 1): the WebSocket upgrade, the client's messages
 * read one at a time in order and handed to the live-query engine (LiveQueries.ts), each connection's bounded
 * outbox (Outbox.ts: a client that falls behind gets `reload`, never a silent gap), heartbeats, and the limits
 * of `[rate_limit]`: `max_sync_connections` per caller (one more upgrade is refused with 429) and
 * `max_live_queries` per connection (one more `subscribe` is answered `QueryFailed` `TooManyQueries`).
 *
 * Under `--smart` a connection serves its caller's token (docs/sync.md, "Connecting"): the upgrade's
 * Authorization header, or an `auth` message for a browser, which cannot set it (the front door admits a `/sync`
 * upgrade without a token for that). A connection without a token serves no `subscribe`, and is closed (4401) when
 * none came within `authTimeout`; the token in force is checked again every `tokenRecheck` and when it expires,
 * and a token that expired or was revoked closes every query (`closed`). A later `auth` of the same caller
 * renews the token without touching the queries.
 *
 * Each `subscribe` is a step of its own at the front door (FrontDoor.ts, `step`): the caller's rate limit charges
 * it as cost class `sync`, the quotas count it, and it is completed like a request (request log, metering, audit
 * trail, where it shows as a search of its query by method `SUBSCRIBE`).
 *
 * The same stack as the Subscriptions' `/ws` (src/subscriptions/SubscriptionSockets.ts): the `ws` package with
 * a server of its own, so that a message over `maxMessageBytes` closes the socket (1009) as soon as its length
 * is read, on the socket the front door admitted.
 */
import { HttpServerResponse } from "@effect/platform"
import { Clock, Context, Deferred, Duration, Effect, Either, Layer, Option, Queue } from "effect"
import { WebSocket, WebSocketServer } from "ws"
import { acceptUpgrade, hangUp as closeSocket, isUpgrade, takeSocket } from "../http/webSocket.ts"
import { GovernanceSettings } from "../governance/Governance.ts"
import { limiterOf } from "../governance/RateLimit.ts"
import { bearerToken } from "../auth/secrets.ts"
import { admissionOf, Door, type Refusal } from "../http/FrontDoor.ts"
import { operationOutcome, outcomeResponse } from "../http/OperationOutcome.ts"
import { anonymous, callerKey, type Principal } from "../http/Principal.ts"
import { fhirBase } from "../http/Route.ts"
import type { RootHandler, RootRequest } from "../http/RootRoutes.ts"
import { readClientMessage } from "./clientMessages.ts"
import { LiveQueries, type Subscribed, type SyncConnection } from "./LiveQueries.ts"
import { SyncTokens } from "./SyncTokens.ts"
import * as Outbox from "./Outbox.ts"
import { type ClientMessage, protocolName, type ServerMessage } from "./protocol.ts"

/** The largest client message, in bytes (a larger one closes the connection with 1009). */
export const maxMessageBytes = 16 * 1024
/** The most client messages waiting for their answer on one connection (more: closed with 1008). */
export const maxWaitingMessages = 64
/** A connection that sent nothing for this long is sent a `heartbeat`. */
export const heartbeatInterval = Duration.seconds(30)
/** Under `--smart`, how long a connection may stay without a token (at the start, or after its token expired). */
export const authTimeout = Duration.seconds(30)
/** Under `--smart`, how often the token in force is checked again (a revocation is seen within this and the servers' own reload of revocations). */
export const tokenRecheck = Duration.seconds(30)

/** The close codes the server sends (4000-4999 are the application's; RFC 6455, 7.4.2). */
export const closeCodes = {
  /** The client did not read even the answers to its own messages. */
  notReading: 4003,
  /** More messages arrived than wait for an answer (RFC 6455: policy violation). */
  tooManyMessages: 1008,
  /** The server is stopping (RFC 6455: going away). */
  stopping: 1001,
  /** Under `--smart`: no token, or a `subscribe` before one. */
  unauthorized: 4401
} as const

export class SyncSockets extends Context.Tag("svc/sync/SyncSockets")<SyncSockets, {
  /** Answers a request to `/sync`: the connection, for as long as it is open, or the 426 or 429 that refuses it. */
  readonly serve: (request: RootRequest) => Effect.Effect<HttpServerResponse.HttpServerResponse>
  /** Connections open now. */
  readonly open: Effect.Effect<number>
}>() {}

/** What a connection starts with: its caller and token as the upgrade gave them, and the caller key it counts against. */
interface Opening {
  readonly principal: Principal
  readonly token: string | undefined
  readonly slot: string
  readonly tokenChanged: Queue.Queue<void>
}

/** Work for a connection's one reader: a client message (null for a binary one), or the reload it is due. */
type Work = { readonly _tag: "message"; readonly text: string | null } | { readonly _tag: "reload" }

/** One open connection. */
interface Connection extends SyncConnection {
  principal: Principal
  /** The bearer token in force (under `--smart`), as given in the header or the latest `auth`. */
  token: string | undefined
  /** The caller key the connection counts against (`max_sync_connections`): the upgrade's, then its token's. */
  slot: string
  /** Told of each new token, for the watch of the token in force. */
  readonly tokenChanged: Queue.Queue<void>
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

/** The `QueryFailed` code of a refusal at the front door. */
const refusedCode = (refusal: Refusal): string =>
  refusal.limit === "rate"
    ? "RateLimited"
    : refusal.limit === "quota"
    ? "QuotaExceeded"
    : refusal.status === 401
    ? "Unauthorized"
    : refusal.status === 403
    ? "Forbidden"
    : "Refused"

const refusedQuery = (id: string, refusal: Refusal): ServerMessage => {
  const retryAfter = Number(refusal.headers?.["retry-after"])
  return {
    type: "QueryFailed",
    id,
    code: refusedCode(refusal),
    outcome: operationOutcome([{ severity: "error", code: refusal.code, diagnostics: refusal.diagnostics }]),
    ...(Number.isFinite(retryAfter) ? { retryAfter } : {})
  }
}

/** The status a subscribe is completed with, as the REST search it stands for would have been answered. */
const statusOf = (subscribed: Subscribed): number => {
  if (subscribed._tag === "Held") return 200
  switch (subscribed.code) {
    case "Forbidden":
      return 403
    case "ServerError":
      return 500
    default:
      return 400
  }
}

/** The URL of the REST search a query stands for, for the request log and the audit trail. */
const searchUrl = (query: string): string => `${fhirBase}/${query.replace(/^\/+/, "")}`

export const make = Effect.gen(function*() {
  const engine = yield* LiveQueries
  const door = yield* Door
  const settings = yield* GovernanceSettings
  const tokens = Option.getOrUndefined(yield* Effect.serviceOption(SyncTokens))
  // Under --smart a connection is served only for a token: without the means to verify one, nothing could be.
  if (settings.smart && tokens === undefined) return yield* Effect.dieMessage("/sync under --smart needs the authorization layer's SyncTokens")
  const rateLimit = settings.rateLimit
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

  /** Whether the connection may serve queries: always without `--smart`, with a token in force under it. */
  const hasToken = (connection: Connection) => !settings.smart || connection.principal._tag === "Authorized"

  /** Tells the client why, and closes the connection (4401). */
  const refuseUnauthorized = (connection: Connection, message: string) =>
    Effect.sync(() => {
      connection.send({ type: "error", code: "Unauthorized", message })
      connection.ws.close(closeCodes.unauthorized, "unauthorized")
    })

  /** An `auth` message: the token verified, then in force for the connection's caller. */
  const authorize = (connection: Connection, token: string): Effect.Effect<void> =>
    Effect.gen(function*() {
      const send = (reply: ServerMessage) => void connection.send(reply)
      if (tokens === undefined) return send({ type: "error", code: "NotSupported", message: "this server runs without --smart: it takes no tokens" })
      const address = connection.principal.address
      const verified = yield* Effect.either(tokens.verify(token, address))
      if (Either.isLeft(verified)) {
        // A connection with a token in force keeps it; one without is refused.
        if (hasToken(connection)) return send({ type: "error", code: verified.left.code, message: verified.left.reason })
        return yield* refuseUnauthorized(connection, verified.left.reason)
      }
      const principal = verified.right
      const previous = connection.principal
      const key = callerKey(principal)
      if (previous._tag === "Authorized" && callerKey(previous) !== key) {
        return send({ type: "error", code: "Unauthorized", message: `this connection serves ${callerKey(previous)}: open a new connection for another client or user` })
      }
      if (connection.slot !== key) {
        // The connection now counts against its token's caller, not the address it opened from.
        if (!limiter.syncConnections.open(key)) {
          connection.send({ type: "error", code: "TooManyConnections", message: `this caller has ${maxSyncConnections ?? "the most"} /sync connections open, the most it may (rate_limit.max_sync_connections)` })
          return connection.ws.close(closeCodes.tooManyMessages, "too many connections")
        }
        limiter.syncConnections.close(connection.slot)
        connection.slot = key
      }
      connection.principal = principal
      connection.token = token
      const now = yield* Clock.currentTimeMillis
      send({ type: "authorized", ...(principal.expiresAt === undefined ? {} : { expiresIn: Math.max(0, Math.floor((principal.expiresAt - now) / 1000)) }) })
      connection.tokenChanged.unsafeOffer(undefined)
      if (previous._tag === "Authorized") {
        // What the caller may see changed only when its scopes or its patient did.
        const same = previous.patient === principal.patient && previous.scopes.join(" ") === principal.scopes.join(" ")
        yield* engine.reauthorize(connection, !same)
      }
    })

  /** A `subscribe`: admitted at the front door as a step of class `sync`, then started by the engine. */
  const subscribe = (connection: Connection, message: Extract<ClientMessage, { type: "subscribe" }>): Effect.Effect<void> =>
    Effect.gen(function*() {
      if (!hasToken(connection)) return yield* refuseUnauthorized(connection, "send an auth message with a bearer token before subscribing")
      if (!connection.ids.has(message.id) && !limiter.liveQueryAllowed(engine.held(connection))) {
        return void connection.send(tooManyQueries(message.id, maxLiveQueries))
      }
      const step = door.step({ principal: connection.principal, client: connection.principal.address, method: "SUBSCRIBE", url: searchUrl(message.query), cost: "sync" })
      if (step._tag === "Refused") return void connection.send(refusedQuery(message.id, step))
      // Held from now: a QueryFailed the engine sends for it removes it again (see `send`).
      connection.ids.add(message.id)
      const before = connection.outbox.bytes()
      const subscribed = yield* engine.subscribe(connection, message.id, message.query, message.since)
      step.complete(statusOf(subscribed), connection.outbox.bytes() - before)
    })

  /** The answer to one client message. */
  const answer = (connection: Connection, message: ClientMessage): Effect.Effect<void> => {
    const send = (reply: ServerMessage) => Effect.sync(() => void connection.send(reply))
    switch (message.type) {
      case "auth":
        return authorize(connection, message.token)
      case "ping":
        // With the commit every result is current as of: a client may ask how far the server has got.
        return Effect.flatMap(engine.handled, (commitTs) =>
          send(message.nonce === undefined ? { type: "pong", commitTs } : { type: "pong", nonce: message.nonce, commitTs }))
      case "unsubscribe":
        return Effect.zipRight(
          engine.unsubscribe(connection, message.id),
          Effect.suspend(() => {
            connection.ids.delete(message.id)
            return send({ type: "unsubscribed", id: message.id })
          })
        )
      case "subscribe":
        return subscribe(connection, message)
    }
  }

  /**
   * Under `--smart`, the watch of the connection's token: without one, the connection is closed (4401) when none
   * came within `authTimeout`; with one, it is checked again every `tokenRecheck` and when it expires, and one that
   * expired or was revoked closes every query (`closed`), leaving the connection `authTimeout` for a new `auth`.
   */
  const watchToken = (connection: Connection) =>
    Effect.forever(Effect.gen(function*() {
      const principal = connection.principal
      const now = yield* Clock.currentTimeMillis
      const wait = principal._tag !== "Authorized"
        ? Duration.toMillis(authTimeout)
        : Math.max(0, Math.min(Duration.toMillis(tokenRecheck), (principal.expiresAt ?? Infinity) - now))
      const changed = yield* Effect.race(
        Effect.as(Queue.take(connection.tokenChanged), true),
        Effect.as(Effect.sleep(Duration.millis(wait)), false)
      )
      if (changed || connection.principal !== principal) return
      if (principal._tag !== "Authorized") {
        yield* refuseUnauthorized(connection, `no token came within ${Duration.format(authTimeout)}: send an auth message with a bearer token`)
        return yield* Effect.never
      }
      const checked = yield* Effect.either(tokens!.verify(connection.token ?? "", principal.address))
      if (Either.isRight(checked) || connection.principal !== principal) return
      connection.principal = anonymous(principal.address)
      connection.token = undefined
      yield* engine.closeAll(connection, checked.left.code, checked.left.reason)
      connection.send({ type: "error", code: checked.left.code, message: `${checked.left.reason}: send an auth message with a new token within ${Duration.format(authTimeout)}` })
    }))

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
  const connect = (ws: WebSocket, opening: Opening, clock: Clock.Clock, inbox: Queue.Queue<Work>, closed: Deferred.Deferred<void>) => {
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
      principal: opening.principal,
      token: opening.token,
      slot: opening.slot,
      tokenChanged: opening.tokenChanged,
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
      return Effect.scoped(Effect.gen(function*() {
        const slot = { key: callerKey(request.principal) }
        const admitted = yield* Effect.acquireRelease(
          Effect.sync(() => limiter.syncConnections.open(slot.key)),
          // The connection's slot may have moved to its token's caller: that one is given back.
          (taken) => Effect.sync(() => taken && limiter.syncConnections.close(slot.key))
        )
        if (!admitted) return tooManyConnections(maxSyncConnections)
        const header = request.http.headers["authorization"]
        const opening: Opening = {
          principal: request.principal,
          token: request.principal._tag === "Authorized" && header !== undefined ? bearerToken(header) : undefined,
          slot: slot.key,
          tokenChanged: yield* Queue.sliding<void>(1)
        }
        const incoming = takeSocket(request.http)
        const clock = yield* Effect.clock
        const inbox = yield* Queue.unbounded<Work>()
        const closed = yield* Deferred.make<void>()
        const opened = yield* Effect.acquireRelease(
          acceptUpgrade(server, incoming, (ws) => connect(ws, opening, clock, inbox, closed)),
          (opened) => (opened === undefined ? Effect.void : hangUp(opened.connection))
        )
        // The status is for the request log: `ws` wrote the handshake's refusal itself.
        if (opened === undefined) return HttpServerResponse.empty({ status: 400 })
        const { answered, connection } = opened
        // Runs after the reader and the heartbeats have stopped.
        yield* Effect.addFinalizer(() => engine.disconnect(connection))
        yield* Effect.addFinalizer(() => Effect.sync(() => void (slot.key = connection.slot)))
        // One message at a time, in the order they came.
        yield* Effect.forkScoped(Effect.forever(Effect.flatMap(Queue.take(inbox), (item) =>
          Effect.ensuring(work(connection, item), Effect.sync(() => item._tag === "message" && answered())))))
        yield* Effect.forkScoped(heartbeats(connection))
        if (settings.smart) yield* Effect.forkScoped(watchToken(connection))
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
