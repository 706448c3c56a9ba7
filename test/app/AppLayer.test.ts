/**
 * Start-up as one layer graph (src/app/AppLayer.ts): the role chooses the graph, and a test gives its own
 * input in place of the graph's (here a writer lease that a test takes away), over HTTP on SQLite file,
 * memory and Postgres.
 */
import { describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Exit, Layer } from "effect"
import { LeaseLost, WriterLease } from "../../src/db/WriterLease.ts"
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

describe.skipIf(postgres.skip)("the start-up graph", () => {
  it.scoped("is chosen by the role: a role this build does not have stops start-up with a message", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(startServer("postgres", { cluster: { role: "replica", primary_url: "http://127.0.0.1:9" } }))
      expect(Exit.isFailure(exit)).toBe(true)
      if (Exit.isFailure(exit)) expect(String(Cause.squash(exit.cause))).toContain("the replica role is not in this build")
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
