/**
 * `node --import tsx scripts/profile/search.ts [options]`: one search workload of the bench, alone, on a
 * svc with the real R4 packages and some Synthea bundles loaded, driven by autocannon; optionally under
 * `--cpu-prof`, printing the functions that took the most self time.
 *
 *   --dir <path>        keeps the SQLite file (and the logs) there, so a second run skips the ingest
 *   --postgres <url>    a database of its own instead of SQLite (ingested when it has no Patient)
 *   --bundles <n>       Synthea bundles to load on a fresh database, as `npm run bench` does (5, as with --quick)
 *   --workload <name>   token | token-date | chained | everything | string | has | include | paged (token)
 *   --connections <n>   8
 *   --seconds <n>       measured seconds after a warm-up of half as many (5)
 *   --cpu-prof          profiles the server and prints its top 30 functions by self time
 *   --bundle <file>     the server bundle to start (dist/svc.mjs, built when stale): to compare two builds
 */
import { execFileSync } from "node:child_process"
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { cleanupAll, installSignalHandlers, interrupted } from "../bench/cleanup.ts"
import { loadSynthea, runIngest } from "../bench/ingest.ts"
import { runLoad } from "../bench/load.ts"
import { chainPaths, countOf, everythingPaths, familyPaths, hasPaths, includePaths, pagedPaths, prepareSearch, tokenDatePaths, tokenPaths } from "../bench/search.ts"
import { startChild } from "../bench/children.ts"
import { formatSummary, summarize } from "./cpuprofile.ts"
import { type Backend, npmRegistry, realPackageCache, root } from "../bench/servers.ts"
import { syntheaEnv } from "../../test/support/syntheaExtensions.ts"

const { values: flags } = parseArgs({
  options: {
    dir: { type: "string" },
    postgres: { type: "string" },
    bundles: { type: "string" },
    workload: { type: "string" },
    connections: { type: "string" },
    seconds: { type: "string" },
    "cpu-prof": { type: "boolean" },
    bundle: { type: "string" }
  }
})

const paths: Record<string, (url: string) => Promise<Array<string>> | Array<string>> = {
  token: () => tokenPaths(),
  "token-date": () => tokenDatePaths(),
  chained: chainPaths,
  everything: everythingPaths,
  string: familyPaths,
  has: () => hasPaths(),
  include: includePaths,
  paged: (url) => pagedPaths(url)
}

/** The top functions of the newest .cpuprofile in `dir`, over its last `seconds` (the measured run; the server stops right after it). */
const topFunctions = (dir: string, top: number, seconds: number): string => {
  const file = readdirSync(dir).filter((name) => name.endsWith(".cpuprofile")).sort().at(-1)
  if (file === undefined) return "no profile written"
  const path = join(dir, file)
  const { endTime } = JSON.parse(readFileSync(path, "utf8")) as { readonly endTime: number }
  return `${formatSummary(summarize(path, root, endTime - seconds * 1_000_000 - 500_000, endTime), top)}
(${path})`
}

const withoutSvcVariables = (): Record<string, string> =>
  Object.fromEntries(Object.entries(process.env).filter((entry): entry is [string, string] => !entry[0].startsWith("SVC_") && entry[1] !== undefined))

/** The CPU time (user and system) a process has used, in ms, from /proc (Linux). */
const cpuMillis = (pid: number): number => {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").replace(/^.*\) /, "").split(" ")
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100
}

const main = async () => {
  installSignalHandlers()
  const workload = flags.workload ?? "token"
  const pathsOf = paths[workload]
  if (pathsOf === undefined) throw new Error(`no workload '${workload}': one of ${Object.keys(paths).join(", ")}`)
  const dir = flags.dir ?? join(tmpdir(), "svc-profile-search")
  mkdirSync(dir, { recursive: true })
  const backend: Backend = flags.postgres !== undefined ? { kind: "postgres", url: flags.postgres } : { kind: "sqlite", file: join(dir, "svc.sqlite") }
  const registry = await npmRegistry()
  if ("why" in registry) throw new Error(registry.why)
  const profileDir = join(dir, "profiles")
  const fresh = backend.kind === "sqlite" && !existsSync(backend.file)
  const config = join(dir, "svc.toml")
  writeFileSync(config, "# svc profile: every setting at its default\n")
  const bundle = flags.bundle ?? join(root, "dist", "svc.mjs")
  if (flags.bundle === undefined) execFileSync(process.execPath, [join(root, "scripts", "build.mjs"), "--if-stale"], { stdio: "inherit" })
  // As startSvc starts it (../bench/servers.ts), with the profiler's flags and the bundle asked for.
  const child = await startChild({
    name: "svc-profiled",
    args: [...(flags["cpu-prof"] ? ["--cpu-prof", `--cpu-prof-dir=${profileDir}`] : []), bundle, "--config", config,
      ...(backend.kind === "sqlite" ? ["--sqlite", backend.file] : ["--postgres", backend.url]), "--bind", "127.0.0.1:0"],
    cwd: root,
    env: {
      ...withoutSvcVariables(),
      SVC_CONFORMANCE_PACKAGE_REGISTRY: registry.registry,
      SVC_CONFORMANCE_PACKAGE_CACHE: realPackageCache,
      ...syntheaEnv
    },
    logDir: dir,
    readyPath: "/readyz",
    timeoutMs: 300_000
  })
  try {
    if (fresh || (await countOf(child.url, "Patient")) === 0) {
      // As the bench leaves it: the first bundle (its warm-up), then the bundles twice (its two ingest runs).
      const bundles = loadSynthea(Number(flags.bundles ?? 5))
      console.error(`[profile] loading ${bundles.length} Synthea bundles twice, as the bench does`)
      for (const batch of [bundles.slice(0, 1), bundles, bundles]) await runIngest({ url: child.url, bundles: batch, connections: 2, signal: interrupted.signal })
    }
    const requests = await prepareSearch(child.url, await pathsOf(child.url), workload === "paged" ? 1 : workload === "everything" ? 0 : undefined)
    const seconds = Number(flags.seconds ?? 5)
    const connections = Number(flags.connections ?? 8)
    const warmupSeconds = Math.ceil(seconds / 2)
    await runLoad({ url: child.url, requests, connections, warmupSeconds: 0, seconds: warmupSeconds, signal: interrupted.signal })
    const cpuBefore = cpuMillis(child.pid)
    const result = await runLoad({ url: child.url, requests, connections, warmupSeconds: 0, seconds, signal: interrupted.signal })
    const cpuPerRequest = (cpuMillis(child.pid) - cpuBefore) / (result.ok + result.non2xx)
    console.log(`${workload} (${backend.kind}, ${connections} connections, ${seconds} s): median ${result.medianMs.toFixed(2)} ms, p99 ${result.p99Ms.toFixed(2)} ms, ` +
      `${result.reqPerSec.toFixed(0)} req/s, ${result.non2xx} non-2xx, ${result.errors} errors; server CPU ${cpuPerRequest.toFixed(2)} ms per request`)
  } finally {
    await child.stop()
  }
  if (flags["cpu-prof"]) console.log(topFunctions(profileDir, 30, Number(flags.seconds ?? 5)))
}

main()
  .catch((error: unknown) => {
    console.error(error)
    process.exitCode = 1
  })
  .finally(cleanupAll)
