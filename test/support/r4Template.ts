/**
 * Databases with the real R4 packages already installed and indexed, built once per test run (in
 * globalSetup) and copied for each test server that asks for the real packages: installing R4 takes
 * about 20 s per server, a copy well under one. A template is named by a hash of the server's code
 * (src/, migrations/, package.json), so a change to how packages are installed or indexed builds a new
 * one. The templates of other code are removed once no test run has used them for a few hours: several
 * checkouts on one machine each have their own, and each run marks its own as used (`markUsed`).
 */
import { createHash } from "node:crypto"
import { closeSync, existsSync, openSync, readdirSync, readFileSync, rmSync, statSync, utimesSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, relative } from "node:path"
import { fileURLToPath } from "node:url"
import { withAdmin } from "./postgres.ts"

const root = fileURLToPath(new URL("../../", import.meta.url))

/** Where the tests keep the real FHIR packages, shared by every test run on this machine (they download once). */
export const r4PackageCache = join(tmpdir(), "svc-test-fhir-packages")

const filesUnder = (dir: string): Array<string> =>
  readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name)
    return entry.isDirectory() ? filesUnder(path) : entry.isFile() ? [path] : []
  })

/** A hash of what the server is made of: a template built by other code is never used. */
export const templateKey: string = (() => {
  const hash = createHash("sha256")
  const files = [...filesUnder(join(root, "src")), ...filesUnder(join(root, "migrations")), join(root, "package.json")].sort()
  for (const file of files) hash.update(relative(root, file)).update("\0").update(readFileSync(file)).update("\0")
  return hash.digest("hex").slice(0, 16)
})()

const sqlitePrefix = "svc-test-r4-"
export const sqliteTemplate = join(tmpdir(), `${sqlitePrefix}${templateKey}.sqlite`)
const pgPrefix = "svc_r4_template_"
export const pgTemplate = `${pgPrefix}${templateKey}`

/** Whether the SQLite template of this code exists (a build that failed half-way leaves none: it is renamed in last). */
export const sqliteTemplateReady = (): boolean => existsSync(sqliteTemplate) && statSync(sqliteTemplate).size > 0

export const pgTemplateReady = async (): Promise<boolean> =>
  withAdmin(async (c) => (await c.query("SELECT 1 FROM pg_database WHERE datname = $1", [pgTemplate])).rowCount === 1)

const usedSuffix = ".used"
/** A template of other code is kept this long after a run last used it (another checkout may be using it now). */
const keepUnusedMillis = 3 * 60 * 60 * 1000

/** Notes that a test run of this code uses its templates (the marker's modification time). */
export const markUsed = (): void => {
  const marker = join(tmpdir(), `${sqlitePrefix}${templateKey}${usedSuffix}`)
  closeSync(openSync(marker, "a"))
  const now = new Date()
  utimesSync(marker, now, now)
}

/** The code keys whose templates no run has marked as used for `keepUnusedMillis`. */
const staleKeys = (): Set<string> => {
  const now = Date.now()
  const keys = new Set<string>()
  for (const name of readdirSync(tmpdir())) {
    if (!name.startsWith(sqlitePrefix)) continue
    const key = name.slice(sqlitePrefix.length, sqlitePrefix.length + 16)
    if (key === templateKey) continue
    const marker = join(tmpdir(), `${sqlitePrefix}${key}${usedSuffix}`)
    const used = statSync(marker, { throwIfNoEntry: false })?.mtimeMs ?? statSync(join(tmpdir(), name), { throwIfNoEntry: false })?.mtimeMs ?? 0
    if (now - used > keepUnusedMillis) keys.add(key)
  }
  return keys
}

/** Removes the templates of other code versions that no run has used for a few hours. */
export const removeOtherTemplates = async (pg: boolean): Promise<void> => {
  const stale = staleKeys()
  for (const name of readdirSync(tmpdir())) {
    const key = name.slice(sqlitePrefix.length, sqlitePrefix.length + 16)
    if (name.startsWith(sqlitePrefix) && stale.has(key)) rmSync(join(tmpdir(), name), { force: true })
  }
  if (!pg) return
  await withAdmin(async (c) => {
    const rows = (await c.query("SELECT datname FROM pg_database WHERE datname LIKE $1", [`${pgPrefix}%`])).rows as Array<{ datname: string }>
    for (const { datname } of rows) {
      const key = datname.slice(pgPrefix.length, pgPrefix.length + 16)
      const known = existsSync(join(tmpdir(), `${sqlitePrefix}${key}${usedSuffix}`)) || existsSync(join(tmpdir(), `${sqlitePrefix}${key}.sqlite`))
      if (datname !== pgTemplate && (stale.has(key) || !known)) await c.query(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`)
    }
  })
}

/** The template to copy for a server of `kind` with the real packages in `cache`, when it has been built. */
export const templateFor = async (kind: string, cache: string | undefined): Promise<string | undefined> => {
  if (cache !== r4PackageCache) return undefined
  if (kind === "sqlite") return sqliteTemplateReady() ? sqliteTemplate : undefined
  if (kind === "postgres") return (await pgTemplateReady().catch(() => false)) ? pgTemplate : undefined
  return undefined
}
