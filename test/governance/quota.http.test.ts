/**
 * Quotas on the real server: a read the fast handler answers (SQLite) and a write the Effect edge answers
 * count against one total and get the same refusal, 429 with `Retry-After` (seconds to the next UTC midnight)
 * and an OperationOutcome `throttled` naming the quota, its limit, the count and the reset instant; on
 * Postgres the read goes to the edge and is refused alike.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { backends } from "../support/backends.ts"
import { call, startServer, type TestServer } from "../support/server.ts"

class Server extends Context.Tag("test/quotaHttp/Server")<Server, TestServer>() {}

const patient = { resourceType: "Patient", name: [{ family: "Counted" }] }

/** Reads the fast handler answered (SQLite files), from the probes, which quotas do not count. */
const fastReads = (url: string) =>
  Effect.map(call("GET", `${url}/healthz?verbose=1`), (reply) => (reply.json.fast_path?.reads ?? 0) as number)

for (const backend of backends.filter((b) => b.kind !== "memory")) {
  describe.skipIf(backend.skip)(`quotas over HTTP on ${backend.kind}`, () => {
    layer(Layer.scoped(Server, startServer(backend.kind, { quota: { requests_per_day: 2 } })), { timeout: 60_000, excludeTestServices: true })((it) => {
      it.effect("two requests a day pass; the third, a read or a write, gets 429 until the next UTC midnight", () =>
        Effect.gen(function*() {
          const { base, url } = yield* Server
          const write = yield* call("POST", `${base}/Patient`, { body: patient })
          expect(write.status).toBe(201)
          const before = yield* fastReads(url)
          const read = yield* call("GET", `${base}/Patient/${write.json.id}`)
          expect(read.status).toBe(200)
          // On a SQLite file the fast handler answered the read.
          if (backend.kind === "sqlite") expect(yield* fastReads(url)).toBe(before + 1)

          const refusedRead = yield* call("GET", `${base}/Patient/${write.json.id}`)
          const refusedWrite = yield* call("POST", `${base}/Patient`, { body: patient })
          const now = Date.now()
          const midnight = new Date(now).setUTCHours(24, 0, 0, 0)
          for (const refused of [refusedRead, refusedWrite]) {
            expect(refused.status).toBe(429)
            expect(refused.headers.get("content-type")).toBe("application/fhir+json; charset=utf-8")
            const retryAfter = Number(refused.headers.get("retry-after"))
            expect(Math.abs(retryAfter - (midnight - now) / 1000)).toBeLessThanOrEqual(2)
            expect(refused.json.resourceType).toBe("OperationOutcome")
            expect(refused.json.issue).toHaveLength(1)
            expect(refused.json.issue[0]).toMatchObject({ severity: "error", code: "throttled" })
            const day = new Date(midnight - 1).toISOString().slice(0, 10)
            expect(refused.json.issue[0].diagnostics).toContain(
              `quota exceeded: requests_per_day = 2 for address 127.0.0.1, 2 counted in UTC day ${day}; ` +
                `it resets at ${new Date(midnight).toISOString()}`
            )
          }
          // The same answer for a read and a write.
          expect(refusedRead.json.issue[0].diagnostics.replace(/retry after \d+ s/, "")).toBe(
            refusedWrite.json.issue[0].diagnostics.replace(/retry after \d+ s/, "")
          )
        }))
    })
  })
}
