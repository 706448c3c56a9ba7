/**
 * Installing a package while the server serves (`$install`, docs/packages.md): one install job at a time, each
 * in the background of the process that holds the writer lease. A job fetches the package and the dependencies
 * the database lacks (a missing one fails the job), installs them in one transaction (Installer.ts), waits
 * until the catalog holds them (CatalogReload) and asks the search index backfill to cover them. A job that
 * fails has changed nothing. Jobs are kept in memory: the last `keptJobs`, until the process stops.
 */
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Context, Deferred, Duration, Effect, Exit, Layer, Option, Schema, Scope } from "effect"
import { randomUUID } from "node:crypto"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { CatalogService } from "../catalog/CatalogService.ts"
import type { Database } from "../db/Database.ts"
import type { Writer } from "../db/Writer.ts"
import type { LeaseLost } from "../db/WriterLease.ts"
import { Backfill } from "../search/Backfill.ts"
import { CatalogReload } from "../search/CatalogReload.ts"
import { tempDir } from "./cache.ts"
import { type PackageError, PackageSourceError } from "./errors.ts"
import { PackageFetcher } from "./Fetcher.ts"
import { type InstalledPackage, installedPackages, installPackages } from "./Installer.ts"
import type { PackageSpec } from "./PackageSpec.ts"
import { isExact } from "./versions.ts"

/** What to install: a package by name, an archive handed over, or a tarball by URL within a configured source. */
export type InstallRequest =
  | { readonly _tag: "Named"; readonly name: string; readonly version: string }
  | { readonly _tag: "Archive"; readonly bytes: Uint8Array }
  | { readonly _tag: "Reference"; readonly url: string }

/** Another version of the package is installed: the two cannot stand side by side (their resources share ids). */
export class InstallConflict extends Schema.TaggedError<InstallConflict>()("InstallConflict", {
  package: Schema.String,
  installed: Schema.String
}) {
  override get message(): string {
    return `${this.installed} is installed: ${this.package} cannot be installed beside it (a package is installed at one version)`
  }
}

export type InstallFailure = PackageError | InstallConflict | SqlError | LeaseLost

export interface PackageReport {
  readonly name: string
  readonly version: string
  readonly source: string
  readonly checksum: string
  /** `installed` by this job, or `already-installed` (nothing changed). */
  readonly status: "installed" | "already-installed"
  /** Installed as a dependency of the package asked for. */
  readonly dependency: boolean
  readonly resources: number
  readonly types: Readonly<Record<string, number>>
}

export interface InstallReport {
  readonly packages: ReadonlyArray<PackageReport>
  readonly warnings: ReadonlyArray<string>
  /** The commit that installed them; undefined when nothing changed. */
  readonly commitTs: number | undefined
  /** The catalog generation that holds them. */
  readonly generation: number
  /** The catalog had not caught up with the commit when the job ended (see `catalogWait`). */
  readonly catalogPending: boolean
}

export interface JobView {
  readonly id: string
  readonly state: "running" | "completed" | "failed"
  /** What it does now, in words (`X-Progress`). */
  readonly progress: string
  /** Set once it has ended. */
  readonly exit: Exit.Exit<InstallReport, InstallFailure> | undefined
}

export class PackageInstalls extends Context.Tag("svc/packages/PackageInstalls")<PackageInstalls, {
  /** Starts a job in the background (it goes on whoever waits for it); its id. */
  readonly start: (request: InstallRequest) => Effect.Effect<string>
  /** The job `id`, waiting at most `wait` for it to end; undefined when no such job is kept. */
  readonly status: (id: string, wait?: Duration.DurationInput) => Effect.Effect<JobView | undefined>
  /** Waits for the job `id` to end. */
  readonly result: (id: string) => Effect.Effect<Exit.Exit<InstallReport, InstallFailure> | undefined>
  /** The packages the database holds. */
  readonly installed: Effect.Effect<ReadonlyArray<InstalledPackage>, SqlError>
}>() {}

/** Finished jobs kept for their status, the oldest dropped first. */
export const keptJobs = 100

/** How long a job waits for the catalog to hold what it installed before it ends anyway (saying so). */
export const catalogWait = Duration.minutes(2)

/** The source an archive handed to `$install` is recorded with. */
export const archiveSource = "$install request body"

interface Job {
  readonly id: string
  progress: string
  exit: Exit.Exit<InstallReport, InstallFailure> | undefined
  readonly done: Deferred.Deferred<Exit.Exit<InstallReport, InstallFailure>>
}

const labelOf = (request: InstallRequest): string =>
  request._tag === "Named" ? `${request.name}@${request.version}` : request._tag === "Reference" ? request.url : archiveSource

