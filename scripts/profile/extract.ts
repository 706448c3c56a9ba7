/**
 * Where index extraction spends its time: `extractIndexReport` over every Synthea resource (references
 * rewritten to `Type/id`, as stored) with the R4 catalog, one warm-up pass (which compiles the expressions)
 * and `--rounds` measured ones; prints µs per resource overall and by type.
 *
 *   node --import tsx scripts/profile/extract.ts [--engine=fhirpath] [--rounds=3] [--cpu-prof[=file]] [--top=25]
 *
 * `--engine=fhirpath` runs every expression through fhirpath.js (no compiled paths), for comparison.
 * `--cpu-prof` records a CPU profile of the measured rounds (node:inspector), prints the functions with the
 * most self time and writes the profile (`extract.cpuprofile` unless named) for Chrome DevTools.
 */
import { readFileSync, writeFileSync } from "node:fs"
import { Session } from "node:inspector"
import { findSourceMap, type SourceMapping } from "node:module"
import { performance } from "node:perf_hooks"
import { fileURLToPath } from "node:url"
import type { Engine } from "../../src/search/extract/extractIndex.ts"

// Source maps before the modules load, so that profile positions read as lines of the TypeScript.
process.setSourceMapsEnabled(true)
const { build } = await import("../../src/catalog/Catalog.ts")
const { extractIndexReport } = await import("../../src/search/extract/extractIndex.ts")
const { loadR4Conformance } = await import("../../test/support/r4Examples.ts")
const { asStored, loadSynthea } = await import("../../test/support/synthea.ts")

const flag = (name: string): string | undefined => {
  const arg = process.argv.find((a) => a === `--${name}` || a.startsWith(`--${name}=`))
  return arg === undefined ? undefined : arg.includes("=") ? arg.slice(arg.indexOf("=") + 1) : ""
}
const engine: Engine = flag("engine") === "fhirpath" ? "fhirpath" : "compiled"
const rounds = Number(flag("rounds") ?? 3)
const profileFile = flag("cpu-prof")
const top = Number(flag("top") ?? 25)

const conformance = await loadR4Conformance()
if (conformance === undefined) throw new Error("the R4 catalog could not be had")
const catalog = build(conformance, 1)
const resources = loadSynthea().flatMap(({ bundle }) => asStored(bundle.entry))

const pass = (byType?: Map<string, { count: number; micros: number }>) => {
  let rows = 0
  for (const resource of resources) {
    const start = byType === undefined ? 0 : performance.now()
    rows += extractIndexReport(resource, catalog, engine).rows.length
    if (byType !== undefined) {
      const type = String(resource["resourceType"])
      const entry = byType.get(type) ?? { count: 0, micros: 0 }
      entry.count++
      entry.micros += (performance.now() - start) * 1000
      byType.set(type, entry)
    }
  }
  return rows
}

const warm = performance.now()
const rows = pass()
console.log(`engine ${engine}: ${resources.length} resources, ${rows} rows; warm-up (compiles) ${((performance.now() - warm) / 1000).toFixed(2)} s`)

const session = new Session()
const post = <T>(method: string, params?: object): Promise<T> =>
  new Promise((resolve, reject) => session.post(method, params ?? {}, (error, result) => (error ? reject(error) : resolve(result as T))))
if (profileFile !== undefined) {
  session.connect()
  await post("Profiler.enable")
  await post("Profiler.setSamplingInterval", { interval: 100 })
  await post("Profiler.start")
}

const byType = new Map<string, { count: number; micros: number }>()
const perRound: Array<string> = []
for (let round = 0; round < rounds; round++) {
  const start = performance.now()
  const cpu = process.cpuUsage()
  pass(byType)
  const { user, system } = process.cpuUsage(cpu)
  perRound.push(`${(((performance.now() - start) * 1000) / resources.length).toFixed(1)} (CPU ${((user + system) / resources.length).toFixed(1)})`)
}
console.log(`µs/resource by round, wall (CPU): ${perRound.join(", ")}`)
const sorted = [...byType].sort(([, a], [, b]) => b.micros - a.micros)
const total = sorted.reduce((sum, [, e]) => sum + e.micros, 0)
console.log(`${"type".padEnd(28)} ${"count".padStart(7)} ${"µs/res".padStart(8)} ${"share".padStart(6)}`)
for (const [type, e] of sorted) {
  console.log(`${type.padEnd(28)} ${String(e.count / rounds).padStart(7)} ${(e.micros / e.count).toFixed(1).padStart(8)} ${((100 * e.micros) / total).toFixed(1).padStart(5)}%`)
}

interface ProfileNode {
  readonly id: number
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number; readonly columnNumber: number }
  readonly hitCount?: number
}

const sources = new Map<string, ReadonlyArray<string>>()

/** `file:line` in the TypeScript source and the start of that line, or the position as given. */
const locate = (frame: ProfileNode["callFrame"]): string => {
  const entry = frame.url === "" ? undefined : findSourceMap(frame.url)?.findEntry(frame.lineNumber, frame.columnNumber)
  const original = entry !== undefined && "originalSource" in entry ? (entry as SourceMapping) : undefined
  const url = original?.originalSource ?? frame.url
  const line = original?.originalLine ?? frame.lineNumber
  const short = url.replace(/^.*\/node_modules\//, "").replace(/^.*\/(src|scripts|test)\//, "$1/")
  if (original === undefined || !url.startsWith("file:")) return `${short}:${line + 1}`
  let lines = sources.get(url)
  if (lines === undefined) {
    lines = readFileSync(fileURLToPath(url), "utf8").split("\n")
    sources.set(url, lines)
  }
  return `${short}:${line + 1}  ${(lines[line] ?? "").trim().slice(0, 70)}`
}
interface Profile {
  readonly nodes: ReadonlyArray<ProfileNode>
  readonly samples?: ReadonlyArray<number>
}

if (profileFile !== undefined) {
  const { profile } = await post<{ profile: Profile }>("Profiler.stop")
  session.disconnect()
  const file = profileFile === "" ? "extract.cpuprofile" : profileFile
  writeFileSync(file, JSON.stringify(profile))
  const hits = new Map<string, number>()
  let all = 0
  for (const node of profile.nodes) {
    const count = node.hitCount ?? 0
    all += count
    const key = `${node.callFrame.functionName || "(anonymous)"} ${locate(node.callFrame)}`
    hits.set(key, (hits.get(key) ?? 0) + count)
  }
  console.log(`\nself time, top ${top} of ${all} samples (profile written to ${file}):`)
  for (const [key, count] of [...hits].sort(([, a], [, b]) => b - a).slice(0, top)) {
    console.log(`${((100 * count) / all).toFixed(1).padStart(5)}%  ${key}`)
  }
}
