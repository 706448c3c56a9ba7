/** Package sources made by the tests: small FHIR packages as .tgz, a loopback npm registry, a loopback S3. */
import { Effect, type Scope } from "effect"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs/promises"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Zlib from "node:zlib"
import { canonicalRequest, type SigningInput } from "../../src/packages/sigv4.ts"

export type Entries = Record<string, string | Buffer>

const header = (name: string, size: number, type = "0"): Buffer => {
  const block = Buffer.alloc(512)
  block.write(name, 0, 100, "utf8")
  block.write("0000644\0", 100)
  block.write("0000000\0", 108)
  block.write("0000000\0", 116)
  block.write(size.toString(8).padStart(11, "0") + "\0", 124)
  block.write("00000000000\0", 136)
  block.write("        ", 148)
  block.write(type, 156)
  block.write("ustar\0", 257)
  block.write("00", 263)
  let sum = 0
  for (const byte of block) sum += byte
  block.write(sum.toString(8).padStart(6, "0") + "\0 ", 148)
  return block
}

const pad = (data: Buffer): Buffer => Buffer.concat([data, Buffer.alloc((512 - (data.length % 512)) % 512)])

/** A gzipped ustar archive; names longer than 100 bytes get a pax header. */
export const tgz = (entries: Entries): Buffer => {
  const parts: Array<Buffer> = []
  for (const [name, content] of Object.entries(entries)) {
    const data = Buffer.isBuffer(content) ? content : Buffer.from(content)
    if (Buffer.byteLength(name) > 99) {
      const record = ` path=${name}\n`
      let length = record.length + 2
      while (`${length}${record}`.length !== length) length++
      const pax = Buffer.from(`${length}${record}`)
      parts.push(header("PaxHeader", pax.length, "x"), pad(pax))
    }
    parts.push(header(name.slice(0, 99), data.length), pad(data))
  }
  parts.push(Buffer.alloc(1024))
  return Zlib.gzipSync(Buffer.concat(parts))
}

export interface PackageDef {
  readonly name: string
  readonly version: string
  readonly dependencies?: Record<string, string>
  readonly manifest?: Record<string, unknown>
  /** Extra files under package/; default: one StructureDefinition and one SearchParameter. */
  readonly files?: Entries
}

export const resource = (resourceType: string, id: string, extra: Record<string, unknown> = {}): string =>
  JSON.stringify({ resourceType, id, url: `http://example.org/fhir/${resourceType}/${id}`, ...extra })

export const packageEntries = (def: PackageDef): Entries => ({
  "package/package.json": JSON.stringify({
    name: def.name,
    version: def.version,
    fhirVersions: ["4.0.1"],
    ...(def.dependencies === undefined ? {} : { dependencies: def.dependencies }),
    ...def.manifest
  }),
  ...(def.files ?? {
    [`package/StructureDefinition-${def.name}.json`]: resource("StructureDefinition", def.name),
    [`package/SearchParameter-${def.name}-code.json`]: resource("SearchParameter", `${def.name}-code`)
  })
})

export const packageTgz = (def: PackageDef): Buffer => tgz(packageEntries(def))

export const tempDir: Effect.Effect<string, never, Scope.Scope> = Effect.acquireRelease(
  Effect.promise(() => Fs.mkdtemp(Path.join(Os.tmpdir(), "svc-pkg-test-"))),
  (dir) => Effect.promise(() => Fs.rm(dir, { recursive: true, force: true }))
)

export const writeFiles = (dir: string, entries: Entries): Effect.Effect<void> =>
  Effect.promise(async () => {
    for (const [name, content] of Object.entries(entries)) {
      await Fs.mkdir(Path.dirname(Path.join(dir, name)), { recursive: true })
      await Fs.writeFile(Path.join(dir, name), content)
    }
  })

type Handler = (request: Http.IncomingMessage, response: Http.ServerResponse, base: string) => void

const serve = (handler: Handler): Effect.Effect<{ readonly url: string }, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<{ server: Http.Server; url: string }>((resolve) => {
        let base = ""
        const server = Http.createServer((req, res) => handler(req, res, base))
        server.listen(0, "127.0.0.1", () => {
          base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
          resolve({ server, url: base })
        })
      })
    ),
    ({ server }) => Effect.promise(() => new Promise<void>((resolve) => {
      server.closeAllConnections()
      server.close(() => resolve())
    }))
  )

export interface TestRegistry {
  readonly url: string
  /** Requests seen so far, by path. */
  readonly requests: Array<string>
}

export type Integrity = "sri" | "shasum" | "wrong" | "none"

