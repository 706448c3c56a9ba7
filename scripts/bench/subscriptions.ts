/**
 * What Subscriptions cost (docs/subscriptions.md, "What it costs"): the Synthea ingest on a svc holding 10,000
 * active Subscriptions that match nothing, against the same ingest on a svc without them, and the time from a
 * commit to a rest-hook receiver on loopback.
 *
 * The two ingests run in turn (as inTurn.ts does for loads, and for the same reason: the machine's speed drifts
 * between two measures a minute apart): the bundles go in chunks, each chunk to one server and then the other
 * (ABBA ...), 4 clients each, so that both databases grow alike and each server meets the same drift.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import type { IngestBundle } from "./ingest.ts"
import { runIngest } from "./ingest.ts"
import type { Measurement } from "./load.ts"

/** How many Subscriptions the ingest is measured with. */
export const subscriptionCount = 10_000

/**
 * The criteria of the `n`th Subscription: token searches on the types the Synthea bundles create most, on values
 * no Synthea resource holds, so that every change of those types meets the index and none matches.
 */
const criteriaOf = (n: number): string => {
  const value = encodeURIComponent(`http://example.org/svc-bench|none-${n}`)
  switch (n % 5) {
    case 0:
      return `Observation?code=${value}`
    case 1:
      return `Patient?identifier=${value}`
    case 2:
      return `Encounter?type=${value}`
    case 3:
      return `Condition?code=${value}`
    default:
      return `Procedure?code=${value}`
  }
}

/** A receiver on loopback: it counts the notifications and keeps when each arrived (µs, the system clock) with its commit. */
export interface BenchReceiver {
  readonly url: string
  readonly arrivals: Array<{ readonly arrivedUs: number; readonly commitTs: number }>
  readonly close: () => Promise<void>
}

export const startBenchReceiver = async (): Promise<BenchReceiver> => {
  const arrivals: Array<{ readonly arrivedUs: number; readonly commitTs: number }> = []
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const arrivedUs = Math.round((performance.timeOrigin + performance.now()) * 1000)
    request.resume()
    request.on("end", () => {
      arrivals.push({ arrivedUs, commitTs: Number(request.headers["x-svc-commit-ts"] ?? Number.NaN) })
      response.writeHead(204).end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    arrivals,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}

const post = async (url: string, body: unknown): Promise<Response> => {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/fhir+json", accept: "application/fhir+json" },
    body: JSON.stringify(body)
  })
  await response.arrayBuffer()
  if (response.status >= 300) throw new Error(`POST ${url} answered ${response.status}`)
  return response
}

/** Creates `count` active rest-hook Subscriptions to `endpoint` that match nothing, 500 to a transaction. */
export const createSubscriptions = async (url: string, count: number, endpoint: string): Promise<void> => {
  for (let first = 0; first < count; first += 500) {
    const entry = Array.from({ length: Math.min(500, count - first) }, (_, k) => ({
      resource: {
        resourceType: "Subscription",
        status: "active",
        reason: "svc bench: matches nothing",
        criteria: criteriaOf(first + k),
        channel: { type: "rest-hook", endpoint, payload: "application/fhir+json" }
      },
      request: { method: "POST", url: "Subscription" }
    }))
    await post(`${url}/fhir`, { resourceType: "Bundle", type: "transaction", entry })
  }
}

export interface IngestInTurn {
  readonly reference: Measurement
  readonly candidate: Measurement
  /** The candidate's resources per second over the reference's. */
  readonly share: number
  /** Each round's share. */
  readonly roundShares: ReadonlyArray<number>
}

