/**
 * What the WebSocket endpoints (`/ws` of Subscriptions, `/sync`) share about taking a request's socket from the
 * platform: whether Node handed the request over as an upgrade, the platform's own response to it kept off the
 * socket, the handshake by `ws`, and the close when a session ends.
 */
import type { HttpServerRequest } from "@effect/platform"
import { NodeHttpServerRequest } from "@effect/platform-node"
import { Effect } from "effect"
import type { IncomingMessage } from "node:http"
import { WebSocket, type WebSocketServer } from "ws"

/** Whether a comma-separated header holds `token`, in any case. */
const hasToken = (header: string | undefined, token: string): boolean =>
  header !== undefined && header.split(",").some((value) => value.trim().toLowerCase() === token)

/** Whether Node handed the request over as a WebSocket upgrade (`Connection: upgrade` with `Upgrade: websocket`): only then may its socket be taken. */
export const isUpgrade = (request: HttpServerRequest.HttpServerRequest): boolean =>
  hasToken(request.headers["connection"], "upgrade") && hasToken(request.headers["upgrade"], "websocket")

/**
 * The request's Node message, its socket now the WebSocket's. The platform answers an upgrade request on its
 * socket when the handler returns, with a response it makes on first use and whose end it waits for: that
 * response is made now, detached from the socket and ended, so that nothing is written there and no answer
 * waits for a socket that is gone.
 */
export const takeSocket = (request: HttpServerRequest.HttpServerRequest): IncomingMessage => {
  const incoming = NodeHttpServerRequest.toIncomingMessage(request)
  const unused = NodeHttpServerRequest.toServerResponse(request)
  unused.detachSocket(incoming.socket)
  unused.end()
  return incoming
}

/**
 * The handshake by `server`: `onOpen`'s value for the new WebSocket (its listeners set at once, as a message may
 * follow the 101 straight away), or undefined when the client had gone or `ws` refused the handshake (it answered
 * 400 and closed).
 */
export const acceptUpgrade = <A>(server: WebSocketServer, incoming: IncomingMessage, onOpen: (ws: WebSocket) => A) =>
  Effect.async<A | undefined>((resume) => {
    const socket = incoming.socket
    let done = false
    const finish = (value: A | undefined) => {
      if (done) return
      done = true
      socket.off("close", gone)
      resume(Effect.succeed(value))
    }
    const gone = () => finish(undefined)
    if (socket.destroyed) return finish(undefined)
    socket.once("close", gone)
    server.handleUpgrade(incoming, socket, Buffer.alloc(0), (ws) => finish(onOpen(ws)))
    if (socket.destroyed) finish(undefined)
  })

/** Closes `ws` with `code` when its session ends, waiting a second at most for the client's close, then drops it. */
export const hangUp = (ws: WebSocket, code: number, reason: string): Effect.Effect<void> => {
  if (ws.readyState !== WebSocket.OPEN) return Effect.sync(() => ws.terminate())
  return Effect.async<void>((resume) => {
    ws.once("close", () => resume(Effect.void))
    ws.close(code, reason)
  }).pipe(Effect.interruptible, Effect.timeout("1 second"), Effect.ignore, Effect.ensuring(Effect.sync(() => ws.terminate())))
}
