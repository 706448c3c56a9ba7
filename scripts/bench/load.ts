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

const once = (options: LoadOptions, seconds: number): Promise<Measurement> =>
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
          reqPerSec: result["2xx"] / result.duration,
          medianMs: percentile(sorted, 0.5),
          p99Ms: percentile(sorted, 0.99),
          ok: result["2xx"],
          non2xx: result.non2xx,
          errors: result.errors,
          seconds: result.duration,
          statusCodes
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
  return once(options, options.seconds)
}
