import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { Database, type DatabaseOptions, layer } from "../../src/db/Database.ts"
import { formatStatus, status, statusExitCode } from "../../src/db/MigrationStatus.ts"
import { checkMigrated, checksumOf, loadMigrations, type Migration, migrate, migratesAtStart, readState } from "../../src/db/Migrations.ts"
import { fullText, indexKey } from "../../src/search/indexKey.ts"
import { buildVersion } from "../../src/version.ts"
import { backends, freshDatabase } from "../support/backends.ts"

const withDatabase = <A, E>(options: DatabaseOptions, body: Effect.Effect<A, E, Database | SqlClient.SqlClient>) =>
  Effect.scoped(Effect.provide(body, layer(options)))

const state = Effect.flatMap(Database, (db) => readState(db.writer))

const extra = (version: number, name: string, sql: string): Migration => ({ version, name, sql, checksum: checksumOf(sql) })

const tableNames = Effect.flatMap(Database, (db) =>
  db.writer.onDialectOrElse({
    pg: () => db.writer<{ name: string }>`SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema()`,
    orElse: () => db.writer<{ name: string }>`SELECT name FROM sqlite_master WHERE type = 'table'`
  })).pipe(Effect.map((rows) => rows.map((r) => r.name).sort()))

describe("Migrations", () => {
  for (const backend of backends) {
    describe.skipIf(backend.skip)(backend.kind, () => {
      const dialect = backend.kind === "postgres" ? "pg" : "sqlite"
      /** The versions this build ships, in order. */
      const shipped = Effect.map(loadMigrations(dialect), (all) => all.map((m) => m.version))

      it.scoped("apply once, and a second run applies nothing", () =>
        Effect.gen(function*() {
          const options = yield* freshDatabase(backend.kind)
          yield* withDatabase(options, Effect.gen(function*() {
            const first = yield* migrate({ fhirVersion: "r4" })
            expect(first.applied.map((m) => m.version)).toEqual(yield* shipped)
            expect(first.created).toBe(true)
            const second = yield* migrate({ fhirVersion: "r4" })
            expect(second.applied).toEqual([])
            expect(second.created).toBe(false)
            expect(yield* tableNames).toEqual(expect.arrayContaining(["svc_meta", "svc_migrations"]))
          }))
        }))

      it.scoped("are only checked by a process that does not write: it is refused until the primary has applied them, and changes nothing", () =>
        Effect.gen(function*() {
          const options = yield* freshDatabase(backend.kind)
          const known = yield* loadMigrations(dialect)
          expect([migratesAtStart("primary"), migratesAtStart("standby"), migratesAtStart("replica")]).toEqual([true, true, false])
          yield* withDatabase(options, Effect.gen(function*() {
            const empty = yield* Effect.flip(checkMigrated({ fhirVersion: "r4" }))
            expect(empty._tag).toBe("MigrationRefused")
            expect(empty.message).toContain("only the primary applies migrations")
            expect(yield* tableNames).toEqual([])
            yield* migrate({ fhirVersion: "r4", migrations: known.slice(0, -1) })
            const behind = yield* Effect.flip(checkMigrated({ fhirVersion: "r4" }))
            expect(behind.message).toContain(`migration ${known[known.length - 1]!.version.toString().padStart(4, "0")}_${known[known.length - 1]!.name}`)
            yield* migrate({ fhirVersion: "r4" })
            yield* checkMigrated({ fhirVersion: "r4" })
            const otherVersion = yield* Effect.flip(checkMigrated({ fhirVersion: "r5" }))
            expect(otherVersion.message).toContain("database holds FHIR version r4")
          }))
        }))

      it.scoped("record the build version, the Clock's time and the FHIR version", () =>
        Effect.gen(function*() {
          const options = yield* freshDatabase(backend.kind)
          yield* TestClock.setTime(Date.parse("2025-03-04T05:06:07.000Z"))
          yield* withDatabase(options, Effect.gen(function*() {
            yield* migrate({ fhirVersion: "r4" })
            const recorded = yield* state
            const known = yield* loadMigrations(dialect)
            expect(recorded.recorded).toEqual(known.map((m) => ({
              version: m.version,
              name: m.name,
              checksum: m.checksum,
              buildVersion,
              appliedAt: "2025-03-04T05:06:07.000Z"
            })))
            expect(recorded.recorded[0]?.name).toBe("init")
            expect(recorded.fhirVersion).toBe("r4")
            expect(recorded.createdByBuild).toBe(buildVersion)
          }))
        }))

      it.scoped("a failing migration leaves the database as it was", () =>
        Effect.gen(function*() {
          const options = yield* freshDatabase(backend.kind)
          const known = yield* loadMigrations(dialect)
          yield* withDatabase(options, Effect.gen(function*() {
            const broken = extra(9000, "broken", "CREATE TABLE half_done (x INTEGER);\nINSERT INTO no_such_table VALUES (1);")
            const error = yield* Effect.flip(migrate({ fhirVersion: "r4", migrations: [...known, broken] }))
            expect(error._tag).toBe("MigrationFailed")
            expect(error.message).toMatch(/^migration 9000_broken failed: .*no_such_table.*; nothing was applied$/)
            // Not even 0001 or the FHIR version: everything ran in one transaction.
            expect(yield* tableNames).toEqual([])
            // Once the shipped migrations are applied, a broken later one leaves them alone.
            yield* migrate({ fhirVersion: "r4", migrations: known })
            yield* Effect.flip(migrate({ fhirVersion: "r4", migrations: [...known, broken] }))
            expect((yield* state).recorded.map((r) => r.version)).toEqual(yield* shipped)
            expect(yield* tableNames).not.toContain("half_done")
          }))
        }))

      it.scoped("0008 cuts the long index values a database already holds to the keys the server writes, keeping the whole text", () =>
        Effect.gen(function*() {
          const options = yield* freshDatabase(backend.kind)
          const known = yield* loadMigrations(dialect)
          yield* withDatabase(options, Effect.gen(function*() {
            const sql = yield* SqlClient.SqlClient
            yield* migrate({ fhirVersion: "r4", migrations: known.filter((m) => m.version < 8) })
            // Code points beyond the Basic Multilingual Plane count as one, in SQL as in the server.
            const long = "\u{1F600}é".repeat(300)
            const short = "a".repeat(256)
            yield* sql`INSERT INTO search_token (rkey, type, param, system, value) VALUES (1, 'Patient', 'identifier', ${long}, ${short})`
            yield* sql`INSERT INTO search_string (rkey, type, param, normalized, exact) VALUES (1, 'Patient', 'family', ${long}, ${long})`
            yield* sql`INSERT INTO search_uri (rkey, type, param, value) VALUES (1, 'ValueSet', 'url', ${`urn:${long}`})`
            yield* migrate({ fhirVersion: "r4", migrations: known })
            expect(yield* sql`SELECT system, system_full, value, value_full FROM search_token`).toEqual([
              { system: indexKey(long), system_full: long, value: short, value_full: null }
            ])
            expect(yield* sql`SELECT normalized, normalized_full, exact FROM search_string`).toEqual([
              { normalized: indexKey(long), normalized_full: fullText(long), exact: long }
            ])
            expect(yield* sql`SELECT value, value_full FROM search_uri`).toEqual([{ value: indexKey(`urn:${long}`), value_full: `urn:${long}` }])
            expect(indexKey(long)).not.toBe(long)
          }))
        }))

      it.scoped("a database migrated by a newer build is refused, and status says so", () =>
        Effect.gen(function*() {
          const options = yield* freshDatabase(backend.kind)
          yield* withDatabase(options, Effect.gen(function*() {
            const sql = yield* SqlClient.SqlClient
            yield* migrate({ fhirVersion: "r4" })
            yield* sql`INSERT INTO svc_migrations (version, name, checksum, build_version, applied_at)
              VALUES (999, 'future', 'x', '9.9.9', ${"2030-01-01T00:00:00.000Z"})`
            const error = yield* Effect.flip(migrate({ fhirVersion: "r4" }))
            expect(error._tag).toBe("MigrationRefused")
            expect(error.message).toBe(
              `database was migrated by a newer build (migration 0999 is unknown to svc ${buildVersion}); refusing to start`
            )
            if (backend.kind !== "memory") {
              const report = yield* status({ ...options, withSql: false, fhirVersion: "r4" })
              expect(report.outcome).toBe("refuse")
              expect(statusExitCode(report)).toBe(1)
              expect(report.unknown.map((r) => r.version)).toEqual([999])
              expect(formatStatus(report)).toContain("0999_future  applied 2030-01-01T00:00:00.000Z by svc 9.9.9 [unknown to this build]")
            }
          }))
        }))

      it.scoped("a database pinned to another FHIR version is refused", () =>
        Effect.gen(function*() {
          const options = yield* freshDatabase(backend.kind)
          yield* withDatabase(options, Effect.gen(function*() {
            yield* migrate({ fhirVersion: "r4" })
            const error = yield* Effect.flip(migrate({ fhirVersion: "r5" }))
            expect(error._tag).toBe("MigrationRefused")
            expect(error.message).toContain("database holds FHIR version r4 but fhir.version is r5")
            if (backend.kind !== "memory") {
              const report = yield* status({ ...options, withSql: false, fhirVersion: "r5" })
              expect(report.outcome).toBe("refuse")
            }
          }))
        }))

      it.scoped("status and dry-run report pending migrations and their SQL, and change nothing", () =>
        Effect.gen(function*() {
          const options = yield* freshDatabase(backend.kind)
          const dryRun = yield* status({ ...options, withSql: true, fhirVersion: "r4" })
          expect(dryRun.outcome).toBe("ok")
          expect(dryRun.pending.map((m) => m.version)).toEqual(yield* shipped)
          const printed = formatStatus(dryRun)
          expect(printed).toContain("-- 0001_init")
          expect(printed).toContain("CREATE TABLE svc_migrations")
          expect(printed).toContain("outcome: this build would start")
          expect(formatStatus({ ...dryRun, withSql: false })).not.toContain("CREATE TABLE")
          if (backend.kind === "sqlite") expect(Fs.existsSync(options.sqlitePath)).toBe(false)
          if (backend.kind === "memory") return
          yield* withDatabase(options, Effect.gen(function*() {
            expect(yield* tableNames).toEqual([])
            yield* migrate({ fhirVersion: "r4" })
          }))
          const after = yield* status({ ...options, withSql: true, fhirVersion: "r4" })
          expect(after.pending).toEqual([])
          expect(after.recorded.map((r) => r.version)).toEqual(yield* shipped)
          expect(after.fhirVersion).toEqual({ configured: "r4", recorded: "r4" })
          expect(formatStatus(after)).toContain("pending migrations: none")
        }))
    })
  }

  it.scoped("status on a SQLite file that does not exist does not create it", () =>
    Effect.gen(function*() {
      const options = yield* freshDatabase("sqlite")
      const report = yield* status({ ...options, withSql: false, fhirVersion: "r4" })
      expect(report.exists).toBe(false)
      expect(report.outcome).toBe("ok")
      expect(formatStatus(report)).toContain(`database: SQLite file ${options.sqlitePath} (does not exist; would be created)`)
      expect(Fs.readdirSync(Path.dirname(options.sqlitePath))).toEqual([])
    }))

  it.scoped("status on a corrupt SQLite file is an open error (exit code 2)", () =>
    Effect.gen(function*() {
      const options = yield* freshDatabase("sqlite")
      Fs.writeFileSync(options.sqlitePath, "garbage ".repeat(100))
      const error = yield* Effect.flip(status({ ...options, withSql: false, fhirVersion: "r4" }))
      expect(error.message).toBe(`cannot open database SQLite file ${options.sqlitePath}: file is not a database`)
    }))

  it.live("status on an unreachable Postgres is an open error", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(status({
        kind: "postgres",
        sqlitePath: "",
        postgresUrl: "postgres://svc:pw@127.0.0.1:1/svc",
        pool: 1,
        withSql: false,
        fhirVersion: "r4"
      }))
      expect(error.message).toContain("postgres://svc:***@127.0.0.1:1/svc: no Postgres server answers")
    }))
})
