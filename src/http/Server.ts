/**
 * The HTTP edge. The server listens from the process's first moment: probes always answer, and
 * every other route answers 503 until the runtime is serving, when the serving app takes over.
 */
import { HttpApp, HttpIncomingMessage, HttpMiddleware, HttpServer, HttpServerRequest } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Context, Effect, Layer, Option, Ref, Schema } from "effect"
import { constTrue } from "effect/Function"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import { answerClientError, maxHeaderBytes } from "./ClientError.ts"
import { outcomeResponse } from "./OperationOutcome.ts"
import * as Probes from "./Probes.ts"
import { Readiness } from "./Readiness.ts"
import * as RequestLog from "./RequestLog.ts"

/** The app that answers once the runtime is serving; installed by start-up. */
export class ServingApp extends Context.Tag("svc/http/ServingApp")<
  ServingApp,
  Ref.Ref<Option.Option<HttpApp.Default<never, never>>>
>() {}

export const servingAppLayer = Layer.effect(ServingApp, Ref.make(Option.none()))

export interface EdgeOptions extends Probes.ProbeOptions, RequestLog.RequestLogOptions {
  readonly maxBodyBytes: number
}

const notFound = Effect.map(HttpServerRequest.HttpServerRequest, (request) =>
  outcomeResponse("not-found", `no route for ${request.method} ${new URL(request.url, "http://localhost").pathname}`))

/** The app of a serving process before any FHIR route exists: everything is a 404 OperationOutcome. */
export const emptyServingApp: HttpApp.Default<never, never> = notFound

const gated = (options: EdgeOptions) =>
  Effect.gen(function*() {
    const readiness = yield* Readiness
    const slot = yield* ServingApp
    const phase = yield* readiness.phase
    if (phase._tag !== "serving") {
      const reason = phase._tag === "starting" ? `the server is starting (${phase.reason})` : "the server is stopping"
      return outcomeResponse("transient", reason, { headers: { "retry-after": "1" } })
    }
    const app = yield* Ref.get(slot)
    if (Option.isNone(app)) return yield* notFound
    return yield* app.value.pipe(
      Effect.catchAllCause((cause) =>
        Effect.logError("request failed", cause).pipe(
          Effect.as(outcomeResponse("exception", "the server failed to answer this request; see its log"))
        )
      )
    )
  }).pipe(HttpIncomingMessage.withMaxBodySize(Option.some(options.maxBodyBytes)))

/** The whole edge: probes first (never logged), then request id, client address and log around the gated app. */
export const edge = (options: EdgeOptions) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const probe = yield* Probes.answer(request, options)
    if (Option.isSome(probe)) return probe.value
    return yield* RequestLog.around(gated(options), options)
  })

/**
 * A handler that answers a request itself, outside any fiber, and returns true, or declines it (false)
 * for the edge above. Only the hottest interactions have one (`src/rest/fastRead.ts`), and each must
 * answer exactly as the edge would: same status, headers, body and request log line.
 */
export type FastHandler = (request: IncomingMessage, response: ServerResponse) => boolean

/** The fast handler in use: set while serving, read by the Node request listener (which is not a fiber). */
export interface FastSlot {
  current: FastHandler | undefined
}

/**
 * Idle keep-alive connections stay open for 65 s (Node's default is 5 s): a client or balancer that
 * reuses a connection the server has just closed sees a reset, and most keep theirs for up to 60 s.
 * A request goes to the slot's fast handler first, and to the edge's listener when it declines.
 */
const makeNodeServer = (slot: FastSlot) => () => {
  const server = createServer({ maxHeaderSize: maxHeaderBytes })
  server.on("clientError", answerClientError)
  server.keepAliveTimeout = 65_000
  server.headersTimeout = 66_000
  const emit = server.emit
  const fastFirst = (event: string | symbol, ...args: Array<unknown>): boolean => {
    const fast = slot.current
    if (event === "request" && fast !== undefined && fast(args[0] as IncomingMessage, args[1] as ServerResponse)) return true
    return Reflect.apply(emit, server, [event, ...args])
  }
  server.emit = fastFirst as typeof server.emit
  return server
}

export interface ListenOptions {
  readonly host: string
  readonly port: number
}

export interface Listening {
  readonly address: HttpServer.Address
  readonly fast: FastSlot
}

/** Starts listening in the current scope; fails with a clear message when the address cannot be bound. */
export const listen = (listenOptions: ListenOptions, options: EdgeOptions) =>
  Effect.gen(function*() {
    const fast: FastSlot = { current: undefined }
    const context = yield* Layer.build(NodeHttpServer.layer(makeNodeServer(fast), listenOptions)).pipe(
      Effect.mapError((error) => listenFailure(listenOptions.host, listenOptions.port, error.cause))
    )
    const server = Context.get(context, HttpServer.HttpServer)
    // No tracer exports spans, so none are made: the HTTP middleware's span per request (URL parsing, a copy
    // of the headers, attributes) and @effect/sql's span per statement were a large share of a read's CPU.
    yield* HttpServer.serveEffect(edge(options)).pipe(
      Effect.provide(context),
      Effect.locally(HttpMiddleware.currentTracerDisabledWhen, constTrue),
      Effect.withTracerEnabled(false)
    )
    const listening: Listening = { address: server.address, fast }
    return listening
  })

export class ListenError extends Schema.TaggedError<ListenError>()("ListenError", { message: Schema.String }) {}

const listenFailure = (host: string, port: number, cause: unknown): ListenError => {
  const code = typeof cause === "object" && cause !== null && "code" in cause ? String(cause.code) : ""
  const why = code === "EADDRINUSE"
    ? "the address is already in use"
    : code === "EACCES"
    ? "permission denied"
    : code === "EADDRNOTAVAIL"
    ? "the address is not available on this machine"
    : String(cause)
  return new ListenError({ message: `cannot listen on ${host}:${port}: ${why}` })
}

