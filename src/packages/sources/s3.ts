/**
 * An S3-compatible bucket, `s3://bucket/prefix`, addressed path-style at `SVC_S3_ENDPOINT` and signed
 * with SigV4. Keys follow the npm layout: `<prefix>/<name>/-/<name>-<version>.tgz`.
 */
import { Clock, Effect, Redacted } from "effect"
import * as Path from "node:path"
import { PackageSourceError, S3Error } from "../errors.ts"
import { type HttpTimeouts, readText, type Reply, saveBody, send } from "../http.ts"
import { emptyPayloadHash, sign, uriEncode } from "../sigv4.ts"
import { isExact, pick } from "../versions.ts"
import type { Lookup, PackageSource, Staged } from "./Source.ts"

export interface S3Settings {
  readonly accessKeyId?: Redacted.Redacted<string> | undefined
  readonly secretAccessKey?: Redacted.Redacted<string> | undefined
  readonly endpoint?: string | undefined
  /** `SVC_S3_REGION`; most S3-compatible stores accept the default `us-east-1`. */
  readonly region?: string | undefined
}

export const parseS3Url = (text: string): { readonly bucket: string; readonly prefix: string } | undefined => {
  const match = /^s3:\/\/([^/]+)\/?(.*)$/.exec(text)
  return match === null ? undefined : { bucket: match[1]!, prefix: match[2]!.replace(/\/+$/, "") }
}

const xmlValues = (xml: string, tag: string): Array<string> =>
  [...xml.matchAll(new RegExp(`<${tag}>([^<]*)</${tag}>`, "g"))].map((m) => m[1]!)

export const s3Source = (target: string, settings: S3Settings, timeouts: HttpTimeouts): PackageSource => {
  const location = parseS3Url(target)
  const endpoint = (() => {
    try {
      const url = new URL(settings.endpoint ?? "")
      return url.protocol === "http:" || url.protocol === "https:" ? url : undefined
    } catch {
      return undefined
    }
  })()
  const label = `s3 ${target}${endpoint === undefined ? "" : ` at ${endpoint.origin}`}`
  const keyFor = (name: string, version: string) =>
    [location?.prefix ?? "", name, "-", `${name}-${version}.tgz`].filter((p) => p !== "").join("/")

  const request = (pkg: string, method: string, key: string | undefined, query: Record<string, string>) =>
    Effect.gen(function*() {
      const fail = (reason: string) => new S3Error({ package: pkg, source: label, reason })
      if (location === undefined) return yield* fail(`${target} is not s3://bucket/prefix`)
      if (endpoint === undefined) {
        return yield* fail(settings.endpoint === undefined ? "SVC_S3_ENDPOINT is not set" : "SVC_S3_ENDPOINT is not an http(s) URL")
      }
      if (settings.accessKeyId === undefined || settings.secretAccessKey === undefined) {
        return yield* fail("SVC_S3_ACCESS_KEY_ID and SVC_S3_SECRET_ACCESS_KEY must be set")
      }
      const segments = [location.bucket, ...(key === undefined ? [] : key.split("/"))].map(uriEncode)
      const url = new URL(`${endpoint.origin}${endpoint.pathname.replace(/\/+$/, "")}/${segments.join("/")}`)
      for (const [k, v] of Object.entries(query)) url.searchParams.set(k, v)
      const headers = sign({
        method,
        url,
        headers: { "x-amz-content-sha256": emptyPayloadHash },
        payloadHash: emptyPayloadHash,
        accessKeyId: Redacted.value(settings.accessKeyId),
        secretAccessKey: Redacted.value(settings.secretAccessKey),
        region: settings.region ?? "us-east-1",
        service: "s3",
        timeMillis: yield* Clock.currentTimeMillis
      })
      return yield* send(url.toString(), { method, headers }, timeouts)
    })

  const refused = (pkg: string, response: Response): Effect.Effect<never, S3Error> =>
    Effect.gen(function*() {
      const body = yield* readText(response, timeouts).pipe(Effect.orElseSucceed(() => ""))
      const code = xmlValues(body, "Code")[0]
      const reason = response.status === 403
        ? `access denied${code === undefined ? "" : ` (${code})`}: check SVC_S3_ACCESS_KEY_ID, SVC_S3_SECRET_ACCESS_KEY and the bucket policy`
        : code ?? `unexpected answer`
      return yield* new S3Error({ package: pkg, source: label, status: response.status, reason })
    })

  const getObject = (pkg: string, key: string, workDir: string): Effect.Effect<Staged, S3Error | PackageSourceError> =>
    Effect.gen(function*() {
      const reply = yield* request(pkg, "GET", key, {})
      if (reply._tag === "Unreachable") return yield* new PackageSourceError({ package: pkg, source: label, reason: reply.reason })
      if (!reply.response.ok) return yield* refused(pkg, reply.response)
      const file = Path.join(workDir, "package.tgz")
      const digests = yield* saveBody(reply.response, file, timeouts).pipe(
        Effect.mapError((reason) => new PackageSourceError({ package: pkg, source: label, reason }))
      )
      return { _tag: "Tarball", file, sha256: digests.sha256.toString("hex") } as const
    })

  const download = (name: string, version: string) => (workDir: string) => getObject(`${name}@${version}`, keyFor(name, version), workDir)

  const found = (name: string, version: string): Lookup => ({ _tag: "Found", version, fetch: download(name, version) })

  const lookup = (name: string, wanted: string): Effect.Effect<Lookup, S3Error> =>
    Effect.gen(function*() {
      const pkg = `${name}@${wanted}`
      if (isExact(wanted)) {
        const reply: Reply = yield* request(pkg, "HEAD", keyFor(name, wanted), {})
        if (reply._tag === "Unreachable") return reply
        if (reply.response.ok) return found(name, wanted)
        if (reply.response.status === 404) return { _tag: "Missing", reason: `no object ${keyFor(name, wanted)}` } as const
        return yield* refused(pkg, reply.response)
      }
      const listPrefix = keyFor(name, "x").replace(/x\.tgz$/, "")
      const reply: Reply = yield* request(pkg, "GET", undefined, { "list-type": "2", prefix: listPrefix })
      if (reply._tag === "Unreachable") return reply
      if (!reply.response.ok) return yield* refused(pkg, reply.response)
      const xml = yield* readText(reply.response, timeouts).pipe(
        Effect.mapError((reason) => new S3Error({ package: pkg, source: label, reason }))
      )
      const versions = xmlValues(xml, "Key")
        .filter((key) => key.startsWith(listPrefix) && key.endsWith(".tgz"))
        .map((key) => key.slice(listPrefix.length, -4))
      const version = pick(versions, {}, wanted)
      return version === undefined
        ? { _tag: "Missing", reason: versions.length === 0 ? "no such package" : `no version matches ${wanted}` } as const
        : found(name, version)
    })

  /** `s3://<bucket>/<key>` of this source's bucket (`$install`'s `url`), fetched with its endpoint and credentials. */
  const downloadReference = (reference: URL, workDir: string): Effect.Effect<Staged, S3Error | PackageSourceError> | undefined => {
    if (reference.protocol !== "s3:" || location === undefined || reference.host !== location.bucket) return undefined
    const key = reference.pathname.split("/").filter((segment) => segment !== "").map((segment) => {
      try {
        return decodeURIComponent(segment)
      } catch {
        return segment
      }
    }).join("/")
    if (key === "") return undefined
    return getObject(reference.href, key, workDir)
  }

  return { label, lookup, download: downloadReference }
}