/** An npm-protocol registry on loopback serving the given packages. */
export const registry = (
  packages: ReadonlyArray<PackageDef & { readonly integrity?: Integrity }>
): Effect.Effect<TestRegistry, never, Scope.Scope> =>
  Effect.gen(function*() {
    const requests: Array<string> = []
    const tarballs = new Map(packages.map((p) => [`/${p.name}/-/${p.name}-${p.version}.tgz`, packageTgz(p)]))
    const server = yield* serve((req, res, base) => {
      const path = req.url ?? "/"
      requests.push(path)
      const tarball = tarballs.get(path)
      if (tarball !== undefined) return void res.writeHead(200, { "content-type": "application/octet-stream" }).end(tarball)
      const versions = packages.filter((p) => `/${p.name}` === path)
      if (versions.length === 0) return void res.writeHead(404, { "content-type": "application/json" }).end(`{"error":"Not found"}`)
      const doc = {
        name: versions[0]!.name,
        "dist-tags": { latest: versions[versions.length - 1]!.version },
        versions: Object.fromEntries(versions.map((p) => {
          const file = `/${p.name}/-/${p.name}-${p.version}.tgz`
          const data = tarballs.get(file)!
          const integrity = p.integrity ?? "sri"
          const dist = {
            tarball: `${base}${file}`,
            ...(integrity === "sri" ? { integrity: `sha512-${Crypto.createHash("sha512").update(data).digest("base64")}` } : {}),
            ...(integrity === "wrong" ? { integrity: `sha512-${Crypto.createHash("sha512").update("other").digest("base64")}` } : {}),
            ...(integrity === "shasum" ? { shasum: Crypto.createHash("sha1").update(data).digest("hex") } : {})
          }
          return [p.version, { name: p.name, version: p.version, dist }]
        }))
      }
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(doc))
    })
    return { url: server.url, requests }
  })

/** A loopback port nobody listens on. */
export const closedPort: Effect.Effect<number> = Effect.promise(() =>
  new Promise<number>((resolve) => {
    const server = Http.createServer()
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as AddressInfo).port
      server.close(() => resolve(port))
    })
  })
)

export const s3Credentials = { accessKeyId: "TESTKEY", secretAccessKey: "test/secret+key" }

/**
 * An S3-compatible server on loopback: path-style GET/HEAD of objects and ListObjectsV2, each request's
 * SigV4 signature recomputed from what arrived (403 when it does not match).
 */
export const s3Server = (bucket: string, objects: ReadonlyMap<string, Buffer>): Effect.Effect<TestRegistry, never, Scope.Scope> =>
  Effect.gen(function*() {
    const requests: Array<string> = []
    const server = yield* serve((req, res, base) => {
      requests.push(`${req.method} ${req.url}`)
      const xml = (status: number, body: string) => res.writeHead(status, { "content-type": "application/xml" }).end(body)
      const fail = (status: number, code: string) => xml(status, `<Error><Code>${code}</Code></Error>`)
      const auth = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/s3\/aws4_request, SignedHeaders=([^,]+), Signature=([0-9a-f]+)$/
        .exec(req.headers.authorization ?? "")
      if (auth === null || auth[1] !== s3Credentials.accessKeyId) return fail(403, "InvalidAccessKeyId")
      const url = new URL(req.url ?? "/", base)
      const signed = Object.fromEntries(auth[4]!.split(";").map((h) => [h, String(req.headers[h] ?? "")]))
      const input: SigningInput = {
        method: req.method ?? "GET",
        url,
        headers: {},
        payloadHash: String(req.headers["x-amz-content-sha256"]),
        ...s3Credentials,
        region: auth[3]!,
        service: "s3",
        timeMillis: 0
      }
      const date = String(req.headers["x-amz-date"])
      const scope = `${auth[2]}/${auth[3]}/s3/aws4_request`
      const toSign = ["AWS4-HMAC-SHA256", date, scope, Crypto.createHash("sha256").update(canonicalRequest(input, signed)).digest("hex")].join("\n")
      const hmac = (key: Buffer | string, text: string) => Crypto.createHmac("sha256", key).update(text).digest()
      const key = hmac(hmac(hmac(hmac(`AWS4${s3Credentials.secretAccessKey}`, auth[2]!), auth[3]!), "s3"), "aws4_request")
      if (hmac(key, toSign).toString("hex") !== auth[5]) return fail(403, "SignatureDoesNotMatch")
      const [, bucketName, ...rest] = url.pathname.split("/").map(decodeURIComponent)
      if (bucketName !== bucket) return fail(404, "NoSuchBucket")
      if (rest.length === 0) {
        const prefix = url.searchParams.get("prefix") ?? ""
        const keys = [...objects.keys()].filter((k) => k.startsWith(prefix))
        return xml(200, `<ListBucketResult>${keys.map((k) => `<Contents><Key>${k}</Key></Contents>`).join("")}</ListBucketResult>`)
      }
      const object = objects.get(rest.join("/"))
      if (object === undefined) return req.method === "HEAD" ? void res.writeHead(404).end() : fail(404, "NoSuchKey")
      res.writeHead(200, { "content-type": "application/octet-stream", "content-length": object.length })
      res.end(req.method === "HEAD" ? undefined : object)
    })
    return { url: server.url, requests }
  })
