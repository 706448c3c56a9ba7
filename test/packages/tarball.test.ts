/** Hostile archives: every one is refused with a `TarError` (or unpacked harmlessly), nothing lands outside `package/`. */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import * as Zlib from "node:zlib"
import * as Tar from "tar"
import { PackageSourceError } from "../../src/packages/errors.ts"
import { loadPath } from "../../src/packages/sources/files.ts"
import { defaultTarLimits, extractTgz, TarError, type TarLimits } from "../../src/packages/tarball.ts"
import { tempDir, tgz } from "./support.ts"

type Entry = Tar.HeaderData & { readonly data?: Buffer | string }

const block = (data: Tar.HeaderData): Buffer => {
  const header = new Tar.Header({ mode: 0o644, mtime: new Date(0), ...data })
  const buffer = Buffer.alloc(512)
  header.encode(buffer)
  return buffer
}

const padded = (data: Buffer): Buffer => Buffer.concat([data, Buffer.alloc((512 - (data.length % 512)) % 512)])

/** An uncompressed tar written block by block with tar's own header encoder, so it can lie as a hostile one does. */
const rawTar = (entries: ReadonlyArray<Entry>, end = true): Buffer => {
  const parts: Array<Buffer> = []
  for (const { data, ...header } of entries) {
    const body = Buffer.from(data ?? "")
    parts.push(block({ type: "File", size: header.type === undefined || header.type === "File" ? body.length : 0, ...header }))
    parts.push(padded(body))
  }
  if (end) parts.push(Buffer.alloc(1024))
  return Buffer.concat(parts)
}

const gz = (data: Buffer): Buffer => Zlib.gzipSync(data)

interface Outcome {
  readonly dir: string
  readonly out: string
  readonly result: { readonly files: number } | { readonly error: unknown }
}

/** Unpacks `archive` into a fresh `<dir>/out`; the error, if any, is returned, never thrown. */
const unpack = (archive: Buffer, limits: TarLimits = defaultTarLimits) =>
  Effect.gen(function*() {
    const dir = yield* tempDir
    const out = Path.join(dir, "out")
    yield* Effect.promise(async () => {
      await Fs.mkdir(out)
      await Fs.writeFile(Path.join(dir, "archive.tgz"), archive)
    })
    const result = yield* Effect.promise(() =>
      extractTgz(Path.join(dir, "archive.tgz"), out, limits).then((files) => ({ files }), (error: unknown) => ({ error }))
    )
    return { dir, out, result } satisfies Outcome
  })

const refused = (outcome: Outcome, message: RegExp): void => {
  if (!("error" in outcome.result)) throw new Error(`expected a refusal, got ${outcome.result.files} files`)
  expect(outcome.result.error).toBeInstanceOf(TarError)
  expect(String(outcome.result.error)).toMatch(message)
}

/** Every path under `dir`, with its kind as lstat sees it. */
const listing = async (dir: string): Promise<Record<string, string>> => {
  const found: Record<string, string> = {}
  for (const name of await Fs.readdir(dir, { recursive: true })) {
    const stat = await Fs.lstat(Path.join(dir, name))
    found[name] = stat.isSymbolicLink() ? "link" : stat.isDirectory() ? "dir" : stat.isFile() ? "file" : "other"
  }
  return found
}

const small: TarLimits = { maxEntryBytes: 1024 * 1024, maxTotalBytes: 4 * 1024 * 1024, maxEntries: 10 }

