/**
 * An npm-protocol registry (the FHIR package registry speaks it too): the package document at
 * `<base>/<name>`, then the tarball it names, checked against `dist.integrity` (sha512 SRI) or
 * `dist.shasum` (sha1).
 */
import { Effect } from "effect"
import * as Path from "node:path"
import { PackageIntegrityError, PackageSourceError } from "../errors.ts"
import { type HttpTimeouts, readText, saveBody, send } from "../http.ts"
import { pick } from "../versions.ts"
import type { Lookup, PackageSource, Staged } from "./Source.ts"

interface Dist {
  readonly tarball?: string
  readonly integrity?: string
  readonly shasum?: string
}

const record = (value: unknown): Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value) ? value as Record<string, unknown> : {}

const strings = (value: unknown): Record<string, string> =>
  Object.fromEntries(Object.entries(record(value)).filter((e): e is [string, string] => typeof e[1] === "string"))

const distOf = (doc: Record<string, unknown>, version: string): Dist => {
  const dist = strings(record(record(doc["versions"])[version])["dist"])
  return {
    ...(dist["tarball"] !== undefined ? { tarball: dist["tarball"] } : {}),
    ...(dist["integrity"] !== undefined ? { integrity: dist["integrity"] } : {}),
    ...(dist["shasum"] !== undefined ? { shasum: dist["shasum"] } : {})
  }
}

/** The expected digest: the strongest sha512 SRI entry, else the sha1 shasum, else nothing to check. */
const expectedDigest = (dist: Dist): { readonly algorithm: "sha512" | "sha1"; readonly value: string } | undefined => {
  const sri = (dist.integrity ?? "").split(/\s+/).find((entry) => entry.startsWith("sha512-"))
  if (sri !== undefined) return { algorithm: "sha512", value: sri }
  if (dist.shasum !== undefined) return { algorithm: "sha1", value: dist.shasum.toLowerCase() }
  return undefined
}

export const registrySource = (base: string, timeouts: HttpTimeouts): PackageSource => {
  const root = base.replace(/\/+$/, "")
  const label = `registry ${root}`

  const tarball = (name: string, version: string, dist: Dist) => (workDir: string): Effect.Effect<Staged, PackageSourceError | PackageIntegrityError> =>
    Effect.gen(function*() {
      const pkg = `${name}@${version}`
      const failed = (reason: string) => new PackageSourceError({ package: pkg, source: label, reason })
      const url = dist.tarball ?? `${root}/${name}/${version}`
      const reply = yield* send(url, { headers: { accept: "application/octet-stream, application/gzip, */*" } }, timeouts)
      if (reply._tag === "Unreachable") return yield* failed(`tarball ${url}: ${reply.reason}`)
      if (!reply.response.ok) return yield* failed(`tarball ${url}: HTTP ${reply.response.status}`)
      const file = Path.join(workDir, "package.tgz")
      const digests = yield* saveBody(reply.response, file, timeouts).pipe(Effect.mapError(failed))
      const expected = expectedDigest(dist)
      if (expected !== undefined) {
        const actual = expected.algorithm === "sha512"
          ? `sha512-${digests.sha512.toString("base64")}`
          : digests.sha1.toString("hex")
        if (actual !== expected.value) {
          return yield* new PackageIntegrityError({ package: pkg, source: label, expected: expected.value, actual })
        }
      } else {
        yield* Effect.logWarning(`${label} gives no integrity for ${pkg}: it is taken unchecked`)
      }
      return { _tag: "Tarball", file, sha256: digests.sha256.toString("hex") }
    })

  const lookup = (name: string, wanted: string): Effect.Effect<Lookup> =>
    Effect.gen(function*() {
      const reply = yield* send(`${root}/${name}`, { headers: { accept: "application/json" } }, timeouts)
      if (reply._tag === "Unreachable") return reply
      const { response } = reply
      if (response.status === 404 || response.status === 410) {
        yield* Effect.ignore(Effect.tryPromise(() => response.body?.cancel() ?? Promise.resolve()))
        return { _tag: "Missing", reason: "no such package" } as const
      }
      const body = yield* readText(response, timeouts).pipe(Effect.either)
      if (body._tag === "Left") return { _tag: "Unreachable", reason: body.left } as const
      if (!response.ok) return { _tag: "Unreachable", reason: `HTTP ${response.status}` } as const
      const doc = yield* Effect.try(() => record(JSON.parse(body.right))).pipe(Effect.option)
      if (doc._tag === "None") return { _tag: "Missing", reason: "the package document is not JSON" } as const
      const versions = Object.keys(record(doc.value["versions"]))
      const version = pick(versions, strings(doc.value["dist-tags"]), wanted)
      if (version === undefined) {
        return { _tag: "Missing", reason: `no version matches ${wanted} (has ${versions.slice(-5).join(", ") || "none"})` } as const
      }
      return { _tag: "Found", version, fetch: tarball(name, version, distOf(doc.value, version)) } as const
    })

  const origin = URL.canParse(root) ? new URL(root).origin : undefined

  /** A tarball URL of this registry's origin (`$install`'s `url`), taken as it comes: no document gives its integrity. */
  const download = (reference: URL, workDir: string): Effect.Effect<Staged, PackageSourceError> | undefined => {
    if ((reference.protocol !== "http:" && reference.protocol !== "https:") || origin === undefined || reference.origin !== origin) return undefined
    return Effect.gen(function*() {
      const failed = (reason: string) => new PackageSourceError({ package: reference.href, source: label, reason })
      const reply = yield* send(reference.href, { headers: { accept: "application/octet-stream, application/gzip, */*" } }, timeouts)
      if (reply._tag === "Unreachable") return yield* failed(reply.reason)
      if (!reply.response.ok) {
        yield* Effect.ignore(Effect.tryPromise(() => reply.response.body?.cancel() ?? Promise.resolve()))
        return yield* failed(`HTTP ${reply.response.status}`)
      }
      const file = Path.join(workDir, "package.tgz")
      const digests = yield* saveBody(reply.response, file, timeouts).pipe(Effect.mapError(failed))
      return { _tag: "Tarball", file, sha256: digests.sha256.toString("hex") } as const
    })
  }

  return { label, lookup, download }
}
