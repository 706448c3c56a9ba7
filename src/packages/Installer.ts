/**
 * Installs loaded packages into the database: each package once, in one Writer command (one
 * transaction), its resources becoming ordinary resources of the server, recorded in `svc_packages`
 * with name, version, source and checksum.
 */
import type { LeaseLost } from "../db/WriterLease.ts"
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Effect } from "effect"
import { entryOf, hasEntries, type StoredEntry, writeEntries } from "../catalog/stored.ts"
import { Database } from "../db/Database.ts"
import { instantOf, putVersion } from "../store/versions.ts"
import { Writer } from "../db/Writer.ts"

/** What the installer needs of a fetched package. */
export interface InstallablePackage {
  readonly name: string
  readonly version: string
  readonly source: string
  readonly checksum: string
  readonly resources: ReadonlyArray<{ readonly file: string; readonly resource: Record<string, unknown> }>
  readonly substitutedFrom?: string | undefined
}

export interface InstalledPackage {
  readonly name: string
  readonly version: string
  readonly source: string
  readonly checksum: string
  readonly substitutedFrom: string | null
  readonly resources: number
}

const idPattern = /^[A-Za-z0-9\-.]{1,64}$/

/** The packages recorded in the database. */
export const installedPackages = Effect.flatMap(Database, (db) =>
  db.withReader((sql) =>
    sql<{ name: string; version: string; source: string; checksum: string; substituted_from: string | null; resources: number }>`
      SELECT name, version, source, checksum, substituted_from, resources FROM svc_packages ORDER BY commit_ts, name`
  )).pipe(Effect.map((rows) =>
    rows.map((row): InstalledPackage => ({
      name: row.name,
      version: row.version,
      source: row.source,
      checksum: row.checksum,
      substitutedFrom: row.substituted_from,
      resources: Number(row.resources)
    }))
  ))

export const isInstalled = (name: string, version: string) =>
  Effect.flatMap(Database, (db) =>
    db.withReader((sql) => sql<{ n: number }>`SELECT 1 AS n FROM svc_packages WHERE name = ${name} AND version = ${version}`)
  ).pipe(Effect.map((rows) => rows.length > 0))

export interface InstallOutcome {
  readonly installed: boolean
  readonly resources: number
  /** Resources left out because they have no usable type or id. */
  readonly skipped: ReadonlyArray<string>
}

/** Told how far an install has got: resources written of the package's total. */
export type InstallProgress = (pkg: string, done: number, total: number) => void

const progressEvery = 250

/** Installs one package unless the database has it already. */
export const installPackage = (
  pkg: InstallablePackage,
  progress?: InstallProgress
): Effect.Effect<InstallOutcome, SqlError | LeaseLost, Database | Writer> =>
  Effect.gen(function*() {
    if (yield* isInstalled(pkg.name, pkg.version)) return { installed: false, resources: 0, skipped: [] }
    const { writer: sql } = yield* Database
    const writer = yield* Writer
    const started = yield* Clock.currentTimeMillis
    // One version per resource: when a package repeats a type/id, its last file wins.
    const byKey = new Map<string, Record<string, unknown>>()
    const skipped: Array<string> = []
    for (const { file, resource } of pkg.resources) {
      const type = resource["resourceType"]
      const id = resource["id"]
      if (typeof type === "string" && typeof id === "string" && idPattern.test(id)) byKey.set(`${type}/${id}`, resource)
      else skipped.push(file)
    }
    const usable = [...byKey.values()]
    const { commitTs } = yield* writer.commit(({ commitTs, record }) =>
      Effect.gen(function*() {
        const label = `${pkg.name}@${pkg.version}`
        const entries: Array<StoredEntry> = []
        for (const [index, resource] of usable.entries()) {
          const type = String(resource["resourceType"])
          const id = String(resource["id"])
          const stored = yield* putVersion(sql, { type, id, resource, commitTs })
          record({ type, id, version: stored.version, op: stored.version === 1 ? "create" : "update", resource: stored.content })
          if (hasEntries(type)) entries.push(entryOf(stored.rkey, stored.version, stored.resource, stored.content))
          if (progress && (index + 1) % progressEvery === 0) progress(label, index + 1, usable.length)
        }
        // What the catalog keeps of each conformance resource, so that no start has to read them again.
        yield* writeEntries(sql, entries)
        progress?.(label, usable.length, usable.length)
        yield* sql`
          INSERT INTO svc_packages (name, version, source, checksum, substituted_from, resources, commit_ts, installed_at)
          VALUES (${pkg.name}, ${pkg.version}, ${pkg.source}, ${pkg.checksum}, ${pkg.substitutedFrom ?? null},
                  ${usable.length}, ${commitTs}, ${instantOf(commitTs)})`
      })
    )
    const finished = yield* Clock.currentTimeMillis
    yield* Effect.logInfo("installed package", {
      package: `${pkg.name}@${pkg.version}`,
      source: pkg.source,
      resources: usable.length,
      skipped: skipped.length,
      ms: finished - started,
      commit_ts: commitTs,
      ...(pkg.substitutedFrom ? { substituted_from: pkg.substitutedFrom } : {})
    })
    return { installed: true, resources: usable.length, skipped }
  })
