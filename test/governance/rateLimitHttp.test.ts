/**
 * Rate limits on the real server: a read the fast handler answers (SQLite) and a write the Effect edge
 * answers spend one bucket (the probes spend nothing) and get the same refusal, 429 with `Retry-After`, an OperationOutcome
 * `throttled` naming the limit and the RateLimit headers; on Postgres the read goes to the edge and is
 * refused alike.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { backends } from "../support/backends.ts"
import { call, type Reply, startServer, type TestServer } from "../support/server.ts"

class Server extends Context.Tag("test/rateLimitHttp/Server")<Server, TestServer>() {}

/** Reads and writes cost 10 of a burst of 20, refilled at one unit a second: two requests pass. */
const rateLimit = { requests_per_second: 1, burst: 20, cost: { read: 10, write: 10 } }

const patient = { resourceType: "Patient", name: [{ family: "Limited" }] }

const limitHeaders = (reply: Reply) => ({
  limit: reply.headers.get("ratelimit-limit"),
  remaining: reply.headers.get("ratelimit-remaining"),
  reset: reply.headers.get("ratelimit-reset")
})

/** Reads the fast handler answered (SQLite files), from the probes, which no limit applies to. */
const fastReads = (url: string) =>
  Effect.map(call("GET", `${url}/healthz?verbose=1`), (reply) => (reply.json.fast_path?.reads ?? 0) as number)

for (const backend of backends.filter((b) => b.kind !== "memory")) {
  describe.skipIf(backend.skip)(`rate limits over HTTP on ${backend.kind}`, () => {
    layer(Layer.scoped(Server, startServer(backend.kind, { rate_limit: rateLimit })), { timeout: 60_000, excludeTestServices: true })((it) => {
      it.effect("admitted answers carry the headers; a refused read and a refused write get the same 429", () =>
        Effect.gen(function*() {
          const { base, url } = yield* Server
          const write = yield* call("POST", `${base}/Patient`, { body: patient })
          expect(write.status).toBe(201)
          expect(limitHeaders(write)).toMatchObject({ limit: "20", remaining: "10" })
          const before = yield* fastReads(url)
          const read = yield* call("GET", `${base}/Patient/${write.json.id}`)
          expect(read.status).toBe(200)
          // The fast handler answered the read (on a SQLite file and on Postgres), and kept the headers the door set.
          expect(yield* fastReads(url)).toBe(before + 1)
          expect(limitHeaders(read)).toMatchObject({ limit: "20", remaining: "0" })
          expect(Number(read.headers.get("ratelimit-reset"))).toBeGreaterThanOrEqual(19)

          const refusedRead = yield* call("GET", `${base}/Patient/${write.json.id}`)
          const refusedWrite = yield* call("POST", `${base}/Patient`, { body: patient })
          for (const refused of [refusedRead, refusedWrite]) {
            expect(refused.status).toBe(429)
            expect(refused.headers.get("content-type")).toBe("application/fhir+json; charset=utf-8")
            const retryAfter = Number(refused.headers.get("retry-after"))
            expect(retryAfter).toBeGreaterThanOrEqual(9)
            expect(retryAfter).toBeLessThanOrEqual(10)
            expect(limitHeaders(refused)).toMatchObject({ limit: "20", remaining: "0" })
            expect(refused.json.resourceType).toBe("OperationOutcome")
            expect(refused.json.issue).toHaveLength(1)
            expect(refused.json.issue[0]).toMatchObject({ severity: "error", code: "throttled" })
            expect(refused.json.issue[0].diagnostics).toContain("the anonymous limit (1 cost units per second, burst 20)")
          }
          // The same answer but for the class named.
          expect(refusedRead.json.issue[0].diagnostics.replace("class read", "class write")).toBe(refusedWrite.json.issue[0].diagnostics)
          expect([...refusedRead.headers.keys()].filter((name) => name !== "date").sort())
            .toEqual([...refusedWrite.headers.keys()].filter((name) => name !== "date").sort())
        }))
    })
  })
}

class Shared extends Context.Tag("test/rateLimitHttp/Shared")<Shared, TestServer>() {}

describe("a configured fleet over HTTP", () => {
  const shared = { requests_per_second: 2, burst: 40, cost: { read: 10 }, servers: 2 }
  layer(Layer.scoped(Shared, startServer("sqlite", { rate_limit: shared })), { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("servers = 2 gives this server half of the rate and the burst", () =>
      Effect.gen(function*() {
        const { base } = yield* Shared
        const first = yield* call("GET", `${base}/Patient/not-there`)
        expect(limitHeaders(first)).toMatchObject({ limit: "20", remaining: "10" })
        yield* call("GET", `${base}/Patient/not-there`)
        const refused = yield* call("GET", `${base}/Patient/not-there`)
        expect(refused.status).toBe(429)
        expect(refused.json.issue[0].diagnostics).toContain("the anonymous limit (2 cost units per second, burst 40, this server's share 0.5)")
        // One unit a second here: ten seconds for a read.
        expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(9)
      }))
  })
})
