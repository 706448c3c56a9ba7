/**
 * The front door (ARCHITECTURE.md, "A request's way"): one synchronous step in Node's request listener,
 * ahead of the fast handlers and the Effect edge, for every request but the probes. It classifies the
 * request once (Route.ts), takes its request id and client address, resolves the caller (Principal.ts) and
 * asks `admit`; a refusal is answered here. It registers one completion hook on the response, which writes
 * the request log line (spec: Events, Request log) and hands one completion record to the listeners
 * (metering, request-log rows, audit). A request is admitted once and completed once, whichever path
 * answers it: the admission travels on the Node request, and the Effect edge reads it from there.
 */
import { type Clock, Context, Effect } from "effect"
import type { IncomingMessage, ServerResponse } from "node:http"
import { STATUS_CODES } from "node:http"
import type { Duplex } from "node:stream"
import type { LogSink } from "../logging/Log.ts"
import { clientAddress, type TrustedProxies } from "./ClientAddress.ts"
import { type IssueCode, operationOutcome } from "./OperationOutcome.ts"
import { anonymousResolver, type Principal, type PrincipalResolver } from "./Principal.ts"
import { pathOf, pickRequestId } from "./RequestLog.ts"
import { classify, type CostClass, type Route } from "./Route.ts"

/** Why a request is not served: answered by the front door with an OperationOutcome. */
export interface Refusal {
  readonly _tag: "Refused"
  readonly status: number
  readonly code: IssueCode
  readonly diagnostics: string
  /** Headers of the answer besides the content headers, such as `Retry-After`. */
  readonly headers?: Readonly<Record<string, string>>
  /** Which limit refused it, when a limit did: a `/sync` subscribe names it in its `QueryFailed`. */
  readonly limit?: "rate" | "quota"
}

export const admitted = { _tag: "Admitted" } as const

export type Verdict = typeof admitted | Refusal

/** Sets a header on the answer, whoever gives it (a rate limit's `RateLimit-Remaining` on an admitted request). */
export type SetHeader = (name: string, value: string) => void

const noHeaders: SetHeader = () => {}

/** What a policy may read of the request besides its route (a step of a connection has no message of its own: no headers). */
export type AdmissionRequest = Pick<IncomingMessage, "url" | "headers">

/**
 * One rule of admission (scopes, rate limit, quota): in memory, without waiting; undefined lets the request
 * pass. A rule may set headers on the answer with `setHeader`, admitted or refused.
 */
export type AdmissionPolicy = (route: Route, principal: Principal, request: AdmissionRequest, setHeader: SetHeader) => Refusal | undefined

/** The policies in order: the first refusal stands; with none, every request is admitted. */
export const admit = (policies: ReadonlyArray<AdmissionPolicy>) =>
(route: Route, principal: Principal, request: AdmissionRequest, setHeader: SetHeader = noHeaders): Verdict => {
  for (const policy of policies) {
    const refusal = policy(route, principal, request, setHeader)
    if (refusal !== undefined) return refusal
  }
  return admitted
}

/** An admitted request, as the answering path sees it. */
export interface Admission {
  readonly route: Route
  /** The caller; an `Unresolved` one is replaced by what the edge's `settle` finds. */
  principal: Principal
  readonly requestId: string
  readonly client: string
  readonly method: string
  readonly url: string
  readonly startedNanos: bigint
  /** The request's `Content-Length`, when it gave one. */
  readonly bytesIn: number | undefined
  /** The answer's status, set by whoever answers (fast handler, edge, refusal). */
  status: number | undefined
  /** The answer's body bytes (null when streamed without a known length), set with `status`. */
  bytesOut: number | null | undefined
  /** The Effect edge is answering: completion waits for it even when the client has gone. */
  inEdge: boolean
  closed: boolean
  completed: boolean
  /**
   * A fast handler waited the pool's whole wait for a database connection and found none (src/rest/fastPg.ts): the
   * Effect edge answers 503 at once rather than wait as long again.
   */
  poolWaited?: boolean
}

/** The admission of the request being answered, as the Effect side reads it. */
export const Admission = Context.GenericTag<Admission>("svc/http/Admission")

