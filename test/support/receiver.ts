/**
 * An HTTP receiver on loopback for the notifications a server sends (rest-hook Subscriptions): it records each
 * request (method, path, headers as sent, body) and answers as the test says: a status with headers, or
 * never (the request is held open until the receiver closes). Closed with the scope.
 */
import { Effect, Queue, type Scope } from "effect"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"

export interface Received {
  readonly method: string
  readonly path: string
  /** Header names in lower case; a repeated header's values joined by `, `. */
  readonly headers: Readonly<Record<string, string>>
  /** Names and values in the order sent, names as sent. */
  readonly rawHeaders: ReadonlyArray<readonly [string, string]>
  readonly body: string
  /** When it arrived, by the clock the receiver was given (the TestClock's time in a test on it), else `Date.now()`. */
  readonly at: number
}

/** How to answer a request: a status (and headers), or `hang` to never answer. */
export type Answer = { readonly status: number; readonly headers?: Readonly<Record<string, string>> } | "hang"

export interface Receiver {
  /** `http://127.0.0.1:<port>` */
  readonly url: string
  /** Every request so far, in order. */
  readonly received: ReadonlyArray<Received>
  /** The next request not yet taken (waits for it). */
  readonly next: Effect.Effect<Received>
  /** How many of the requests left hanging the sender has closed. */
  readonly abandoned: () => number
  /** Changes the answer for the requests to come. */
  readonly answerWith: (answer: Answer | ((received: Received, count: number) => Answer)) => void
}

/** Starts a receiver answering `answer` (default 200). */
export const startReceiver = (answer: Answer | ((received: Received, count: number) => Answer) = { status: 200 }): Effect.Effect<Receiver, never, Scope.Scope> =>
  Effect.gen(function*() {
    // The fiber's clock: a test on the TestClock reads its time when each request arrives.
    const clock = yield* Effect.clock
    const queue = yield* Queue.unbounded<Received>()
    const received: Array<Received> = []
    const hanging = new Set<ServerResponse>()
    let abandoned = 0
    let current = answer
    const server = createServer((request: IncomingMessage, response: ServerResponse) => {
      const at = clock.unsafeCurrentTimeMillis()
      const chunks: Array<Buffer> = []
      request.on("data", (chunk: Buffer) => chunks.push(chunk))
      request.on("end", () => {
        const rawHeaders: Array<readonly [string, string]> = []
        for (let i = 0; i + 1 < request.rawHeaders.length; i += 2) rawHeaders.push([request.rawHeaders[i]!, request.rawHeaders[i + 1]!])
        const headers: Record<string, string> = {}
        for (const [name, value] of rawHeaders) {
          const key = name.toLowerCase()
          headers[key] = headers[key] === undefined ? value : `${headers[key]}, ${value}`
        }
        const one: Received = { method: request.method ?? "", path: request.url ?? "", headers, rawHeaders, body: Buffer.concat(chunks).toString("utf8"), at }
        received.push(one)
        const reply = typeof current === "function" ? current(one, received.length) : current
        queue.unsafeOffer(one)
        if (reply === "hang") {
          hanging.add(response)
          response.on("close", () => {
            if (hanging.delete(response)) abandoned++
          })
          return
        }
        response.writeHead(reply.status, { "content-type": "text/plain", ...reply.headers })
        response.end("received")
      })
    })
    yield* Effect.acquireRelease(
      Effect.async<void>((resume) => void server.listen(0, "127.0.0.1", () => resume(Effect.void))),
      () =>
        Effect.async<void>((resume) => {
          for (const response of hanging) response.destroy()
          hanging.clear()
          server.closeAllConnections()
          server.close(() => resume(Effect.void))
        })
    )
    const port = (server.address() as AddressInfo).port
    return {
      url: `http://127.0.0.1:${port}`,
      received,
      next: Queue.take(queue),
      abandoned: () => abandoned,
      answerWith: (next) => void (current = next)
    }
  })

/** A loopback port nothing listens on: a connection to it is refused. */
export const closedPort = (): Effect.Effect<number> =>
  Effect.async<number>((resume) => {
    const server = createServer()
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as AddressInfo).port
      server.close(() => resume(Effect.succeed(port)))
    })
  })
