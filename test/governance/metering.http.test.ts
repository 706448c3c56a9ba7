/**
 * `GET /_usage` on the real server (SQLite file and Postgres): what the server answered is counted whichever
 * path answered it (the fast read on SQLite, the Effect edge), the filters select, a parameter that cannot be
 * read is a 400 naming it, and with metering off the endpoint says so.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { call, startServer } from "../support/server.ts"
import { pgAvailable } from "../support/backends.ts"

const fastReads = (url: string) => Effect.map(call("GET", `${url}/healthz?verbose=1`), (reply) => reply.json.fast_path?.reads as number | undefined)

for (const kind of ["sqlite", "postgres"] as const) {
  describe.skipIf(kind === "postgres" && !pgAvailable)(`GET /_usage on ${kind}`, () => {
    it.scopedLive("counts every answered request by class, fast reads with the rest, and filters them", () =>
      Effect.gen(function*() {
        const server = yield* startServer(kind)
        const created = yield* call("POST", `${server.base}/Patient`, { body: { resourceType: "Patient", name: [{ family: "Metered" }] } })
        expect(created.status).toBe(201)
        const id = created.json.id as string
        const before = yield* fastReads(server.url)
        for (let i = 0; i < 3; i++) expect((yield* call("GET", `${server.base}/Patient/${id}`)).status).toBe(200)
        expect((yield* fastReads(server.url))! - before!).toBe(3)
        expect((yield* call("GET", `${server.base}/Patient?family=Metered`)).status).toBe(200)

        const reply = yield* call("GET", `${server.url}/_usage?class=read,write&class=search`)
        expect(reply.status).toBe(200)
        expect(reply.headers.get("content-type")).toContain("application/json")
        const rows = reply.json.usage as ReadonlyArray<Record<string, unknown>>
        const today = new Date().toISOString().slice(0, 10)
        const byClass = Object.fromEntries(rows.map((row) => [row.class, row]))
        expect(rows.every((row) => row.client === "address:127.0.0.1" && row.day === today)).toBe(true)
        expect(byClass.write).toMatchObject({ requests: 1, refused: 0 })
        expect((byClass.write!.bytes_in as number) > 0).toBe(true)
        expect(byClass.search).toMatchObject({ requests: 1 })
        // The three reads (the probes are not behind the front door, and this answer is not complete yet).
        expect(byClass.read).toMatchObject({ requests: 3, bytes_in: 0 })
        expect((byClass.read!.bytes_out as number) > 0).toBe(true)

        const writes = yield* call("GET", `${server.url}/_usage?class=write&client=address:127.0.0.1&from=${today}&to=${today}`)
        expect(writes.json.usage.map((row: any) => row.class)).toEqual(["write"])
        expect((yield* call("GET", `${server.url}/_usage?client=someone-else`)).json).toEqual({ usage: [] })
        expect((yield* call("GET", `${server.url}/_usage?to=2000-01-01`)).json).toEqual({ usage: [] })
        const paged = yield* call("GET", `${server.url}/_usage?limit=1`)
        expect(paged.json.usage).toHaveLength(1)
        expect(paged.json.next).toBe("/_usage?limit=1&offset=1")
      }))

    it.scopedLive("answers a parameter it cannot read with a 400 OperationOutcome naming it", () =>
      Effect.gen(function*() {
        const server = yield* startServer(kind)
        for (const [query, name] of [["from=2026-13-01", "from"], ["class=delete", "class"], ["from=2026-11-02&to=2026-11-01", "from"], ["days=1", "days"], ["limit=x", "limit"]] as const) {
          const reply = yield* call("GET", `${server.url}/_usage?${query}`)
          expect([query, reply.status]).toEqual([query, 400])
          expect(reply.json.resourceType).toBe("OperationOutcome")
          expect(reply.json.issue[0].diagnostics).toContain(name)
        }
      }))
  })
}

describe("GET /_usage with metering off", () => {
  it.scopedLive("counts nothing and answers 404 saying metering is off", () =>
    Effect.gen(function*() {
      const server = yield* startServer("sqlite", { metering: { enabled: false } })
      const reply = yield* call("GET", `${server.url}/_usage`)
      expect(reply.status).toBe(404)
      expect(reply.json.issue[0].diagnostics).toContain("metering.enabled = false")
    }))
})
