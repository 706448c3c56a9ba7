/**
 * `npm run bench:graphql [-- --quick] [-- --sqlite-only | --postgres-only] [-- --clients N] [-- --cpu-prof]`: the
 * GraphQL workload (graphql.ts) alone, a patient with its Observations by one `POST /graphql` against the REST calls
 * for the same data, on a svc with the real R4 packages (a copy of the bench's R4 template, template.ts) on SQLite and
 * on Postgres when one answers. Prints the table and a line per backend, and writes
 * bench/results/graphql-<YYYY-MM-DD>T<HH-MM>.json. With `--cpu-prof`, svc runs under `node --cpu-prof` and, after the
 * timed part, each side is loaded alone for a few seconds more and its top functions are printed (the profile's
 * summary, scripts/profile/cpuprofile.ts). See docs/performance.md, "GraphQL".
 */
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs"
import { cpus, loadavg, tmpdir } from "node:os"
import { join, relative } from "node:path"
import { parseArgs } from "node:util"
import { formatSummary, summarize } from "../profile/cpuprofile.ts"
import { cleanupAll, installSignalHandlers, interrupted, onCleanup } from "./cleanup.ts"
import {
  benchGraphQL, describeGraphQL, type GraphQLFigures, type GraphQLSettings, graphqlRows, graphqlSettings, graphqlWorkloads, loadAlone, measureSides, readyServer
} from "./graphql.ts"
import { postgresUnavailable, shownAdminUrl } from "./postgres.ts"
import { formatTable, writeJsonNamed } from "./report.ts"
import { type Backend, npmRegistry, type Packages, root } from "./servers.ts"
import { postgresR4, sqliteR4 } from "./template.ts"

const usage = `usage: npm run bench:graphql [-- --quick] [-- --sqlite-only | --postgres-only] [-- --clients N] [-- --cpu-prof]
  --quick          4 rounds of 0.5 s on each side after 1 s (default 8 rounds of 1 s after 2 s)
  --sqlite-only    skip Postgres even when a server answers
  --postgres-only  skip SQLite
  --clients N      clients at once on the side being loaded (default 1)
  --cpu-prof       svc under node --cpu-prof; after the timed part, each side alone for 5 s more, its top functions printed`

/** Seconds each side is loaded alone under the profiler. */
const profiledSeconds = 5

/** Now on the clock of the profile's timestamps (µs of the monotonic clock). */
const nowMicros = (): number => Number(process.hrtime.bigint() / 1000n)

/** The timed part under `--cpu-prof`, then each side alone for `profiledSeconds`; prints each side's top functions. */
const profiled = async (backend: Backend, workDir: string, packages: Packages, settings: GraphQLSettings, progress: (message: string) => void): Promise<void> => {
  const profileDir = mkdtempSync(join(tmpdir(), "svc-profile-"))
  const readied = await readyServer(backend, workDir, packages, settings, progress, ["--cpu-prof", "--cpu-prof-dir", profileDir])
  const windows: Array<{ readonly side: string; readonly from: number; readonly to: number }> = []
  try {
    await measureSides(readied.child.url, readied.ids, settings, readied.bytes)
    for (const side of ["graphql", "rest"] as const) {
      progress(`${backend.kind}: ${side} alone for ${profiledSeconds} s, profiled`)
      const from = nowMicros()
      await loadAlone(readied.child.url, readied.ids, side, settings.clients, profiledSeconds)
      windows.push({ side, from, to: nowMicros() })
    }
  } finally {
    await readied.stop()
  }
  const file = readdirSync(profileDir).filter((f) => f.endsWith(".cpuprofile")).map((f) => join(profileDir, f)).sort((a, b) => statSync(b).size - statSync(a).size)[0]
  if (file === undefined) throw new Error(`svc wrote no profile into ${profileDir}`)
  for (const window of windows) {
    console.log(`\n== ${window.side}, ${settings.clients} client(s), on ${backend.kind} ==\n`)
    console.log(formatSummary(summarize(file, root, window.from, window.to), 25))
  }
  console.log(`\nProfile (the whole life of the server): ${file}`)
}

