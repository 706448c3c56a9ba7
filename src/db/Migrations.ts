/**
 * Forward-only migrations (interface spec, Versioning items 4 and 5): numbered SQL files under
 * `migrations/<dialect>/NNNN_name.sql`, applied at start-up in one transaction and recorded in
 * `svc_migrations`. A database that records a migration this build does not know was migrated by a
 * newer build and is refused; so is a database pinned to another FHIR version.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { DateTime, Effect } from "effect"
import * as Crypto from "node:crypto"
import { existsSync } from "node:fs"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { buildVersion } from "../version.ts"
import { Database, type Dialect } from "./Database.ts"
import { causeText, DatabaseError, MigrationFailed, MigrationFilesInvalid, MigrationRefused } from "./errors.ts"
import { splitStatements } from "./sqlStatements.ts"

export interface Migration {
  readonly version: number
  readonly name: string
  readonly sql: string
  readonly checksum: string
}

export interface RecordedMigration {
  readonly version: number
  readonly name: string
  readonly checksum: string
  readonly buildVersion: string
  readonly appliedAt: string
}

/** What the database records next to what this build ships. */
export interface MigrationPlan {
  readonly recorded: ReadonlyArray<RecordedMigration>
  /** Migrations this build would apply, in order. */
  readonly pending: ReadonlyArray<Migration>
  /** Recorded versions this build does not know: the database was migrated by a newer build. */
  readonly unknown: ReadonlyArray<RecordedMigration>
  /** Recorded migrations whose file has changed since they were applied. */
  readonly changed: ReadonlyArray<RecordedMigration>
}

export interface DatabaseState {
  readonly recorded: ReadonlyArray<RecordedMigration>
  readonly fhirVersion: string | undefined
  readonly createdByBuild: string | undefined
}

export interface MigrateResult {
  readonly applied: ReadonlyArray<Migration>
  readonly fhirVersion: string
  /** Whether this run created the database (recorded its FHIR version for the first time). */
  readonly created: boolean
}

/** `0007_name`, as files and messages show a migration. */
export const migrationLabel = (m: { readonly version: number; readonly name: string }): string =>
  `${String(m.version).padStart(4, "0")}_${m.name}`

const versionLabel = (version: number): string => String(version).padStart(4, "0")

/**
 * The shipped migrations of a dialect, found from this file so it works from any working directory: two
 * levels up from `src/db/`, or one up from the bundle in `dist/` (`npm run build`).
 */
export const migrationsDirectory = (dialect: Dialect): string => {
  const sub = `migrations/${dialect === "pg" ? "postgres" : "sqlite"}/`
  const candidates = [`../../${sub}`, `../${sub}`].map((path) => fileURLToPath(new URL(path, import.meta.url)))
  return candidates.find((path) => existsSync(path)) ?? candidates[0]!
}

export const checksumOf = (sql: string): string => Crypto.createHash("sha256").update(sql).digest("hex")

const fileName = /^(\d{4})_([a-z0-9_]+)\.sql$/

export const loadMigrations = Effect.fn("Migrations.load")(function*(
  dialect: Dialect,
  directory: string = migrationsDirectory(dialect)
) {
  const invalid = (reason: string) => new MigrationFilesInvalid({ reason })
  const names = yield* Effect.tryPromise({
    try: () => Fs.readdir(directory),
    catch: () => invalid(`directory ${directory} cannot be read`)
  })
  const migrations: Array<Migration> = []
  for (const name of names.filter((n) => n.endsWith(".sql")).sort()) {
    const match = fileName.exec(name)
    if (match === null) return yield* invalid(`${name} is not named NNNN_name.sql`)
    const version = Number(match[1])
    if (migrations.some((m) => m.version === version)) return yield* invalid(`version ${match[1]} is used twice`)
    const sql = yield* Effect.tryPromise({
      try: () => Fs.readFile(Path.join(directory, name), "utf8"),
      catch: (cause) => invalid(`${name}: ${causeText(cause)}`)
    })
    migrations.push({ version, name: match[2]!, sql, checksum: checksumOf(sql) })
  }
  if (migrations.length === 0) return yield* invalid(`no migrations in ${directory}`)
  return migrations
})