/** What the completion hook hands on for each request, once. */
export interface Completion {
  readonly principal: Principal
  readonly route: Route
  readonly requestId: string
  readonly client: string
  readonly method: string
  readonly path: string
  /** The path with its query, as received (the audit trail keeps a search's query). */
  readonly url: string
  readonly status: number
  /** The request's `Content-Length`, when it gave one. */
  readonly bytesIn: number | undefined
  readonly bytesOut: number | null
  readonly durationMs: number
  /** The connection closed before the answer was sent in full. */
  readonly aborted: boolean
}

export type CompletionListener = (completion: Completion) => void

/** The admission policies in force; none by default. */
export class AdmissionPolicies extends Context.Tag("svc/http/AdmissionPolicies")<AdmissionPolicies, ReadonlyArray<AdmissionPolicy>>() {}

/** Who is told of each completed request; none by default. */
export class CompletionListeners extends Context.Tag("svc/http/CompletionListeners")<CompletionListeners, ReadonlyArray<CompletionListener>>() {}

/** How callers are resolved; every caller anonymous by default. */
export class PrincipalResolution extends Context.Tag("svc/http/PrincipalResolution")<PrincipalResolution, PrincipalResolver>() {}

export interface FrontDoorOptions {
  readonly trusted: TrustedProxies
  /** `request_log.enabled`: write the line (the request id is returned either way). */
  readonly requestLog: boolean
  readonly sink: LogSink["Type"]
  readonly clock: Clock.Clock
  readonly policies: ReadonlyArray<AdmissionPolicy>
  readonly listeners: ReadonlyArray<CompletionListener>
  readonly resolve?: PrincipalResolver
  /** Called when a response is done (finished or abandoned), after its completion. */
  readonly settled?: (response: ServerResponse) => void
}

/** What the services of a started server add to the front door (src/governance/): read at every request. */
export interface DoorRules {
  readonly policies: ReadonlyArray<AdmissionPolicy>
  readonly listeners: ReadonlyArray<CompletionListener>
  /** Resolves callers from then on (the authorization layer's, by token), instead of the door's own. */
  readonly resolve?: PrincipalResolver
  /** Resolves an `Unresolved` caller, waiting as needed (a token's verification): the caller, or a refusal. */
  readonly settle?: (principal: Principal, route: Route, url: string) => Effect.Effect<Principal | Refusal>
}

/** A step of an open connection (a `/sync` subscribe), admitted as a request of its own. */
export interface Step {
  /** The caller, as the connection holds it now. */
  readonly principal: Principal
  /** The client address of the connection. */
  readonly client: string
  /** How the request log and the audit trail name it (`SUBSCRIBE`). */
  readonly method: string
  /** The URL of the REST request it stands for (`/fhir/Observation?subject=...`): its route and its query. */
  readonly url: string
  /** Its class in the rate-limit cost table. */
  readonly cost: CostClass
}

/** An admitted step: completed once with what it answered, like a request. */
export interface StepAdmission {
  readonly _tag: "Step"
  readonly requestId: string
  /** The step's status (200 when it was served, as an HTTP request would have been answered otherwise) and bytes sent. */
  readonly complete: (status: number, bytesOut: number) => void
}

export interface FrontDoor {
  /**
   * Adds `rules` after those the door was made with: the server listens before its database is open, and the
   * rules that need it (metering, rate limits over the fleet, quotas) come with the services.
   */
  readonly install: (rules: DoorRules) => void
  /**
   * Admits a request and hooks its completion; undefined when it was refused (and answered). Called once
   * per request, from the listener; the edge finds the admission with `admissionOf`.
   */
  readonly enter: (request: IncomingMessage, response: ServerResponse) => Admission | undefined
  /** The same for a request asking to upgrade its connection (a WebSocket): completed when the socket closes. */
  readonly enterUpgrade: (request: IncomingMessage, socket: Duplex) => Admission | undefined
  /**
   * Resolves the caller of an admission the door left `Unresolved` (`DoorRules.settle`): the admission then
   * holds the caller found; a refusal (a bad token) is returned for the edge to answer.
   */
  readonly settle: (admission: Admission) => Effect.Effect<Refusal | undefined>
  /**
   * Admits a step of an open connection as a request of its own: the policies judge it (the scopes of its
   * route, the rate limit of its cost class, the quotas) and, admitted, it is completed like a request (the
   * request log line, metering, the request-log rows, the audit trail). Undefined `StepAdmission` never: a
   * refusal is returned for the connection to answer in its own protocol.
   */
  readonly step: (step: Step) => Refusal | StepAdmission
  /** The Effect edge starts answering an admitted request. */
  readonly enterEdge: (admission: Admission) => void
  /** The Effect edge has answered with `status` and `bytes` (undefined: it failed to answer). */
  readonly leaveEdge: (admission: Admission, answer: { readonly status: number; readonly bytes: number | null } | undefined) => void
}

