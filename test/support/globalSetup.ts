/**
 * Runs once per test run: builds the bundle that tests running the `svc` command start (process.ts),
 * reports up front whether the Postgres tests will run, and builds the databases with the real R4
 * packages installed that test servers copy (r4Template.ts), when the registry answers and this code
 * has none yet.
 */
import Sqlite from "better-sqlite3"
import { Effect } from "effect"
import { execFileSync } from "node:child_process"
import { renameSync, rmSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { registryUrl, skipRealPackages } from "./npmRegistry.ts"
import { postgresAvailable, urlFor, withAdmin } from "./postgres.ts"
import { testBundle } from "./process.ts"
import { markUsed, pgTemplate, pgTemplateReady, r4PackageCache, removeOtherTemplates, sqliteTemplate, sqliteTemplateReady } from "./r4Template.ts"
import { startServerOn } from "./server.ts"

const settings = { conformance: { package_registry: registryUrl ?? "", package_cache: r4PackageCache } }

/** Starts a server on the database, which installs and indexes the packages, and stops it. */
const installInto = (database: Parameters<typeof startServerOn>[0]) =>
  Effect.runPromise(Effect.scoped(Effect.asVoid(startServerOn(database, settings))))

const buildSqlite = async (): Promise<void> => {
  const building = `${sqliteTemplate}.building`
  for (const suffix of ["", "-wal", "-shm"]) rmSync(`${building}${suffix}`, { force: true })
  await installInto({ kind: "sqlite", sqlitePath: building, pool: 1 })
  // Everything into the main file, so that one file is the whole database.
  const db = new Sqlite(building)
  db.pragma("wal_checkpoint(TRUNCATE)")
  db.close()
  rmSync(`${building}-wal`, { force: true })
  rmSync(`${building}-shm`, { force: true })
  renameSync(building, sqliteTemplate)
}

const buildPostgres = async (): Promise<void> => {
  const building = `${pgTemplate}_building`
  await withAdmin((c) => c.query(`DROP DATABASE IF EXISTS "${building}" WITH (FORCE)`).then(() => c.query(`CREATE DATABASE "${building}"`)))
  await installInto({ kind: "postgres", sqlitePath: "", postgresUrl: urlFor(building), pool: 2 })
  await withAdmin((c) => c.query(`ALTER DATABASE "${building}" RENAME TO "${pgTemplate}"`))
}

/** Bundles the server to `testBundle` with the build script's settings. */
const buildBundle = (): void => {
  const root = fileURLToPath(new URL("../../", import.meta.url))
  execFileSync(process.execPath, [join(root, "scripts", "build.mjs"), "--out", testBundle], { cwd: root, stdio: "inherit" })
}

export default async function setup(): Promise<void> {
  buildBundle()
  const pg = await postgresAvailable()
  if (skipRealPackages) return
  markUsed()
  await removeOtherTemplates(pg)
  if (!sqliteTemplateReady()) await buildSqlite()
  if (pg && !(await pgTemplateReady())) await buildPostgres()
}
