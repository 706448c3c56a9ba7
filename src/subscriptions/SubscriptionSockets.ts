/**
 * The websocket channel of R4 Subscriptions (https://hl7.org/fhir/R4/subscription.html, channel type
 * `websocket`; interface spec, Subscription notifications, rule 8: "no handshake and keeps one socket per id").
 * A client opens a WebSocket at `/ws`, sends `bind <id>` for a Subscription whose channel is `websocket`, and is
 * answered `bound <id>`; from then on each notification of that Subscription is the text `ping <id>` on that
 * socket (delivery calls `ping`). "No handshake": there is no binding-token step (R5's `$get-ws-binding-token`);
 * a `bind` is judged by the access of the caller that opened the socket (socketBinding.ts).
 *
 * The server's messages: `bound <id>`; `ping <id>`; `error <id> <reason>` when `<id>` is not bound on this socket
 * (not known, not a websocket channel, not allowed, too many ids) or no longer is (taken over by a newer socket,
 * deleted); `error <reason>` for a message that is not `bind <id>`. An error leaves the socket open.
 *
 * One socket per id: a `bind` of an id another socket holds takes it over. A socket may hold several ids. A
 * socket that loses its last id this way is closed, with a code that says why (`closeCodes`); one that still
 * holds others is told `error <id> <reason>` and stays. A closed socket's ids are forgotten.
 *
 * Bounds: `maxIdsPerSocket` ids a socket may hold; `maxMessageBytes` per incoming message (a larger one closes
 * the socket with 1009 before it is read whole); `maxWaitingMessages` messages not yet answered (more: closed
 * with 1008); `maxUnsentBytes` of pings the client has not read (more: closed with `closeCodes.notReading`).
 */
import { HttpServerResponse } from "@effect/platform"
import { Context, Deferred, Effect, Layer, Queue } from "effect"
import type { IncomingMessage } from "node:http"
import { WebSocket, WebSocketServer } from "ws"
import { acceptUpgrade, hangUp as closeSocket, isUpgrade, takeSocket } from "../http/webSocket.ts"
import { CatalogService } from "../catalog/CatalogService.ts"
import { Database } from "../db/Database.ts"
import { admissionOf } from "../http/FrontDoor.ts"
import { outcomeResponse } from "../http/OperationOutcome.ts"
import type { Principal } from "../http/Principal.ts"
import type { RootHandler, RootRequest } from "../http/RootRoutes.ts"
import { bindingCheck } from "./socketBinding.ts"

/** The most Subscription ids one socket may hold. */
export const maxIdsPerSocket = 100
/** The largest incoming message, in bytes: `bind ` and a 64-character id fit many times over. */
export const maxMessageBytes = 256
/** The most incoming messages waiting for their answer on one socket. */
export const maxWaitingMessages = 16
/** The most bytes of pings waiting on one socket for a client that does not read them. */
export const maxUnsentBytes = 64 * 1024

/** The close codes the server sends (4000-4999 are the application's; RFC 6455, 7.4.2). */
export const closeCodes = {
  /** Its last id was bound by a newer socket. */
  replaced: 4001,
  /** Its last id's Subscription was deleted. */
  deleted: 4002,
  /** The client did not read its pings. */
  notReading: 4003,
  /** More messages arrived than wait for an answer (RFC 6455: policy violation). */
  tooManyMessages: 1008,
  /** The server is stopping (RFC 6455: going away). */
  stopping: 1001
} as const

export class SubscriptionSockets extends Context.Tag("svc/subscriptions/SubscriptionSockets")<SubscriptionSockets, {
  /** Sends `ping <id>` on the socket bound to `id`: true when one is bound and open and the ping was queued. */
  readonly ping: (id: string) => Effect.Effect<boolean>
  /** Ends the binding of `id` (its Subscription was deleted): the socket is told, or closed if it held no other id. */
  readonly unbindAll: (id: string) => Effect.Effect<void>
  /** Answers a request to `/ws`: the WebSocket, for as long as it is open, or the 426 of a plain request. */
  readonly serve: (request: RootRequest) => Effect.Effect<HttpServerResponse.HttpServerResponse>
}>() {}

/** A socket and the ids it holds. */
interface Connection {
  readonly ws: WebSocket
  readonly principal: Principal
  readonly ids: Set<string>
}

/** An incoming message: its text, or null for a binary one. */
type Incoming = string | null

const idPattern = /^[A-Za-z0-9\-.]{1,64}$/

/** The answer to a plain GET of `/ws` (426 Upgrade Required, RFC 9110 15.5.22). */
const upgradeRequired = outcomeResponse(
  "not-supported",
  "/ws is the websocket channel of Subscriptions: open it as a WebSocket (a GET with Upgrade: websocket), then send \"bind <id>\"",
  { status: 426, headers: { upgrade: "websocket" } }
)

