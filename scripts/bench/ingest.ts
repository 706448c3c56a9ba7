/**
 * The Synthea ingest: the Synthea R4 transaction Bundles beside the project
 * (`../shared/data/synthea`, one patient each, `urn:uuid:` fullUrls, every entry a POST) sent to
 * `POST /fhir` by a few clients, each sending its next bundle when the last is answered. Not an
 * autocannon load: the set of bundles is fixed, so it runs once through them and is timed.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { refusedSynthea } from "../../test/support/synthea.ts"
import type { Measurement } from "./load.ts"

export const syntheaDir = fileURLToPath(new URL("../../../shared/data/synthea/", import.meta.url))

export interface IngestBundle {
  readonly file: string
  /** The file's text, sent as is. */
  readonly text: string
  /** Its entries: the resources it creates. */
  readonly resources: number
}

/** Undefined when the bundles are there, otherwise why not. */
export const syntheaMissing = (): string | undefined =>
  existsSync(syntheaDir) && readdirSync(syntheaDir).some((file) => file.endsWith(".json"))
    ? undefined
    : "no Synthea bundles in ../shared/data/synthea"

/** The first `limit` bundles in file-name order (all of them without a limit), but those validation refuses for defects of the data. */
export const loadSynthea = (limit?: number): Array<IngestBundle> =>
  readdirSync(syntheaDir)
    .filter((file) => file.endsWith(".json") && refusedSynthea[file] === undefined)
    .sort()
    .slice(0, limit)
    .map((file) => {
      const text = readFileSync(join(syntheaDir, file), "utf8")
      const bundle = JSON.parse(text) as { entry?: ReadonlyArray<unknown> }
      return { file, text, resources: bundle.entry?.length ?? 0 }
    })

export interface IngestOptions {
  readonly url: string
  readonly bundles: ReadonlyArray<IngestBundle>
  readonly connections: number
  readonly signal: AbortSignal
}

const percentile = (sorted: ReadonlyArray<number>, p: number): number =>
  sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)] ?? Number.NaN

/**
 * Sends every bundle once, `connections` at a time, and measures: `reqPerSec` counts transactions
 * answered 2xx per second, `resourcesPerSec` their entries per second, latencies are per transaction.
 */
export const runIngest = async (options: IngestOptions): Promise<Measurement> => {
  const latencies: Array<number> = []
  const statusCodes: Record<string, number> = {}
  let ok = 0
  let non2xx = 0
  let errors = 0
  let resources = 0
  let next = 0
  const worker = async () => {
    for (let n = next++; n < options.bundles.length; n = next++) {
      options.signal.throwIfAborted()
      const bundle = options.bundles[n]!
      const sent = performance.now()
      try {
        const response = await fetch(`${options.url}/fhir`, {
          method: "POST",
          headers: { "content-type": "application/fhir+json", accept: "application/fhir+json" },
          body: bundle.text,
          signal: options.signal
        })
        await response.arrayBuffer()
        statusCodes[response.status] = (statusCodes[response.status] ?? 0) + 1
        if (response.status >= 200 && response.status < 300) {
          ok++
          resources += bundle.resources
          latencies.push(performance.now() - sent)
        } else {
          non2xx++
        }
      } catch (error) {
        if (options.signal.aborted) throw error
        errors++
      }
    }
  }
  const started = performance.now()
  await Promise.all(Array.from({ length: options.connections }, worker))
  const seconds = (performance.now() - started) / 1000
  const sorted = latencies.sort((a, b) => a - b)
  return {
    reqPerSec: ok / seconds,
    resourcesPerSec: resources / seconds,
    medianMs: percentile(sorted, 0.5),
    p99Ms: percentile(sorted, 0.99),
    ok,
    non2xx,
    errors,
    seconds,
    statusCodes
  }
}
