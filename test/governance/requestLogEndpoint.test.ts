/**
 * `GET /_requests` on the real server (src/governance/Requests.ts): rows of requests the fast handler and the
 * Effect edge answered alike, newest first, paged by its `next` links, filtered, unreadable parameters
 * refused by name, refusals past `refused_per_second` counted, and a 404 when nothing is stored.
 */
import { describe, expect, it, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { GovernanceSettings } from "../../src/governance/Governance.ts"
import * as Requests from "../../src/governance/Requests.ts"
import { AdmissionPolicies, type AdmissionPolicy } from "../../src/http/FrontDoor.ts"
import { backends } from "../support/backends.ts"
import { call, startServer, type TestServer } from "../support/server.ts"
import { withStore } from "../support/store.ts"

/** Refuses, as a rate limit would, every request that asks to be refused. */
const refuseAsked: AdmissionPolicy = (_route, _principal, request) =>
  request.headers["x-test-refuse"] === undefined
    ? undefined
    : { _tag: "Refused", status: 429, code: "throttled", diagnostics: "too many requests", headers: { "retry-after": "1" } }

class Served extends Context.Tag("test/RequestLogServer")<Served, TestServer>() {}

const served = (kind: "sqlite" | "postgres") =>
  Layer.scoped(
    Served,
    startServer(kind, { request_log: { refused_per_second: 1 } }).pipe(Effect.provide(Layer.succeed(AdmissionPolicies, [refuseAsked])))
  )

interface Rows {
  readonly rows: ReadonlyArray<Record<string, any>>
  readonly next?: string
  readonly not_stored: { readonly refused: number; readonly dropped: number }
}

/** `/_requests?<query>` once the request `requestId` has completed (a completion follows its answer closely). */
const requests = (server: TestServer, query: string, requestId?: string) =>
  Effect.gen(function*() {
    for (let attempt = 0; ; attempt++) {
      const reply = yield* call("GET", `${server.url}/_requests?${query}`)
      expect(reply.status).toBe(200)
      expect(reply.headers.get("content-type")).toBe("application/json")
      const body = reply.json as Rows
      if (requestId === undefined || body.rows.some((row) => row["request_id"] === requestId) || attempt === 50) return body
      yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
    }
  })

const fastReads = (url: string) => Effect.map(call("GET", `${url}/healthz?verbose=1`), (reply) => reply.json.fast_path?.reads as number | undefined)

for (const backend of backends.filter((b) => b.kind !== "memory")) {
  describe.skipIf(backend.skip)(`GET /_requests on ${backend.kind}`, () => {
    layer(served(backend.kind as "sqlite" | "postgres"), { timeout: 120_000, excludeTestServices: true })((it) => {
      it.effect("stores the rows of edge writes and fast reads alike, with their fields", () =>
        Effect.gen(function*() {
          const server = yield* Served
          const created = yield* call("POST", `${server.base}/Patient`, { body: { resourceType: "Patient" }, headers: { "x-request-id": "log-create" } })
          expect(created.status).toBe(201)
          const id = created.json.id as string
          const before = yield* fastReads(server.url)
          const read = yield* call("GET", `${server.base}/Patient/${id}`, { headers: { "x-request-id": "log-read" } })
          expect(read.status).toBe(200)
          if (backend.kind === "sqlite") expect(yield* fastReads(server.url)).toBe((before ?? 0) + 1)
          const body = yield* requests(server, "path=/fhir/Patient", "log-read")
          const byId = new Map(body.rows.map((row) => [row["request_id"], row]))
          expect(byId.get("log-create")).toMatchObject({
            method: "POST",
            path: "/fhir/Patient",
            status: 201,
            client: "127.0.0.1",
            caller: "address:127.0.0.1",
            interaction: "create",
            resource_type: "Patient",
            cost: "write",
            aborted: false
          })
          expect(byId.get("log-read")).toMatchObject({ method: "GET", path: `/fhir/Patient/${id}`, status: 200, interaction: "read", cost: "read" })
          expect(byId.get("log-read")!["bytes_out"]).toBe(Buffer.byteLength(read.text))
          expect(Date.parse(byId.get("log-read")!["time"])).toBeGreaterThanOrEqual(Date.parse(byId.get("log-create")!["time"]))
          expect(body.rows.map((row) => row["request_id"]).indexOf("log-read")).toBeLessThan(body.rows.map((row) => row["request_id"]).indexOf("log-create"))
        }))

      it.effect("stores the row of a request whose resource type decodes to U+0000 (which Postgres text cannot hold), and those after it", () =>
        Effect.gen(function*() {
          const server = yield* Served
          const odd = yield* call("GET", `${server.base}/%00`, { headers: { "x-request-id": "log-nul" } })
          expect(odd.status).toBe(400)
          const after = yield* call("GET", `${server.base}/metadata`, { headers: { "x-request-id": "log-after-nul" } })
          expect(after.status).toBe(200)
          const body = yield* requests(server, "", "log-after-nul")
          const byId = new Map(body.rows.map((row) => [row["request_id"], row]))
          expect(byId.get("log-nul")).toMatchObject({ path: "/fhir/%00", status: 400, resource_type: backend.kind === "postgres" ? "\uFFFD" : "\u0000" })
          expect(byId.get("log-after-nul")).toMatchObject({ path: "/fhir/metadata", status: 200 })
        }))

      it.effect("pages newest first by its next links, without repeating or skipping a row", () =>
        Effect.gen(function*() {
          const server = yield* Served
          for (let i = 0; i < 5; i++) yield* call("GET", `${server.base}/Patient/missing-${i}`, { headers: { "x-request-id": `page-${i}` } })
          yield* requests(server, "path=/fhir/Patient/missing-", "page-4")
          const seen: Array<string> = []
          let query = "path=/fhir/Patient/missing-&_count=2"
          for (let page = 0; page < 5; page++) {
            const body = yield* requests(server, query)
            seen.push(...body.rows.map((row) => row["request_id"] as string))
            expect(body.not_stored).toEqual({ refused: expect.any(Number), dropped: 0 })
            if (body.next === undefined) break
            expect(body.next.startsWith("/_requests?")).toBe(true)
            query = body.next.slice("/_requests?".length)
          }
          expect(seen).toEqual(["page-4", "page-3", "page-2", "page-1", "page-0"])
        }))

      it.effect("filters by client, caller, status, method, path, request id and time", () =>
        Effect.gen(function*() {
          const server = yield* Served
          const created = yield* call("POST", `${server.base}/Patient`, { body: { resourceType: "Patient" }, headers: { "x-request-id": "filter-post" } })
          expect(created.status).toBe(201)
          const ids = (query: string) => Effect.map(requests(server, query, "filter-post"), (body) => body.rows.map((row) => row["request_id"]))
          expect(yield* ids("request_id=filter-post")).toEqual(["filter-post"])
          expect(yield* ids("method=post&path=/fhir/Patient&status=2xx&client=127.0.0.1&caller=address:127.0.0.1")).toContain("filter-post")
          expect(yield* ids("request_id=filter-post&status=404")).toEqual([])
          expect(yield* ids("request_id=filter-post&since=2000-01-01&until=2999-01-01T00:00:00Z")).toEqual(["filter-post"])
          const after = encodeURIComponent(new Date(Date.now() + 60_000).toISOString())
          expect((yield* requests(server, `request_id=filter-post&since=${after}`)).rows).toEqual([])
        }))

      it.effect("refuses a parameter it cannot read with a 400 naming it", () =>
        Effect.gen(function*() {
          const server = yield* Served
          for (const [query, name] of [
            ["_count=abc", "_count"],
            ["_count=0", "_count"],
            ["since=yesterday", "since"],
            ["until=2024-13-45", "until"],
            ["status=20", "status"],
            ["method=G%20T", "method"],
            ["_cursor=zzz", "_cursor"],
            ["method=GET&method=POST", "method"],
            ["client=", "client"],
            ["client=%00", "client"],
            ["path=/fhir/%00", "path"],
            ["caller=a%00", "caller"],
            ["request_id=%01", "request_id"],
            ["colour=red", "colour"]
          ] as const) {
            const reply = yield* call("GET", `${server.url}/_requests?${query}`)
            expect([query, reply.status]).toEqual([query, 400])
            expect(reply.json.resourceType).toBe("OperationOutcome")
            expect(reply.json.issue[0].diagnostics).toContain(`parameter ${name}:`)
          }
        }))

      it.effect("stores refused_per_second refusals a second and counts the rest", () =>
        Effect.gen(function*() {
          const server = yield* Served
          const before = (yield* requests(server, "_count=1")).not_stored.refused
          for (let i = 0; i < 4; i++) {
            const reply = yield* call("GET", `${server.base}/Patient/x`, { headers: { "x-test-refuse": "1", "x-request-id": `refused-${i}` } })
            expect(reply.status).toBe(429)
          }
          // Four refusals within at most two seconds: one or two are stored, the rest counted.
          const body = yield* requests(server, "status=429&path=/fhir/Patient/x")
          const stored = body.rows.filter((row) => String(row["request_id"]).startsWith("refused-")).length
          expect(stored).toBeGreaterThanOrEqual(1)
          expect(stored + body.not_stored.refused - before).toBe(4)
        }))
    })
  })
}

describe("GET /_requests with request_log.store = false", () => {
  layer(Layer.scoped(Served, startServer("sqlite", { request_log: { store: false } })), { timeout: 120_000, excludeTestServices: true })((it) => {
    it.effect("answers 404 and says why", () =>
      Effect.gen(function*() {
        const server = yield* Served
        const reply = yield* call("GET", `${server.url}/_requests`)
        expect(reply.status).toBe(404)
        expect(reply.json.issue[0].diagnostics).toBe("the request log is not stored: request_log.store = false")
      }))
  })
})

describe("the request log part", () => {
  it.scoped("adds no listener with request_log.store = false, only the endpoint's 404", () =>
    withStore("memory", Effect.gen(function*() {
      const settings = { requestLog: { enabled: true, store: false, retention_hours: 24, refused_per_second: 20 }, smart: false }
      const rules = yield* Requests.rules.pipe(Effect.provideService(GovernanceSettings, settings as unknown as GovernanceSettings["Type"]))
      expect(rules.listeners).toEqual([])
      expect(Object.keys(rules.routes)).toEqual(["/_requests"])
    })))
})