export const make = Effect.gen(function*() {
  const check = bindingCheck(yield* Database, yield* CatalogService)
  const byId = new Map<string, Connection>()
  const open = new Set<Connection>()

  // The `ws` package directly rather than @effect/platform's `HttpServerRequest.upgrade`: the platform's own
  // WebSocket server takes messages of up to 100 MiB, read whole before a handler sees them, while this one
  // refuses a message over `maxMessageBytes` as soon as its length is read. The Node request is the one the
  // front door admitted; its upgrade bytes after the headers are empty, as a client waits for the 101 (RFC 6455, 4.1).
  const server = yield* Effect.acquireRelease(
    Effect.sync(() => {
      const wss = new WebSocketServer({ noServer: true, maxPayload: maxMessageBytes, clientTracking: false, perMessageDeflate: false })
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

  const send = (connection: Connection, text: string) => {
    if (connection.ws.readyState === WebSocket.OPEN) connection.ws.send(text)
  }

  /** `connection` no longer holds `id`: it is closed when that was its last, told otherwise. */
  const release = (connection: Connection, id: string, code: number, reason: string) => {
    connection.ids.delete(id)
    if (connection.ids.size === 0) connection.ws.close(code, reason)
    else send(connection, `error ${id} ${reason}`)
  }

  const bind = (connection: Connection, id: string) => {
    const previous = byId.get(id)
    byId.set(id, connection)
    connection.ids.add(id)
    send(connection, `bound ${id}`)
    if (previous !== undefined && previous !== connection) {
      release(previous, id, closeCodes.replaced, `replaced by a newer socket for Subscription/${id}`)
    }
  }

  const forget = (connection: Connection) => {
    for (const id of connection.ids) {
      if (byId.get(id) === connection) byId.delete(id)
    }
    connection.ids.clear()
    open.delete(connection)
  }

  /** The answer to one message, in the order the messages came. */
  const answer = (connection: Connection, message: Incoming): Effect.Effect<void> =>
    Effect.suspend(() => {
      if (message === null) return Effect.sync(() => send(connection, "error binary messages are not understood: send \"bind <id>\" as text"))
      const words = message.trim().split(/\s+/)
      if (words[0] !== "bind") return Effect.sync(() => send(connection, "error only \"bind <id>\" is understood"))
      const id = words[1]
      if (id === undefined || words.length > 2 || !idPattern.test(id)) {
        return Effect.sync(() => send(connection, "error bind takes one Subscription id (1 to 64 letters, digits, \"-\" and \".\"): \"bind <id>\""))
      }
      if (!connection.ids.has(id) && connection.ids.size >= maxIdsPerSocket) {
        return Effect.sync(() => send(connection, `error ${id} this socket holds ${maxIdsPerSocket} Subscriptions already, the most one may`))
      }
      return Effect.map(check(connection.principal, id), (verdict) => {
        if (connection.ws.readyState !== WebSocket.OPEN) return
        if (verdict._tag === "Refused") send(connection, `error ${id} ${verdict.reason}`)
        else bind(connection, id)
      })
    })

  /** Queues a socket's messages for `answer`, and completes `closed` when it closes. */
  const listen = (connection: Connection, inbox: Queue.Queue<Incoming>, closed: Deferred.Deferred<void>) => {
    const ws = connection.ws
    ws.on("message", (data, isBinary) => {
      const bytes = Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data)
      if (!inbox.unsafeOffer(isBinary ? null : bytes.toString("utf8"))) ws.close(closeCodes.tooManyMessages, "too many messages waiting for an answer")
    })
    // `ws` closes the socket itself on a protocol error (a message over maxPayload: 1009); without a listener
    // the error would be thrown.
    ws.on("error", () => undefined)
    ws.once("close", () => Deferred.unsafeDone(closed, Effect.void))
  }

  /** Takes the request's socket: the connection, listened to from its first moment (a message may follow the 101 at once), or undefined. */
  const upgrade = (incoming: IncomingMessage, principal: Principal, inbox: Queue.Queue<Incoming>, closed: Deferred.Deferred<void>) =>
    acceptUpgrade(server, incoming, (ws) => {
      const connection: Connection = { ws, principal, ids: new Set() }
      open.add(connection)
      listen(connection, inbox, closed)
      return connection
    })

  const hangUp = (connection: Connection | undefined) => {
    if (connection === undefined) return Effect.void
    forget(connection)
    return closeSocket(connection.ws, closeCodes.stopping, "the server is stopping")
  }

  const serve = (request: RootRequest): Effect.Effect<HttpServerResponse.HttpServerResponse> =>
    Effect.suspend(() => {
      if (!isUpgrade(request.http)) return Effect.succeed(upgradeRequired)
      const incoming = takeSocket(request.http)
      return Effect.scoped(Effect.gen(function*() {
        const inbox = yield* Queue.bounded<Incoming>(maxWaitingMessages)
        const closed = yield* Deferred.make<void>()
        const connection = yield* Effect.acquireRelease(upgrade(incoming, request.principal, inbox, closed), hangUp)
        // The status is for the request log: `ws` wrote the handshake's refusal itself.
        if (connection === undefined) return HttpServerResponse.empty({ status: 400 })
        // One message at a time, in the order they came.
        yield* Effect.forkScoped(Effect.forever(Effect.flatMap(Queue.take(inbox), (message) => answer(connection, message))))
        yield* Deferred.await(closed)
        return HttpServerResponse.empty({ status: 101 })
      }))
    })

  const ping = (id: string): Effect.Effect<boolean> =>
    Effect.sync(() => {
      const connection = byId.get(id)
      if (connection === undefined || connection.ws.readyState !== WebSocket.OPEN) return false
      if (connection.ws.bufferedAmount > maxUnsentBytes) {
        connection.ws.close(closeCodes.notReading, "the client does not read its pings")
        return false
      }
      connection.ws.send(`ping ${id}`)
      return true
    })

  const unbindAll = (id: string): Effect.Effect<void> =>
    Effect.sync(() => {
      const connection = byId.get(id)
      if (connection === undefined) return
      byId.delete(id)
      release(connection, id, closeCodes.deleted, `Subscription/${id} was deleted`)
    })

  return SubscriptionSockets.of({ ping, unbindAll, serve })
})

/** The sockets of a server, closed (1001) when its scope closes. */
export const layer = Layer.scoped(SubscriptionSockets, make)

/** The `/ws` root route's handler (src/http/RootRoutes.ts), served with the server's `SubscriptionSockets`. */
export const handler: RootHandler<never, SubscriptionSockets> = (request) => Effect.flatMap(SubscriptionSockets, (sockets) => sockets.serve(request))
