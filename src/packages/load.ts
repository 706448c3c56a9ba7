/**
 * Reads an unpacked package folder (the one holding package.json). A package is a FHIR package when
 * its package.json has a non-empty `fhirVersions` (or the older `fhir-version-list` / `fhirVersion`),
 * or, failing that, when at least one of its files is a FHIR resource.
 */
import { Effect } from "effect"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { causeText, NotAFhirPackage, PackageSourceError, ResourceNotJson } from "./errors.ts"
import type { LoadedPackage, PackageResource } from "./LoadedPackage.ts"

export interface LoadOptions {
  /** The package as asked for, for messages. */
  readonly request: string
  readonly source: string
  /** Known sha256 of the tarball; otherwise the folder's files are hashed. */
  readonly checksum?: string | undefined
  /** Keep only resources of these types (the examples→core substitution). */
  readonly onlyTypes?: ReadonlySet<string>
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const declaresFhir = (manifest: Record<string, unknown>): boolean => {
  const list = (key: string) => Array.isArray(manifest[key]) && (manifest[key] as Array<unknown>).length > 0
  return list("fhirVersions") || list("fhir-version-list") || typeof manifest["fhirVersion"] === "string"
}

// Skips parsing a file whose first key names a type we do not keep (most of the 190 MB examples package).
const leadingType = (text: string): string | undefined => /^\s*\{\s*"resourceType"\s*:\s*"([A-Za-z]+)"/.exec(text)?.[1]

const folderChecksum = (folder: string): Effect.Effect<string, string> =>
  Effect.tryPromise({
    try: async () => {
      const files = (await Fs.readdir(folder, { recursive: true, withFileTypes: true }))
        .filter((entry) => entry.isFile())
        .map((entry) => Path.relative(folder, Path.join(entry.parentPath, entry.name)).split(Path.sep).join("/"))
        .sort()
      const hash = Crypto.createHash("sha256")
      for (const file of files) {
        hash.update(`${file}\0`).update(await Fs.readFile(Path.join(folder, file))).update("\0")
      }
      return hash.digest("hex")
    },
    catch: causeText
  })

export const loadFolder = (folder: string, options: LoadOptions): Effect.Effect<LoadedPackage, NotAFhirPackage | ResourceNotJson | PackageSourceError> =>
  Effect.gen(function*() {
    const notFhir = (reason: string) => new NotAFhirPackage({ package: options.request, source: options.source, reason })
    const failed = (reason: string) => new PackageSourceError({ package: options.request, source: options.source, reason })
    const manifestText = yield* Effect.tryPromise(() => Fs.readFile(Path.join(folder, "package.json"), "utf8")).pipe(
      Effect.mapError(() => notFhir("it has no package/package.json"))
    )
    const manifest = yield* Effect.try(() => JSON.parse(manifestText) as unknown).pipe(
      Effect.mapError(() => notFhir("its package.json is not JSON"))
    )
    if (!isRecord(manifest) || typeof manifest["name"] !== "string" || typeof manifest["version"] !== "string") {
      return yield* notFhir("its package.json has no name and version")
    }
    const files = yield* Effect.tryPromise(() => Fs.readdir(folder, { withFileTypes: true })).pipe(
      Effect.mapError((cause) => failed(causeText(cause)))
    )
    const candidates = files
      .filter((entry) => entry.isFile() && entry.name.endsWith(".json") && entry.name !== "package.json" && !entry.name.startsWith("."))
      .map((entry) => entry.name)
      .sort()
    const read = (file: string): Effect.Effect<PackageResource | undefined, ResourceNotJson | PackageSourceError> =>
      Effect.gen(function*() {
        const text = yield* Effect.tryPromise(() => Fs.readFile(Path.join(folder, file), "utf8")).pipe(
          Effect.mapError((cause) => failed(`${file}: ${causeText(cause)}`))
        )
        const leading = options.onlyTypes === undefined ? undefined : leadingType(text)
        if (leading !== undefined && options.onlyTypes?.has(leading) === false) return undefined
        const resource = yield* Effect.try(() => JSON.parse(text) as unknown).pipe(
          Effect.mapError((cause) =>
            new ResourceNotJson({ package: options.request, source: options.source, file, reason: causeText(cause) })
          )
        )
        if (!isRecord(resource) || typeof resource["resourceType"] !== "string") return undefined
        if (options.onlyTypes !== undefined && !options.onlyTypes.has(resource["resourceType"])) return undefined
        return { file, resource }
      })
    const loaded = yield* Effect.forEach(candidates, read, { concurrency: 16 })
    const resources = loaded.filter((r): r is PackageResource => r !== undefined)
    if (!declaresFhir(manifest) && resources.length === 0) {
      return yield* notFhir("its package.json has no fhirVersions and it holds no FHIR resources")
    }
    const checksum = options.checksum ?? (yield* folderChecksum(folder).pipe(Effect.mapError(failed)))
    return {
      name: manifest["name"],
      version: manifest["version"],
      source: options.source,
      checksum,
      manifest,
      resources
    }
  })
