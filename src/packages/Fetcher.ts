/**
 * PackageFetcher: given package specs and the configuration, returns the loaded packages and their
 * dependencies in dependency order. Order of resolution for `name@version`: the cache, then each
 * source of the chain (see chain.ts); an unreachable source is skipped. See docs/packages.md.
 */
import { Config, Context, Duration, Effect, Layer, Option } from "effect"
import * as Cache from "./cache.ts"
import { chain } from "./chain.ts"
import { DependencyMissing, type PackageError, PackageNotFound, PackageReferenceRefused, PackageSourceError } from "./errors.ts"
import type { HttpTimeouts } from "./http.ts"
import { conformanceTypes, type FetchResult, inCore, type LoadedPackage, type PackageWarning } from "./LoadedPackage.ts"
import { loadFolder } from "./load.ts"
import { expandHome, label, type PackageSpec, parse } from "./PackageSpec.ts"
import { loadPath, loadTgz } from "./sources/files.ts"
import type { S3Settings } from "./sources/s3.ts"
import type { Lookup, PackageSource } from "./sources/Source.ts"
import { defaultTarLimits, type TarLimits } from "./tarball.ts"
import { isExact, pick } from "./versions.ts"

/** `[fhir].version = "r4"` installs these. */
export const r4ReleaseDefaults: ReadonlyArray<string> = ["hl7.fhir.r4.core@4.0.1", "hl7.terminology.r4@7.0.1"]

const core = { name: "hl7.fhir.r4.core", version: "4.0.1" }
const examples = { name: "hl7.fhir.r4.examples", version: "4.0.1" }
const examplesLabel = `${examples.name}@${examples.version}`

export interface FetcherOptions {
  /** `conformance.package_cache`; default `~/.fhir/packages`. */
  readonly cacheDir?: string | undefined
  /** `conformance.package_registry` (several: tried in order); unset means the default chain. */
  readonly registry?: string | ReadonlyArray<string> | undefined
  /** Connect and response headers; an unreachable source is skipped after this. Default 5 s. */
  readonly responseTimeout?: Duration.DurationInput
  /** Reading a whole tarball. Default 10 min. */
  readonly bodyTimeout?: Duration.DurationInput
  /** Default: `SVC_S3_ACCESS_KEY_ID`, `SVC_S3_SECRET_ACCESS_KEY`, `SVC_S3_ENDPOINT`, `SVC_S3_REGION`. */
  readonly s3?: S3Settings
  /** How the machine's npm registry is found; default asks npm. */
  readonly npmRegistry?: Effect.Effect<Option.Option<string>>
  readonly limits?: TarLimits
}

export const optionsFromConfig = (conformance: {
  readonly package_registry?: string | undefined
  readonly package_cache?: string | undefined
}): FetcherOptions => ({ registry: conformance.package_registry, cacheDir: conformance.package_cache })

const s3FromEnv: Effect.Effect<S3Settings> = Config.all({
  accessKeyId: Config.option(Config.redacted("SVC_S3_ACCESS_KEY_ID")),
  secretAccessKey: Config.option(Config.redacted("SVC_S3_SECRET_ACCESS_KEY")),
  endpoint: Config.option(Config.string("SVC_S3_ENDPOINT")),
  region: Config.option(Config.string("SVC_S3_REGION"))
}).pipe(
  Effect.map((c): S3Settings => ({
    accessKeyId: Option.getOrUndefined(c.accessKeyId),
    secretAccessKey: Option.getOrUndefined(c.secretAccessKey),
    endpoint: Option.getOrUndefined(c.endpoint),
    region: Option.getOrUndefined(c.region)
  })),
  Effect.orElseSucceed((): S3Settings => ({}))
)

/** How a fetch treats dependencies. */
export interface FetchOptions {
  /**
   * The packages the database holds: a dependency on one of these names is met by it, whatever its version (a
   * warning says so when the versions differ): a package of the same name is never installed beside it.
   */
  readonly installed?: ReadonlyArray<{ readonly name: string; readonly version: string }>
  /** A dependency no source has fails the fetch (`DependencyMissing`) instead of being a warning. */
  readonly requireDependencies?: boolean
}

export class PackageFetcher extends Context.Tag("svc/packages/Fetcher")<PackageFetcher, {
  /** Specs are `name@version` (or `name#version`), a `.tgz` path or a directory, an archive handed over, or a reference. */
  readonly fetch: (specs: ReadonlyArray<string | PackageSpec>, options?: FetchOptions) => Effect.Effect<FetchResult, PackageError>
}>() {}

