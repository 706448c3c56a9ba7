/**
 * Databases with the real R4 packages installed, for the servers of the Synthea workloads: templates
 * like the tests' (test/support/r4Template.ts), named by the same hash of the server's code, in the OS
 * temporary directory (`svc-bench-r4-<hash>.sqlite`) and on the Postgres server
 * (`svc_bench_r4_template_<hash>`). When this code has none yet, the bench builds it once with the
 * bundle (a start on an empty database installs and indexes the packages, as the tests' setup does in
 * process) and removes the bench's templates of other code; every later run copies it, which takes a
 * second or two instead of the twenty to seventy seconds of an install. They are the bench's own, not the
 * tests': a test run removes every test template of other code, which on a machine with several
 * checkouts would remove the one a bench run was about to copy.
 */
import Database from "better-sqlite3"
import { randomBytes } from "node:crypto"
import { copyFileSync, existsSync, readdirSync, renameSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { templateKey } from "../../test/support/r4Template.ts"
import { onCleanup } from "./cleanup.ts"
import { createBenchDatabase, withAdmin } from "./postgres.ts"
import { type Backend, type Packages, startSvc } from "./servers.ts"

const sqlitePrefix = "svc-bench-r4-"
const sqliteTemplate = join(tmpdir(), `${sqlitePrefix}${templateKey}.sqlite`)
const pgPrefix = "svc_bench_r4_template_"
const pgTemplate = `${pgPrefix}${templateKey}`

/** A template that exists is whole: it is renamed into place last. */
const sqliteTemplateReady = (): boolean => existsSync(sqliteTemplate) && statSync(sqliteTemplate).size > 0

const pgTemplateReady = (): Promise<boolean> =>
  withAdmin(async (client) => (await client.query("select 1 from pg_database where datname = $1", [pgTemplate])).rowCount === 1)

/** Removes the bench's SQLite templates of other code. */
const removeOtherSqliteTemplates = (): void => {
  for (const name of readdirSync(tmpdir())) {
    if (name.startsWith(sqlitePrefix) && !name.startsWith(`${sqlitePrefix}${templateKey}`)) rmSync(join(tmpdir(), name), { force: true })
  }
}

/** Removes the bench's Postgres templates of other code. */
const removeOtherPgTemplates = (): Promise<void> =>
  withAdmin(async (client) => {
    const rows = (await client.query("select datname from pg_database where starts_with(datname, $1)", [pgPrefix])).rows as Array<{ datname: string }>
    for (const { datname } of rows) {
      if (datname !== pgTemplate) await client.query(`drop database if exists "${datname}" with (force)`)
    }
  })

/** Starts svc on `backend` with the real packages (which installs them) and stops it. */
const install = async (backend: Backend, workDir: string, packages: Packages): Promise<void> => {
  const child = await startSvc(backend, workDir, packages, { name: `svc-${backend.kind}-r4-template` })
  await child.stop()
}

const removeSqlite = (file: string) => {
  for (const suffix of ["", "-wal", "-shm"]) rmSync(`${file}${suffix}`, { force: true })
}

const buildSqliteTemplate = async (workDir: string, packages: Packages): Promise<void> => {
  // A name of this run's own: another bench run may be building the same template at the same time.
  const building = `${sqliteTemplate}.bench-${randomBytes(4).toString("hex")}`
  const remove = onCleanup("removing a half-built SQLite template", () => removeSqlite(building))
  await install({ kind: "sqlite", file: building }, workDir, packages)
  // Everything into the main file, so that one file is the whole database.
  const db = new Database(building)
  db.pragma("wal_checkpoint(TRUNCATE)")
  db.close()
  rmSync(`${building}-wal`, { force: true })
  rmSync(`${building}-shm`, { force: true })
  renameSync(building, sqliteTemplate)
  await remove()
  removeOtherSqliteTemplates()
}

const buildPostgresTemplate = async (workDir: string, packages: Packages): Promise<void> => {
  const building = await createBenchDatabase()
  const drop = onCleanup("dropping a half-built Postgres template", building.drop)
  await install({ kind: "postgres", url: building.url }, workDir, packages)
  // Renamed in last, so that a template that exists is whole; another bench run may have renamed its own in meanwhile.
  await withAdmin((client) => client.query(`alter database "${building.name}" rename to "${pgTemplate}"`)).catch(() => undefined)
  // The rename moved the database away from the name `drop` removes, or it failed and the copy is not needed.
  await drop()
  await removeOtherPgTemplates()
}

/**
 * A fresh SQLite file in `workDir` with the real R4 packages installed: a copy of the template,
 * built first when this code has none. `progress` says when it builds.
 */
export const sqliteR4 = async (file: string, workDir: string, packages: Packages, progress: (message: string) => void): Promise<Backend> => {
  if (!sqliteTemplateReady()) {
    progress("building the SQLite template with the real R4 packages for this code (once per code version)")
    await buildSqliteTemplate(workDir, packages)
  }
  copyFileSync(sqliteTemplate, file)
  return { kind: "sqlite", file }
}

/**
 * A fresh Postgres database with the real R4 packages installed (`CREATE DATABASE ... TEMPLATE`),
 * the template built first when this code has none; `drop` removes it.
 */
export const postgresR4 = async (workDir: string, packages: Packages, progress: (message: string) => void): Promise<{ readonly backend: Backend; readonly drop: () => Promise<void> }> => {
  if (!(await pgTemplateReady())) {
    progress("building the Postgres template with the real R4 packages for this code (once per code version)")
    await buildPostgresTemplate(workDir, packages)
  }
  const database = await createBenchDatabase(pgTemplate)
  return { backend: { kind: "postgres", url: database.url }, drop: database.drop }
}
