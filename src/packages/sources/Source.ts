/** A place packages come from: a registry, a mirror directory or an S3-compatible bucket. */
import type { Effect } from "effect"
import type { PackageError } from "../errors.ts"

/** What a source hands over: a tarball to unpack into the cache, or a folder already on disk. */
export type Staged =
  | { readonly _tag: "Tarball"; readonly file: string; readonly sha256: string }
  | { readonly _tag: "Folder"; readonly folder: string }

export type Lookup =
  | {
    readonly _tag: "Found"
    readonly version: string
    /** Brings the package into `workDir` (a fresh temporary directory). */
    readonly fetch: (workDir: string) => Effect.Effect<Staged, PackageError>
  }
  | { readonly _tag: "Missing"; readonly reason: string }
  | { readonly _tag: "Unreachable"; readonly reason: string }

export interface PackageSource {
  /** Human-readable and free of secrets: it appears in logs, errors and `LoadedPackage.source`. */
  readonly label: string
  readonly lookup: (name: string, wanted: string) => Effect.Effect<Lookup, PackageError>
  /**
   * Brings the tarball at `reference` into `workDir` when the reference lies within this source (a URL of a
   * registry's origin, an object of a bucket); undefined when it does not, or the source takes no references.
   */
  readonly download?: (reference: URL, workDir: string) => Effect.Effect<Staged, PackageError> | undefined
}
