/**
 * The raw settings before decoding: file, environment and flags merged in that order,
 * remembering where each value came from so an error can name the file, variable or flag.
 */
import type { Leaf } from "./Setting.ts"

export type Origin =
  | { readonly _tag: "File"; readonly file: string }
  | { readonly _tag: "Env"; readonly variable: string }
  | { readonly _tag: "Flag" }

export type Raw = Record<string, unknown>

export const isTable = (value: unknown): value is Raw =>
  typeof value === "object" && value !== null && !Array.isArray(value) && !(value instanceof Date)

export const pathKey = (path: ReadonlyArray<PropertyKey>): string => path.map(String).join("\u0000")

export class RawSettings {
  readonly raw: Raw = {}
  private readonly origins = new Map<string, Origin>()

  /** Deep-merges `source` over what is there; `undefined` values (flags not given) are skipped. */
  merge(source: Raw, origin: Origin, path: ReadonlyArray<string> = []): void {
    for (const [key, value] of Object.entries(source)) {
      if (value === undefined) continue
      const at = [...path, key]
      if (isTable(value)) {
        const target = this.tableAt(at)
        if (target !== undefined) {
          this.origins.set(pathKey(at), origin)
          this.merge(value, origin, at)
          continue
        }
      }
      this.set(at, value, origin)
    }
  }

  /** Sets one value; without an origin it is a default the loader derived. */
  set(path: ReadonlyArray<string>, value: unknown, origin?: Origin): void {
    const parent = this.tableAt(path.slice(0, -1))
    const key = path[path.length - 1]
    if (parent === undefined || key === undefined) return
    parent[key] = value
    if (origin !== undefined) this.origins.set(pathKey(path), origin)
  }

  delete(path: ReadonlyArray<string>): void {
    const parent = this.get(path.slice(0, -1))
    const key = path[path.length - 1]
    if (isTable(parent) && key !== undefined) delete parent[key]
  }

  get(path: ReadonlyArray<PropertyKey>): unknown {
    let current: unknown = this.raw
    for (const key of path) {
      if (typeof key === "number" && Array.isArray(current)) current = current[key]
      else if (isTable(current)) current = current[String(key)]
      else return undefined
    }
    return current
  }

  /** Where the value at `path` (or the nearest table above it) came from. */
  originOf(path: ReadonlyArray<PropertyKey>): Origin | undefined {
    for (let n = path.length; n > 0; n--) {
      const origin = this.origins.get(pathKey(path.slice(0, n)))
      if (origin !== undefined) return origin
    }
    return undefined
  }

  /** The table at `path`, created where missing; undefined when a non-table is in the way. */
  private tableAt(path: ReadonlyArray<string>): Raw | undefined {
    let current: Raw = this.raw
    for (const key of path) {
      const next = current[key]
      if (next === undefined) {
        const created: Raw = {}
        current[key] = created
        current = created
      } else if (isTable(next)) {
        current = next
      } else {
        return undefined
      }
    }
    return current
  }
}

export const envName = (path: ReadonlyArray<string>): string => `SVC_${path.join("_").toUpperCase()}`

/** Variables the spec names beside the generic SVC_<SECTION>_<SETTING> ones; they win over those. */
export const NAMED_ENV: ReadonlyArray<readonly [string, ReadonlyArray<string>]> = [
  ["SVC_POSTGRES_URL", ["database", "postgres_url"]],
  ["SVC_ROLE", ["cluster", "role"]],
  ["SVC_PRIMARY_URL", ["cluster", "primary_url"]],
  ["SVC_DB_POOL", ["cluster", "db_pool"]]
]

/** Coerces an environment string by the leaf's type; a string that does not fit is kept so the schema names it. */
export const coerceEnv = (kind: Leaf["kind"], text: string): unknown => {
  const trimmed = text.trim()
  switch (kind) {
    case "number":
      return /^-?\d+(\.\d+)?$/.test(trimmed) ? Number(trimmed) : text
    case "boolean":
      return trimmed === "true" ? true : trimmed === "false" ? false : text
    case "list":
      return trimmed.split(",").map((item) => item.trim()).filter((item) => item !== "")
    case "string":
      return text
  }
}

/** Applies SVC_* variables over `settings`: generic ones for every leaf, then the named ones. */
export const mergeEnv = (
  settings: RawSettings,
  env: Record<string, string | undefined>,
  leaves: ReadonlyArray<Leaf>
): void => {
  const byPath = new Map(leaves.map((leaf) => [pathKey(leaf.path), leaf]))
  const apply = (variable: string, path: ReadonlyArray<string>) => {
    const text = env[variable]
    const leaf = byPath.get(pathKey(path))
    if (text === undefined || text === "" || leaf === undefined) return
    settings.set(path, coerceEnv(leaf.kind, text), { _tag: "Env", variable })
  }
  for (const leaf of leaves) apply(envName(leaf.path), leaf.path)
  for (const [variable, path] of NAMED_ENV) apply(variable, path)
}
