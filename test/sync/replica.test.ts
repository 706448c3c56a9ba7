/**
 * `/sync` across two processes on one Postgres database (docs/sync.md, docs/cluster.md): a live query held by a
 * replica, the writes made on the primary, as real processes and a real WebSocket client (`ws`). The replica
 * follows the database's change log: each commit reaches the client as one message, a transaction as one, with
 * the primary's commit timestamps; a write that does not match wakes nothing.
 */
import { afterAll, describe, expect, it } from "vitest"
import { WebSocket } from "ws"
import { suiteDatabase } from "../support/postgresSuite.ts"
import { type Running, startSvc } from "../support/process.ts"
import { scratchDirectories } from "../support/scratch.ts"

const scratch = scratchDirectories()
const running: Array<Running> = []
afterAll(async () => {
  await Promise.all(running.map((process) => process.stop("SIGKILL")))
})

const start = async (args: ReadonlyArray<string>) => {
  const started = await startSvc(args, { cwd: scratch() })
  running.push(started)
  return started
}

/** A `/sync` client: its messages in order, `next` the first one not taken yet. */
const connect = (server: Running) =>
  new Promise<{ readonly send: (message: unknown) => void; readonly next: () => Promise<any>; readonly close: () => void }>((resolve, reject) => {
    const ws = new WebSocket(`${server.url.replace(/^http/, "ws")}/sync`, "svc.sync.v1")
    const inbox: Array<any> = []
    const waiting: Array<(message: any) => void> = []
    ws.on("message", (data) => {
      const message = JSON.parse(String(data))
      const waiter = waiting.shift()
      if (waiter !== undefined) waiter(message)
      else inbox.push(message)
    })
    ws.once("error", reject)
    ws.once("open", () =>
      resolve({
        send: (message) => ws.send(JSON.stringify(message)),
        next: () => (inbox.length > 0 ? Promise.resolve(inbox.shift()) : new Promise((found) => waiting.push(found))),
        close: () => ws.terminate()
      }))
  })

const put = async (server: Running, resource: { resourceType: string; id: string } & Record<string, unknown>) => {
  const reply = await fetch(`${server.url}/fhir/${resource.resourceType}/${resource.id}`, {
    method: "PUT",
    headers: { "content-type": "application/fhir+json" },
    body: JSON.stringify(resource)
  })
  expect(reply.status).toBeLessThan(300)
  return Number(reply.headers.get("x-svc-commit-ts"))
}

const ids = (resources: ReadonlyArray<{ id: string }>) => resources.map((resource) => resource.id).sort()

describe("/sync on a replica", async () => {
  const { available, url } = await suiteDatabase()

  it.skipIf(!available)("gives a live query held by a replica each commit the primary makes, a transaction as one message", async () => {
    const primary = await start(["--postgres", url(), "--update-as-create"])
    await primary.logged("serving")
    const replica = await start(["--postgres", url(), "--role", "replica", "--primary-url", primary.url])
    await replica.logged("serving")
    await put(primary, { resourceType: "Patient", id: "r1", gender: "female", name: [{ family: "Far" }] })
    const client = await connect(replica)
    try {
      client.send({ type: "subscribe", id: "far", query: "Patient?family=Far" })
      // The query's first search reads the database: the primary's write is in it.
      const result = await client.next()
      expect([result.type, ids(result.resources)]).toEqual(["result", ["r1"]])
      await put(primary, { resourceType: "Patient", id: "other", name: [{ family: "Near" }] })
      const ts = await put(primary, { resourceType: "Patient", id: "r2", name: [{ family: "Far" }] })
      const entered = await client.next()
      // The write of another family woke nothing: the next message is r2's commit.
      expect(entered).toMatchObject({ type: "changes", commitTs: ts })
      expect(ids(entered.queries.far.entered)).toEqual(["r2"])
      const bundle = await fetch(`${primary.url}/fhir`, {
        method: "POST",
        headers: { "content-type": "application/fhir+json" },
        body: JSON.stringify({
          resourceType: "Bundle",
          type: "transaction",
          entry: [
            { resource: { resourceType: "Patient", id: "r1", name: [{ family: "Gone" }] }, request: { method: "PUT", url: "Patient/r1" } },
            { resource: { resourceType: "Patient", id: "r3", name: [{ family: "Far" }] }, request: { method: "PUT", url: "Patient/r3" } }
          ]
        })
      })
      expect(bundle.status).toBe(200)
      const step = await client.next()
      expect(step).toMatchObject({ type: "changes", commitTs: Number(bundle.headers.get("x-svc-commit-ts")) })
      expect([ids(step.queries.far.entered), step.queries.far.left]).toEqual([["r3"], ["Patient/r1"]])
      // The write through the replica is the primary's, and comes back to the replica's live query.
      const relayed = await put(replica, { resourceType: "Patient", id: "r4", name: [{ family: "Far" }] })
      const back = await client.next()
      expect(back).toMatchObject({ type: "changes", commitTs: relayed })
      expect(ids(back.queries.far.entered)).toEqual(["r4"])
    } finally {
      client.close()
    }
  }, 120_000)
})