export const plan = (known: ReadonlyArray<Migration>, recorded: ReadonlyArray<RecordedMigration>): MigrationPlan => {
  const knownVersions = new Map(known.map((m) => [m.version, m]))
  const recordedVersions = new Set(recorded.map((r) => r.version))
  return {
    recorded,
    pending: known.filter((m) => !recordedVersions.has(m.version)),
    unknown: recorded.filter((r) => !knownVersions.has(r.version)),
    changed: recorded.filter((r) => {
      const m = knownVersions.get(r.version)
      return m !== undefined && m.checksum !== r.checksum
    })
  }
}

/** Why this build must not run against a database in `state`; empty when it may. */
export const refusals = (p: MigrationPlan, state: DatabaseState, fhirVersion: string): ReadonlyArray<string> => {
  const reasons: Array<string> = []
  if (p.unknown.length > 0) {
    const versions = p.unknown.map((r) => versionLabel(r.version))
    const which = versions.length === 1
      ? `migration ${versions[0]} is unknown`
      : `migrations ${versions.join(", ")} are unknown`
    reasons.push(`database was migrated by a newer build (${which} to svc ${buildVersion}); refusing to start`)
  }
  if (state.fhirVersion !== undefined && state.fhirVersion !== fhirVersion) {
    reasons.push(
      `database holds FHIR version ${state.fhirVersion} but fhir.version is ${fhirVersion}; ` +
        "a database cannot be pointed at another FHIR version; refusing to start"
    )
  }
  return reasons
}

const isoText = (value: unknown): string =>
  value instanceof Date ? DateTime.formatIso(DateTime.unsafeMake(value)) : String(value)

/** The recorded migrations and pinned facts; an empty state when the own tables do not exist yet. */
export const readState = (sql: SqlClient.SqlClient): Effect.Effect<DatabaseState, SqlError> =>
  Effect.gen(function*() {
    const tables = yield* sql.onDialectOrElse({
      pg: () =>
        sql<{ name: string }>`SELECT table_name AS name FROM information_schema.tables
          WHERE table_schema = current_schema() AND table_name IN ('svc_migrations', 'svc_meta')`,
      orElse: () =>
        sql<{ name: string }>`SELECT name FROM sqlite_master
          WHERE type = 'table' AND name IN ('svc_migrations', 'svc_meta')`
    })
    const has = (name: string) => tables.some((t) => t.name === name)
    const rows = has("svc_migrations")
      ? yield* sql<{ version: number; name: string; checksum: string; build_version: string; applied_at: unknown }>`
          SELECT version, name, checksum, build_version, applied_at FROM svc_migrations ORDER BY version`
      : []
    const meta = has("svc_meta") ? yield* sql<{ key: string; value: string }>`SELECT key, value FROM svc_meta` : []
    const metaValue = (key: string) => meta.find((m) => m.key === key)?.value
    return {
      recorded: rows.map((r) => ({
        version: Number(r.version),
        name: r.name,
        checksum: r.checksum,
        buildVersion: r.build_version,
        appliedAt: isoText(r.applied_at)
      })),
      fhirVersion: metaValue("fhir_version"),
      createdByBuild: metaValue("created_by_build")
    }
  })

// Serialises start-ups of several processes on one Postgres database.
const migrationLockKey = 7_461_830_215

const applyOne = (sql: SqlClient.SqlClient, dialect: Dialect, m: Migration, appliedAt: string) =>
  Effect.gen(function*() {
    // Postgres takes a whole script in one simple query; SQLite prepares one statement at a time.
    const statements = dialect === "pg" ? [m.sql] : splitStatements(m.sql)
    for (const statement of statements) yield* sql.unsafe(statement)
    yield* sql`INSERT INTO svc_migrations (version, name, checksum, build_version, applied_at)
      VALUES (${m.version}, ${m.name}, ${m.checksum}, ${buildVersion}, ${appliedAt})`
  }).pipe(
    Effect.mapError((error) => new MigrationFailed({ migration: migrationLabel(m), reason: causeText(error) }))
  )

