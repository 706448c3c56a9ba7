/**
 * Rate limits on the real server: a read the fast handler answers (SQLite) and a write the Effect edge
 * answers spend one bucket and get the same refusal, 429 with `Retry-After`, an OperationOutcome
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

for (const backend of backends.filter((b) => b.kind !== "memory")) {
  describe.skipIf(backend.skip)(`rate limits over HTTP on ${backend.kind}`, () => {
    layer(Layer.scoped(Server, startServer(backend.kind, { rate_limit: rateLimit })), { timeout: 60_000, excludeTestServices: true })((it) => {
      it.effect("admitted answers carry the headers; a refused read and a refused write get the same 429", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const read = yield* call("GET", `${base}/Patient/not-there`)
          expect(read.status).toBe(404)
          expect(limitHeaders(read)).toMatchObject({ limit: "20", remaining: "10" })
          const write = yield* call("POST", `${base}/Patient`, { body: patient })
          expect(write.status).toBe(201)
          expect(limitHeaders(write)).toMatchObject({ limit: "20", remaining: "0" })
          expect(Number(write.headers.get("ratelimit-reset"))).toBeGreaterThanOrEqual(19)

          const refusedRead = yield* call("GET", `${base}/Patient/not-there`)
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