const admissionKey = Symbol.for("svc/http/Admission")

interface Admitted {
  [admissionKey]?: Admission
}

/** The admission the front door attached to a Node request. */
export const admissionOf = (request: IncomingMessage): Admission | undefined => (request as IncomingMessage & Admitted)[admissionKey]

const single = (value: string | ReadonlyArray<string> | undefined): string | undefined =>
  typeof value === "string" || value === undefined ? value : value.join(", ")

const outcomeType = "application/fhir+json; charset=utf-8"

/** An admission not yet answered. */
const newAdmission = (
  route: Route,
  principal: Principal,
  requestId: string,
  client: string,
  method: string,
  url: string,
  startedNanos: bigint,
  bytesIn: number | undefined,
  closed: boolean
): Admission => ({
  route,
  principal,
  requestId,
  client,
  method,
  url,
  startedNanos,
  bytesIn,
  status: undefined,
  bytesOut: undefined,
  inEdge: false,
  closed,
  completed: false
})

export const make = (options: FrontDoorOptions): FrontDoor => {
  const { clock, sink, trusted } = options
  let resolve = options.resolve ?? anonymousResolver
  let settleWith: DoorRules["settle"] = undefined
  let listeners = options.listeners
  let judge = admit(options.policies)
  let policies = options.policies
  const settled = options.settled
  const install = (rules: DoorRules) => {
    policies = [...policies, ...rules.policies]
    judge = admit(policies)
    listeners = [...listeners, ...rules.listeners]
    if (rules.resolve !== undefined) resolve = rules.resolve
    if (rules.settle !== undefined) settleWith = rules.settle
  }

  const settle = (admission: Admission): Effect.Effect<Refusal | undefined> => {
    if (admission.principal._tag !== "Unresolved" || settleWith === undefined) return Effect.succeed(undefined)
    return Effect.map(settleWith(admission.principal, admission.route, admission.url), (found) => {
      if (found._tag === "Refused") return found
      admission.principal = found
      return undefined
    })
  }

  const complete = (admission: Admission, aborted: boolean, fallbackStatus: number) => {
    if (admission.completed) return
    admission.completed = true
    const status = admission.status ?? (aborted ? 499 : fallbackStatus)
    // Nothing was sent when the client left before any answer.
    const bytesOut = admission.bytesOut === undefined ? (aborted ? 0 : null) : admission.bytesOut
    const durationMs = Number(clock.unsafeCurrentTimeNanos() - admission.startedNanos) / 1e6
    const path = pathOf(admission.url)
    if (options.requestLog) {
      sink.write(JSON.stringify({
        time: new Date(clock.unsafeCurrentTimeMillis()).toISOString(),
        level: "info",
        message: "request",
        request_id: admission.requestId,
        method: admission.method,
        path,
        status,
        duration_ms: durationMs,
        client: admission.client,
        bytes: bytesOut
      }))
    }
    if (listeners.length === 0) return
    const completion: Completion = {
      principal: admission.principal,
      route: admission.route,
      requestId: admission.requestId,
      client: admission.client,
      method: admission.method,
      path,
      url: admission.url,
      status,
      bytesIn: admission.bytesIn,
      bytesOut,
      durationMs,
      aborted
    }
    for (const listener of listeners) listener(completion)
  }

  // One listener for every response, so that hooking a request allocates nothing.
  const closed = function(this: ServerResponse) {
    const admission = admissionOf(this.req)
    if (admission !== undefined) {
      admission.closed = true
      if (!admission.inEdge) complete(admission, !this.writableFinished, this.statusCode)
    }
    settled?.(this)
  }

  /** Takes the request's route, id, client and caller, and attaches them to it, whatever `admit` says next. */
  const admission = (request: IncomingMessage): Admission => {
    const startedNanos = clock.unsafeCurrentTimeNanos()
    const headers = request.headers
    const method = request.method ?? "GET"
    const url = request.url ?? "/"
    const route = classify(method, url)
    const client = clientAddress(request.socket.remoteAddress, single(headers["x-forwarded-for"]), trusted)
    const principal = resolve(headers, client)
    const length = headers["content-length"]
    const requestId = pickRequestId(single(headers["x-request-id"]))
    const admission = newAdmission(route, principal, requestId, client, method, url, startedNanos, length === undefined ? undefined : Number(length), false)
    ;(request as IncomingMessage & Admitted)[admissionKey] = admission
    return admission
  }

  const refusalBody = (admission: Admission, refusal: Refusal): string => {
    const body = JSON.stringify(operationOutcome([{ severity: "error", code: refusal.code, diagnostics: refusal.diagnostics }]))
    admission.status = refusal.status
    admission.bytesOut = Buffer.byteLength(body)
    return body
  }

  const enter = (request: IncomingMessage, response: ServerResponse): Admission | undefined => {
    const entered = admission(request)
    response.on("close", closed)
    const verdict = judge(entered.route, entered.principal, request, (name, value) => response.setHeader(name, value))
    if (verdict._tag === "Admitted") return entered
    const body = refusalBody(entered, verdict)
    // In the order the edge sends an OperationOutcome's headers.
    response.writeHead(verdict.status, {
      ...verdict.headers,
      "content-type": outcomeType,
      "content-length": entered.bytesOut ?? 0,
      "x-request-id": entered.requestId
    })
    response.end(body)
    return undefined
  }

  const enterUpgrade = (request: IncomingMessage, socket: Duplex): Admission | undefined => {
    const entered = admission(request)
    socket.once("close", () => {
      entered.closed = true
      if (!entered.inEdge) complete(entered, entered.status === undefined, 499)
    })
    // The headers rules set go on a refusal only: an admitted upgrade is answered by its endpoint.
    const set: Record<string, string> = {}
    const verdict = judge(entered.route, entered.principal, request, (name, value) => void (set[name] = value))
    if (verdict._tag === "Admitted") return entered
    const body = refusalBody(entered, verdict)
    const extra = Object.entries({ ...set, ...verdict.headers }).map(([name, value]) => `${name}: ${value}\r\n`).join("")
    socket.end(
      `HTTP/1.1 ${verdict.status} ${STATUS_CODES[verdict.status] ?? ""}\r\n${extra}content-type: ${outcomeType}\r\n` +
        `content-length: ${entered.bytesOut}\r\nx-request-id: ${entered.requestId}\r\nconnection: close\r\n\r\n${body}`
    )
    return undefined
  }

  const step = (taken: Step): Refusal | StepAdmission => {
    const route: Route = { ...classify("GET", taken.url), cost: taken.cost }
    const verdict = judge(route, taken.principal, { url: taken.url, headers: {} })
    // Nothing of a connection's socket is its step's: it is closed from the start, and completes when answered.
    const entered = newAdmission(route, taken.principal, pickRequestId(undefined), taken.client, taken.method, taken.url, clock.unsafeCurrentTimeNanos(), undefined, true)
    // Refused, it is completed at once as a refused request is (the rate limit and quotas skip a 429).
    if (verdict._tag === "Refused") {
      entered.status = verdict.status
      entered.bytesOut = 0
      complete(entered, false, verdict.status)
      return verdict
    }
    return {
      _tag: "Step",
      requestId: entered.requestId,
      complete: (status, bytesOut) => {
        entered.status = status
        entered.bytesOut = bytesOut
        complete(entered, false, status)
      }
    }
  }

  const enterEdge = (admission: Admission) => {
    admission.inEdge = true
  }

  const leaveEdge = (admission: Admission, answer: { readonly status: number; readonly bytes: number | null } | undefined) => {
    admission.inEdge = false
    if (answer !== undefined && admission.status === undefined) {
      admission.status = answer.status
      admission.bytesOut = answer.bytes
    }
    // The client left while the edge answered (a write runs to its end): the request completes now.
    if (admission.closed) complete(admission, true, 499)
  }

  return { install, enter, enterUpgrade, settle, step, enterEdge, leaveEdge }
}

/** The server's front door, for the connections that admit steps of their own (`/sync`). */
export class Door extends Context.Tag("svc/http/Door")<Door, FrontDoor>() {}
