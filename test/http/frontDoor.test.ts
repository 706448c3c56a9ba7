/**
 * The front door (src/http/FrontDoor.ts) over both paths, on the real server: with a policy that refuses every
 * second request of a caller, a request the fast handler answers and one the Effect edge answers get the same
 * refusal, the same log line and exactly one admission and one completion each, including a read the fast
 * handler declines after running its statement, and a caller whose token must be resolved by the edge.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { connect } from "node:net"
import { AdmissionPolicies, type AdmissionPolicy, type Completion, CompletionListeners, PrincipalResolution } from "../../src/http/FrontDoor.ts"
import { anonymous, type PrincipalResolver } from "../../src/http/Principal.ts"
import { call, rawCall, type RawReply, startServer, type TestServer } from "../support/server.ts"

interface Door {
  readonly server: TestServer
  /** The request ids the policy was asked about, in order. */
  readonly admissions: Array<string>
  readonly completions: Array<Completion>
  /** Resolves when the request of this id has been admitted. */
  readonly admitted: (requestId: string) => Promise<void>
  /** Resolves when the request of this id has been completed. */
  readonly completed: (requestId: string) => Promise<Completion>
}

/** Promises kept by key, made by whichever side asks first. */
const events = <A>() => {
  const pending = new Map<string, { readonly promise: Promise<A>; readonly resolve: (value: A) => void }>()
  const entry = (key: string) => {
    let found = pending.get(key)
    if (found === undefined) {
      let resolve!: (value: A) => void
      const promise = new Promise<A>((done) => (resolve = done))
      found = { promise, resolve }
      pending.set(key, found)
    }
    return found
  }
  return { wait: (key: string) => entry(key).promise, happened: (key: string, value: A) => entry(key).resolve(value) }
}

class Governed extends Context.Tag("test/GovernedServer")<Governed, Door>() {}

/** The callers the policy governs: one network of the documentation range, one address per case. */
const governed = "203.0.113."

/**
 * Refuses every second request of each governed caller, with the headers a rate limit would send: on the
 * refusal, and (set by the rule, as `RateLimit-Remaining` is) on the admitted answer too.
 */
const everySecond = (admissions: Array<string>, admitted: (requestId: string) => void): AdmissionPolicy => {
  const seen = new Map<string, number>()
  return (_route, principal, request, setHeader) => {
    admissions.push(String(request.headers["x-request-id"]))
    admitted(String(request.headers["x-request-id"]))
    if (!principal.address.startsWith(governed)) return undefined
    const count = (seen.get(principal.address) ?? 0) + 1
    seen.set(principal.address, count)
    setHeader("ratelimit-remaining", count % 2 === 0 ? "0" : "1")
    return count % 2 === 0
      ? { _tag: "Refused", status: 429, code: "throttled", diagnostics: "too many requests: try again later", headers: { "retry-after": "1" } }
      : undefined
  }
}

/** A bearer token is never in memory here: the caller is left for the edge to resolve. */
const tokensUnresolved: PrincipalResolver = (headers, address) => {
  const authorization = headers["authorization"]
  return authorization === undefined ? anonymous(address) : { _tag: "Unresolved", address, token: authorization }
}

const governedServer = Layer.scoped(
  Governed,
  Effect.gen(function*() {
    const admissions: Array<string> = []
    const completions: Array<Completion> = []
    const admittedEvents = events<void>()
    const completedEvents = events<Completion>()
    const complete = (completion: Completion) => {
      completions.push(completion)
      completedEvents.happened(completion.requestId, completion)
    }
    const server = yield* startServer("sqlite", { server: { trusted_proxy_hops: 1 } }).pipe(
      Effect.provide(Layer.mergeAll(
        Layer.succeed(AdmissionPolicies, [everySecond(admissions, (id) => admittedEvents.happened(id, undefined))]),
        Layer.succeed(CompletionListeners, [complete]),
        Layer.succeed(PrincipalResolution, tokensUnresolved)
      ))
    )
    return { server, admissions, completions, admitted: admittedEvents.wait, completed: completedEvents.wait }
  })
)


/** One request, keeping the raw header order; the body as text. */
const raw = (method: string, url: string, headers: Record<string, string>, body?: string) =>
  Effect.map(rawCall(method, url, headers, body), (reply) => ({ ...reply, body: reply.bytes.toString("utf8") }))

const logLines = (lines: ReadonlyArray<string>, requestId: string) =>
  lines.map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line["message"] === "request" && line["request_id"] === requestId)

const lineKeys = ["time", "level", "message", "request_id", "method", "path", "status", "duration_ms", "client", "bytes"]

/** Headers that differ between any two answers. */
const varying = new Set(["x-request-id", "date"])
const stable = (reply: RawReply) => reply.headers.filter(([name]) => !varying.has(name))

const fastCounts = (url: string) =>
  Effect.map(call("GET", `${url}/healthz?verbose=1`), (reply) => reply.json.fast_path as { reads: number; searches: number })

