/** The run's one table on standard output, and the same figures as JSON in bench/results/. */
import type { ExportFigures, ExportSettings } from "./export.ts"
import type { GraphQLFigures, GraphQLSettings } from "./graphql.ts"
import type { ValidationFigures } from "./validation.ts"
import { mkdirSync, writeFileSync } from "node:fs"
import { cpus, totalmem } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import type { Measurement } from "./load.ts"

export interface Row extends Measurement {
  readonly workload: string
  /** `svc` or `floor` */
  readonly server: string
  readonly backend: string
  readonly connections: number
  readonly peakRssMb: number | undefined
  /** req/s over the floor's read-by-id req/s */
  readonly floorRatio: number | undefined
  readonly target: string
  /** Whether the target was reached; undefined without a target. */
  readonly met: boolean | undefined
}

export interface Report {
  readonly startedAt: string
  /** The whole run, from the start of the bench process's work to the table, seconds. */
  readonly elapsedSeconds: number
  /** Other work on the machine skews every figure: 1, 5 and 15 minute load averages when the run began. */
  readonly loadAverageAtStart: ReadonlyArray<number>
  readonly quick: boolean
  readonly settings: {
    readonly seconds: number
    readonly warmupSeconds: number
    readonly poolSize: number
    readonly syntheaBundles: number
    /** Idle seconds after a server's last workload before its resident memory is read. */
    readonly idleSeconds: number
  }
  readonly workloads: ReadonlyArray<{ readonly name: string; readonly description: string; readonly connections: number; readonly target: string }>
  readonly rows: ReadonlyArray<Row>
  /** Lifetime peak RSS (MB) of each server process, as the kernel counts it. */
  readonly serverPeakRssMb: Record<string, number | undefined>
  /** Resident memory (MB, `VmRSS`) of each svc after all its workloads and `settings.idleSeconds` idle. */
  readonly serverRssAfterRunMb: Record<string, number | undefined>
  readonly rssAfterRunTargetMb: number
  readonly notices: ReadonlyArray<string>
  /** µs per resource of validation on the Synthea resources (undefined when the R4 packages could not be had). */
  readonly validation?: ValidationFigures | undefined
  /** Process start to `/readyz` 200 on the Synthea database, the R4 packages installed: median of 3, ms, by backend. */
  readonly restartMs?: Readonly<Record<string, number>>
  /** Read by id and the ingest with governance's defaults on, as a share of the same with it off (same run). */
  readonly governance?: ReadonlyArray<Share>
  /** Read by id and the token search with a bearer token under `--smart`, as a share of the same without `--smart` (same run). */
  readonly smart?: ReadonlyArray<Share>
  /** The ingest with 10,000 Subscriptions that match nothing as a share of the same without (in turn), and the notification latency by backend. */
  readonly subscriptions?: {
    readonly ingest: ReadonlyArray<Share>
    readonly notificationLatency: Readonly<Record<string, { readonly count: number; readonly medianMs: number; readonly p99Ms: number }>>
  }
  /** The ingest with 10,000 live queries as a share of the same without (in turn); commit-to-client latency and memory per query by backend. */
  readonly sync?: {
    readonly ingest: ReadonlyArray<Share>
    readonly figures: Readonly<Record<string, { readonly count: number; readonly medianMs: number; readonly p99Ms: number; readonly kbPerQuery: number | undefined }>>
  }
  /** A patient with its Observations by `POST /graphql` against the same by REST, in turn, by backend (graphql.ts). */
  readonly graphql?: { readonly settings: GraphQLSettings; readonly runs: ReadonlyArray<GraphQLFigures> }
  /** The system-level `$export` after copies of the Synthea data, by backend (export.ts). */
  readonly export?: { readonly settings: ExportSettings; readonly runs: ReadonlyArray<ExportFigures> }
  /** A Postgres primary and a replica loaded at once against the primary alone (cluster.ts). */
  readonly cluster?: ReadonlyArray<{
    readonly workload: string
    readonly connections: number
    readonly aloneReqPerSec: number
    readonly bothReqPerSec: number
    readonly ratio: number | undefined
  }>
}

/** One workload's rate on a server as a share of its rate on the server it is compared with, in the same run. */
export interface Share {
  readonly workload: string
  readonly backend: string
  readonly connections: number
  readonly share: number
  /** The share to reach. */
  readonly target: number
  /** Whether the two servers were loaded in turn (scripts/bench/inTurn.ts) rather than one after the other. */
  readonly inTurn?: boolean
  /** In turn: each server's 2xx responses per second over all rounds, and each round's share. */
  readonly candidateReqPerSec?: number
  readonly referenceReqPerSec?: number
  readonly roundShares?: ReadonlyArray<number>
}

const fixed = (value: number | undefined, digits: number): string =>
  value === undefined || Number.isNaN(value) ? "-" : value.toFixed(digits)

const percent = (ratio: number | undefined): string => (ratio === undefined ? "-" : `${Math.round(ratio * 100)}%`)

export const formatTable = (rows: ReadonlyArray<Row>): string => {
  const header = ["workload", "backend", "conns", "req/s", "res/s", "median ms", "p99 ms", "peak RSS MB", "floor ratio", "target"]
  const body = rows.map((row) => [
    row.workload,
    row.server === "svc" ? row.backend : row.server === "floor" ? `floor (${row.backend})` : `${row.backend} (${row.server.replace(/^svc,? /, "")})`,
    String(row.connections),
    fixed(row.reqPerSec, row.resourcesPerSec === undefined ? 0 : 1),
    fixed(row.resourcesPerSec, 0),
    fixed(row.medianMs, 2),
    fixed(row.p99Ms, 2),
    fixed(row.peakRssMb, 0),
    row.server === "floor" ? "(floor)" : percent(row.floorRatio),
    row.target === "" ? "" : `${row.target}: ${row.met === undefined ? "?" : row.met ? "met" : "MISSED"}`
  ])
  const widths = header.map((title, column) => Math.max(title.length, ...body.map((cells) => cells[column]?.length ?? 0)))
  const numeric = new Set([2, 3, 4, 5, 6, 7, 8])
  const line = (cells: ReadonlyArray<string>) =>
    `| ${cells.map((cell, column) => (numeric.has(column) ? cell.padStart(widths[column] ?? 0) : cell.padEnd(widths[column] ?? 0))).join(" | ")} |`
  return [line(header), `|${widths.map((width, column) => (numeric.has(column) ? `${"-".repeat(width + 1)}:` : "-".repeat(width + 2))).join("|")}|`, ...body.map(line)].join("\n")
}

/** Writes bench/results/<YYYY-MM-DD>T<HH-MM>.json (UTC) and returns its path. */
export const writeJson = (report: Report): string => writeJsonNamed(report.startedAt.slice(0, 16).replace(":", "-"), report)

/** Writes `content`, with the machine's description, to bench/results/<name>.json and returns its path. */
export const writeJsonNamed = (name: string, content: object): string => {
  const dir = fileURLToPath(new URL("../../bench/results/", import.meta.url))
  mkdirSync(dir, { recursive: true })
  const file = join(dir, `${name}.json`)
  const machine = {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model ?? "unknown",
    memoryMb: Math.round(totalmem() / 2 ** 20),
    node: process.version,
    platform: `${process.platform}-${process.arch}`
  }
  const nullForUndefined = (_key: string, value: unknown) => (value === undefined ? null : value)
  writeFileSync(file, `${JSON.stringify({ ...content, machine }, nullForUndefined, 2)}\n`)
  return file
}
