/**
 * `node --import tsx scripts/profile/ingest.ts [--postgres] [--bundles N] [--clients C] [--cpu-prof]`:
 * the bench's Synthea ingest on its own, to find where the time of a transaction Bundle goes. svc (the
 * bundle `npm start` runs) starts on a fresh database with the real R4 packages, as the bench starts it;
 * the first bundle is sent once as a warm-up, then N bundles by C clients, and the resources per second
 * are printed. With `--cpu-prof` the server is started again on that database under node's
 * `--cpu-prof` (the installation is left out of the profile), and the functions with the most self and
 * total time, mapped to their source files, are printed.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { SourceMap } from "node:module"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { cleanupAll, installSignalHandlers, interrupted, onCleanup } from "../bench/cleanup.ts"
import { loadSynthea, runIngest, syntheaMissing } from "../bench/ingest.ts"
import { createBenchDatabase, postgresUnavailable } from "../bench/postgres.ts"
import { type Backend, npmRegistry, startSvc } from "../bench/servers.ts"

const { values: flags } = parseArgs({
  options: {
    postgres: { type: "boolean" },
    bundles: { type: "string", default: "20" },
    clients: { type: "string", default: "4" },
    "cpu-prof": { type: "boolean" },
    /** More options for the server's node (`--import ./probe.mjs`, say), given after the installation. */
    "node-arg": { type: "string", multiple: true, default: [] },
    top: { type: "string", default: "30" }
  }
})

/** CPU time (user and system) of a process so far, from /proc; 0 where there is none. */
const cpuMillis = (pid: number): number => {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").replace(/^.*\) /, "").split(" ")
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100
  } catch {
    return 0
  }
}

interface ProfileNode {
  readonly id: number
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number; readonly columnNumber: number }
  readonly children?: ReadonlyArray<number>
}
interface Profile {
  readonly nodes: ReadonlyArray<ProfileNode>
  readonly samples: ReadonlyArray<number>
  readonly timeDeltas: ReadonlyArray<number>
}

const sourceMaps = new Map<string, SourceMap | undefined>()
const sourceMapOf = (url: string): SourceMap | undefined => {
  if (!sourceMaps.has(url)) {
    let map: SourceMap | undefined
    try {
      map = new SourceMap(JSON.parse(readFileSync(`${new URL(url).pathname}.map`, "utf8")))
    } catch {
      map = undefined
    }
    sourceMaps.set(url, map)
  }
  return sourceMaps.get(url)
}

/** `name (file:line)`, through the bundle's source map where there is one. */
const frameName = (frame: ProfileNode["callFrame"]): string => {
  const name = frame.functionName === "" ? "(anonymous)" : frame.functionName
  if (frame.url === "") return name
  const entry: { originalSource?: unknown; originalLine?: unknown } | undefined = frame.url.endsWith(".mjs")
    ? sourceMapOf(frame.url)?.findEntry(frame.lineNumber, frame.columnNumber)
    : undefined
  if (typeof entry?.originalSource === "string" && typeof entry.originalLine === "number") {
    const source = entry.originalSource.replace(/^.*?(node_modules\/|src\/)/, "$1")
    return `${name} (${source}:${entry.originalLine + 1})`
  }
  return `${name} (${frame.url.replace(/^.*\//, "")}:${frame.lineNumber + 1})`
}

/** Self and total time per function (a recursive function's total counted once per sample). */
const summarise = (profile: Profile, top: number): void => {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]))
  const parent = new Map<number, number>()
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id)
  const self = new Map<string, number>()
  const total = new Map<string, number>()
  let all = 0
  profile.samples.forEach((id, n) => {
    const dt = profile.timeDeltas[n] ?? 0
    all += dt
    const leaf = frameName(byId.get(id)!.callFrame)
    self.set(leaf, (self.get(leaf) ?? 0) + dt)
    const seen = new Set<string>()
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const name = frameName(byId.get(at)!.callFrame)
      if (seen.has(name)) continue
      seen.add(name)
      total.set(name, (total.get(name) ?? 0) + dt)
    }
  })
  const print = (title: string, table: Map<string, number>) => {
    console.log(`\n${title} (of ${(all / 1e6).toFixed(2)} s sampled)`)
    for (const [name, us] of [...table].sort((a, b) => b[1] - a[1]).slice(0, top)) {
      console.log(`${(us / 1e3).toFixed(0).padStart(8)} ms ${((100 * us) / all).toFixed(1).padStart(5)}%  ${name}`)
    }
  }
  print("self time", self)
  print("total time", total)
}

const main = async () => {
  installSignalHandlers()
  const missing = syntheaMissing()
  if (missing !== undefined) throw new Error(missing)
  const registry = await npmRegistry()
  if ("why" in registry) throw new Error(registry.why)
  const packages = { kind: "r4", registry: registry.registry } as const
  const workDir = mkdtempSync(join(tmpdir(), "svc-profile-"))
  onCleanup("removing the temporary directory", () => rmSync(workDir, { recursive: true, force: true }))
  let backend: Backend
  if (flags.postgres) {
    const why = await postgresUnavailable()
    if (why !== undefined) throw new Error(`Postgres: ${why}`)
    const database = await createBenchDatabase()
    onCleanup("dropping the Postgres database", database.drop)
    backend = { kind: "postgres", url: database.url }
  } else {
    backend = { kind: "sqlite", file: join(workDir, "svc.sqlite") }
  }
  const count = Number(flags.bundles)
  const connections = Number(flags.clients)
  const bundles = loadSynthea(count + 1)
  const [warmup, ...measured] = bundles

  console.error(`starting svc on ${backend.kind} (installs the R4 packages on the fresh database)`)
  let child = await startSvc(backend, workDir, packages)
  const profileDir = join(workDir, "cpu-prof")
  if (flags["cpu-prof"] || flags["node-arg"].length > 0) {
    await child.stop()
    child = await startSvc(backend, workDir, packages, { nodeArgs: [...(flags["cpu-prof"] ? ["--cpu-prof", `--cpu-prof-dir=${profileDir}`] : []), ...flags["node-arg"]] })
  }
  await runIngest({ url: child.url, bundles: [warmup!], connections: 1, signal: interrupted.signal })
  const cpuBefore = cpuMillis(child.pid)
  const result = await runIngest({ url: child.url, bundles: measured, connections, signal: interrupted.signal })
  const cpu = cpuMillis(child.pid) - cpuBefore
  const resources = measured.reduce((n, b) => n + b.resources, 0)
  console.log(
    `${backend.kind}, ${connections} client(s), ${result.ok} bundles (${resources} resources) in ${result.seconds.toFixed(2)} s: ` +
      `${(result.resourcesPerSec ?? 0).toFixed(0)} res/s, median ${result.medianMs.toFixed(0)} ms per bundle, non-2xx ${result.non2xx}, errors ${result.errors}; ` +
      `server CPU ${((1000 * cpu) / resources).toFixed(0)} µs per resource (load average ${loadavg()[0]!.toFixed(1)})`
  )
  await child.stop()
  if (flags["cpu-prof"]) {
    const file = readdirSync(profileDir).find((name) => name.endsWith(".cpuprofile"))
    if (file === undefined) throw new Error("the server wrote no CPU profile")
    summarise(JSON.parse(readFileSync(join(profileDir, file), "utf8")) as Profile, Number(flags.top))
  }
}

main().then(
  () => cleanupAll(),
  async (error) => {
    console.error(error instanceof Error ? error.message : String(error))
    await cleanupAll()
    process.exitCode = 1
  }
)
