/**
 * The HTTP edge. The server listens from the process's first moment: probes always answer, and
 * every other route answers 503 until the runtime is serving, when the serving app takes over.
 * On shutdown it drains (docs/operations.md, "Shutdown"): no new connection, idle ones closed at
 * once, every request still arriving answered 503 with `Connection: close`, the requests in flight
 * given `drainTimeout` to finish, then every connection closed.
 */
import { HttpApp, HttpIncomingMessage, HttpMiddleware, HttpServer, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer, NodeHttpServerRequest } from "@effect/platform-node"
import { Cause, Context, Duration, Effect, Exit, Layer, Option, Ref, Schema } from "effect"
import { constTrue } from "effect/Function"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { Duplex } from "node:stream"
import { LogSink } from "../logging/Log.ts"
import { answerClientError, maxHeaderBytes } from "./ClientError.ts"
import * as FrontDoor from "./FrontDoor.ts"
import { outcomeResponse } from "./OperationOutcome.ts"
import { isResolved, Principal } from "./Principal.ts"
import * as Probes from "./Probes.ts"
import { Readiness } from "./Readiness.ts"
import * as RequestLog from "./RequestLog.ts"
import * as RootRoutes from "./RootRoutes.ts"

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
  RootRoutes.noRoute(request.method, new URL(request.url, "http://localhost").pathname))

/**
 * The app for every path outside the FHIR API: the root route table (a 501 OperationOutcome for an endpoint
 * of the interface not built yet), and a 404 for any other path.
 */
export const emptyServingApp: HttpApp.Default<never, never> = RootRoutes.app(RootRoutes.rootRoutes)

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
    // The HTTP server runs a request uninterruptibly. A read (GET, HEAD) may be interrupted, so that a client
    // that goes away cancels its database statement (docs/database.md, "Deadlines and cancels"); a write runs
    // to its end, so that what it commits is answered for and published.
    const request = yield* HttpServerRequest.HttpServerRequest
    const reading = request.method === "GET" || request.method === "HEAD"
    return yield* (reading ? Effect.interruptible(app.value) : app.value).pipe(
      Effect.catchAllCause((cause) =>
        // Interrupted: the client went away. Nobody reads the answer; the request log shows 499 (client closed request).
        Cause.isInterruptedOnly(cause)
          ? Effect.succeed(outcomeResponse("transient", "the client closed the connection before the answer", { status: 499 }))
          : Effect.logError("request failed", cause).pipe(
            Effect.as(outcomeResponse("exception", "the server failed to answer this request; see its log"))
          )
      )
    )
  }).pipe(HttpIncomingMessage.withMaxBodySize(Option.some(options.maxBodyBytes)))

/**
 * The whole edge: probes first (never logged), then the gated app with the front door's admission as the
 * `Admission`, `Principal` and `RequestInfo` services. The answer's status and bytes go back to the
 * admission for the request log line, written once by the front door's completion hook.
 */
export const edge = (options: EdgeOptions, door: FrontDoor.FrontDoor) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const guarded = Probes.isGuardedHealth(request.method, request.url, options)
    if (!guarded) {
      const probe = yield* Probes.answer(request, options)
      if (Option.isSome(probe)) return probe.value
    }
    const incoming = NodeHttpServerRequest.toIncomingMessage(request)
    // Every request the listener saw was admitted there; one it did not see is admitted now.
    const admission = FrontDoor.admissionOf(incoming) ?? door.enter(incoming, NodeHttpServerRequest.toServerResponse(request))
    if (admission === undefined) return HttpServerResponse.empty()
    door.enterEdge(admission)
    // A token the front door had not seen is verified here, before anything answers.
    const refused = admission.principal._tag === "Unresolved" ? yield* door.settle(admission) : undefined
    const answering = refused === undefined
      ? guarded
        ? admission.principal._tag === "Authorized"
          ? Effect.map(Probes.answer(request, options), Option.getOrElse(() => RootRoutes.noRoute(request.method, "/healthz")))
          : Effect.succeed(outcomeResponse("login", "/healthz?verbose=1 needs a bearer token", { status: 401, headers: { "www-authenticate": "Bearer realm=\"svc\"" } }))
        : gated(options)
      : Effect.succeed(outcomeResponse(refused.code, refused.diagnostics, { status: refused.status, ...(refused.headers === undefined ? {} : { headers: refused.headers }) }))
    const response = yield* answering.pipe(
      Effect.provideService(FrontDoor.Admission, admission),
      Effect.provideService(Principal, admission.principal),
      Effect.provideService(RequestLog.RequestInfo, admission),
      Effect.onExit((exit) =>
        Effect.sync(() =>
          door.leaveEdge(admission, Exit.isSuccess(exit) ? { status: exit.value.status, bytes: RequestLog.bytesOf(exit.value) } : undefined)
        )
      )
    )
    return HttpServerResponse.setHeader(response, "x-request-id", admission.requestId)
  })

