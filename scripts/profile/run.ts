/**
 * `npm run profile -- <workload | all> [--seconds N] [--postgres] [--top N]`: a CPU profile of bench
 * workloads. Starts svc as the bench does (the bundle, every setting at its default, the real R4
 * packages from a copy of the R4 template) under `node --cpu-prof`, readies it (a pool of Patients;
 * the first Synthea bundles when a search is profiled), runs the workload(s) against it for N seconds
 * each after a warm-up, stops it, and prints the functions that took the most CPU time, by self time
 * and by total time, over the measured seconds only. The `.cpuprofile` stays in the OS temporary
 * directory for Chrome DevTools (Performance, "Load profile"). See docs/performance.md.
 */
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { cleanupAll, installSignalHandlers, interrupted, onCleanup } from "../bench/cleanup.ts"
import { loadSynthea, runIngest, syntheaMissing } from "../bench/ingest.ts"
import { runLoad } from "../bench/load.ts"
import { postgresUnavailable } from "../bench/postgres.ts"
import { seedSvc } from "../bench/seed.ts"
import { npmRegistry, root, startSvc } from "../bench/servers.ts"
import { isDriven, onSynthea, quickBundles, type Target, type Workload, workloads } from "../bench/suite.ts"
import { postgresR4, sqliteR4 } from "../bench/template.ts"
import { formatSummary, summarize } from "./cpuprofile.ts"

const usage = `usage: npm run profile -- <workload | all> [--seconds N] [--warmup N] [--postgres] [--top N]
  workload   one of: ${[...new Set(workloads.map((w) => JSON.stringify(w.name)))].join(", ")} (ingest runs with 1, then 4 clients)
  --seconds  profiled seconds per workload (default 10)
  --warmup   seconds of the same load before, not counted (default 3)
  --postgres on the Postgres server (SVC_TEST_POSTGRES_URL) instead of SQLite
  --top      functions listed (default 25)`

const { values: flags, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    seconds: { type: "string" },
    warmup: { type: "string" },
    postgres: { type: "boolean" },
    top: { type: "string" },
    help: { type: "boolean", short: "h" }
  }
})
const wanted = positionals.join(" ")
const chosen = wanted === "all" ? workloads : workloads.filter((w) => w.name === wanted)
if (flags.help || chosen.length === 0) {
  console.log(usage)
  process.exit(flags.help ? 0 : 2)
}
const seconds = Number(flags.seconds ?? 10)
const warmupSeconds = Number(flags.warmup ?? 3)
const top = Number(flags.top ?? 25)
const progress = (message: string) => console.error(`[profile] ${message}`)

/** Now on the clock of the profile's timestamps (µs of the monotonic clock). */
const nowMicros = (): number => Number(process.hrtime.bigint() / 1000n)

/** Runs one workload for `seconds` after the warm-up; returns the measured window. */
const run = async (target: Target, workload: Workload): Promise<{ readonly from: number; readonly to: number }> => {
  if (isDriven(workload)) {
    // The ingest: the first bundles again and again until the time is up (each time under new ids);
    // the window ends with the last pass, so it can be longer than `seconds`.
    const bundles = loadSynthea(quickBundles)
    const until = async (deadline: number) => {
      while (performance.now() < deadline) await runIngest({ url: target.url, bundles, connections: workload.connections, signal: interrupted.signal })
    }
    await until(performance.now() + warmupSeconds * 1000)
    const from = nowMicros()
    await until(performance.now() + seconds * 1000)
    return { from, to: nowMicros() }
  }
  const requests = await workload.prepare(target)
  const options = { url: target.url, requests, connections: workload.connections, signal: interrupted.signal }
  if (warmupSeconds > 0) await runLoad({ ...options, warmupSeconds: 0, seconds: warmupSeconds })
  const from = nowMicros()
  await runLoad({ ...options, warmupSeconds: 0, seconds })
  return { from, to: nowMicros() }
}

const main = async (): Promise<void> => {
  installSignalHandlers()
  if (chosen.some(onSynthea) && syntheaMissing() !== undefined) throw new Error(syntheaMissing())
  const registry = await npmRegistry()
  if ("why" in registry) throw new Error(`the real R4 packages are needed: ${registry.why}`)
  const packages = { kind: "r4", registry: registry.registry } as const
  const workDir = mkdtempSync(join(tmpdir(), "svc-profile-run-"))
  onCleanup("removing the temporary directory", () => rmSync(workDir, { recursive: true, force: true }))
  // Kept after the run, for DevTools.
  const profileDir = mkdtempSync(join(tmpdir(), "svc-profile-"))

  let backend
  if (flags.postgres) {
    const why = await postgresUnavailable()
    if (why !== undefined) throw new Error(`no Postgres server answers: ${why}`)
    const database = await postgresR4(workDir, packages, progress)
    onCleanup("dropping the Postgres database", database.drop)
    backend = database.backend
  } else {
    backend = await sqliteR4(join(workDir, "svc.sqlite"), workDir, packages, progress)
  }

  progress(`svc ${backend.kind} with the real R4 packages, under --cpu-prof: starting`)
  const child = await startSvc(backend, workDir, packages, {
    nodeArgs: ["--cpu-prof", "--cpu-prof-dir", profileDir],
    name: `svc-${backend.kind}-profiled`,
    // Killed, it would write no profile.
    killAfterMs: 120_000
  })
  progress("creating 1000 Patients")
  const target: Target = { server: "svc", backend: backend.kind, url: child.url, ids: await seedSvc(child.url, 1000) }
  if (chosen.some((w) => onSynthea(w) && !isDriven(w)) && !chosen.some(isDriven)) {
    progress(`loading the first ${quickBundles} Synthea bundles for the searches`)
    await runIngest({ url: child.url, bundles: loadSynthea(quickBundles), connections: 1, signal: interrupted.signal })
  }
  const windows: Array<{ readonly workload: string; readonly connections: number; readonly from: number; readonly to: number }> = []
  for (const workload of chosen) {
    progress(`${workload.name}: ${warmupSeconds} s warm-up + ${seconds} s profiled, ${workload.connections} connections`)
    windows.push({ workload: workload.name, connections: workload.connections, ...(await run(target, workload)) })
  }
  progress("stopping svc (it writes the profile as it exits)")
  const stopping = performance.now()
  await child.stop()
  progress(`svc stopped in ${((performance.now() - stopping) / 1000).toFixed(1)} s`)

  const files = readdirSync(profileDir).filter((f) => f.endsWith(".cpuprofile")).map((f) => join(profileDir, f))
  // The main thread's profile is the largest.
  const file = files.sort((a, b) => statSync(b).size - statSync(a).size)[0]
  if (file === undefined) throw new Error(`svc wrote no profile into ${profileDir}`)
  for (const window of windows) {
    console.log(`\n== ${window.workload}, ${window.connections} connection(s), on ${backend.kind} ==\n`)
    console.log(formatSummary(summarize(file, root, window.from, window.to), top))
  }
  console.log(`\nProfile (the whole life of the server, start-up included): ${file}`)
  console.log("Open it in Chrome DevTools (Performance, Load profile) or in VS Code.")
}

main()
  .catch((error: unknown) => {
    console.error(interrupted.signal.aborted ? String(interrupted.signal.reason) : error)
    process.exitCode = interrupted.signal.aborted ? 130 : 1
  })
  .finally(cleanupAll)
