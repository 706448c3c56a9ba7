/**
 * Installs loaded packages into the database: each package once, in one Writer command (one
 * transaction; `installPackages` puts several in the same one, so that all or none are installed), its
 * resources becoming ordinary resources of the server, recorded in `svc_packages` with name, version,
 * source and checksum.
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
  /** How many of each resource type it installed. */
  readonly types: Readonly<Record<string, number>>
}

/** Told how far an install has got: resources written of the package's total. */
export type InstallProgress = (pkg: string, done: number, total: number) => void

const progressEvery = 250

/** The resources of a package the installer writes: one per type and id (the last file wins), and the files left out. */
const usableOf = (pkg: InstallablePackage) => {
  const byKey = new Map<string, Record<string, unknown>>()
  const skipped: Array<string> = []
  for (const { file, resource } of pkg.resources) {
    const type = resource["resourceType"]
    const id = resource["id"]
    if (typeof type === "string" && typeof id === "string" && idPattern.test(id)) byKey.set(`${type}/${id}`, resource)
    else skipped.push(file)
  }
  return { usable: [...byKey.values()], skipped }
}

const countTypes = (resources: ReadonlyArray<Record<string, unknown>>): Record<string, number> => {
  const types: Record<string, number> = {}
  for (const resource of resources) {
    const type = String(resource["resourceType"])
    types[type] = (types[type] ?? 0) + 1
  }
  return types
}

/** Installs one package unless the database has it already. */
export const installPackage = (
  pkg: InstallablePackage,
  progress?: InstallProgress
): Effect.Effect<InstallOutcome, SqlError | LeaseLost, Database | Writer> =>
  Effect.map(installPackages([pkg], progress), (result) => result.outcomes[0]!)

/**
 * Installs the packages the database does not have yet, all in one Writer command: one transaction, so that
 * either every one of them is installed or none is. A resource that two of them hold is written once, as the
 * later one has it (packages come in dependency order). `commitTs` is undefined when none was installed.
 */
export const installPackages = (
  pkgs: ReadonlyArray<InstallablePackage>,
  progress?: InstallProgress
): Effect.Effect<{ readonly outcomes: ReadonlyArray<InstallOutcome>; readonly commitTs: number | undefined }, SqlError | LeaseLost, Database | Writer> =>
  Effect.gen(function*() {
    const missing = yield* Effect.forEach(pkgs, (pkg) => Effect.map(isInstalled(pkg.name, pkg.version), (has) => !has))
    const chosen = pkgs.flatMap((pkg, index) => (missing[index] ? [{ pkg, ...usableOf(pkg) }] : []))
    const skippedOutcome: InstallOutcome = { installed: false, resources: 0, skipped: [], types: {} }
    if (chosen.length === 0) return { outcomes: pkgs.map(() => skippedOutcome), commitTs: undefined }
    const { writer: sql } = yield* Database
    const writer = yield* Writer
    const started = yield* Clock.currentTimeMillis
    // One version per resource in the commit: of a type/id written by two packages, the later one's.
    const written = new Map<string, { readonly resource: Record<string, unknown>; readonly label: string }>()
    for (const { pkg, usable } of chosen) {
      for (const resource of usable) written.set(`${String(resource["resourceType"])}/${String(resource["id"])}`, { resource, label: `${pkg.name}@${pkg.version}` })
    }
    const { commitTs } = yield* writer.commit(({ commitTs, record }) =>
      Effect.gen(function*() {
        const entries: Array<StoredEntry> = []
        for (const { pkg, usable } of chosen) {
          const label = `${pkg.name}@${pkg.version}`
          let done = 0
          for (const resource of usable) {
            const type = String(resource["resourceType"])
            const id = String(resource["id"])
            done++
            if (written.get(`${type}/${id}`)?.label !== label) continue
            const stored = yield* putVersion(sql, { type, id, resource, commitTs })
            record({ type, id, version: stored.version, op: stored.version === 1 ? "create" : "update", resource: stored.content })
            if (hasEntries(type)) entries.push(entryOf(stored.rkey, stored.version, stored.resource, stored.content))
            if (progress && done % progressEvery === 0) progress(label, done, usable.length)
          }
          progress?.(label, usable.length, usable.length)
          yield* sql`
            INSERT INTO svc_packages (name, version, source, checksum, substituted_from, resources, commit_ts, installed_at)
            VALUES (${pkg.name}, ${pkg.version}, ${pkg.source}, ${pkg.checksum}, ${pkg.substitutedFrom ?? null},
                    ${usable.length}, ${commitTs}, ${instantOf(commitTs)})`
        }
        // What the catalog keeps of each conformance resource, so that no start has to read them again.
        yield* writeEntries(sql, entries)
      })
    )
    const finished = yield* Clock.currentTimeMillis
    for (const { pkg, usable, skipped } of chosen) {
      yield* Effect.logInfo("installed package", {
        package: `${pkg.name}@${pkg.version}`,
        source: pkg.source,
        resources: usable.length,
        skipped: skipped.length,
        ms: finished - started,
        commit_ts: commitTs,
        ...(pkg.substitutedFrom ? { substituted_from: pkg.substitutedFrom } : {})
      })
    }
    const outcomes = pkgs.map((pkg): InstallOutcome => {
      const done = chosen.find((c) => c.pkg === pkg)
      return done === undefined
        ? skippedOutcome
        : { installed: true, resources: done.usable.length, skipped: done.skipped, types: countTypes(done.usable) }
    })
    return { outcomes, commitTs }
  })
