/**
 * The export workload (docs/export.md, docs/performance.md "Export"): a svc with the real R4 packages, on a
 * fresh copy of the R4 template, takes copies of the Synthea bundles (10x by default, as the scale run loads
 * them: copies.ts), then a system-level Bulk Data export (`GET /fhir/$export`, `Prefer: respond-async`,
 * https://hl7.org/fhir/uv/bulkdata/STU2/export.html). The status URL is polled until the manifest, and every
 * file of the manifest is downloaded, streamed and counted line by line, never held whole.
 *
 * Figures: resources exported, seconds from the kick-off to the manifest and resources/s over them, MB
 * downloaded and MB/s over the downloads, and the server's resident memory before the export and at its peak
 * during it and during the downloads. The lines of each type are checked against the manifest's counts and
 * against the resources the database holds. On SQLite the same database is then written out by the export's
 * floor (exportFloor.ts), and svc's resources/s is put next to the floor's. `npm run bench` runs it on each backend (run.ts), and `npm run
 * bench:export` alone (exportRun.ts).
 */
import Database from "better-sqlite3"
import pg from "pg"
import { rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { interrupted, onCleanup } from "./cleanup.ts"
import { type Loaded, loadCopies } from "./copies.ts"
import { type ExportFloor, exportFloor } from "./exportFloor.ts"
import type { IngestBundle } from "./ingest.ts"
import { watchMemory } from "./memory.ts"
import { type Backend, type Packages, startSvc } from "./servers.ts"

export interface ExportSettings {
  /** How many times the 55 bundles are loaded before the export. */
  readonly copies: number
  /** Clients loading bundles at once. */
  readonly clients: number
  /** Idle seconds before the resident memory is read: after the loading, and after the export. */
  readonly idleSeconds: number
  /**
   * How soon the status URL is asked again after a 202 that came at once: the server's `Retry-After` (2 s) is too
   * coarse to time the export by, and each request is one the server logs.
   */
  readonly pollMs: number
}

export const exportSettings = (quick: boolean): ExportSettings => ({ copies: quick ? 1 : 10, clients: 4, idleSeconds: quick ? 4 : 5, pollMs: 250 })

/** The workload as the bench's table and JSON name and describe it. */
export const exportWorkload = (settings: ExportSettings) => ({
  name: "$export",
  description: `GET /fhir/$export (system level, Prefer: respond-async) after the Synthea bundles loaded ${settings.copies} time(s) into a fresh svc ` +
    `(copies with fresh ids, ${settings.clients} clients), the status polled every ${settings.pollMs} ms, then every file of the manifest downloaded one at a time; ` +
    "res/s counts the resources exported over the seconds from kick-off to manifest, peak RSS is the server's over the same seconds",
  connections: 1
})

/** Gives up on a job that has not finished in this long. */
const exportTimeoutMs = 30 * 60_000

export interface ExportFigures {
  readonly backend: string
  readonly loaded: Loaded
  /** The current resources the database holds, by type, the packages' conformance resources included. */
  readonly databaseByType: Readonly<Record<string, number>>
  readonly databaseResources: number
  /** Lines downloaded: resources exported. */
  readonly exported: number
  /** The sum of the manifest's `count`s. */
  readonly manifestCount: number
  readonly files: number
  readonly types: number
  readonly secondsToManifest: number
  readonly resourcesPerSec: number
  readonly downloadedMb: number
  readonly downloadSeconds: number
  readonly downloadMbPerSec: number
  /** `VmRSS` after the loading and an idle moment, just before the kick-off. */
  readonly rssBeforeMb: number | undefined
  /** Peak resident memory from the kick-off to the manifest. */
  readonly peakRssExportMb: number | undefined
  /** `VmRSS` when the manifest came: what the export left resident, before the downloads. */
  readonly rssAtManifestMb: number | undefined
  /** Peak resident memory while the files were downloaded. */
  readonly peakRssDownloadMb: number | undefined
  /** `VmRSS` after the job was discarded and an idle moment (the server collects its garbage when it falls idle). */
  readonly rssAfterIdleMb: number | undefined
  /** Peak resident memory over the server's whole life, the loading included, as the kernel counts it. */
  readonly peakRssLifetimeMb: number | undefined
  /** What did not match: files, types whose counts differ; empty when all did. */
  readonly mismatches: ReadonlyArray<string>
  /** On SQLite: the floor's pass over the same database, and svc's resources/s over the floor's. */
  readonly floor: ExportFloor | undefined
  readonly floorRatio: number | undefined
}

interface ManifestEntry {
  readonly type: string
  readonly url: string
  readonly count?: number
}

interface Manifest {
  readonly transactionTime: string
  readonly output: ReadonlyArray<ManifestEntry>
  readonly error: ReadonlyArray<ManifestEntry>
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** `GET /fhir/$export` with `Prefer: respond-async`: the status URL of the job it started. */
export const kickOff = async (url: string, signal: AbortSignal): Promise<string> => {
  const response = await fetch(`${url}/fhir/$export`, { headers: { accept: "application/fhir+json", prefer: "respond-async" }, signal })
  const text = await response.text()
  const location = response.headers.get("content-location")
  if (response.status !== 202 || location === null) {
    throw new Error(`GET /fhir/$export answered ${response.status}${location === null ? " without Content-Location" : ""}: ${text.slice(0, 300)}`)
  }
  return new URL(location, url).toString()
}

/** How long a status request asks the server to wait for the job to end (`Prefer: wait`), seconds. */
const waitSeconds = 5

/**
 * Asks the status URL until the manifest (200); any answer but 202 or 200 is an error. Each request asks the
 * server to hold it until the job ends (`Prefer: wait=5`), so the manifest is seen when the job ends; a 202 that
 * comes back at once (a server that does not wait) is asked again after `pollMs`.
 */
export const awaitManifest = async (statusUrl: string, pollMs: number, signal: AbortSignal, progress: (message: string) => void): Promise<Manifest> => {
  const started = performance.now()
  let said = started
  for (;;) {
    const asked = performance.now()
    const response = await fetch(statusUrl, { headers: { prefer: `wait=${waitSeconds}` }, signal })
    const text = await response.text()
    if (response.status === 200) return JSON.parse(text) as Manifest
    if (response.status !== 202) throw new Error(`GET ${statusUrl} answered ${response.status}: ${text.slice(0, 300)}`)
    const now = performance.now()
    if (now - started > exportTimeoutMs) throw new Error(`the export was not done in ${exportTimeoutMs / 60_000} min (${response.headers.get("x-progress") ?? "no X-Progress"})`)
    if (now - said >= 5_000) {
      progress(`export ${((now - started) / 1000).toFixed(0)} s: ${response.headers.get("x-progress") ?? "no X-Progress"}`)
      said = now
    }
    if (now - asked < pollMs) await sleep(pollMs)
  }
}

interface Downloaded {
  readonly lines: number
  readonly bytes: number
  /** `resourceType` of the first line; undefined when the line is too long to keep (a package's Bundle can pass 4 MiB). */
  readonly firstType: string | undefined
  readonly endsWithNewline: boolean
  readonly contentType: string | null
}

/** The most of a file's first line kept to read its `resourceType`. */
const firstLineLimit = 4 * 2 ** 20

/** Streams one file, counting its bytes and lines; only its first line is kept, to read its `resourceType`. */
export const download = async (fileUrl: string, signal: AbortSignal): Promise<Downloaded> => {
  const response = await fetch(fileUrl, { headers: { accept: "application/fhir+ndjson" }, signal })
  if (response.status !== 200 || response.body === null) throw new Error(`GET ${fileUrl} answered ${response.status}: ${(await response.text()).slice(0, 300)}`)
  let lines = 0
  let bytes = 0
  let last = -1
  const first: Array<Uint8Array> = []
  let firstBytes = 0
  let firstDone = false
  for await (const chunk of response.body) {
    if (!firstDone) {
      const end = chunk.indexOf(0x0a)
      const part = end < 0 ? chunk : chunk.subarray(0, end)
      if (firstBytes + part.length <= firstLineLimit) first.push(part)
      firstBytes += part.length
      firstDone = end >= 0
    }
    for (let i = chunk.indexOf(0x0a); i >= 0; i = chunk.indexOf(0x0a, i + 1)) lines++
    bytes += chunk.length
    if (chunk.length > 0) last = chunk[chunk.length - 1]!
  }
  let firstType: string | undefined
  try {
    firstType = firstBytes > firstLineLimit ? undefined : String((JSON.parse(Buffer.concat(first).toString("utf8")) as { resourceType?: unknown }).resourceType)
  } catch {
    firstType = "(first line is not JSON)"
  }
  return { lines, bytes, firstType, endsWithNewline: last === 0x0a, contentType: response.headers.get("content-type") }
}

/** The current (not deleted) resources by type, read from the database itself. */
export const countDatabase = async (backend: Backend): Promise<Record<string, number>> => {
  const byType: Record<string, number> = {}
  if (backend.kind === "sqlite") {
    const db = new Database(backend.file, { readonly: true, fileMustExist: true })
    try {
      for (const row of db.prepare("select type, count(*) as n from resources where deleted = 0 group by type").all() as Array<{ type: string; n: number }>) byType[row.type] = row.n
    } finally {
      db.close()
    }
  } else {
    const client = new pg.Client({ connectionString: backend.url })
    await client.connect()
    try {
      const rows = (await client.query("select type, count(*) as n from resources where not deleted group by type")).rows as Array<{ type: string; n: string }>
      for (const row of rows) byType[row.type] = Number(row.n)
    } finally {
      await client.end()
    }
  }
  return byType
}

const sum = (values: Iterable<number>): number => {
  let total = 0
  for (const value of values) total += value
  return total
}

/** Where a server on Postgres writes its files when `export.dir` is not set (docs/export.md, "Where the files are"). */
const postgresExportDir = (url: string): string => join(tmpdir(), `svc-export-${decodeURIComponent(new URL(url).pathname.slice(1))}`)

/** Compares the lines of each type with the manifest's counts and the database's; what differs, in words. */
const compare = (database: Readonly<Record<string, number>>, manifest: Readonly<Record<string, number>>, lines: Readonly<Record<string, number>>): Array<string> => {
  const mismatches: Array<string> = []
  for (const type of [...new Set([...Object.keys(database), ...Object.keys(manifest), ...Object.keys(lines)])].sort()) {
    const [d, m, l] = [database[type] ?? 0, manifest[type] ?? 0, lines[type] ?? 0]
    if (d !== m || m !== l) mismatches.push(`${type}: ${d} in the database, ${m} in the manifest, ${l} lines`)
  }
  return mismatches
}

/** What is wrong with a downloaded file, against its entry in the manifest; empty when nothing is. */
const fileProblems = (entry: ManifestEntry, file: Downloaded): Array<string> =>
  [
    entry.count === file.lines ? "" : `${file.lines} lines, the manifest says ${String(entry.count)}`,
    file.firstType === undefined || file.firstType === entry.type ? "" : `its first line is a ${file.firstType}`,
    file.endsWithNewline || file.bytes === 0 ? "" : "its last line has no newline",
    file.contentType?.startsWith("application/fhir+ndjson") === true ? "" : `Content-Type ${String(file.contentType)}`
  ].filter((problem) => problem !== "")

/** Downloads every file of the manifest, one at a time: bytes, the manifest's counts and the lines by type, and what was wrong. */
const downloadAll = async (manifest: Manifest, signal: AbortSignal) => {
  const mismatches: Array<string> = []
  const manifestByType: Record<string, number> = {}
  const linesByType: Record<string, number> = {}
  let bytes = 0
  for (const entry of manifest.output) {
    const file = await download(entry.url, signal)
    bytes += file.bytes
    manifestByType[entry.type] = (manifestByType[entry.type] ?? 0) + (entry.count ?? Number.NaN)
    linesByType[entry.type] = (linesByType[entry.type] ?? 0) + file.lines
    const problems = fileProblems(entry, file)
    if (problems.length > 0) mismatches.push(`${entry.url}: ${problems.join(", ")}`)
  }
  return { bytes, manifestByType, linesByType, mismatches }
}

/** The export of everything on a started server, and what it cost; the job is discarded afterwards. */
const measureExport = async (url: string, pid: number, backend: Backend, settings: ExportSettings, progress: (message: string) => void) => {
  const signal = interrupted.signal
  const memory = watchMemory(pid)
  try {
    await sleep(settings.idleSeconds * 1000)
    const rssBeforeMb = memory.currentMb()
    const databaseByType = await countDatabase(backend)
    progress(`${backend.kind}: ${sum(Object.values(databaseByType))} resources in the database; GET /fhir/$export`)
    memory.startWindow()
    const kickedOff = performance.now()
    const statusUrl = await kickOff(url, signal)
    const manifest = await awaitManifest(statusUrl, settings.pollMs, signal, progress)
    const secondsToManifest = (performance.now() - kickedOff) / 1000
    const peakRssExportMb = memory.windowPeakMb()
    const rssAtManifestMb = memory.currentMb()
    progress(`${backend.kind}: manifest after ${secondsToManifest.toFixed(1)} s, ${manifest.output.length} files; downloading them one at a time`)
    memory.startWindow()
    const downloadStarted = performance.now()
    const { bytes, manifestByType, linesByType, mismatches } = await downloadAll(manifest, signal)
    const downloadSeconds = (performance.now() - downloadStarted) / 1000
    const peakRssDownloadMb = memory.windowPeakMb()
    if (manifest.error.length > 0) mismatches.push(`the manifest lists ${manifest.error.length} error files`)
    mismatches.push(...compare(databaseByType, manifestByType, linesByType))
    const discarded = await fetch(statusUrl, { method: "DELETE", signal })
    await discarded.arrayBuffer()
    if (discarded.status !== 202) mismatches.push(`DELETE of the job answered ${discarded.status}, not 202`)
    await sleep(settings.idleSeconds * 1000)
    const rssAfterIdleMb = memory.currentMb()
    const peakRssLifetimeMb = memory.lifetimePeakMb()
    const exported = sum(Object.values(linesByType))
    const downloadedMb = bytes / 2 ** 20
    return {
      databaseByType, databaseResources: sum(Object.values(databaseByType)), exported, manifestCount: sum(Object.values(manifestByType)),
      files: manifest.output.length, types: Object.keys(linesByType).length, secondsToManifest, resourcesPerSec: exported / secondsToManifest,
      downloadedMb, downloadSeconds, downloadMbPerSec: downloadedMb / downloadSeconds, rssBeforeMb, peakRssExportMb, rssAtManifestMb, peakRssDownloadMb, rssAfterIdleMb, peakRssLifetimeMb, mismatches
    }
  } finally {
    memory.stop()
  }
}

/**
 * Starts svc on `backend` (a fresh copy of the R4 template) with the real packages, loads `settings.copies`
 * copies of `bundles`, exports everything and downloads it.
 */
export const benchExport = async (
  backend: Backend,
  workDir: string,
  packages: Packages,
  bundles: ReadonlyArray<IngestBundle>,
  settings: ExportSettings,
  progress: (message: string) => void
): Promise<ExportFigures> => {
  progress(`svc ${backend.kind} with the real R4 packages, for the export: starting`)
  const child = await startSvc(backend, workDir, packages, { name: `svc-${backend.kind}-r4-export` })
  const stop = onCleanup(`stopping the svc ${backend.kind} of the export`, child.stop)
  // The SQLite server's files are beside its database, in the run's temporary directory; Postgres's are not.
  const removeFiles = backend.kind === "postgres" ? onCleanup("removing the export files", () => rmSync(postgresExportDir(backend.url), { recursive: true, force: true })) : undefined
  try {
    progress(`${backend.kind}: loading the ${bundles.length} Synthea bundles ${settings.copies} time(s), ${settings.clients} clients`)
    const loaded = await loadCopies({ url: child.url, bundles, from: 0, to: settings.copies, clients: settings.clients, signal: interrupted.signal, progress })
    const measured = await measureExport(child.url, child.pid, backend, settings, progress)
    if (backend.kind === "sqlite") progress("sqlite: the export's floor, a better-sqlite3 pass over the same database")
    const floor = backend.kind === "sqlite" ? exportFloor(backend.file, join(workDir, "export-floor")) : undefined
    const floorRatio = floor === undefined || floor.resourcesPerSec === 0 ? undefined : measured.resourcesPerSec / floor.resourcesPerSec
    return { backend: backend.kind, loaded, ...measured, floor, floorRatio }
  } finally {
    await stop()
    await removeFiles?.()
  }
}

const thousands = (n: number): string => Math.round(n).toLocaleString("en-US")
const mb = (value: number | undefined): string => (value === undefined ? "?" : `${value.toFixed(0)} MB`)

/** One line per backend, as printed under the bench's table. */
export const describeExport = (figures: ExportFigures): string =>
  `${figures.backend}: ${thousands(figures.exported)} resources (${figures.types} types, ${figures.files} files) in ${figures.secondsToManifest.toFixed(1)} s ` +
  `from kick-off to manifest (${thousands(figures.resourcesPerSec)} resources/s` +
  (figures.floor === undefined || figures.floorRatio === undefined ? "" : `, ${Math.round(100 * figures.floorRatio)}% of the floor's ${thousands(figures.floor.resourcesPerSec)}`) +
  `); ${figures.downloadedMb.toFixed(0)} MB downloaded in ` +
  `${figures.downloadSeconds.toFixed(1)} s (${figures.downloadMbPerSec.toFixed(0)} MB/s); server RSS ${mb(figures.rssBeforeMb)} before, ` +
  `peak ${mb(figures.peakRssExportMb)} during the export, ${mb(figures.rssAtManifestMb)} at the manifest, peak ${mb(figures.peakRssDownloadMb)} during the downloads, ` +
  `${mb(figures.rssAfterIdleMb)} after an idle moment; ` +
  (figures.mismatches.length === 0
    ? `every type's lines match the manifest and the database's ${thousands(figures.databaseResources)} resources`
    : `MISMATCHED: ${figures.mismatches.slice(0, 5).join("; ")}${figures.mismatches.length > 5 ? `; and ${figures.mismatches.length - 5} more` : ""}`)
