/**
 * What live queries cost (docs/sync.md): 10,000 live queries held by 100 `/sync` connections on a svc while it
 * takes the Synthea ingest (in turn with a svc holding none, as subscriptions.ts does), the time from a commit
 * to a client's `changes` message for a relevant write, and the server's memory per live query.
 *
 * The live queries are `Observation?subject=Patient/<id>` on Patients created for them beforehand: the ingest's
 * writes are relevant to none of them, so what they cost the ingest is what it costs to find that out. While the
 * ingest runs, an Observation of one of those Patients is written now and then (a relevant change) and the time
 * to its `changes` message is taken.
 */
import { WebSocket } from "ws"

/** How many live queries, on how many connections. */
export const liveQueryCount = 10_000
export const connectionCount = 100

interface Client {
  readonly socket: WebSocket
  /** Commit timestamps of the `changes` messages, with the time (µs, the system clock) each arrived. */
  readonly arrivals: Map<number, number>
  readonly results: { count: number }
  /** Subscribe messages not sent yet: a connection takes at most 64 messages waiting for an answer (docs/sync.md). */
  readonly pending: Array<string>
}

/** Subscribes in flight per connection. */
const window = 16

const nowUs = () => Math.round((performance.timeOrigin + performance.now()) * 1000)

const open = (url: string): Promise<Client> =>
  new Promise((resolve, reject) => {
    const socket = new WebSocket(`${url.replace(/^http/, "ws")}/sync`, "svc.sync.v1")
    const client: Client = { socket, arrivals: new Map(), results: { count: 0 }, pending: [] }
    socket.on("message", (data) => {
      const message = JSON.parse(String(data)) as { type: string; commitTs?: number }
      if (message.type === "changes" && message.commitTs !== undefined) client.arrivals.set(message.commitTs, nowUs())
      if (message.type === "result") {
        client.results.count++
        const next = client.pending.shift()
        if (next !== undefined) socket.send(next)
      }
      if (message.type === "QueryFailed") console.error(`[bench] a live query failed: ${String(data).slice(0, 300)}`)
    })
    socket.once("close", (code) => {
      if (code !== 1000 && code !== 1005 && code !== 1006) console.error(`[bench] a /sync connection was closed with ${code}`)
    })
    socket.once("open", () => resolve(client))
    socket.once("error", reject)
  })

const post = async (url: string, body: unknown): Promise<Response> => {
  const response = await fetch(url, { method: "POST", headers: { "content-type": "application/fhir+json" }, body: JSON.stringify(body) })
  await response.arrayBuffer()
  if (response.status >= 300) throw new Error(`POST ${url} answered ${response.status}`)
  return response
}

/** Creates `count` Patients in transactions of 500; their ids. */
const createPatients = async (url: string, count: number): Promise<Array<string>> => {
  const ids: Array<string> = []
  for (let first = 0; first < count; first += 500) {
    const entry = Array.from({ length: Math.min(500, count - first) }, () => ({ resource: { resourceType: "Patient" }, request: { method: "POST", url: "Patient" } }))
    const response = await fetch(`${url}/fhir`, { method: "POST", headers: { "content-type": "application/fhir+json" }, body: JSON.stringify({ resourceType: "Bundle", type: "transaction", entry }) })
    const bundle = (await response.json()) as { entry?: Array<{ response?: { location?: string } }> }
    for (const e of bundle.entry ?? []) ids.push(String(e.response?.location?.split("/")[1]))
  }
  return ids
}

export interface LiveQueryLoad {
  readonly clients: ReadonlyArray<Client>
  readonly patients: ReadonlyArray<string>
  /** Resident memory of the server (MB) before and after the queries were taken. */
  readonly close: () => void
}

/** Opens `connectionCount` connections to `url` and subscribes `liveQueryCount` queries, waiting for every result. */
export const holdLiveQueries = async (url: string): Promise<LiveQueryLoad> => {
  const patients = await createPatients(url, liveQueryCount)
  const clients = await Promise.all(Array.from({ length: connectionCount }, () => open(url)))
  patients.forEach((id, n) => {
    clients[n % connectionCount]!.pending.push(JSON.stringify({ type: "subscribe", id: `q${n}`, query: `Observation?subject=Patient/${id}&_count=10` }))
  })
  for (const client of clients) for (const message of client.pending.splice(0, window)) client.socket.send(message)
  const deadline = performance.now() + 300_000
  while (clients.reduce((sum, client) => sum + client.results.count, 0) < liveQueryCount && performance.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  const held = clients.reduce((sum, client) => sum + client.results.count, 0)
  if (held < liveQueryCount) throw new Error(`only ${held} of ${liveQueryCount} live queries got their result`)
  return { clients, patients, close: () => clients.forEach((client) => client.socket.terminate()) }
}

export interface SyncLatency {
  readonly count: number
  readonly medianMs: number
  readonly p99Ms: number
}

/**
 * Writes an Observation of one of the held Patients every `everyMs` until `running()` says stop, and times each
 * from its commit to the `changes` message reaching the client that holds the query.
 */
export const relevantWrites = async (url: string, load: LiveQueryLoad, running: () => boolean, everyMs = 100): Promise<SyncLatency> => {
  const latencies: Array<number> = []
  for (let n = 0; running(); n++) {
    const index = (n * 7919) % load.patients.length
    const response = await post(`${url}/fhir/Observation`, {
      resourceType: "Observation",
      status: "final",
      code: { text: "svc bench: a relevant change" },
      subject: { reference: `Patient/${load.patients[index]}` }
    })
    const commitTs = Number(response.headers.get("x-svc-commit-ts"))
    const client = load.clients[index % connectionCount]!
    const deadline = performance.now() + 10_000
    while (!client.arrivals.has(commitTs) && performance.now() < deadline) await new Promise((resolve) => setImmediate(resolve))
    const arrived = client.arrivals.get(commitTs)
    if (arrived !== undefined) latencies.push((arrived - commitTs) / 1000)
    await new Promise((resolve) => setTimeout(resolve, everyMs))
  }
  latencies.sort((a, b) => a - b)
  const at = (p: number) => latencies[Math.min(latencies.length - 1, Math.ceil(p * latencies.length) - 1)] ?? Number.NaN
  return { count: latencies.length, medianMs: at(0.5), p99Ms: at(0.99) }
}
