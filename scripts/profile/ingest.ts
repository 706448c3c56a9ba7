/**
 * `node --import tsx scripts/profile/ingest.ts [--postgres] [--bundles N] [--clients C] [--passes P] [--cpu-prof]`:
 * the bench's Synthea ingest on its own, to find where the time of a transaction Bundle goes. svc (the
 * bundle `npm start` runs) starts on a fresh database with the real R4 packages, as the bench starts it;
 * the first bundle is sent once as a warm-up, then N bundles by C clients, and the resources per second
 * are printed. With `--cpu-prof` the server is started again on that database under node's
 * `--cpu-prof` (the installation is left out of the profile), and the functions with the most self and
 * total time, mapped to their source files, are printed.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { cleanupAll, installSignalHandlers, interrupted, onCleanup } from "../bench/cleanup.ts"
import { loadSynthea, runIngest, syntheaMissing } from "../bench/ingest.ts"
import { createBenchDatabase, postgresUnavailable } from "../bench/postgres.ts"
import { type Backend, npmRegistry, root, startSvc } from "../bench/servers.ts"
import { formatSummary, summarize } from "./cpuprofile.ts"

const { values: flags } = parseArgs({
  options: {
    postgres: { type: "boolean" },
    bundles: { type: "string", default: "20" },
    clients: { type: "string", default: "4" },
    /** How many times the N bundles are sent (each pass creates new resources), each pass reported. */
    passes: { type: "string", default: "1" },
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
  for (let pass = 1; pass <= Number(flags.passes); pass++) {
    const cpuBefore = cpuMillis(child.pid)
    const result = await runIngest({ url: child.url, bundles: measured, connections, signal: interrupted.signal })
    const cpu = cpuMillis(child.pid) - cpuBefore
    const resources = measured.reduce((n, b) => n + b.resources, 0)
    console.log(
      `${Number(flags.passes) > 1 ? `pass ${pass}: ` : ""}${backend.kind}, ${connections} client(s), ${result.ok} bundles (${resources} resources) in ${result.seconds.toFixed(2)} s: ` +
        `${(result.resourcesPerSec ?? 0).toFixed(0)} res/s, median ${result.medianMs.toFixed(0)} ms per bundle, non-2xx ${result.non2xx}, errors ${result.errors}; ` +
        `server CPU ${((1000 * cpu) / resources).toFixed(0)} µs per resource (load average ${loadavg()[0]!.toFixed(1)})`
    )
  }
  await child.stop()
  if (flags["cpu-prof"]) {
    const file = readdirSync(profileDir).find((name) => name.endsWith(".cpuprofile"))
    if (file === undefined) throw new Error("the server wrote no CPU profile")
    console.log(formatSummary(summarize(join(profileDir, file), root), Number(flags.top)))
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
