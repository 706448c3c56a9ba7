/**
 * `npm run bench:export [-- --quick] [-- --sqlite-only | --postgres-only] [-- --copies N] [-- --clients N]`: the
 * export workload (export.ts) alone: on SQLite, and on Postgres when one answers, a svc with the real R4
 * packages takes the Synthea bundles 10 times (`--copies`; once with `--quick`), then a system-level
 * `$export`, whose files are downloaded and counted. Prints one line per backend and writes
 * bench/results/export-<YYYY-MM-DD>T<HH-MM>.json. See docs/performance.md, "Export".
 */
import { mkdtempSync, rmSync } from "node:fs"
import { cpus, loadavg, tmpdir } from "node:os"
import { join, relative } from "node:path"
import { parseArgs } from "node:util"
import { cleanupAll, installSignalHandlers, interrupted, onCleanup } from "./cleanup.ts"
import { benchExport, describeExport, type ExportFigures, exportSettings } from "./export.ts"
import { loadSynthea, syntheaMissing } from "./ingest.ts"
import { postgresUnavailable, shownAdminUrl } from "./postgres.ts"
import { writeJsonNamed } from "./report.ts"
import { npmRegistry, root } from "./servers.ts"
import { postgresR4, sqliteR4 } from "./template.ts"

const usage = `usage: npm run bench:export [-- --quick] [-- --sqlite-only | --postgres-only] [-- --copies N] [-- --clients N]
  --quick          the 55 bundles once (default 10 times)
  --sqlite-only    skip Postgres even when a server answers
  --postgres-only  skip SQLite
  --copies N       how many times the 55 bundles are loaded before the export
  --clients N      clients loading bundles at once (default 4)`

const main = async (): Promise<void> => {
  const { values: flags } = parseArgs({
    options: {
      quick: { type: "boolean" },
      "sqlite-only": { type: "boolean" },
      "postgres-only": { type: "boolean" },
      copies: { type: "string" },
      clients: { type: "string" },
      help: { type: "boolean", short: "h" }
    }
  })
  if (flags.help) {
    console.log(usage)
    return
  }
  installSignalHandlers()
  const quick = flags.quick === true
  const defaults = exportSettings(quick)
  const settings = { ...defaults, copies: Number(flags.copies ?? defaults.copies), clients: Number(flags.clients ?? defaults.clients) }
  const progress = (message: string) => console.error(`[export] ${message}`)
  const startedAt = new Date().toISOString()
  const startedAtMs = performance.now()
  const loadAverageAtStart = loadavg().map((load) => Math.round(load * 100) / 100)
  const missing = syntheaMissing()
  if (missing !== undefined) throw new Error(missing)
  const registry = await npmRegistry()
  if ("why" in registry) throw new Error(`the real R4 packages are needed: ${registry.why}`)
  const packages = { kind: "r4", registry: registry.registry } as const
  const workDir = mkdtempSync(join(tmpdir(), "svc-bench-export-"))
  onCleanup("removing the temporary directory", () => rmSync(workDir, { recursive: true, force: true }))
  const bundles = loadSynthea()
  const notices: Array<string> = []
  const runs: Array<ExportFigures> = []

  if (flags["postgres-only"]) notices.push("SQLite skipped: --postgres-only")
  else {
    const file = join(workDir, "svc-r4-export.sqlite")
    runs.push(await benchExport(await sqliteR4(file, workDir, packages, progress), workDir, packages, bundles, settings, progress))
    rmSync(file, { force: true })
  }
  if (flags["sqlite-only"]) notices.push("Postgres skipped: --sqlite-only")
  else {
    const why = await postgresUnavailable()
    if (why !== undefined) notices.push(`Postgres skipped: no server answers at ${shownAdminUrl()} (${why})`)
    else {
      const database = await postgresR4(workDir, packages, progress)
      const drop = onCleanup("dropping the Postgres database", database.drop)
      runs.push(await benchExport(database.backend, workDir, packages, bundles, settings, progress))
      await drop()
    }
  }

  const elapsedSeconds = Math.round((performance.now() - startedAtMs) / 1000)
  const file = writeJsonNamed(`export-${startedAt.slice(0, 16).replace(":", "-")}`, { startedAt, elapsedSeconds, loadAverageAtStart, quick, settings, runs, notices })
  console.log(`svc export bench${quick ? " (quick)" : ""}: GET /fhir/$export (system level) after the ${bundles.length} Synthea bundles loaded ${settings.copies} time(s), ` +
    `${cpus().length} CPUs (load average ${loadAverageAtStart.join(" ")} at start), Node ${process.version}`)
  console.log("")
  for (const run of runs) {
    console.log(`Loaded ${run.loaded.resources} resources in ${run.loaded.seconds.toFixed(0)} s on ${run.backend}${run.loaded.failed > 0 ? ` (${run.loaded.failed} bundles failed)` : ""}`)
    console.log(`Export ${describeExport(run)}`)
    if (run.mismatches.length > 0) notices.push(`export on ${run.backend}: ${run.mismatches.length} mismatches (all of them in the JSON)`)
  }
  for (const notice of notices) console.log(`NOTICE: ${notice}`)
  console.log(`Written: ${relative(root, file)} (${elapsedSeconds} s in all)`)
  if (runs.some((run) => run.mismatches.length > 0)) process.exitCode = 1
}

main()
  .catch((error: unknown) => {
    console.error(interrupted.signal.aborted ? String(interrupted.signal.reason) : error)
    process.exitCode = interrupted.signal.aborted ? 130 : 1
  })
  .finally(cleanupAll)
