/**
 * A TCP server on loopback that takes connections and never says a word: what a host behind a firewall
 * that drops packets, or a hung server, looks like to a client. `accepted` completes with the first
 * connection, so a test knows the client is waiting before it moves the TestClock.
 */
import { Deferred, Effect, Exit, type Scope } from "effect"
import * as Net from "node:net"

export interface SilentServer {
  readonly port: number
  readonly accepted: Deferred.Deferred<void>
}

export const silentServer: Effect.Effect<SilentServer, never, Scope.Scope> = Effect.gen(function*() {
  const accepted = yield* Deferred.make<void>()
  const sockets = new Set<Net.Socket>()
  const server = Net.createServer((socket) => {
    sockets.add(socket)
    socket.on("close", () => sockets.delete(socket))
    socket.on("error", () => {})
    Deferred.unsafeDone(accepted, Exit.void)
  })
  const port = yield* Effect.acquireRelease(
    Effect.async<number>((resume) => {
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed((server.address() as Net.AddressInfo).port)))
    }),
    () =>
      Effect.async<void>((resume) => {
        for (const socket of sockets) socket.destroy()
        server.close(() => resume(Effect.void))
      })
  )
  return { port, accepted }
})
