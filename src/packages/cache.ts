/**
 * The package cache, in the FHIR layout `<dir>/<name>#<version>/package/...`, shared with other FHIR
 * tools. An entry is written to a temporary folder and renamed into place, so a half-unpacked package
 * is never seen. `.svc-tarball-sha256` beside `package/` keeps the tarball's checksum for later loads.
 */
import { Effect, Option, type Scope } from "effect"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"
import { causeText, PackageSourceError } from "./errors.ts"
import { defaultTarLimits, extractTgz, type TarLimits } from "./tarball.ts"

export const defaultCacheDir = (): string => Path.join(Os.homedir(), ".fhir", "packages")

const checksumFile = ".svc-tarball-sha256"

export interface CachedPackage {
  /** The folder holding package.json. */
  readonly folder: string
  readonly checksum: string | undefined
}

export const entryDir = (cacheDir: string, name: string, version: string): string => Path.join(cacheDir, `${name}#${version}`)

export const lookup = (cacheDir: string, name: string, version: string): Effect.Effect<Option.Option<CachedPackage>> =>
  Effect.gen(function*() {
    const entry = entryDir(cacheDir, name, version)
    const folder = Path.join(entry, "package")
    const present = yield* Effect.tryPromise(() => Fs.stat(Path.join(folder, "package.json"))).pipe(Effect.option)
    if (Option.isNone(present)) return Option.none()
    const checksum = yield* Effect.tryPromise(() => Fs.readFile(Path.join(entry, checksumFile), "utf8")).pipe(
      Effect.map((text) => text.trim()),
      Effect.option
    )
    return Option.some({ folder, checksum: Option.getOrUndefined(checksum) })
  })

/** The versions of `name` the cache holds. */
export const versions = (cacheDir: string, name: string): Effect.Effect<ReadonlyArray<string>> =>
  Effect.tryPromise(() => Fs.readdir(cacheDir)).pipe(
    Effect.map((entries) => entries.filter((e) => e.startsWith(`${name}#`)).map((e) => e.slice(name.length + 1))),
    Effect.orElseSucceed(() => [])
  )

/** A fresh scratch folder inside the cache directory (same file system, so the final rename is atomic). */
export const scratch = (cacheDir: string): Effect.Effect<string, string, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: async () => {
        await Fs.mkdir(cacheDir, { recursive: true })
        return Fs.mkdtemp(Path.join(cacheDir, ".svc-tmp-"))
      },
      catch: causeText
    }),
    (dir) => Effect.promise(() => Fs.rm(dir, { recursive: true, force: true }))
  )

/**
 * Unpacks a tarball into the cache as `name#version`. `check` reads the unpacked folder first: a
 * package it refuses is never cached.
 */
export const install = <A, E>(
  cacheDir: string,
  name: string,
  version: string,
  tarball: { readonly file: string; readonly sha256: string; readonly source: string },
  check: (folder: string) => Effect.Effect<A, E>,
  limits: TarLimits = defaultTarLimits
): Effect.Effect<A, E | PackageSourceError> =>
  Effect.scoped(Effect.gen(function*() {
    const failed = (reason: string) => new PackageSourceError({ package: `${name}@${version}`, source: tarball.source, reason })
    const work = yield* scratch(cacheDir).pipe(Effect.mapError((reason) => failed(`cache ${cacheDir}: ${reason}`)))
    const staging = Path.join(work, "entry")
    yield* Effect.tryPromise({
      try: async () => {
        await Fs.mkdir(staging)
        await extractTgz(tarball.file, staging, limits)
      },
      catch: (cause) => failed(`cannot unpack the tarball: ${causeText(cause)}`)
    })
    const result = yield* check(Path.join(staging, "package"))
    yield* Effect.tryPromise({
      try: async () => {
        await Fs.writeFile(Path.join(staging, checksumFile), `${tarball.sha256}\n`)
        await Fs.rename(staging, entryDir(cacheDir, name, version)).catch(async (cause: NodeJS.ErrnoException) => {
          // Another process cached the same package meanwhile: keep theirs.
          if (cause.code !== "EEXIST" && cause.code !== "ENOTEMPTY") throw cause
        })
      },
      catch: (cause) => failed(`cannot write the cache ${cacheDir}: ${causeText(cause)}`)
    })
    return result
  }))

/** A temporary folder outside the cache, e.g. to unpack a local `.tgz` that is not cached. */
export const tempDir = (): Effect.Effect<string, string, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.tryPromise({ try: () => Fs.mkdtemp(Path.join(Os.tmpdir(), "svc-pkg-")), catch: causeText }),
    (dir) => Effect.promise(() => Fs.rm(dir, { recursive: true, force: true }))
  )