interface Case {
  readonly name: string
  readonly method: string
  /** The path and query under the server's URL. */
  readonly path: (id: string) => string
  readonly headers?: Record<string, string>
  readonly body?: string
  /** Which path answers the admitted request. */
  readonly answeredBy: "fast read" | "fast search" | "edge"
  readonly status: number
  readonly route: Partial<Completion["route"]>
}

const patient = JSON.stringify({ resourceType: "Patient", name: [{ family: "Frontdoor" }] })

const cases: ReadonlyArray<Case> = [
  { name: "a read the fast handler answers", method: "GET", path: (id) => `/fhir/Patient/${id}`, answeredBy: "fast read", status: 200, route: { interaction: "read", cost: "read", type: "Patient" } },
  { name: "a search the fast handler answers", method: "GET", path: () => "/fhir/Patient?family=frontdoor", answeredBy: "fast search", status: 200, route: { interaction: "search", cost: "search", type: "Patient" } },
  { name: "the same read through the edge (_format)", method: "GET", path: (id) => `/fhir/Patient/${id}?_format=json`, answeredBy: "edge", status: 200, route: { interaction: "read", cost: "read" } },
  { name: "the same read through the edge (Accept)", method: "GET", path: (id) => `/fhir/Patient/${id}`, headers: { accept: "application/fhir+xml" }, answeredBy: "edge", status: 200, route: { interaction: "read", cost: "read" } },
  { name: "a create through the edge", method: "POST", path: () => "/fhir/Patient", headers: { "content-type": "application/fhir+json" }, body: patient, answeredBy: "edge", status: 201, route: { interaction: "create", cost: "write", type: "Patient" } },
  { name: "a read the fast handler declines after its statement", method: "GET", path: () => "/fhir/Patient/no-such-patient", answeredBy: "edge", status: 404, route: { interaction: "read", cost: "read", id: "no-such-patient" } },
  // Nothing resolves the token here: the FHIR app grants a caller it does not know nothing (docs/smart.md, "Scopes").
  { name: "a read whose token only the edge resolves", method: "GET", path: (id) => `/fhir/Patient/${id}`, headers: { authorization: "Bearer not-in-memory" }, answeredBy: "edge", status: 403, route: { interaction: "read", cost: "read" } }
]

