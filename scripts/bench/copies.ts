/**
 * The Synthea data made larger: copies of the 55 bundles, each distinct data (fresh UUIDs, identifiers
 * suffixed with the copy's number), loaded by a few clients. The scale run (scale.ts) and the export
 * workload (export.ts) load their 10x this way.
 */
import { randomUUID } from "node:crypto"
import { type IngestBundle, runIngest } from "./ingest.ts"

const uuidPattern = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g

/**
 * Copy `n` (from 1) of a bundle: every UUID in it (the `urn:uuid:` fullUrls, the references to them,
 * the identifiers that repeat them) replaced by a fresh one, the same throughout the copy, and every
 * other identifier value of its resources suffixed with the copy's number, so that no two copies
 * share an id or an identifier. Copy 0 is the bundle as it is.
 */
export const copyOf = (bundle: IngestBundle, n: number): IngestBundle => {
  if (n === 0) return bundle
  const parsed = JSON.parse(bundle.text) as { entry?: Array<{ resource?: { identifier?: Array<{ value?: unknown }> } }> }
  for (const entry of parsed.entry ?? []) {
    for (const identifier of entry.resource?.identifier ?? []) {
      if (typeof identifier.value === "string" && !new RegExp(`^${uuidPattern.source}$`).test(identifier.value)) identifier.value = `${identifier.value}-${n}`
    }
  }
  const fresh = new Map<string, string>()
  const text = JSON.stringify(parsed).replace(uuidPattern, (uuid) => {
    const replaced = fresh.get(uuid) ?? randomUUID()
    fresh.set(uuid, replaced)
    return replaced
  })
  return { file: `${bundle.file}#${n}`, text, resources: bundle.resources }
}

export interface Loaded {
  readonly copies: number
  readonly resources: number
  readonly seconds: number
  /** Bundles answered non-2xx or not answered. */
  readonly failed: number
}

export interface LoadCopiesOptions {
  readonly url: string
  readonly bundles: ReadonlyArray<IngestBundle>
  /** Copies `from` to `to - 1` are loaded. */
  readonly from: number
  readonly to: number
  /** Clients sending bundles at once. */
  readonly clients: number
  readonly signal: AbortSignal
  readonly progress: (message: string) => void
}

/** Loads copies `from` to `to - 1` of every bundle with `clients` clients; copies are made one at a time. */
export const loadCopies = async (options: LoadCopiesOptions): Promise<Loaded> => {
  const { url, bundles, from, to, clients, signal, progress } = options
  let resources = 0
  let failed = 0
  const started = performance.now()
  for (let n = from; n < to; n++) {
    const copies = bundles.map((bundle) => copyOf(bundle, n))
    const result = await runIngest({ url, bundles: copies, connections: clients, signal })
    resources += Math.round((result.resourcesPerSec ?? 0) * result.seconds)
    failed += result.non2xx + result.errors
    if (result.non2xx + result.errors > 0) progress(`copy ${n + 1}: ${result.non2xx} bundles answered non-2xx, ${result.errors} failed (${JSON.stringify(result.statusCodes)})`)
    const elapsed = (performance.now() - started) / 1000
    progress(`copy ${n + 1} of ${to} loaded: ${resources} resources in ${elapsed.toFixed(0)} s (${(resources / elapsed).toFixed(0)} resources/s)`)
  }
  return { copies: to - from, resources, seconds: (performance.now() - started) / 1000, failed }
}