export const make = Effect.gen(function*() {
  const scope = yield* Effect.scope
  const context = yield* Effect.context<PackageFetcher | Database | Writer | CatalogReload | Backfill | CatalogService>()
  const fetcher = yield* PackageFetcher
  const reload = yield* CatalogReload
  const backfill = yield* Backfill
  const catalogs = yield* CatalogService
  const jobs = new Map<string, Job>()
  const oneAtATime = yield* Effect.makeSemaphore(1)

  /** Writes an archive handed over to a temporary file, for the fetcher to unpack under its limits. */
  const specOf = (request: InstallRequest): Effect.Effect<PackageSpec, PackageSourceError, Scope.Scope> => {
    if (request._tag !== "Archive") return Effect.succeed(request)
    return Effect.gen(function*() {
      const failed = (reason: string) => new PackageSourceError({ package: archiveSource, source: archiveSource, reason })
      const dir = yield* tempDir().pipe(Effect.mapError(failed))
      const file = Path.join(dir, "package.tgz")
      yield* Effect.tryPromise({ try: () => Fs.writeFile(file, request.bytes), catch: () => failed("the archive could not be written to a temporary file") })
      return { _tag: "Archive", file, source: archiveSource } as const
    })
  }

  const already = (pkg: InstalledPackage): PackageReport => ({
    name: pkg.name,
    version: pkg.version,
    source: pkg.source,
    checksum: pkg.checksum,
    status: "already-installed",
    dependency: false,
    resources: pkg.resources,
    types: {}
  })

  const unchanged = (pkg: InstalledPackage) =>
    Effect.map(catalogs.get, (catalog): InstallReport => ({ packages: [already(pkg)], warnings: [], commitTs: undefined, generation: catalog.generation, catalogPending: false }))

  const run = (job: Job, request: InstallRequest): Effect.Effect<InstallReport, InstallFailure, Database | Writer> =>
    Effect.gen(function*() {
      job.progress = "resolving"
      const installed = yield* installedPackages
      const held = (name: string) => installed.find((pkg) => pkg.name === name)
      if (request._tag === "Named" && isExact(request.version)) {
        const same = held(request.name)
        if (same !== undefined) {
          if (same.version === request.version) return yield* unchanged(same)
          return yield* new InstallConflict({ package: `${request.name}@${request.version}`, installed: `${same.name}@${same.version}` })
        }
      }
      job.progress = `fetching ${labelOf(request)}`
      const fetched = yield* Effect.scoped(Effect.flatMap(specOf(request), (spec) => fetcher.fetch([spec], { installed, requireDependencies: true })))
      // Dependency order: the package asked for comes last.
      const asked = fetched.packages[fetched.packages.length - 1]!
      const same = held(asked.name)
      if (same !== undefined) {
        if (same.version === asked.version) return yield* unchanged(same)
        return yield* new InstallConflict({ package: `${asked.name}@${asked.version}`, installed: `${same.name}@${same.version}` })
      }
      job.progress = "installing"
      const { outcomes, commitTs } = yield* installPackages(fetched.packages, (pkg, done, total) => {
        job.progress = `installing ${pkg}: ${done} of ${total} resources written`
      })
      let catalogPending = false
      if (commitTs !== undefined) {
        job.progress = "rebuilding the catalog"
        catalogPending = Option.isNone(yield* Effect.timeoutOption(reload.reached(commitTs), catalogWait))
        // Resources of types whose search parameters did not change (examples) are indexed by this request.
        yield* backfill.request(yield* catalogs.get)
      }
      const packages = fetched.packages.map((pkg, index): PackageReport => ({
        name: pkg.name,
        version: pkg.version,
        source: pkg.source,
        checksum: pkg.checksum,
        status: outcomes[index]!.installed ? "installed" : "already-installed",
        dependency: pkg !== asked,
        resources: outcomes[index]!.resources,
        types: outcomes[index]!.types
      }))
      return {
        packages,
        warnings: fetched.warnings.map((warning) => warning.message),
        commitTs,
        generation: (yield* catalogs.get).generation,
        catalogPending
      }
    })

  /** Drops the oldest finished jobs beyond `keptJobs`. */
  const prune = Effect.sync(() => {
    const finished = [...jobs.values()].filter((job) => job.exit !== undefined)
    for (const job of finished.slice(0, Math.max(0, finished.length - keptJobs))) jobs.delete(job.id)
  })

  const start = (request: InstallRequest) =>
    Effect.gen(function*() {
      const id = randomUUID()
      const job: Job = { id, progress: "queued", exit: undefined, done: yield* Deferred.make<Exit.Exit<InstallReport, InstallFailure>>() }
      jobs.set(id, job)
      const started = yield* Clock.currentTimeMillis
      yield* oneAtATime.withPermits(1)(run(job, request)).pipe(
        Effect.provide(context),
        Effect.exit,
        Effect.tap((exit) =>
          Effect.gen(function*() {
            const ms = (yield* Clock.currentTimeMillis) - started
            if (Exit.isFailure(exit)) yield* Effect.logWarning("package install failed; nothing was installed", { job: id, request: labelOf(request), ms, cause: exit.cause })
            else yield* Effect.logInfo("package install finished", { job: id, request: labelOf(request), ms, commit_ts: exit.value.commitTs ?? null })
            job.exit = exit
            job.progress = Exit.isSuccess(exit) ? "completed" : "failed"
            yield* Deferred.succeed(job.done, exit)
            yield* prune
          })
        ),
        // The job runs in the service's scope: the caller that started it may go away.
        Effect.forkIn(scope)
      )
      return id
    })

  const view = (job: Job): JobView => ({
    id: job.id,
    state: job.exit === undefined ? "running" : Exit.isSuccess(job.exit) ? "completed" : "failed",
    progress: job.progress,
    exit: job.exit
  })

  const status = (id: string, wait?: Duration.DurationInput) =>
    Effect.gen(function*() {
      const job = jobs.get(id)
      if (job === undefined) return undefined
      if (wait !== undefined && job.exit === undefined) yield* Effect.timeoutOption(Deferred.await(job.done), wait)
      return view(job)
    })

  const result = (id: string) =>
    Effect.suspend(() => {
      const job = jobs.get(id)
      return job === undefined ? Effect.succeed(undefined) : Deferred.await(job.done)
    })

  return PackageInstalls.of({ start, status, result, installed: Effect.provide(installedPackages, context) })
})

export const layer = Layer.scoped(PackageInstalls, make)