export const make = (options: FetcherOptions = {}) =>
  Effect.gen(function*() {
    const cacheDir = expandHome(options.cacheDir ?? Cache.defaultCacheDir())
    const limits = options.limits ?? defaultTarLimits
    const timeouts: HttpTimeouts = {
      response: Duration.decode(options.responseTimeout ?? Duration.seconds(5)),
      body: Duration.decode(options.bodyTimeout ?? Duration.minutes(10))
    }
    const s3 = options.s3 ?? (yield* s3FromEnv)
    const sources = yield* Effect.cached(chain({ registry: options.registry, s3, timeouts, npmRegistry: options.npmRegistry }))

    const fromCache = (name: string, version: string, request: string, onlyTypes?: ReadonlySet<string>) =>
      Effect.gen(function*() {
        const hit = yield* Cache.lookup(cacheDir, name, version)
        if (Option.isNone(hit)) return Option.none<LoadedPackage>()
        const load = { request, source: "cache", checksum: hit.value.checksum }
        return Option.some(yield* loadFolder(hit.value.folder, onlyTypes === undefined ? load : { ...load, onlyTypes }))
      })

    const fetchFound = (name: string, found: Extract<Lookup, { _tag: "Found" }>, source: PackageSource, onlyTypes?: ReadonlySet<string>) =>
      Effect.gen(function*() {
        const request = `${name}@${found.version}`
        const cached = yield* fromCache(name, found.version, request, onlyTypes)
        if (Option.isSome(cached)) return cached.value
        yield* Effect.logInfo(`downloading ${request} from ${source.label}`)
        return yield* Effect.scoped(Effect.gen(function*() {
          const work = yield* Cache.scratch(cacheDir).pipe(
            Effect.mapError((reason) => new PackageSourceError({ package: request, source: "cache", reason: `${cacheDir}: ${reason}` }))
          )
          const staged = yield* found.fetch(work)
          const load = (folder: string, checksum: string | undefined) =>
            loadFolder(folder, { request, source: source.label, checksum, ...(onlyTypes === undefined ? {} : { onlyTypes }) }).pipe(
              Effect.filterOrFail(
                (pkg) => pkg.name === name && pkg.version === found.version,
                (pkg) => new PackageSourceError({ package: request, source: source.label, reason: `the tarball holds ${pkg.name}@${pkg.version}` })
              )
            )
          return yield* staged._tag === "Folder"
            ? load(staged.folder, undefined)
            : Cache.install(cacheDir, name, found.version, { ...staged, source: source.label }, (folder) => load(folder, staged.sha256), limits)
        }))
      })

    const substituted = (pkg: LoadedPackage, where: string) =>
      Effect.as(
        Effect.logInfo(`${core.name}@${core.version} is not in ${where}: its conformance resources are taken from ${examplesLabel}`),
        { ...pkg, name: core.name, version: core.version, substitutedFrom: examplesLabel, resources: pkg.resources.filter(({ resource }) => inCore(resource)) }
      )

    /** `unreachable` holds the sources that did not answer earlier in the same fetch: they are not waited for again. */
    const resolveNamed = (name: string, wanted: string, unreachable: Set<string>): Effect.Effect<LoadedPackage, PackageError> =>
      Effect.gen(function*() {
        const request = `${name}@${wanted}`
        const stands = name === core.name && wanted === core.version
        if (isExact(wanted)) {
          const hit = yield* fromCache(name, wanted, request)
          if (Option.isSome(hit)) return hit.value
          if (stands) {
            const alt = yield* fromCache(examples.name, examples.version, request, conformanceTypes)
            if (Option.isSome(alt)) return yield* substituted(alt.value, "the cache")
          }
        }
        const tried: Array<string> = []
        for (const source of yield* sources) {
          if (unreachable.has(source.label)) {
            tried.push(`${source.label} (unreachable earlier)`)
            continue
          }
          const found = yield* source.lookup(name, wanted)
          if (found._tag === "Found") return yield* fetchFound(name, found, source)
          tried.push(`${source.label} (${found.reason})`)
          if (found._tag === "Unreachable") {
            unreachable.add(source.label)
            yield* Effect.logWarning(`package source ${source.label} is unreachable (${found.reason}); trying the next`)
          } else if (stands) {
            const alt = yield* source.lookup(examples.name, examples.version)
            if (alt._tag === "Found") return yield* substituted(yield* fetchFound(examples.name, alt, source, conformanceTypes), source.label)
          }
        }
        if (!isExact(wanted)) {
          const version = pick(yield* Cache.versions(cacheDir, name), {}, wanted)
          const hit = version === undefined ? Option.none() : yield* fromCache(name, version, request)
          if (Option.isSome(hit)) {
            yield* Effect.logWarning(`no package source answered for ${request}: using ${hit.value.version} from the cache`)
            return hit.value
          }
        }
        return yield* new PackageNotFound({ package: request, tried: [`cache ${cacheDir}`, ...tried] })
      })

    /** A tarball by URL, from the configured source it lies within (`PackageSource.download`); refused when none holds it. */
    const fetchReference = (url: string): Effect.Effect<LoadedPackage, PackageError> =>
      Effect.gen(function*() {
        if (!URL.canParse(url)) return yield* new PackageReferenceRefused({ reference: url, reason: "it is not a URL" })
        const reference = new URL(url)
        // Shown without a user name or password, should it carry one.
        const shown = new URL(url)
        shown.username = ""
        shown.password = ""
        const refused = (reason: string) => new PackageReferenceRefused({ reference: shown.href, reason })
        if (reference.username !== "" || reference.password !== "") return yield* refused("a URL may not carry a user name or password")
        if (!["http:", "https:", "s3:"].includes(reference.protocol)) return yield* refused("only http(s):// and s3:// URLs are taken")
        return yield* Effect.scoped(Effect.gen(function*() {
          const work = yield* Cache.tempDir().pipe(Effect.mapError((reason) => new PackageSourceError({ package: shown.href, source: "reference", reason })))
          for (const source of yield* sources) {
            const download = source.download?.(reference, work)
            if (download === undefined) continue
            yield* Effect.logInfo(`downloading ${url} from ${source.label}`)
            const staged = yield* download
            const names = { request: url, source: `${source.label}: ${url}` }
            return yield* staged._tag === "Folder" ? loadFolder(staged.folder, names) : loadTgz(staged.file, names, limits)
          }
          return yield* refused(`it lies within none of the package sources (${(yield* sources).map((source) => source.label).join("; ")})`)
        }))
      })

    const load = (spec: Exclude<PackageSpec, { readonly _tag: "Named" }>): Effect.Effect<LoadedPackage, PackageError> => {
      switch (spec._tag) {
        case "Path":
          return loadPath(spec.path, limits)
        case "Archive":
          return loadTgz(spec.file, { request: spec.source, source: spec.source }, limits)
        case "Reference":
          return fetchReference(spec.url)
      }
    }

    const fetch = (specs: ReadonlyArray<string | PackageSpec>, options: FetchOptions = {}): Effect.Effect<FetchResult, PackageError> =>
      Effect.gen(function*() {
        const installed = new Map((options.installed ?? []).map((pkg) => [pkg.name, pkg.version]))
        const loaded = new Map<string, LoadedPackage>()
        const visiting = new Set<string>()
        const order: Array<LoadedPackage> = []
        const warnings: Array<PackageWarning> = []
        const unreachable = new Set<string>()

        const dependencies = (pkg: LoadedPackage): Array<PackageSpec> =>
          Object.entries(pkg.manifest["dependencies"] ?? {})
            .filter((e): e is [string, string] => typeof e[1] === "string")
            .map(([name, version]) => ({ _tag: "Named", name, version }))

        const visit = (spec: PackageSpec, requiredBy: string | undefined): Effect.Effect<void, PackageError> =>
          Effect.gen(function*() {
            if (spec._tag === "Named") {
              const held = requiredBy === undefined ? undefined : installed.get(spec.name)
              if (held !== undefined && requiredBy !== undefined) {
                if (held !== spec.version && pick([held], {}, spec.version) === undefined) {
                  warnings.push({
                    package: label(spec),
                    requiredBy,
                    message: `${label(spec)} is wanted by ${requiredBy}, but ${spec.name}@${held} is installed: keeping it`
                  })
                }
                return
              }
              const already = loaded.get(spec.name)
              if (already !== undefined || visiting.has(spec.name)) {
                if (already !== undefined && already.version !== spec.version && pick([already.version], {}, spec.version) === undefined) {
                  warnings.push({
                    package: label(spec),
                    requiredBy: requiredBy ?? "the configuration",
                    message: `${label(spec)} is wanted by ${requiredBy ?? "the configuration"}, but ${spec.name}@${already.version} is already loaded: keeping it`
                  })
                }
                return
              }
            }
            const result = yield* (spec._tag === "Named" ? resolveNamed(spec.name, spec.version, unreachable) : load(spec)).pipe(
              Effect.map(Option.some),
              Effect.catchTag("PackageNotFound", (error): Effect.Effect<Option.Option<LoadedPackage>, PackageError> =>
                requiredBy === undefined
                  ? Effect.fail(error)
                  : options.requireDependencies === true
                  ? Effect.fail(new DependencyMissing({ package: error.package, requiredBy, reason: error.message }))
                  : Effect.as(Effect.sync(() => warnings.push({ package: error.package, requiredBy, message: `${error.message} (required by ${requiredBy})` })), Option.none()))
            )
            if (Option.isNone(result)) return
            const pkg = result.value
            if (loaded.has(pkg.name) || visiting.has(pkg.name)) return
            visiting.add(pkg.name)
            for (const dependency of dependencies(pkg)) yield* visit(dependency, `${pkg.name}@${pkg.version}`)
            visiting.delete(pkg.name)
            loaded.set(pkg.name, pkg)
            order.push(pkg)
          })

        for (const spec of specs) yield* visit(typeof spec === "string" ? yield* parse(spec) : spec, undefined)
        for (const warning of warnings) yield* Effect.logWarning(warning.message)
        return { packages: order, warnings }
      })

    return PackageFetcher.of({ fetch })
  })

export const layer = (options: FetcherOptions = {}): Layer.Layer<PackageFetcher> => Layer.effect(PackageFetcher, make(options))
