/**
 * A mirror directory. A package `name@version` is found in one of these layouts
 *   <dir>/<name>#<version>/package/package.json   (the FHIR package-cache layout; used in place)
 *   <dir>/<name>#<version>.tgz
 *   <dir>/<name>/-/<name>-<version>.tgz           (the npm registry layout)
 */
import { Effect } from "effect"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { hashFile } from "../http.ts"
import { PackageSourceError } from "../errors.ts"
import { pick } from "../versions.ts"
import type { Lookup, PackageSource, Staged } from "./Source.ts"

type Entry = { readonly kind: "folder" | "tarball"; readonly path: string }

const listDir = (dir: string): Effect.Effect<ReadonlyArray<string>> =>
  Effect.tryPromise(() => Fs.readdir(dir)).pipe(Effect.orElseSucceed(() => []))

const exists = (path: string): Effect.Effect<boolean> =>
  Effect.tryPromise(() => Fs.stat(path)).pipe(Effect.as(true), Effect.orElseSucceed(() => false))

export const mirrorSource = (dir: string): PackageSource => {
  const label = `mirror ${dir}`

  const entries = (name: string): Effect.Effect<Map<string, Entry>> =>
    Effect.gen(function*() {
      const found = new Map<string, Entry>()
      const npmDir = Path.join(dir, name, "-")
      for (const file of yield* listDir(npmDir)) {
        const prefix = `${name}-`
        if (file.startsWith(prefix) && file.endsWith(".tgz")) {
          found.set(file.slice(prefix.length, -4), { kind: "tarball", path: Path.join(npmDir, file) })
        }
      }
      for (const file of yield* listDir(dir)) {
        if (!file.startsWith(`${name}#`)) continue
        const path = Path.join(dir, file)
        if (file.endsWith(".tgz")) {
          found.set(file.slice(name.length + 1, -4), { kind: "tarball", path })
        } else if (yield* exists(Path.join(path, "package", "package.json"))) {
          found.set(file.slice(name.length + 1), { kind: "folder", path: Path.join(path, "package") })
        }
      }
      return found
    })

  const lookup = (name: string, wanted: string): Effect.Effect<Lookup> =>
    Effect.gen(function*() {
      if (!(yield* exists(dir))) return { _tag: "Unreachable", reason: "the directory does not exist" } as const
      const found = yield* entries(name)
      const version = pick([...found.keys()], {}, wanted)
      const entry = version === undefined ? undefined : found.get(version)
      if (version === undefined || entry === undefined) {
        return { _tag: "Missing", reason: found.size === 0 ? "no such package" : `no version matches ${wanted}` } as const
      }
      const fetch = (): Effect.Effect<Staged, PackageSourceError> =>
        entry.kind === "folder"
          ? Effect.succeed({ _tag: "Folder", folder: entry.path })
          : hashFile(entry.path).pipe(
            Effect.map((sha256): Staged => ({ _tag: "Tarball", file: entry.path, sha256 })),
            Effect.mapError((reason) => new PackageSourceError({ package: `${name}@${version}`, source: label, reason }))
          )
      return { _tag: "Found", version, fetch } as const
    })

  return { label, lookup }
}