/**
 * A handler that answers an admitted request itself, outside any fiber, and returns true, or declines it
 * (false) for the edge above. Only the hottest interactions have one (`src/rest/fastRead.ts`,
 * `src/rest/fastPg.ts`), and each must answer exactly as the edge would: same status, headers and body. It
 * sets the admission's `status` and `bytesOut`, from which the front door writes the request log line. One that
 * answers later (its statement runs on a Postgres connection) takes the request (true) and, when it finds it
 * cannot answer after all, hands it to the edge with `decline(request, response)` (once, before writing anything).
 */
export type FastHandler = (
  request: IncomingMessage,
  response: ServerResponse,
  admission: FrontDoor.Admission,
  decline: (request: IncomingMessage, response: ServerResponse) => void
) => boolean

/** The fast handler in use: set while serving, read by the Node request listener (which is not a fiber). */
export interface FastSlot {
  current: FastHandler | undefined
}

/**
 * A replica's relay (src/cluster/replica.ts, docs/cluster.md), asked before the front door: it takes a request
 * the primary must answer (forwarded, the primary's answer relayed unchanged), or one whose `X-Svc-Min-Ts` the
 * replica has not reached yet (held until it has, then given back through `proceed`, or forwarded past the wait).
 * A request it does not take is served here like any other.
 */
export interface Relay {
  /** True when the relay took the request. */
  readonly request: (request: IncomingMessage, response: ServerResponse, proceed: () => void) => boolean
  /** True when the relay took the upgrade (a `/ws` socket, proxied to the primary). */
  readonly upgrade: (request: IncomingMessage, socket: Duplex, head: Buffer) => boolean
}

/** The relay in use: set by a replica's start-up, read by the Node request listener. */
export interface RelaySlot {
  current: Relay | undefined
}

/** How long the requests in flight at shutdown get to finish before their connections are closed. */
export const drainTimeout = Duration.seconds(10)

/** The server's requests, as its Node listener sees them: outside any fiber. */
interface Traffic {
  server: Server | undefined
  draining: boolean
  /** Responses not yet finished or abandoned. */
  readonly inFlight: Set<ServerResponse>
  /** Called when the last response in flight is done while draining. */
  drained: (() => void) | undefined
}

/** Forgets a response that is done (finished or abandoned); the last one of a drain ends the wait. */
const settled = (traffic: Traffic) => (response: ServerResponse) => {
  traffic.inFlight.delete(response)
  if (traffic.draining && traffic.inFlight.size === 0) traffic.drained?.()
}

/**
 * Idle keep-alive connections stay open for 65 s (Node's default is 5 s): a client or balancer that
 * reuses a connection the server has just closed sees a reset, and most keep theirs for up to 60 s.
 * Every request but a probe goes through the front door first, which admits it (or answers its refusal)
 * and hooks its completion; an admitted request goes to the slot's fast handler, and to the edge's
 * listener when it declines. While draining, always to the edge (which answers 503), with `Connection: close`.
 */
const makeNodeServer = (slot: FastSlot, relay: RelaySlot, traffic: Traffic, front: FrontDoor.FrontDoor, probeOptions: Probes.ProbeOptions) => () => {
  const server = createServer({ maxHeaderSize: maxHeaderBytes })
  server.on("clientError", answerClientError)
  server.keepAliveTimeout = 65_000
  server.headersTimeout = 66_000
  traffic.server = server
  const emit = server.emit
  const done = settled(traffic)
  const probeDone = function(this: ServerResponse) {
    done(this)
  }
  /** The edge's own listener (one function for every request, so that the fast path allocates none). */
  const edge = (request: IncomingMessage, response: ServerResponse): boolean => Reflect.apply(emit, server, ["request", request, response])
  /** The front door, a fast handler, or the edge: a request served by this process. */
  const serve = (request: IncomingMessage, response: ServerResponse): boolean => {
    const admission = front.enter(request, response)
    if (admission === undefined) return true
    // A caller whose token is not resolved yet is the edge's to resolve.
    const fast = traffic.draining || !isResolved(admission.principal) ? undefined : slot.current
    if (fast !== undefined && fast(request, response, admission, edge)) return true
    return edge(request, response)
  }
  const frontFirst = (event: string | symbol, ...args: Array<unknown>): boolean => {
    if (event === "request") {
      const request = args[0] as IncomingMessage
      const response = args[1] as ServerResponse
      traffic.inFlight.add(response)
      if (traffic.draining) response.setHeader("connection", "close")
      if (Probes.isProbe(request.method, request.url ?? "", probeOptions)) {
        response.on("close", probeDone)
        return Reflect.apply(emit, server, [event, ...args])
      }
      const relaying = traffic.draining ? undefined : relay.current
      if (relaying !== undefined && relaying.request(request, response, () => void serve(request, response))) {
        response.on("close", probeDone)
        return true
      }
      return serve(request, response)
    } else if (event === "upgrade") {
      const request = args[0] as IncomingMessage
      if (Probes.isProbe(request.method, request.url ?? "", probeOptions)) return Reflect.apply(emit, server, [event, ...args])
      if (relay.current !== undefined && relay.current.upgrade(request, args[1] as Duplex, args[2] as Buffer)) return true
      if (front.enterUpgrade(request, args[1] as Duplex) === undefined) return true
    }
    return Reflect.apply(emit, server, [event, ...args])
  }
  server.emit = frontFirst as typeof server.emit
  return server
}

