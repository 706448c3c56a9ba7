/**
 * Drives one workload against one server with autocannon, in this process: a warm-up whose figures
 * are thrown away, then the measured run. Latencies are taken from every 2xx response at
 * microsecond resolution (autocannon's own histogram rounds to whole milliseconds).
 */
import autocannon from "autocannon"

export interface LoadOptions {
  readonly url: string
  readonly requests: Array<autocannon.Request>
  readonly connections: number
  readonly warmupSeconds: number
  readonly seconds: number
  readonly signal: AbortSignal
  /** Headers sent with every request, under each request's own (a bearer token). */
  readonly headers?: Readonly<Record<string, string>> | undefined
}

export interface Measurement {
  readonly reqPerSec: number
  /** Resources created per second, for workloads that create several per request (the ingest). */
  readonly resourcesPerSec?: number
  readonly medianMs: number
  readonly p99Ms: number
  /** 2xx responses in the measured run */
  readonly ok: number
  readonly non2xx: number
  /** connection errors and timeouts */
  readonly errors: number
  readonly seconds: number
  readonly statusCodes: Record<string, number>
}

const percentile = (sorted: Float64Array, p: number): number =>
  sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)] ?? Number.NaN

/** A measured run's figures and its 2xx latencies (ms, sorted), to pool with other runs'. */
export interface Slice {
  readonly measurement: Measurement
  readonly latencies: Float64Array
}

const once = (options: LoadOptions, seconds: number): Promise<Slice> =>
  new Promise((resolve, reject) => {
    options.signal.throwIfAborted()
    let latencies = new Float64Array(1 << 16)
    let count = 0
    const instance = autocannon(
      {
        url: options.url,
        connections: options.connections,
        duration: seconds,
        timeout: 10,
        requests: options.requests,
        ...(options.headers === undefined ? {} : { headers: { ...options.headers } })
      },
      (error, result) => {
        options.signal.removeEventListener("abort", stop)
        if (error) return reject(error)
        if (options.signal.aborted) return reject(options.signal.reason)
        const sorted = latencies.subarray(0, count).sort()
        const statusCodes = Object.fromEntries(Object.entries(result.statusCodeStats).map(([code, { count }]) => [code, count]))
        resolve({
          measurement: {
            reqPerSec: result["2xx"] / result.duration,
            medianMs: percentile(sorted, 0.5),
            p99Ms: percentile(sorted, 0.99),
            ok: result["2xx"],
            non2xx: result.non2xx,
            errors: result.errors,
            seconds: result.duration,
            statusCodes
          },
          latencies: sorted
        })
      }
    )
    instance.on("response", (_client: unknown, statusCode: number, _bytes: number, responseTime: number) => {
      if (statusCode < 200 || statusCode >= 300) return
      if (count === latencies.length) {
        const grown = new Float64Array(latencies.length * 2)
        grown.set(latencies)
        latencies = grown
      }
      latencies[count++] = responseTime
    })
    const stop = () => instance.stop()
    options.signal.addEventListener("abort", stop, { once: true })
  })

export const runLoad = async (options: LoadOptions): Promise<Measurement> => {
  if (options.warmupSeconds > 0) await once(options, options.warmupSeconds)
  return (await once(options, options.seconds)).measurement
}

/** One measured run of `options.seconds` with no warm-up, its latencies kept (the slices of inTurn.ts). */
export const runSlice = (options: LoadOptions): Promise<Slice> => once(options, options.seconds)

/** The slices' figures as one measurement: their counts summed, the percentiles over all their latencies. */
export const pooled = (slices: ReadonlyArray<Slice>): Measurement => {
  const all = new Float64Array(slices.reduce((n, slice) => n + slice.latencies.length, 0))
  let at = 0
  for (const slice of slices) {
    all.set(slice.latencies, at)
    at += slice.latencies.length
  }
  all.sort()
  const sum = (pick: (m: Measurement) => number) => slices.reduce((n, slice) => n + pick(slice.measurement), 0)
  const statusCodes: Record<string, number> = {}
  for (const slice of slices) {
    for (const [code, count] of Object.entries(slice.measurement.statusCodes)) statusCodes[code] = (statusCodes[code] ?? 0) + count
  }
  const seconds = sum((m) => m.seconds)
  return {
    reqPerSec: seconds > 0 ? sum((m) => m.ok) / seconds : 0,
    medianMs: percentile(all, 0.5),
    p99Ms: percentile(all, 0.99),
    ok: sum((m) => m.ok),
    non2xx: sum((m) => m.non2xx),
    errors: sum((m) => m.errors),
    seconds,
    statusCodes
  }
}
