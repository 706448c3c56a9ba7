/**
 * `svc migrate --status | --dry-run` (interface spec, Versioning item 5): what the database records
 * and what this build would apply. Changes nothing: SQLite is opened read-only and a missing file is
 * not created. Outcome "ok" maps to exit code 0, "refuse" to 1; an error value (cannot open or read)
 * to 2.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import { Effect } from "effect"
import * as Fs from "node:fs"
import { buildVersion } from "../version.ts"
import { type DatabaseOptions, describeDatabase, type Dialect } from "./Database.ts"
import { causeText, DatabaseError, DatabaseOpenError } from "./errors.ts"
import {
  type DatabaseState,
  loadMigrations,
  type Migration,
  migrationLabel,
  type MigrationPlan,
  plan,
  readState,
  refusals
} from "./Migrations.ts"
import { openPostgres } from "./postgresOpen.ts"
import { directoryProblem, openSqlite } from "./sqliteOpen.ts"

export interface StatusOptions extends DatabaseOptions {
  /** `--dry-run`: the report carries the SQL that would run. */
  readonly withSql: boolean
  /** The configured `fhir.version`, checked against the database's pinned one. */
  readonly fhirVersion: string
  readonly migrations?: ReadonlyArray<Migration> | undefined
}

export interface MigrationStatusReport extends MigrationPlan {
  readonly database: string
  readonly dialect: Dialect
  readonly exists: boolean
  /** Set when the database was not opened, saying why ("does not exist; would be created"). */
  readonly note: string | undefined
  readonly buildVersion: string
  readonly fhirVersion: { readonly configured: string; readonly recorded: string | undefined }
  readonly createdByBuild: string | undefined
  readonly withSql: boolean
  readonly outcome: "ok" | "refuse"
  readonly reasons: ReadonlyArray<string>
}

const emptyState: DatabaseState = { recorded: [], fhirVersion: undefined, createdByBuild: undefined }

const inspect = (options: StatusOptions, database: string) => {
  const readError = (error: unknown) => new DatabaseError({ operation: "status", reason: causeText(error) })
  return Effect.scoped(Effect.gen(function*() {
    if (options.kind === "postgres") {
      if (options.postgresUrl === undefined || options.postgresUrl === "") {
        return yield* new DatabaseOpenError({ database, reason: "no Postgres URL is configured" })
      }
      const { client } = yield* openPostgres({ url: options.postgresUrl, pool: 1 })
      return yield* client.withTransaction(
        Effect.zipRight(client`SET TRANSACTION READ ONLY`, readState(client))
      ).pipe(Effect.mapError(readError))
    }
    const client = yield* openSqlite({ filename: options.sqlitePath, database, readonly: true })
    return yield* readState(client).pipe(Effect.mapError(readError))
  })).pipe(Effect.provide(Reactivity.layer))
}

export const status = Effect.fn("Migrations.status")(function*(options: StatusOptions) {
  const dialect: Dialect = options.kind === "postgres" ? "pg" : "sqlite"
  const known = options.migrations ?? (yield* loadMigrations(dialect))
  const database = describeDatabase(options)
  const note = options.kind === "memory"
    ? "in memory; created empty at every start"
    : options.kind === "sqlite" && !Fs.existsSync(options.sqlitePath)
    ? "does not exist; would be created"
    : undefined
  // A missing file "would be created" only where start-up could create it.
  const unreachable = options.kind === "sqlite" && note !== undefined ? directoryProblem(options.sqlitePath, true) : undefined
  if (unreachable !== undefined) return yield* new DatabaseOpenError({ database, reason: unreachable })
  const state = note === undefined ? yield* inspect(options, database) : emptyState
  const p = plan(known, state.recorded)
  const reasons = refusals(p, state, options.fhirVersion)
  const report: MigrationStatusReport = {
    ...p,
    database,
    dialect,
    exists: note === undefined,
    note,
    buildVersion,
    fhirVersion: { configured: options.fhirVersion, recorded: state.fhirVersion },
    createdByBuild: state.createdByBuild,
    withSql: options.withSql,
    outcome: reasons.length === 0 ? "ok" : "refuse",
    reasons
  }
  return report
})

/** The report as `svc migrate` prints it. */
export const formatStatus = (report: MigrationStatusReport): string => {
  const lines: Array<string> = []
  lines.push(`database: ${report.database}${report.note === undefined ? "" : ` (${report.note})`}`)
  lines.push(`build: svc ${report.buildVersion}`)
  const recordedFhir = report.fhirVersion.recorded === undefined ? "not recorded yet" : report.fhirVersion.recorded
  lines.push(`fhir version: configured ${report.fhirVersion.configured}, database ${recordedFhir}`)
  if (report.createdByBuild !== undefined) lines.push(`created by: svc ${report.createdByBuild}`)
  lines.push(report.recorded.length === 0 ? "recorded migrations: none" : "recorded migrations:")
  for (const r of report.recorded) {
    const flags = [
      report.unknown.includes(r) ? "unknown to this build" : undefined,
      report.changed.includes(r) ? "file changed since it was applied" : undefined
    ].filter((f) => f !== undefined)
    const suffix = flags.length === 0 ? "" : ` [${flags.join("; ")}]`
    lines.push(`  ${migrationLabel(r)}  applied ${r.appliedAt} by svc ${r.buildVersion}${suffix}`)
  }
  lines.push(report.pending.length === 0 ? "pending migrations: none" : "pending migrations (this build would apply):")
  for (const m of report.pending) lines.push(`  ${migrationLabel(m)}`)
  if (report.withSql && report.pending.length > 0) {
    lines.push("", "-- SQL that would run, in one transaction:")
    for (const m of report.pending) lines.push(`-- ${migrationLabel(m)}`, m.sql.trimEnd(), "")
  }
  lines.push(
    report.outcome === "ok"
      ? "outcome: this build would start"
      : `outcome: this build would refuse to start: ${report.reasons.join("; ")}`
  )
  return lines.join("\n")
}

/** `svc migrate`'s exit code for a report: 0 would start, 1 would refuse. */
export const statusExitCode = (report: MigrationStatusReport): 0 | 1 => (report.outcome === "ok" ? 0 : 1)