/**
 * Applies every pending migration in one transaction and pins the FHIR version of a new database.
 * A failure rolls everything back, so the database is left as it was.
 */
export const migrate = Effect.fn("Migrations.migrate")(function*(options: {
  readonly fhirVersion: string
  /** Tests inject their own list; the build's files otherwise. */
  readonly migrations?: ReadonlyArray<Migration> | undefined
}) {
  const db = yield* Database
  const sql = db.writer
  const known = options.migrations ?? (yield* loadMigrations(db.dialect))
  const dbError = (error: SqlError) => new DatabaseError({ operation: "migration", reason: causeText(error) })
  const result = yield* sql.withTransaction(Effect.gen(function*() {
    if (db.dialect === "pg") {
      yield* sql`SELECT pg_advisory_xact_lock(${migrationLockKey})`.pipe(Effect.mapError(dbError))
      // A migration may rewrite a whole table: `database.statement_timeout_ms` is for requests, not for it.
      yield* sql`SET LOCAL statement_timeout = 0`.pipe(Effect.mapError(dbError))
    }
    const state = yield* readState(sql).pipe(Effect.mapError(dbError))
    const p = plan(known, state.recorded)
    const reasons = refusals(p, state, options.fhirVersion)
    if (reasons.length > 0) return yield* new MigrationRefused({ reason: reasons.join("; ") })
    const appliedAt = DateTime.formatIso(yield* DateTime.now)
    for (const m of p.pending) yield* applyOne(sql, db.dialect, m, appliedAt)
    const created = state.recorded.length === 0
    const pin = (key: string, value: string) =>
      sql`INSERT INTO svc_meta (key, value) VALUES (${key}, ${value}) ON CONFLICT (key) DO NOTHING`.pipe(
        Effect.mapError(dbError)
      )
    if (state.fhirVersion === undefined) yield* pin("fhir_version", options.fhirVersion)
    if (created) yield* pin("created_by_build", buildVersion)
    return { applied: p.pending, fhirVersion: options.fhirVersion, created }
  })).pipe(
    Effect.catchTag("SqlError", (error) => Effect.fail(dbError(error)))
  )
  for (const m of result.applied) yield* Effect.logInfo(`applied migration ${migrationLabel(m)}`)
  const done: MigrateResult = result
  return done
})

/**
 * For a process that will not write (a standby or a replica): succeeds when the database is migrated to
 * exactly this build's migrations and pinned to `fhirVersion`, and changes nothing. Only the process that
 * writes (the primary) applies migrations; the others are refused until it has.
 */
export const checkMigrated = Effect.fn("Migrations.check")(function*(options: {
  readonly fhirVersion: string
  readonly migrations?: ReadonlyArray<Migration> | undefined
}) {
  const db = yield* Database
  const known = options.migrations ?? (yield* loadMigrations(db.dialect))
  const state = yield* db.withReader(readState).pipe(
    Effect.mapError((error) => new DatabaseError({ operation: "migration check", reason: causeText(error) }))
  )
  const p = plan(known, state.recorded)
  const reasons = [...refusals(p, state, options.fhirVersion)]
  const pendingOnly = reasons.length === 0 && p.pending.length > 0
  if (p.pending.length > 0) {
    reasons.push(
      `the database lacks ${p.pending.length === 1 ? "migration" : "migrations"} ${p.pending.map(migrationLabel).join(", ")} ` +
        "of this build, and only the primary applies migrations: start the primary (or `svc migrate`) first"
    )
  }
  if (reasons.length > 0) return yield* new MigrationRefused({ reason: reasons.join("; "), pendingOnly })
})

/** Whether a process of `role` writes the database, and so applies its migrations at start-up. */
export const migratesAtStart = (role: string): boolean => role !== "replica"
