/**
 * `npm run bench:terminology [-- --quick] [-- --sqlite-only]`: the terminology workloads (terminology.ts) over
 * HTTP on a svc with the real R4 packages (a copy of the bench's R4 template, template.ts), on SQLite and on
 * Postgres when one answers, next to the floor's read by id measured in the same run: req/s, median and p99
 * against each workload's goal. Prints the table and writes bench/results/terminology-<YYYY-MM-DD>T<HH-MM>.json.
 * See docs/performance.md, "Terminology".
 */
import type autocannon from "autocannon"
import { mkdtempSync, rmSync } from "node:fs"
import { cpus, loadavg, tmpdir } from "node:os"
import { join, relative } from "node:path"
import { parseArgs } from "node:util"
import { cleanupAll, installSignalHandlers, interrupted, onCleanup } from "./cleanup.ts"
import { runLoad } from "./load.ts"
import { postgresUnavailable, shownAdminUrl } from "./postgres.ts"
import { formatTable, type Row, writeJsonNamed } from "./report.ts"
import { seedFloor } from "./seed.ts"
import { type Backend, npmRegistry, root, startFloor, startSvc } from "./servers.ts"
import { describeGoal, type LoadWorkload, readById, type Target } from "./suite.ts"
import { terminologyWorkloads } from "./terminology.ts"
import { postgresR4, sqliteR4 } from "./template.ts"

const usage = `usage: npm run bench:terminology [-- --quick] [-- --sqlite-only]
  --quick         2 s per workload after a 1 s warm-up (default 10 s after 5 s)
  --sqlite-only   skip Postgres even when a server answers`

const main = async (): Promise<void> => {
  const { values: flags } = parseArgs({ options: { quick: { type: "boolean" }, "sqlite-only": { type: "boolean" }, help: { type: "boolean", short: "h" } } })
  if (flags.help) {
    console.log(usage)
    return
  }
  installSignalHandlers()
  const quick = flags.quick === true
  const settings = { seconds: quick ? 2 : 10, warmupSeconds: quick ? 1 : 5 }
  const progress = (message: string) => console.error(`[terminology] ${message}`)
  const startedAt = new Date().toISOString()
  const loadAverageAtStart = loadavg().map((load) => Math.round(load * 100) / 100)
  const workDir = mkdtempSync(join(tmpdir(), "svc-bench-terminology-"))
  onCleanup("removing the temporary directory", () => rmSync(workDir, { recursive: true, force: true }))
  const notices: Array<string> = []
  const registry = await npmRegistry()
  if ("why" in registry) throw new Error(`the real R4 packages are needed: ${registry.why}`)
  const packages = { kind: "r4", registry: registry.registry } as const
  const rows: Array<Row> = []

  const load = (target: Target, workload: LoadWorkload, requests: Array<autocannon.Request>) => {
    progress(`${target.server} ${target.backend}: ${workload.name}, ${workload.connections} connections, ${settings.warmupSeconds} s warm-up + ${settings.seconds} s`)
    return runLoad({ url: target.url, requests, connections: workload.connections, ...settings, signal: interrupted.signal, headers: target.headers })
  }

  // The floor's read by id, for the ratio every row is printed against.
  const floorFile = join(workDir, "floor.sqlite")
  const floorIds = seedFloor(floorFile, 1000)
  const floor = await startFloor(floorFile, workDir)
  const stopFloor = onCleanup("stopping the floor", floor.stop)
  const floorTarget: Target = { server: "floor", backend: "better-sqlite3", url: floor.url, ids: floorIds }
  const floorRead = await load(floorTarget, readById as LoadWorkload, await (readById as LoadWorkload).prepare(floorTarget))
  await stopFloor()
  rows.push({ workload: readById.name, server: "floor", backend: "better-sqlite3", connections: readById.connections, ...floorRead, peakRssMb: undefined, floorRatio: undefined, target: "", met: undefined })

  const measure = async (backend: Backend) => {
    progress(`svc ${backend.kind} with the real R4 packages: starting`)
    const child = await startSvc(backend, workDir, packages, { name: `svc-${backend.kind}-r4-terminology` })
    const stop = onCleanup(`stopping svc ${backend.kind}`, child.stop)
    try {
      const target: Target = { server: "svc", backend: backend.kind, url: child.url, ids: [] }
      for (const workload of terminologyWorkloads) {
        const measured = await load(target, workload, await workload.prepare(target))
        const goal = workload.goals?.[backend.kind]
        const checks = [goal?.maxMedianMs === undefined || measured.medianMs <= goal.maxMedianMs, goal?.maxP99Ms === undefined || measured.p99Ms <= goal.maxP99Ms]
        rows.push({
          workload: workload.name, server: "svc", backend: backend.kind, connections: workload.connections, ...measured, peakRssMb: undefined,
          floorRatio: floorRead.reqPerSec > 0 ? measured.reqPerSec / floorRead.reqPerSec : undefined,
          target: describeGoal(goal), met: goal === undefined ? undefined : checks.every(Boolean)
        })
        if (measured.non2xx > 0 || measured.errors > 0) notices.push(`${workload.name} on ${backend.kind}: ${measured.non2xx} non-2xx, ${measured.errors} errors`)
      }
    } finally {
      await stop()
    }
  }

  await measure(await sqliteR4(join(workDir, "svc-r4-terminology.sqlite"), workDir, packages, progress))
  if (flags["sqlite-only"]) notices.push("Postgres skipped: --sqlite-only")
  else {
    const why = await postgresUnavailable()
    if (why !== undefined) notices.push(`Postgres skipped: no server answers at ${shownAdminUrl()} (${why})`)
    else {
      const database = await postgresR4(workDir, packages, progress)
      const drop = onCleanup("dropping the Postgres database", database.drop)
      await measure(database.backend)
      await drop()
    }
  }

  const file = writeJsonNamed(`terminology-${startedAt.slice(0, 16).replace(":", "-")}`, {
    startedAt, loadAverageAtStart, quick, settings, workloads: terminologyWorkloads.map((w) => ({ name: w.name, description: w.description, connections: w.connections })), rows, notices
  })
  console.log(`svc terminology bench${quick ? " (quick)" : ""}: ${settings.seconds} s per workload after ${settings.warmupSeconds} s warm-up, ` +
    `${cpus().length} CPUs (load average ${loadAverageAtStart.join(" ")} at start), Node ${process.version}`)
  console.log("")
  console.log(formatTable(rows))
  for (const notice of notices) console.log(`NOTICE: ${notice}`)
  console.log(`Written: ${relative(root, file)}`)
}

main()
  .catch((error: unknown) => {
    console.error(interrupted.signal.aborted ? String(interrupted.signal.reason) : error)
    process.exitCode = interrupted.signal.aborted ? 130 : 1
  })
  .finally(cleanupAll)
