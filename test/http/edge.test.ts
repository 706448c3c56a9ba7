import { describe, expect, it } from "@effect/vitest"
import { HttpServerResponse } from "@effect/platform"
import { Chunk, Context, Deferred, Duration, Effect, Exit, Fiber, Layer, Option, Ref, Scope, TestClock } from "effect"
import { Readiness, layer as readinessLayer } from "../../src/http/Readiness.ts"
import { drainTimeout, type EdgeOptions, emptyServingApp, listen, ServingApp, servingAppLayer } from "../../src/http/Server.ts"
import { memorySink } from "../../src/logging/Log.ts"
import { makePeerList } from "../../src/http/ClientAddress.ts"

const options: EdgeOptions = {
  role: "primary",
  trusted: { hops: 1, peers: makePeerList(["127.0.0.0/8"]) },
  requestLog: true,
  maxBodyBytes: 1024
}

/** A real server on an ephemeral loopback port, with its request-log lines kept in memory. */
const serve = (edge: EdgeOptions = options) =>
  Effect.gen(function*() {
    const lines: Array<string> = []
    const context = yield* Layer.build(Layer.mergeAll(readinessLayer, servingAppLayer, memorySink(lines)))
    const { address } = yield* listen({ host: "127.0.0.1", port: 0 }, edge).pipe(Effect.provide(context))
    const port = address._tag === "TcpAddress" ? address.port : 0
    const get = (path: string, headers: Record<string, string> = {}) =>
      Effect.promise(async () => {
        const response = await fetch(`http://127.0.0.1:${port}${path}`, { headers })
        return { status: response.status, headers: response.headers, body: await response.json() as Record<string, unknown> }
      })
    const readiness = yield* Effect.provide(Readiness, context)
    return { get, lines, readiness }
  })

describe("the HTTP edge", () => {
  it.scoped("answers probes while starting and 503 with an OperationOutcome elsewhere", () =>
    Effect.gen(function*() {
      const { get, lines, readiness } = yield* serve()
      yield* readiness.starting("opening the database")
      expect(yield* get("/livez")).toMatchObject({ status: 200, body: { status: "ok" } })
      expect(yield* get("/readyz")).toMatchObject({ status: 503, body: { status: "starting", reason: "opening the database" } })
      expect(yield* get("/healthz")).toMatchObject({ status: 503, body: { status: "starting", role: "primary" } })
      const fhir = yield* get("/fhir/Patient/1")
      expect(fhir.status).toBe(503)
      expect(fhir.headers.get("retry-after")).toBe("1")
      expect(fhir.body).toMatchObject({ resourceType: "OperationOutcome", issue: [{ severity: "error", code: "transient" }] })
      // Probes are not logged; the other request is.
      expect(lines.map((line) => JSON.parse(line).path)).toEqual(["/fhir/Patient/1"])
    }))

  it.scoped("serves once ready: readyz 200, healthz with the role, and verbose details", () =>
    Effect.gen(function*() {
      const { get, readiness } = yield* serve()
      yield* readiness.serving(Effect.succeed({ status: "ok" }), Effect.succeed({ database: { kind: "memory" } }))
      expect(yield* get("/readyz")).toMatchObject({ status: 200, body: { status: "ok" } })
      expect(yield* get("/healthz")).toEqual(expect.objectContaining({ status: 200, body: { status: "ok", role: "primary" } }))
      expect((yield* get("/healthz?verbose=1")).body).toEqual({ status: "ok", role: "primary", database: { kind: "memory" } })
      expect(yield* get("/fhir/Nothing")).toMatchObject({ status: 404, body: { resourceType: "OperationOutcome" } })
    }))

  it.scoped("answers 501 on an endpoint of the interface not built yet, and 404 on any other path", () =>
    Effect.gen(function*() {
      const lines: Array<string> = []
      const context = yield* Layer.build(Layer.mergeAll(readinessLayer, servingAppLayer, memorySink(lines)))
      const { address } = yield* listen({ host: "127.0.0.1", port: 0 }, options).pipe(Effect.provide(context))
      const port = address._tag === "TcpAddress" ? address.port : 0
      yield* Effect.flatMap(Readiness, (r) => r.serving(Effect.succeed({ status: "ok" }), Effect.succeed({}))).pipe(Effect.provide(context))
      yield* Ref.set(Context.get(context, ServingApp), Option.some(emptyServingApp))
      const status = (path: string) =>
        Effect.promise(async () => {
          const response = await fetch(`http://127.0.0.1:${port}${path}`)
          const body = await response.json() as { issue: Array<{ code: string; diagnostics: string }> }
          return [path, response.status, body.issue[0]!.code] as const
        })
      for (const path of ["/graphql", "/sync", "/_audit/verify", "/_usage?day=1", "/export/job-1/file", "/auth/token", "/.well-known/smart-configuration"]) {
        expect(yield* status(path)).toEqual([path, 501, "not-supported"])
      }
      for (const path of ["/nothing", "/graphqlx", "/_auditor"]) expect(yield* status(path)).toEqual([path, 404, "not-found"])
    }))

  it.scoped("answers 503 on healthz for a standby even when it could serve", () =>
    Effect.gen(function*() {
      const { get, readiness } = yield* serve({ ...options, role: "standby" })
      yield* readiness.serving(Effect.succeed({ status: "ok" }), Effect.succeed({}))
      expect(yield* get("/healthz")).toMatchObject({ status: 503, body: { role: "standby" } })
    }))

  it.scoped("logs one JSON line per request with id, status, duration, client and bytes", () =>
    Effect.gen(function*() {
      const { get, lines, readiness } = yield* serve()
      yield* readiness.serving(Effect.succeed({ status: "ok" }), Effect.succeed({}))
      const given = yield* get("/fhir/x?name=a", { "x-request-id": "abc-123", "x-forwarded-for": "203.0.113.9" })
      expect(given.headers.get("x-request-id")).toBe("abc-123")
      const generated = yield* get("/fhir/y", { "x-request-id": "bad id with spaces" })
      expect(generated.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/)
      const [first, second] = lines.map((line) => JSON.parse(line))
      expect(first).toMatchObject({ message: "request", request_id: "abc-123", method: "GET", path: "/fhir/x", status: 404, client: "203.0.113.9" })
      expect(first.bytes).toBeGreaterThan(0)
      expect(typeof first.duration_ms).toBe("number")
      expect(new Date(first.time).getTime()).not.toBeNaN()
      expect(second).toMatchObject({ request_id: generated.headers.get("x-request-id"), client: "127.0.0.1" })
    }))

  it.scoped("uses the connection address when the peer is not a trusted proxy", () =>
    Effect.gen(function*() {
      const { get, lines, readiness } = yield* serve({ ...options, trusted: { hops: 1, peers: makePeerList(["10.0.0.0/8"]) } })
      yield* readiness.serving(Effect.succeed({ status: "ok" }), Effect.succeed({}))
      yield* get("/fhir/x", { "x-forwarded-for": "203.0.113.9" })
      expect(JSON.parse(lines[0]!).client).toBe("127.0.0.1")
    }))
})

