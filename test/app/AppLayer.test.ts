/**
 * Start-up as one layer graph (src/app/AppLayer.ts): a test gives its own input in place of the graph's (here a
 * writer lease that a test takes away, and a replica's), over HTTP on SQLite file, memory and Postgres.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { LeaseLost, replicaCheck, WriterLease } from "../../src/db/WriterLease.ts"
import { backends } from "../support/backends.ts"
import { call, startServer } from "../support/server.ts"

/** A writer lease held until `lose` is called, as a Postgres lease is lost when another process takes over. */
const revocableLease = () => {
  let held = true
  const layer = Layer.succeed(WriterLease, WriterLease.of({
    check: () => Effect.suspend(() => (held ? Effect.void : Effect.fail(new LeaseLost({ reason: "another process took the lease" }))))
  }))
  return { layer, lose: () => void (held = false) }
}

const postgres = backends.find((backend) => backend.kind === "postgres")!

describe.skipIf(postgres.skip)("a server with a replica's writer lease", () => {
  it.scoped("refuses every write of a resource, and still commits what changes none (its metering)", () =>
    Effect.gen(function*() {
      // Started as a primary (which installs its packages), then checked as a replica is.
      let asReplica = false
      const lease = Layer.succeed(WriterLease, WriterLease.of({ check: (sql, changes) => (asReplica ? replicaCheck(sql, changes) : Effect.void) }))
      const server = yield* startServer("postgres", {}, lease)
      asReplica = true
      const refused = yield* call("POST", `${server.base}/Patient`, { body: { resourceType: "Patient", gender: "female" } })
      expect(refused.status).toBe(503)
      expect(refused.json.issue[0].diagnostics).toContain("nothing was written")
      expect((yield* call("GET", `${server.base}/Patient?_total=accurate`)).json.total).toBe(0)
      // Metering's counts are a commit without resources: stored, and read back by /_usage.
      const usage = yield* call("GET", `${server.url}/_usage?class=write`)
      expect(usage.json.usage).toEqual([expect.objectContaining({ class: "write", requests: 1 })])
    }))
})

for (const backend of backends) {
  describe.skipIf(backend.skip)(`a server whose writer lease is lost, on ${backend.kind}`, () => {
    it.scoped("commits nothing more and answers 503 to writes, while its reads go on", () =>
      Effect.gen(function*() {
        const lease = revocableLease()
        const server = yield* startServer(backend.kind, {}, lease.layer)
        const first = yield* call("POST", `${server.base}/Patient`, { body: { resourceType: "Patient", gender: "female" } })
        expect(first.status).toBe(201)
        const id = first.json.id as string

        lease.lose()
        const refused = yield* call("POST", `${server.base}/Patient`, { body: { resourceType: "Patient", gender: "male" } })
        expect(refused.status).toBe(503)
        expect(refused.json.resourceType).toBe("OperationOutcome")
        expect(refused.json.issue[0].code).toBe("transient")
        expect(refused.json.issue[0].diagnostics).toContain("nothing was written")
        const update = yield* call("PUT", `${server.base}/Patient/${id}`, { body: { resourceType: "Patient", id, gender: "other" } })
        expect(update.status).toBe(503)
        const transaction = yield* call("POST", server.base, {
          body: { resourceType: "Bundle", type: "transaction", entry: [{ resource: { resourceType: "Patient" }, request: { method: "POST", url: "Patient" } }] }
        })
        expect(transaction.status).toBe(503)

        const read = yield* call("GET", `${server.base}/Patient/${id}`)
        expect(read.status).toBe(200)
        expect(read.json.gender).toBe("female")
        expect(read.json.meta.versionId).toBe("1")
        const all = yield* call("GET", `${server.base}/Patient?_total=accurate`)
        expect(all.json.total).toBe(1)
      }))
  })
}
