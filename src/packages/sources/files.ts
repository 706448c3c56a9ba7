/**
 * A package given as a path: a `.tgz` (unpacked to a temporary folder, not cached) or a directory
 * holding either `package/package.json` (the FHIR layout) or `package.json` itself.
 */
import { Effect } from "effect"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { tempDir } from "../cache.ts"
import { causeText, type PackageError, PackagePathNotFound, PackageSourceError } from "../errors.ts"
import { hashFile } from "../http.ts"
import type { LoadedPackage } from "../LoadedPackage.ts"
import { loadFolder } from "../load.ts"
import { extractTgz, type TarLimits } from "../tarball.ts"

const exists = (path: string) => Effect.tryPromise(() => Fs.stat(path)).pipe(Effect.option)

export const loadPath = (path: string, limits: TarLimits): Effect.Effect<LoadedPackage, PackageError> =>
  Effect.gen(function*() {
    const stat = yield* Effect.tryPromise(() => Fs.stat(path)).pipe(Effect.mapError(() => new PackagePathNotFound({ path })))
    if (stat.isDirectory()) {
      const source = `directory ${path}`
      const nested = Path.join(path, "package")
      const folder = (yield* exists(Path.join(nested, "package.json")))._tag === "Some" ? nested : path
      return yield* loadFolder(folder, { request: path, source })
    }
    return yield* loadTgz(path, { request: path, source: `file ${path}` }, limits)
  })

/**
 * A `.tgz` on disk (a `--package` file, an archive sent to `$install`, a download), unpacked to a temporary
 * folder under `limits` (the archive is untrusted: tarball.ts) and read; nothing is cached.
 */
export const loadTgz = (
  path: string,
  names: { readonly request: string; readonly source: string },
  limits: TarLimits
): Effect.Effect<LoadedPackage, PackageError> =>
  Effect.gen(function*() {
    const failed = (reason: string) => new PackageSourceError({ package: names.request, source: names.source, reason })
    return yield* Effect.scoped(Effect.gen(function*() {
      const work = yield* tempDir().pipe(Effect.mapError(failed))
      const sha256 = yield* hashFile(path).pipe(Effect.mapError(failed))
      yield* Effect.tryPromise({
        try: () => extractTgz(path, work, limits),
        catch: (cause) => failed(`cannot unpack: ${causeText(cause)}`)
      })
      return yield* loadFolder(Path.join(work, "package"), { ...names, checksum: sha256 })
    }))
  })
