/**
 * Reads a V8 `.cpuprofile` (what `node --cpu-prof` writes) and sums its samples by function: self time
 * (the function was running) and total time (it was on the stack, counted once per sample however
 * often it recurs), over the samples taken between two instants. Positions in the bundle are mapped
 * back to the sources through its source map when there is one.
 */
import { readFileSync } from "node:fs"
import { SourceMap } from "node:module"
import { dirname, relative, resolve } from "node:path"
import { fileURLToPath } from "node:url"

interface ProfileNode {
  readonly id: number
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number; readonly columnNumber: number }
  readonly children?: ReadonlyArray<number>
}

interface CpuProfile {
  readonly nodes: ReadonlyArray<ProfileNode>
  /** µs, on the machine's monotonic clock (`process.hrtime`'s) */
  readonly startTime: number
  readonly endTime: number
  readonly samples: ReadonlyArray<number>
  readonly timeDeltas: ReadonlyArray<number>
}

export interface FunctionTime {
  /** `name (file:line)` */
  readonly function: string
  readonly selfMs: number
  readonly totalMs: number
}

export interface Summary {
  /** Samples in the window and the time they cover, ms. */
  readonly samples: number
  readonly windowMs: number
  /** Time in `(idle)`: the server waiting for work, ms. */
  readonly idleMs: number
  readonly functions: ReadonlyArray<FunctionTime>
}

const sourceMaps = new Map<string, SourceMap | undefined>()

const sourceMapOf = (url: string): SourceMap | undefined => {
  if (!sourceMaps.has(url)) {
    let map: SourceMap | undefined
    try {
      map = new SourceMap(JSON.parse(readFileSync(`${fileURLToPath(url)}.map`, "utf8")) as ConstructorParameters<typeof SourceMap>[0])
    } catch {
      map = undefined
    }
    sourceMaps.set(url, map)
  }
  return sourceMaps.get(url)
}

/** A path as shown: from `node_modules/` on for a package's file (wherever the folder really is), else relative to `root` when under it. */
const shown = (path: string, root: string): string => {
  const packages = path.lastIndexOf("/node_modules/")
  if (packages >= 0) return path.slice(packages + 1)
  return path.startsWith(root) ? relative(root, path) : path
}

/** `file:line` of a frame, through the source map when the file has one. */
const place = (frame: ProfileNode["callFrame"], root: string): string => {
  if (frame.url === "") return ""
  const map = frame.url.startsWith("file:") ? sourceMapOf(frame.url) : undefined
  const entry = map?.findEntry(frame.lineNumber, frame.columnNumber)
  if (entry !== undefined && "originalSource" in entry) {
    // Sources are named relative to the bundle's folder.
    const source = entry.originalSource.startsWith("file:")
      ? fileURLToPath(entry.originalSource)
      : resolve(dirname(fileURLToPath(frame.url)), entry.originalSource)
    return `${shown(source, root)}:${entry.originalLine + 1}`
  }
  const file = frame.url.startsWith("file:") ? fileURLToPath(frame.url) : frame.url
  return `${shown(file, root)}:${frame.lineNumber + 1}`
}

/**
 * Sums the samples of `file` taken from `fromMicros` to `toMicros` (the profile's clock, which is
 * `process.hrtime`'s), or all of them when no sample falls in that window.
 */
