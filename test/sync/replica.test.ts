/**
 * `/sync` across two processes on one Postgres database (docs/sync.md, docs/cluster.md): a live query held by a
 * replica, the writes made on the primary, as real processes and a real WebSocket client (`ws`). The replica
 * follows the database's change log: each commit reaches the client as one message, a transaction as one, with
 * the primary's commit timestamps.
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

/** Messages in order, `take` the first one not taken yet. */
const mailbox = () => {
  const inbox: Array<any> = []
  const waiting: Array<(message: any) => void> = []
  return {
    put: (message: any) => {
      const waiter = waiting.shift()
      if (waiter !== undefined) waiter(message)
      else inbox.push(message)
    },
    take: (): Promise<any> => (inbox.length > 0 ? Promise.resolve(inbox.shift()) : new Promise((found) => waiting.push(found)))
  }
}

interface Client {
  readonly send: (message: unknown) => void
  /** The next message that is not a `pong`. */
  readonly next: () => Promise<any>
  /** Pings until the server's results are current as of `commitTs` (the `pong`'s `commitTs`). */
  readonly caughtUp: (commitTs: number) => Promise<void>
  readonly close: () => void
}

const connect = (server: Running) =>
  new Promise<Client>((resolve, reject) => {
    const ws = new WebSocket(`${server.url.replace(/^http/, "ws")}/sync`, "svc.sync.v1")
    const messages = mailbox()
    const pongs = mailbox()
    ws.on("message", (data) => {
      const message = JSON.parse(String(data))
      if (message.type === "pong") pongs.put(message)
      else messages.put(message)
    })
    ws.once("error", reject)
    const send = (message: unknown) => ws.send(JSON.stringify(message))
    const caughtUp = async (commitTs: number): Promise<void> => {
      send({ type: "ping" })
      if ((await pongs.take()).commitTs < commitTs) return caughtUp(commitTs)
    }
    ws.once("open", () => resolve({ send, next: messages.take, caughtUp, close: () => ws.terminate() }))
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
    const first = await put(primary, { resourceType: "Patient", id: "r1", gender: "female", name: [{ family: "Far" }] })
    const client = await connect(replica)
    try {
      client.send({ type: "subscribe", id: "far", query: "Patient?family=Far" })
      // The query's first search reads the database: the primary's write is in it.
      const result = await client.next()
      expect([result.type, ids(result.resources)]).toEqual(["result", ["r1"]])
      // Each step begins once the replica has taken in the commits before it: its searches see the database as
      // it is, so a commit it is still behind on would show the next one's write early (at the earlier commit).
      await client.caughtUp(first)
      const ts = await put(primary, { resourceType: "Patient", id: "r2", name: [{ family: "Far" }] })
      const entered = await client.next()
      expect(entered).toMatchObject({ type: "changes", commitTs: ts })
      expect(ids(entered.queries.far.entered)).toEqual(["r2"])
      await client.caughtUp(ts)
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
      await client.caughtUp(step.commitTs)
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
