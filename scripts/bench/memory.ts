/**
 * Resident memory of a child process, from Linux's /proc/<pid>/status: `VmRSS` (now) and `VmHWM`
 * (the kernel's own peak). The peak is reset at the start of each workload (writing 5 to
 * /proc/<pid>/clear_refs), so each workload reports its own peak; where that is refused, the
 * highest `VmRSS` sampled every 100 ms stands in. Elsewhere than Linux every figure is undefined.
 */
import { readFileSync, writeFileSync } from "node:fs"

const kilobytes = (status: string, field: string): number | undefined => {
  const match = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)
  return match ? Number(match[1]) : undefined
}

const readStatus = (pid: number): { readonly rss: number | undefined; readonly hwm: number | undefined } => {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8")
    return { rss: kilobytes(status, "VmRSS"), hwm: kilobytes(status, "VmHWM") }
  } catch {
    return { rss: undefined, hwm: undefined }
  }
}

const megabytes = (kb: number | undefined): number | undefined => (kb === undefined ? undefined : Math.round(kb / 102.4) / 10)

export interface MemoryWatch {
  /** Starts a new window: resets the kernel's peak and the sampled peak. */
  readonly startWindow: () => void
  /** The peak resident memory (MB) since the window started. */
  readonly windowPeakMb: () => number | undefined
  /** The peak resident memory (MB) of the process's whole life, as the kernel counts it. */
  readonly lifetimePeakMb: () => number | undefined
  /** The resident memory (MB) now (`VmRSS`). */
  readonly currentMb: () => number | undefined
  readonly stop: () => void
}

export const watchMemory = (pid: number, intervalMs = 100): MemoryWatch => {
  let lifetimeKb: number | undefined
  let sampledKb: number | undefined
  let peakWasReset = false
  const sample = () => {
    const { rss, hwm } = readStatus(pid)
    if (rss !== undefined) sampledKb = Math.max(sampledKb ?? 0, rss)
    if (hwm !== undefined) lifetimeKb = Math.max(lifetimeKb ?? 0, hwm)
  }
  const timer = setInterval(sample, intervalMs)
  timer.unref()
  sample()
  return {
    startWindow: () => {
      sample()
      sampledKb = undefined
      try {
        writeFileSync(`/proc/${pid}/clear_refs`, "5")
        peakWasReset = true
      } catch {
        peakWasReset = false
      }
      sample()
    },
    windowPeakMb: () => {
      sample()
      // After a reset VmHWM is the window's own peak (the lifetime figure keeps the earlier maximum).
      const { hwm } = readStatus(pid)
      return megabytes(peakWasReset && hwm !== undefined ? Math.max(hwm, sampledKb ?? 0) : sampledKb)
    },
    lifetimePeakMb: () => {
      sample()
      return megabytes(lifetimeKb)
    },
    currentMb: () => megabytes(readStatus(pid).rss),
    stop: () => clearInterval(timer)
  }
}