export const summarize = (file: string, root: string, fromMicros?: number, toMicros?: number): Summary => {
  const profile = JSON.parse(readFileSync(file, "utf8")) as CpuProfile
  const byId = new Map(profile.nodes.map((node) => [node.id, node]))
  const parent = new Map<number, number>()
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id)
  const keyOf = new Map<number, string>()
  for (const node of profile.nodes) {
    const where = place(node.callFrame, root)
    keyOf.set(node.id, `${node.callFrame.functionName === "" ? "(anonymous)" : node.callFrame.functionName}${where === "" ? "" : ` (${where})`}`)
  }
  // Each sample's instant, and the time until the next (the last one gets the mean interval).
  const times: Array<number> = []
  let at = profile.startTime
  for (const delta of profile.timeDeltas) times.push((at += delta))
  const mean = times.length > 1 ? ((times[times.length - 1] ?? 0) - (times[0] ?? 0)) / (times.length - 1) : 0
  const inWindow = (t: number) => (fromMicros === undefined || t >= fromMicros) && (toMicros === undefined || t <= toMicros)
  const windowed = times.some(inWindow)
  const self = new Map<string, number>()
  const total = new Map<string, number>()
  let samples = 0
  let windowMicros = 0
  let idleMicros = 0
  profile.samples.forEach((nodeId, i) => {
    const t = times[i] ?? 0
    if (windowed && !inWindow(t)) return
    const duration = i + 1 < times.length ? (times[i + 1] ?? t) - t : mean
    samples++
    windowMicros += duration
    const leaf = keyOf.get(nodeId) ?? "?"
    if (byId.get(nodeId)?.callFrame.functionName === "(idle)") idleMicros += duration
    self.set(leaf, (self.get(leaf) ?? 0) + duration)
    const seen = new Set<string>()
    for (let id: number | undefined = nodeId; id !== undefined; id = parent.get(id)) {
      const key = keyOf.get(id) ?? "?"
      if (byId.get(id)?.callFrame.functionName === "(root)" || seen.has(key)) continue
      seen.add(key)
      total.set(key, (total.get(key) ?? 0) + duration)
    }
  })
  const functions = [...total].map(([name, micros]) => ({ function: name, selfMs: (self.get(name) ?? 0) / 1000, totalMs: micros / 1000 }))
  return { samples, windowMs: windowMicros / 1000, idleMs: idleMicros / 1000, functions }
}

/** The `top` functions by self time and by total time, as two text tables. */
export const formatSummary = (summary: Summary, top: number): string => {
  const busy = summary.windowMs - summary.idleMs
  const share = (ms: number) => (busy > 0 ? `${((ms / busy) * 100).toFixed(1)}%` : "-")
  const table = (title: string, rows: ReadonlyArray<FunctionTime>, first: "self" | "total") => {
    const cells = rows.map((row) => {
      const [a, b] = first === "self" ? [row.selfMs, row.totalMs] : [row.totalMs, row.selfMs]
      return [a.toFixed(0), share(a), b.toFixed(0), row.function]
    })
    const header = first === "self" ? ["self ms", "self %", "total ms", "function"] : ["total ms", "total %", "self ms", "function"]
    const widths = header.map((h, c) => Math.max(h.length, ...cells.map((row) => row[c]?.length ?? 0)))
    const line = (row: ReadonlyArray<string>) => row.map((cell, c) => (c < 3 ? cell.padStart(widths[c] ?? 0) : cell)).join("  ")
    return [title, line(header), ...cells.map(line)].join("\n")
  }
  const busyFunctions = summary.functions.filter((f) => f.function !== "(idle)")
  const bySelf = busyFunctions.filter((f) => f.selfMs > 0).sort((a, b) => b.selfMs - a.selfMs).slice(0, top)
  const byTotal = [...busyFunctions].sort((a, b) => b.totalMs - a.totalMs).slice(0, top)
  const ownCode = [...busyFunctions].filter((f) => f.function.includes(" (src/")).sort((a, b) => b.totalMs - a.totalMs).slice(0, top)
  return [
    `${summary.samples} samples over ${(summary.windowMs / 1000).toFixed(1)} s, ${(summary.idleMs / 1000).toFixed(1)} s of it idle; shares are of the busy time (${(busy / 1000).toFixed(1)} s)`,
    "",
    table(`Top ${top} by self time`, bySelf, "self"),
    "",
    table(`Top ${top} by total time (on the stack)`, byTotal, "total"),
    "",
    // Below the runtime's own frames (Effect's fiber loop, the event loop), which are on every stack.
    table(`Top ${top} of the server's own code (src/) by total time`, ownCode, "total")
  ].join("\n")
}