/**
 * Stops accepting, closes idle connections, marks the responses not yet begun `Connection: close`, and
 * waits for the requests in flight, at most `timeout`; then closes every connection left (silent ones,
 * and requests that outran the timeout). Requests arriving meanwhile are answered 503 by the gate.
 */
const drain = (traffic: Traffic, timeout: Duration.Duration) =>
  Effect.gen(function*() {
    const server = traffic.server
    if (server === undefined) return
    traffic.draining = true
    for (const response of traffic.inFlight) {
      if (!response.headersSent) response.setHeader("connection", "close")
    }
    yield* Effect.logInfo("stopping", { in_flight: traffic.inFlight.size })
    server.close()
    server.closeIdleConnections()
    // A finalizer runs uninterruptibly: the wait must be interruptible for the timeout to end it.
    const done = yield* Effect.async<void>((resume) => {
      if (traffic.inFlight.size === 0) return resume(Effect.void)
      traffic.drained = () => resume(Effect.void)
      return Effect.sync(() => void (traffic.drained = undefined))
    }).pipe(Effect.interruptible, Effect.timeoutTo({ duration: timeout, onSuccess: () => true, onTimeout: () => false }))
    if (!done) {
      yield* Effect.logWarning("requests still running at shutdown were cut off", {
        requests: traffic.inFlight.size,
        after_ms: Duration.toMillis(timeout)
      })
    }
    server.closeAllConnections()
  })

export interface ListenOptions {
  readonly host: string
  readonly port: number
}

export interface Listening {
  readonly address: HttpServer.Address
  readonly fast: FastSlot
  /** A replica's relay, set once its services are built. */
  readonly relay: RelaySlot
  /** The front door, for the rules the services add once built (`FrontDoor.install`). */
  readonly door: FrontDoor.FrontDoor
}

/** Starts listening in the current scope; fails with a clear message when the address cannot be bound. */
export const listen = (listenOptions: ListenOptions, options: EdgeOptions, drainWithin: Duration.Duration = drainTimeout) =>
  Effect.gen(function*() {
    const fast: FastSlot = { current: undefined }
    const relay: RelaySlot = { current: undefined }
    const traffic: Traffic = { server: undefined, draining: false, inFlight: new Set(), drained: undefined }
    const sink = yield* LogSink
    const clock = yield* Effect.clock
    const policies = yield* Effect.serviceOption(FrontDoor.AdmissionPolicies)
    const listeners = yield* Effect.serviceOption(FrontDoor.CompletionListeners)
    const resolve = yield* Effect.serviceOption(FrontDoor.PrincipalResolution)
    const door = FrontDoor.make({
      trusted: options.trusted,
      requestLog: options.requestLog,
      sink,
      clock,
      policies: Option.getOrElse(policies, () => []),
      listeners: Option.getOrElse(listeners, () => []),
      ...(Option.isSome(resolve) ? { resolve: resolve.value } : {}),
      settled: settled(traffic)
    })
    const context = yield* Layer.build(NodeHttpServer.layer(makeNodeServer(fast, relay, traffic, door, options), listenOptions)).pipe(
      Effect.mapError((error) => listenFailure(listenOptions.host, listenOptions.port, error.cause))
    )
    const server = Context.get(context, HttpServer.HttpServer)
    // No tracer exports spans, so none are made: the HTTP middleware's span per request (URL parsing, a copy
    // of the headers, attributes) and @effect/sql's span per statement were a large share of a read's CPU.
    yield* HttpServer.serveEffect(edge(options, door)).pipe(
      Effect.provide(context),
      Effect.locally(HttpMiddleware.currentTracerDisabledWhen, constTrue),
      Effect.withTracerEnabled(false)
    )
    // Runs before the edge's handlers are removed and Node's own close, which would wait for every connection.
    yield* Effect.addFinalizer(() => drain(traffic, drainWithin))
    const listening: Listening = { address: server.address, fast, relay, door }
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