describe("extractTgz on hostile archives", () => {
  it.scopedLive("refuses entries that climb out, by name, by prefix or by pax header, and writes nothing outside", () =>
    Effect.gen(function*() {
      const hostile: ReadonlyArray<ReadonlyArray<Entry>> = [
        [{ path: "package/../evil.json", data: "{}" }],
        [{ path: "package/a/../../evil.json", data: "{}" }],
        [{ path: "/tmp/evil.json", data: "{}" }],
        [{ path: "package/a\\..\\..\\evil.json", data: "{}" }]
      ]
      for (const entries of hostile) {
        const outcome = yield* unpack(gz(rawTar([{ path: "package/package.json", data: "{}" }, ...entries])))
        refused(outcome, /unsafe entry path/)
        expect(yield* Effect.promise(() => listing(outcome.dir))).not.toHaveProperty("evil.json")
      }
      // A pax header naming the path overrides the harmless name in the ustar header.
      const pax = new Tar.Pax({ path: "package/../../evil.json" }).encode()
      const viaPax = yield* unpack(gz(Buffer.concat([pax, rawTar([{ path: "package/harmless.json", data: "{}" }])])))
      refused(viaPax, /unsafe entry path/)
      expect(yield* Effect.promise(() => listing(viaPax.dir))).not.toHaveProperty("evil.json")
    }))

  it.scopedLive("never writes or follows links and devices", () =>
    Effect.gen(function*() {
      const outcome = yield* unpack(gz(rawTar([
        { path: "package/package.json", data: "{}" },
        { path: "package/up", type: "SymbolicLink", linkpath: ".." },
        { path: "package/up/escaped.json", data: "{}" },
        { path: "package/passwd.json", type: "Link", linkpath: "/etc/passwd" },
        { path: "package/null", type: "CharacterDevice" },
        { path: "package/fifo", type: "FIFO" },
        { path: "package/folder", type: "Directory" }
      ])))
      expect(outcome.result).toEqual({ files: 2 })
      // The link was skipped: `up` is a plain folder inside the package.
      expect(yield* Effect.promise(() => listing(outcome.out))).toEqual({
        "package": "dir",
        "package/package.json": "file",
        "package/up": "dir",
        "package/up/escaped.json": "file"
      })
    }))

  it.scopedLive("does not write through a link already in the destination", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const outside = Path.join(dir, "outside.json")
      const out = Path.join(dir, "out")
      yield* Effect.promise(async () => {
        await Fs.writeFile(outside, "untouched")
        await Fs.mkdir(Path.join(out, "package"), { recursive: true })
        await Fs.symlink(outside, Path.join(out, "package", "x.json"))
        await Fs.writeFile(Path.join(dir, "a.tgz"), tgz({ "package/x.json": "overwritten" }))
      })
      const error = yield* Effect.promise(() => extractTgz(Path.join(dir, "a.tgz"), out).then(() => undefined, (e: unknown) => e))
      expect(String(error)).toMatch(/ELOOP/)
      expect(yield* Effect.promise(() => Fs.readFile(outside, "utf8"))).toBe("untouched")
    }))

  it.scopedLive("refuses an entry that claims more than the limit before reading its bytes", () =>
    Effect.gen(function*() {
      // The header claims 3 GiB; only a few bytes follow.
      const header = block({ path: "package/huge.json", type: "File", size: 3 * 1024 * 1024 * 1024 })
      refused(yield* unpack(gz(Buffer.concat([header, Buffer.alloc(4096)]))), /larger than 134217728 bytes/)
    }))

  it.scopedLive("stops a gzip bomb at the limits", () =>
    Effect.gen(function*() {
      // 16 MiB of zeros gzip to about 16 KiB.
      const bomb = gz(rawTar([{ path: "package/bomb.json", data: Buffer.alloc(16 * 1024 * 1024) }]))
      expect(bomb.length).toBeLessThan(256 * 1024)
      refused(yield* unpack(bomb, small), /larger than 1048576 bytes/)
      // Many entries each within the limit, together beyond it.
      const spread = gz(rawTar(Array.from({ length: 8 }, (_, i) => ({ path: `package/${i}.json`, data: Buffer.alloc(1024 * 1024) }))))
      refused(yield* unpack(spread, small), /unpacked size exceeds 4194304 bytes/)
      // Zeros after the end of the archive are never decompressed nor kept.
      const trailing = gz(Buffer.concat([rawTar([{ path: "package/package.json", data: "{}" }]), Buffer.alloc(16 * 1024 * 1024)]))
      expect((yield* unpack(trailing, small)).result).toEqual({ files: 1 })
    }))

  it.scopedLive("refuses more entries than the limit, links and folders included", () =>
    Effect.gen(function*() {
      const many = Array.from({ length: 11 }, (_, i): Entry => i % 2 === 0 ? { path: `package/${i}.json`, data: "" } : { path: `package/d${i}`, type: "Directory" })
      refused(yield* unpack(gz(rawTar(many)), small), /more than 10 entries/)
      expect((yield* unpack(gz(rawTar(many.slice(0, 10))), small)).result).toEqual({ files: 5 })
    }))

  it.scopedLive("refuses truncated archives, in a body, in a header or in the gzip stream", () =>
    Effect.gen(function*() {
      const whole = rawTar([{ path: "package/package.json", data: "{}" }, { path: "package/a.json", data: "x".repeat(2000) }], false)
      refused(yield* unpack(gz(whole.subarray(0, 512 * 4))), /truncated tar archive/)
      refused(yield* unpack(gz(whole.subarray(0, 512 * 2 + 100))), /truncated tar archive/)
      const zipped = gz(rawTar([{ path: "package/package.json", data: "{}" }]))
      refused(yield* unpack(zipped.subarray(0, zipped.length - 10)), /not a valid gzip stream/)
    }))

  it.scopedLive("refuses what is not a gzipped tar", () =>
    Effect.gen(function*() {
      refused(yield* unpack(Buffer.from(`{"error":"not found"}`)), /not a valid gzip stream/)
      refused(yield* unpack(rawTar([{ path: "package/package.json", data: "{}" }])), /not a valid gzip stream/)
      refused(yield* unpack(gz(Buffer.from("<html>not found</html>\n".repeat(100)))), /corrupt tar header|not a tar archive/)
      refused(yield* unpack(gz(Buffer.alloc(0))), /not a tar archive/)
      refused(yield* unpack(gz(gz(rawTar([{ path: "package/package.json", data: "{}" }])))), /compressed twice/)
      const corrupt = rawTar([{ path: "package/package.json", data: "{}" }])
      corrupt[0] = "q".charCodeAt(0)
      refused(yield* unpack(gz(corrupt)), /corrupt tar header/)
    }))

  it.scopedLive("a hostile .tgz given as a package path fails as a PackageSourceError", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const file = Path.join(dir, "evil.tgz")
      yield* Effect.promise(() => Fs.writeFile(file, gz(rawTar([{ path: "package/../../evil.json", data: "{}" }]))))
      const error = yield* loadPath(file, defaultTarLimits).pipe(Effect.flip)
      expect(error).toBeInstanceOf(PackageSourceError)
      expect(error.message).toMatch(/cannot unpack: unsafe entry path/)
    }))
})