describe("the front door", () => {
  layer(governedServer, { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("refuses, logs and completes alike whether the fast handler or the edge answers", () =>
      Effect.gen(function*() {
        const { admissions, completions, server } = yield* Governed
        const { lines, url } = server
        const created = yield* call("POST", `${server.base}/Patient`, { body: patient, headers: { "x-forwarded-for": "198.51.100.1" } })
        expect(created.status).toBe(201)
        yield* server.searchIndexed
        const id: string = created.json.id
        const refusals: Array<RawReply & { readonly body: string }> = []
        let caller = 0
        for (const each of cases) {
          caller++
          const address = `${governed}${caller}`
          const send = (requestId: string) =>
            raw(each.method, `${url}${each.path(id)}`, { ...each.headers, "x-forwarded-for": address, "x-request-id": requestId }, each.body)
          const before = yield* fastCounts(url)
          const first = yield* send(`admitted-${caller}`)
          const after = yield* fastCounts(url)
          expect([each.name, first.status]).toEqual([each.name, each.status])
          expect([each.name, after.reads - before.reads, after.searches - before.searches]).toEqual([
            each.name,
            each.answeredBy === "fast read" ? 1 : 0,
            each.answeredBy === "fast search" ? 1 : 0
          ])
          expect(first.headers).toContainEqual(["x-request-id", `admitted-${caller}`])
          expect([each.name, first.headers.filter(([name]) => name === "ratelimit-remaining")]).toEqual([each.name, [["ratelimit-remaining", "1"]]])

          const refused = yield* send(`refused-${caller}`)
          expect([each.name, refused.status]).toEqual([each.name, 429])
          expect(JSON.parse(refused.body)).toEqual({
            resourceType: "OperationOutcome",
            issue: [{ severity: "error", code: "throttled", diagnostics: "too many requests: try again later" }]
          })
          expect(refused.headers).toContainEqual(["retry-after", "1"])
          expect(refused.headers).toContainEqual(["ratelimit-remaining", "0"])
          expect(refused.headers).toContainEqual(["content-type", "application/fhir+json; charset=utf-8"])
          expect(refused.headers).toContainEqual(["x-request-id", `refused-${caller}`])
          refusals.push(refused)

          for (const [requestId, status] of [[`admitted-${caller}`, each.status], [`refused-${caller}`, 429]] as const) {
            // Admitted once, logged once, completed once.
            expect([each.name, admissions.filter((admitted) => admitted === requestId).length]).toEqual([each.name, 1])
            const logged = logLines(lines, requestId)
            expect([each.name, logged.length]).toEqual([each.name, 1])
            expect(Object.keys(logged[0]!)).toEqual(lineKeys)
            expect(logged[0]).toMatchObject({ method: each.method, path: each.path(id).split("?")[0], status, client: address })
            const completed = completions.filter((completion) => completion.requestId === requestId)
            expect([each.name, completed.length]).toEqual([each.name, 1])
            expect(completed[0]).toMatchObject({ status, client: address, method: each.method, aborted: false, route: each.route })
            expect(completed[0]!.bytesOut).toBe(logged[0]!["bytes"])
            expect(completed[0]!.principal.address).toBe(address)
          }
        }
        // The refusal is the same whichever path would have answered.
        for (const refused of refusals) {
          expect(stable(refused)).toEqual(stable(refusals[0]!))
          expect(refused.body).toBe(refusals[0]!.body)
        }
      }))

    it.effect("logs the fast and the edge answer of the same read with lines of the same shape and values", () =>
      Effect.gen(function*() {
        const { server } = yield* Governed
        const created = yield* call("POST", `${server.base}/Patient`, { body: patient })
        const path = `/fhir/Patient/${created.json.id}`
        yield* raw("GET", `${server.url}${path}`, { "x-request-id": "shape-fast" })
        yield* raw("GET", `${server.url}${path}?`, { "x-request-id": "shape-edge" })
        const [fast] = logLines(server.lines, "shape-fast")
        const [edge] = logLines(server.lines, "shape-edge")
        expect(Object.keys(fast!)).toEqual(lineKeys)
        expect(Object.keys(edge!)).toEqual(lineKeys)
        const { time: _t1, duration_ms: d1, request_id: _r1, ...fastRest } = fast!
        const { time: _t2, duration_ms: d2, request_id: _r2, ...edgeRest } = edge!
        expect(fastRest).toEqual(edgeRest)
        expect(typeof d1).toBe("number")
        expect(typeof d2).toBe("number")
      }))

    it.effect("refuses a WebSocket handshake itself, and completes each handshake once", () =>
      Effect.gen(function*() {
        const { admissions, completed, server } = yield* Governed
        const { hostname, port } = new URL(server.url)
        const handshake = (requestId: string) =>
          Effect.promise(() =>
            new Promise<string>((resolve, reject) => {
              const socket = connect(Number(port), hostname, () =>
                socket.write(
                  "GET /sync HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" +
                    `X-Forwarded-For: ${governed}100\r\nX-Request-Id: ${requestId}\r\n` +
                    "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
                ))
              let text = ""
              // The head of the answer: an admitted handshake switches protocols and stays open, so it is closed here.
              socket.on("data", (chunk) => {
                text += chunk.toString()
                if (text.includes("\r\n\r\n") && text.startsWith("HTTP/1.1 101")) socket.destroy()
              })
              socket.on("close", () => resolve(text))
              socket.on("error", reject)
            })
          )
        expect((yield* handshake("sync-1")).split("\r\n")[0]).toBe("HTTP/1.1 101 Switching Protocols")
        const refused = yield* handshake("sync-2")
        expect(refused.split("\r\n")[0]).toBe("HTTP/1.1 429 Too Many Requests")
        expect(refused).toContain("retry-after: 1\r\n")
        expect(refused).toContain("ratelimit-remaining: 0\r\n")
        expect(refused).toContain("x-request-id: sync-2\r\n")
        expect(refused).toContain('"code":"throttled"')
        for (const [requestId, status] of [["sync-1", 101], ["sync-2", 429]] as const) {
          const completion = yield* Effect.promise(() => completed(requestId))
          expect(completion).toMatchObject({ status, route: { interaction: "root-endpoint", cost: "sync" } })
          expect(admissions.filter((admitted) => admitted === requestId)).toHaveLength(1)
          expect(logLines(server.lines, requestId)).toHaveLength(1)
        }
      }))

    it.effect("completes a write whose client went away once, when the edge has answered it", () =>
      Effect.gen(function*() {
        const { admitted, completed, completions, server } = yield* Governed
        const { hostname, port } = new URL(server.url)
        // The body never arrives in full: the edge is still reading it when the client leaves.
        const socket = connect(Number(port), hostname)
        socket.write(
          "POST /fhir/Patient HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/fhir+json\r\n" +
            "Content-Length: 1000\r\nX-Request-Id: gone-1\r\n\r\n{\"resourceType\":"
        )
        yield* Effect.promise(() => admitted("gone-1"))
        socket.destroy()
        const completion = yield* Effect.promise(() => completed("gone-1"))
        expect(completion).toMatchObject({ aborted: true, method: "POST", bytesIn: 1000, route: { interaction: "create" } })
        // The next request's completion comes after this one's: nothing more for the first.
        yield* call("GET", `${server.url}/fhir/metadata`, { headers: { "x-request-id": "after-gone" } })
        yield* Effect.promise(() => completed("after-gone"))
        expect(completions.filter((each) => each.requestId === "gone-1")).toHaveLength(1)
        expect(logLines(server.lines, "gone-1")).toHaveLength(1)
      }))

    it.effect("neither admits nor logs the probes", () =>
      Effect.gen(function*() {
        const { admissions, completions, server } = yield* Governed
        const counts = [admissions.length, completions.length, server.lines.length]
        for (const probe of ["/livez", "/readyz", "/healthz", "/healthz?verbose=1"]) {
          expect((yield* raw("GET", `${server.url}${probe}`, { "x-request-id": `probe-${probe.slice(1)}` })).status).toBe(200)
        }
        expect([admissions.length, completions.length, server.lines.length]).toEqual(counts)
      }))
  })
})
