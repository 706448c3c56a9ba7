/**
 * What `--package` and `conformance.packages` accept: `name@version` (or the FHIR form `name#version`),
 * a `.tgz` file, or a directory. See docs/packages.md.
 */
import { Effect } from "effect"
import * as Os from "node:os"
import * as Path from "node:path"
import { PackageSpecInvalid } from "./errors.ts"

export type PackageSpec =
  | { readonly _tag: "Named"; readonly name: string; readonly version: string }
  | { readonly _tag: "Path"; readonly path: string }
  /** A `.tgz` the server was handed (`$install`'s body): `source` says so in logs and the installed-package record. */
  | { readonly _tag: "Archive"; readonly file: string; readonly source: string }
  /** A tarball by URL within a configured source (`$install`'s `url`): a registry's origin or a bucket. */
  | { readonly _tag: "Reference"; readonly url: string }

// FHIR package ids: letters, digits, '.', '-', '_' (no npm scopes); this also keeps names safe as cache folder names.
const namePattern = /^[A-Za-z0-9][A-Za-z0-9._-]*$/
const versionPattern = /^[A-Za-z0-9.^~<>=*|+\- ]+$/

export const named = (name: string, version: string): PackageSpec => ({ _tag: "Named", name, version })

export const label = (spec: PackageSpec): string => {
  switch (spec._tag) {
    case "Named":
      return `${spec.name}@${spec.version}`
    case "Path":
      return spec.path
    case "Archive":
      return spec.source
    case "Reference":
      return spec.url
  }
}

const looksLikePath = (text: string): boolean =>
  text.startsWith(".") || text.startsWith("/") || text.startsWith("~") || text.includes("/") ||
  text.includes("\\") || /\.(tgz|tar\.gz)$/i.test(text)

/** Expands a leading `~` against the home directory of whoever runs the server. */
export const expandHome = (path: string): string =>
  path === "~" ? Os.homedir() : path.startsWith("~/") ? Path.join(Os.homedir(), path.slice(2)) : path

export const parse = (text: string): Effect.Effect<PackageSpec, PackageSpecInvalid> => {
  const trimmed = text.trim()
  if (trimmed === "") return Effect.fail(new PackageSpecInvalid({ spec: text, reason: "it is empty" }))
  if (looksLikePath(trimmed)) return Effect.succeed({ _tag: "Path", path: expandHome(trimmed) })
  const at = trimmed.search(/[@#]/)
  const name = at < 0 ? trimmed : trimmed.slice(0, at)
  const version = at < 0 ? "latest" : trimmed.slice(at + 1).trim()
  if (!namePattern.test(name)) {
    return Effect.fail(new PackageSpecInvalid({ spec: text, reason: `${JSON.stringify(name)} is not a package name` }))
  }
  if (version === "" || !versionPattern.test(version)) {
    return Effect.fail(new PackageSpecInvalid({ spec: text, reason: "expected name@version, a .tgz file or a directory" }))
  }
  return Effect.succeed(named(name, version))
}