const main = async (): Promise<void> => {
  const { values: flags } = parseArgs({
    options: {
      quick: { type: "boolean" },
      "sqlite-only": { type: "boolean" },
      "postgres-only": { type: "boolean" },
      clients: { type: "string" },
      "cpu-prof": { type: "boolean" },
      help: { type: "boolean", short: "h" }
    }
  })
  if (flags.help) {
    console.log(usage)
    return
  }
  installSignalHandlers()
  const quick = flags.quick === true
  const defaults = graphqlSettings(quick)
  const settings: GraphQLSettings = { ...defaults, clients: Number(flags.clients ?? defaults.clients) }
  const progress = (message: string) => console.error(`[graphql] ${message}`)
  const startedAt = new Date().toISOString()
  const startedAtMs = performance.now()
  const loadAverageAtStart = loadavg().map((load) => Math.round(load * 100) / 100)
  const registry = await npmRegistry()
  if ("why" in registry) throw new Error(`the real R4 packages are needed: ${registry.why}`)
  const packages = { kind: "r4", registry: registry.registry } as const
  const workDir = mkdtempSync(join(tmpdir(), "svc-bench-graphql-"))
  onCleanup("removing the temporary directory", () => rmSync(workDir, { recursive: true, force: true }))
  const notices: Array<string> = []
  const runs: Array<GraphQLFigures> = []
  const run = async (backend: Backend) => {
    if (flags["cpu-prof"]) await profiled(backend, workDir, packages, settings, progress)
    else runs.push(await benchGraphQL(backend, workDir, packages, settings, progress))
  }

  if (flags["postgres-only"]) notices.push("SQLite skipped: --postgres-only")
  else await run(await sqliteR4(join(workDir, "svc-r4-graphql.sqlite"), workDir, packages, progress))
  if (flags["sqlite-only"]) notices.push("Postgres skipped: --sqlite-only")
  else {
    const why = await postgresUnavailable()
    if (why !== undefined) notices.push(`Postgres skipped: no server answers at ${shownAdminUrl()} (${why})`)
    else {
      const database = await postgresR4(workDir, packages, progress)
      const drop = onCleanup("dropping the Postgres database", database.drop)
      await run(database.backend)
      await drop()
    }
  }
  if (flags["cpu-prof"]) return

  const elapsedSeconds = Math.round((performance.now() - startedAtMs) / 1000)
  const workloads = graphqlWorkloads(settings)
  const file = writeJsonNamed(`graphql-${startedAt.slice(0, 16).replace(":", "-")}`, {
    startedAt, elapsedSeconds, loadAverageAtStart, quick, settings, workloads: [workloads.graphql, workloads.rest], runs, notices
  })
  console.log(`svc GraphQL bench${quick ? " (quick)" : ""}: a patient and its ${settings.observationsPerPatient} Observations, GraphQL against REST in turn, ` +
    `${cpus().length} CPUs (load average ${loadAverageAtStart.join(" ")} at start), Node ${process.version}`)
  console.log("")
  console.log(formatTable(runs.flatMap((figures) => graphqlRows(figures, settings)).map((row) => ({ ...row, floorRatio: undefined, met: undefined }))))
  console.log("")
  console.log(`GraphQL against REST (ratios GraphQL over REST): ${runs.map(describeGraphQL).join("; ")}`)
  for (const figures of runs) {
    if (figures.graphql.failed + figures.rest.failed > 0) notices.push(`${figures.backend}: failed iterations (${figures.firstFailure ?? "?"})`)
  }
  for (const notice of notices) console.log(`NOTICE: ${notice}`)
  console.log(`Written: ${relative(root, file)} (${elapsedSeconds} s in all)`)
  if (runs.some((figures) => figures.graphql.failed + figures.rest.failed > 0)) process.exitCode = 1
}

main()
  .catch((error: unknown) => {
    console.error(interrupted.signal.aborted ? String(interrupted.signal.reason) : error)
    process.exitCode = interrupted.signal.aborted ? 130 : 1
  })
  .finally(cleanupAll)
