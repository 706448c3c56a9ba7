/**
 * Start-up's conformance step (spec: Command line rules 5-6): install the release defaults of
 * `fhir.version` and the configured packages that the database does not have yet, then build the
 * Catalog from the conformance resources stored in the database.
 */
import { Clock, type Duration, Effect } from "effect"
import { type Catalog, fromEntries } from "../catalog/Catalog.ts"
import { storedEntries } from "../catalog/stored.ts"
import { r4ReleaseDefaults, PackageFetcher } from "../packages/Fetcher.ts"
import { type InstallProgress, installedPackages, installPackage, isInstalled } from "../packages/Installer.ts"
import { parse } from "../packages/PackageSpec.ts"
import { isExact } from "../packages/versions.ts"
import { Readiness, Reasons } from "../http/Readiness.ts"
import { Backfill, progressDetails } from "../search/Backfill.ts"

export const releaseDefaults = (fhirVersion: string): ReadonlyArray<string> => (fhirVersion === "r4" ? r4ReleaseDefaults : [])

/** Whether the database already has the package a spec names exactly (a path or a range is fetched to know). */
const alreadyInstalled = (text: string) =>
  Effect.flatMap(parse(text), (spec) =>
    spec._tag === "Named" && isExact(spec.version) ? isInstalled(spec.name, spec.version) : Effect.succeed(false))

/** A progress bar on standard error when it is a terminal; nothing otherwise (the log has a line per package). */
export const terminalProgress = (stream: NodeJS.WriteStream): InstallProgress | undefined => {
  if (!stream.isTTY) return undefined
  return (pkg, done, total) => {
    const width = 30
    const filled = total === 0 ? width : Math.round((done / total) * width)
    stream.write(`\r${pkg} [${"#".repeat(filled)}${" ".repeat(width - filled)}] ${done}/${total}`)
    if (done === total) stream.write("\n")
  }
}

export const installConfiguredPackages = (specs: ReadonlyArray<string>, progress?: InstallProgress) =>
  Effect.gen(function*() {
    const missing = yield* Effect.filter(specs, (spec) => Effect.map(alreadyInstalled(spec), (has) => !has))
    if (missing.length === 0) return
    const fetcher = yield* PackageFetcher
    // The fetcher logs its own warnings (missing dependencies). A dependency on a package the database holds is
    // met by it: another version of it is never installed beside it.
    const result = yield* fetcher.fetch(missing, { installed: yield* installedPackages })
    for (const pkg of result.packages) yield* installPackage(pkg, progress)
  })

/**
 * Every current conformance resource in the database, compiled from the entries stored beside them
 * (made first for resources that have none: after an install, this takes a few seconds once).
 */
export const buildCatalog = (generation: number) =>
  Effect.gen(function*() {
    const started = yield* Clock.currentTimeMillis
    const { entries, made } = yield* storedEntries
    const catalog = fromEntries(entries, generation)
    const finished = yield* Clock.currentTimeMillis
    yield* Effect.logInfo("catalog built", {
      generation,
      resources: entries.length,
      entries_made: made,
      resource_types: catalog.resourceTypes.length,
      problems: catalog.problems.length,
      ms: finished - started
    })
    for (const problem of catalog.problems.slice(0, 20)) {
      yield* Effect.logDebug("catalog problem", { ...problem })
    }
    return catalog
  })

/**
 * A replica's conformance step (docs/cluster.md): it installs nothing; it waits until the primary has installed
 * every package named by an exact version (the release defaults and the configured ones), then builds its catalog
 * from the database.
 */
export const awaitConformance = (options: { readonly fhirVersion: string; readonly packages: ReadonlyArray<string> }, every: Duration.DurationInput) =>
  Effect.gen(function*() {
    const readiness = yield* Readiness
    yield* readiness.starting(Reasons.waitingForPrimary)
    const specs = [...releaseDefaults(options.fhirVersion), ...options.packages]
    const exact = yield* Effect.filter(specs, (spec) => Effect.map(parse(spec), (parsed) => parsed._tag === "Named" && isExact(parsed.version)))
    const installed = Effect.map(Effect.forEach(exact, alreadyInstalled), (found) => found.every(Boolean))
    while (!(yield* installed)) yield* Effect.sleep(every)
    yield* readiness.starting(Reasons.buildingCatalog)
    return yield* buildCatalog(1)
  })

export const prepareConformance = (options: { readonly fhirVersion: string; readonly packages: ReadonlyArray<string> }) =>
  Effect.gen(function*() {
    const readiness = yield* Readiness
    yield* readiness.starting(Reasons.installingPackages)
    yield* installConfiguredPackages(
      [...releaseDefaults(options.fhirVersion), ...options.packages],
      terminalProgress(process.stderr)
    )
    yield* readiness.starting(Reasons.buildingCatalog)
    return yield* buildCatalog(1)
  })

/**
 * Start-up's indexing step (spec: Readiness, "search indexes backfilled"): the resources the installed
 * packages brought and those of types whose search parameters changed are indexed before serving.
 */
export const indexForSearch = (catalog: Catalog) =>
  Effect.gen(function*() {
    const readiness = yield* Readiness
    const backfill = yield* Backfill
    yield* readiness.starting(Reasons.indexing, Effect.map(backfill.progress, (progress) => ({ search_index: progressDetails(progress) })))
    return yield* backfill.run(catalog)
  })

export type { Catalog }
