/**
 * Reads by id while a large transaction is ingested: what one large write costs the requests around it.
 * The Synthea bundles are joined into one transaction Bundle of a few thousand entries (within
 * `server.max_bundle_entries`); while the server takes it, one client reads a Patient by id, the next read
 * sent when the last is answered, and the latencies of those reads are measured. With the work of a large
 * write done in one piece, every read waits for the whole transaction; done in pieces, a read waits for
 * one piece. See docs/performance.md ("One request and the others").
 */
import type { IngestBundle } from "./ingest.ts"
import type { Measurement } from "./load.ts"

const percentile = (sorted: ReadonlyArray<number>, p: number): number =>
  sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)] ?? Number.NaN

/**
 * One transaction Bundle of the entries of `bundles`, at most `maxEntries` of them (whole bundles only). An
 * entry whose fullUrl an earlier bundle has (the same Organization or Practitioner) is left out: a Bundle's
 * fullUrls are distinct, and the references go to the first.
 */
export const joinBundles = (bundles: ReadonlyArray<IngestBundle>, maxEntries: number): { readonly text: string; readonly entries: number } => {
  const entries: Array<unknown> = []
  const fullUrls = new Set<string>()
  for (const bundle of bundles) {
    const own = ((JSON.parse(bundle.text) as { entry?: Array<{ fullUrl?: string }> }).entry ?? [])
      .filter((entry) => entry.fullUrl === undefined || !fullUrls.has(entry.fullUrl))
    if (entries.length + own.length > maxEntries) break
    for (const entry of own) {
      if (entry.fullUrl !== undefined) fullUrls.add(entry.fullUrl)
      entries.push(entry)
    }
  }
  return { text: JSON.stringify({ resourceType: "Bundle", type: "transaction", entry: entries }), entries: entries.length }
}

export interface ReadsDuringIngestOptions {
  readonly url: string
  /** The id of a Patient the server holds. */
  readonly patientId: string
  /** The transaction Bundle's text. */
  readonly transaction: string
  readonly entries: number
  readonly signal: AbortSignal
}

/** `reqPerSec`, the median and p99 are those of the reads; `resourcesPerSec` is the transaction's. */
export const runReadsDuringIngest = async (options: ReadsDuringIngestOptions): Promise<Measurement & { readonly maxMs: number; readonly transactionMs: number }> => {
  const latencies: Array<number> = []
  const statusCodes: Record<string, number> = {}
  let done = false
  let non2xx = 0
  let errors = 0
  const started = performance.now()
  const transaction = fetch(`${options.url}/fhir`, {
    method: "POST",
    headers: { "content-type": "application/fhir+json", prefer: "return=minimal" },
    body: options.transaction,
    signal: options.signal
  }).then(async (response) => {
    await response.text()
    return response.status
  }).finally(() => {
    done = true
  })
  const reads = (async () => {
    while (!done) {
      const at = performance.now()
      try {
        const response = await fetch(`${options.url}/fhir/Patient/${options.patientId}`, { signal: options.signal })
        await response.text()
        if (done) break
        statusCodes[response.status] = (statusCodes[response.status] ?? 0) + 1
        if (response.ok) latencies.push(performance.now() - at)
        else non2xx++
      } catch (error) {
        if (options.signal.aborted) throw error
        errors++
      }
    }
  })()
  const status = await transaction
  const transactionMs = performance.now() - started
  await reads
  if (status < 200 || status >= 300) throw new Error(`the large transaction was answered ${status}`)
  const sorted = [...latencies].sort((a, b) => a - b)
  const seconds = transactionMs / 1000
  return {
    reqPerSec: latencies.length / seconds,
    resourcesPerSec: options.entries / seconds,
    medianMs: percentile(sorted, 0.5),
    p99Ms: percentile(sorted, 0.99),
    maxMs: sorted.at(-1) ?? Number.NaN,
    transactionMs,
    ok: latencies.length,
    non2xx,
    errors,
    seconds,
    statusCodes
  }
}