describe("shutdown", () => {
  it.live("finishes a request in flight before the server closes", () =>
    Effect.gen(function*() {
      const lines: Array<string> = []
      const entered = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const slow = Deferred.succeed(entered, undefined).pipe(
        Effect.zipRight(Deferred.await(release)),
        Effect.as(HttpServerResponse.text("done"))
      )
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(Layer.mergeAll(readinessLayer, servingAppLayer, memorySink(lines)), scope)
      const { address } = yield* listen({ host: "127.0.0.1", port: 0 }, options).pipe(Effect.provide(context), Scope.extend(scope))
      const port = address._tag === "TcpAddress" ? address.port : 0
      yield* Effect.flatMap(Readiness, (r) => r.serving(Effect.succeed({ status: "ok" }), Effect.succeed({}))).pipe(Effect.provide(context))
      yield* Ref.set(Context.get(context, ServingApp), Option.some(slow))
      const response = yield* Effect.fork(Effect.promise(async () => {
        const r = await fetch(`http://127.0.0.1:${port}/fhir/slow`)
        return { status: r.status, body: await r.text() }
      }))
      yield* Deferred.await(entered)
      const closing = yield* Effect.fork(Scope.close(scope, Exit.void))
      yield* Deferred.succeed(release, undefined)
      expect(yield* Fiber.join(response)).toEqual({ status: 200, body: "done" })
      yield* Fiber.join(closing)
      const refused = yield* Effect.promise(() => fetch(`http://127.0.0.1:${port}/livez`).then(() => "answered", () => "refused"))
      expect(refused).toBe("refused")
    }))

  it.scoped("cuts off a request still running when the drain's bound has passed, and closes", () =>
    Effect.gen(function*() {
      const lines: Array<string> = []
      const entered = yield* Deferred.make<void>()
      const stuck = Deferred.succeed(entered, undefined).pipe(Effect.zipRight(Effect.never))
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(Layer.mergeAll(readinessLayer, servingAppLayer, memorySink(lines)), scope)
      const { address } = yield* listen({ host: "127.0.0.1", port: 0 }, options).pipe(Effect.provide(context), Scope.extend(scope))
      const port = address._tag === "TcpAddress" ? address.port : 0
      yield* Effect.flatMap(Readiness, (r) => r.serving(Effect.succeed({ status: "ok" }), Effect.succeed({}))).pipe(Effect.provide(context))
      yield* Ref.set(Context.get(context, ServingApp), Option.some(stuck))
      const response = yield* Effect.fork(Effect.promise(() => fetch(`http://127.0.0.1:${port}/fhir/stuck`).then((r) => `answered ${r.status}`, () => "cut off")))
      yield* Deferred.await(entered)
      const closing = yield* Effect.fork(Scope.close(scope, Exit.void))
      // The drain waits on the test clock: once its timer is set, just short of the bound it still waits.
      yield* TestClock.sleeps().pipe(Effect.zipLeft(Effect.yieldNow()), Effect.repeat({ until: Chunk.isNonEmpty }))
      yield* TestClock.adjust(Duration.subtract(drainTimeout, Duration.millis(1)))
      expect(Option.isNone(yield* Fiber.poll(closing))).toBe(true)
      yield* TestClock.adjust(Duration.millis(1))
      yield* Fiber.join(closing)
      expect(yield* Fiber.join(response)).toBe("cut off")
    }))
})