const pooledIngest = (parts: ReadonlyArray<Measurement>): Measurement => {
  const seconds = parts.reduce((n, m) => n + m.seconds, 0)
  const ok = parts.reduce((n, m) => n + m.ok, 0)
  const resources = parts.reduce((n, m) => n + (m.resourcesPerSec ?? 0) * m.seconds, 0)
  const statusCodes: Record<string, number> = {}
  for (const part of parts) for (const [code, count] of Object.entries(part.statusCodes)) statusCodes[code] = (statusCodes[code] ?? 0) + count
  const medians = parts.map((m) => m.medianMs).sort((a, b) => a - b)
  return {
    reqPerSec: ok / seconds,
    resourcesPerSec: resources / seconds,
    medianMs: medians[Math.floor(medians.length / 2)] ?? Number.NaN,
    p99Ms: Math.max(...parts.map((m) => m.p99Ms)),
    ok,
    non2xx: parts.reduce((n, m) => n + m.non2xx, 0),
    errors: parts.reduce((n, m) => n + m.errors, 0),
    seconds,
    statusCodes
  }
}

/** The bundles in chunks of `chunk`, each to the reference and the candidate in turn (ABBA ...), `connections` clients. */
export const ingestInTurn = async (
  referenceUrl: string,
  candidateUrl: string,
  bundles: ReadonlyArray<IngestBundle>,
  options: { readonly chunk: number; readonly connections: number; readonly signal: AbortSignal }
): Promise<IngestInTurn> => {
  const reference: Array<Measurement> = []
  const candidate: Array<Measurement> = []
  const roundShares: Array<number> = []
  for (let first = 0, round = 0; first < bundles.length; first += options.chunk, round++) {
    const some = bundles.slice(first, first + options.chunk)
    const run = (url: string) => runIngest({ url, bundles: some, connections: options.connections, signal: options.signal })
    const [ref, cand] = round % 2 === 0 ? [await run(referenceUrl), await run(candidateUrl)] : await run(candidateUrl).then(async (c) => [await run(referenceUrl), c] as const)
    reference.push(ref)
    candidate.push(cand)
    roundShares.push((cand.resourcesPerSec ?? 0) / (ref.resourcesPerSec ?? 1))
  }
  const ref = pooledIngest(reference)
  const cand = pooledIngest(candidate)
  return { reference: ref, candidate: cand, share: (cand.resourcesPerSec ?? 0) / (ref.resourcesPerSec ?? 1), roundShares }
}

export interface Latency {
  readonly count: number
  readonly medianMs: number
  readonly p99Ms: number
}

/**
 * Creates `count` Patients one at a time on `url`, each matched by one Subscription whose endpoint is `receiver`,
 * each after the notification of the one before has arrived: the time from each commit (`X-Svc-Commit-Ts`, µs of the server's clock) to
 * its arrival (µs of the same machine's clock).
 */
export const notificationLatency = async (url: string, receiver: BenchReceiver, count: number, signal: AbortSignal): Promise<Latency> => {
  await createSubscriptionFor(url, "Patient?identifier=urn:svc:bench:latency|", receiver.url)
  const before = receiver.arrivals.length
  for (let n = 0; n < count; n++) {
    signal.throwIfAborted()
    await post(`${url}/fhir/Patient`, { resourceType: "Patient", identifier: [{ system: "urn:svc:bench:latency", value: `latency-${n}` }] })
    // The next create waits for this notification: each is timed alone, not behind the ones before it.
    const deadline = performance.now() + 10_000
    while (receiver.arrivals.length - before <= n && performance.now() < deadline) await new Promise((resolve) => setImmediate(resolve))
  }
  const latencies = receiver.arrivals.slice(before).map((a) => (a.arrivedUs - a.commitTs) / 1000).sort((a, b) => a - b)
  const at = (p: number) => latencies[Math.min(latencies.length - 1, Math.ceil(p * latencies.length) - 1)] ?? Number.NaN
  return { count: latencies.length, medianMs: at(0.5), p99Ms: at(0.99) }
}

const createSubscriptionFor = (url: string, criteria: string, endpoint: string) =>
  post(`${url}/fhir/Subscription`, {
    resourceType: "Subscription",
    status: "active",
    reason: "svc bench: notification latency",
    criteria,
    channel: { type: "rest-hook", endpoint, payload: "application/fhir+json" }
  })
