/**
 * Unpacks a gzipped npm tarball into `<dest>/package/...`, streaming (the R4 examples package is
 * about 190 MB unpacked), with the `tar` package's parser. Like npm, the first path component is
 * replaced by `package`. The archive is untrusted: entries that would escape the destination are
 * refused, links, devices and directories are never written (folders are made for the files), and
 * the number of entries, each entry's size, the total size and the bytes decompressed are bounded,
 * so a gzip bomb stops at a limit. Every failure is a `TarError` (or the file system's own error).
 */
import { once } from "node:events"
import * as Fs from "node:fs"
import * as FsP from "node:fs/promises"
import * as Path from "node:path"
import * as Stream from "node:stream"
import * as Zlib from "node:zlib"
import * as Tar from "tar"

export interface TarLimits {
  readonly maxEntryBytes: number
  readonly maxTotalBytes: number
  /** Entries of any kind (files, folders, links). Default 100 000; the R4 examples package has about 5 300. */
  readonly maxEntries?: number
}

export const defaultTarLimits: TarLimits = {
  maxEntryBytes: 128 * 1024 * 1024,
  maxTotalBytes: 2 * 1024 * 1024 * 1024,
  maxEntries: 100_000
}

export class TarError extends Error {}

/** The path under `package/`, or undefined for the top folder itself; throws on traversal. */
export const entryPath = (raw: string): string | undefined => {
  if (raw.includes("\0") || raw.includes("\\") || raw.startsWith("/")) throw new TarError(`unsafe entry path ${JSON.stringify(raw)}`)
  const parts = raw.split("/").filter((part) => part !== "" && part !== ".")
  if (parts.includes("..")) throw new TarError(`unsafe entry path ${JSON.stringify(raw)}`)
  return parts.length <= 1 ? undefined : parts.slice(1).join("/")
}

const fileTypes: ReadonlySet<string> = new Set(["File", "OldFile", "ContiguousFile"])

// O_NOFOLLOW: a file is never written through a link, whatever the destination already holds.
const writeFlags = Fs.constants.O_WRONLY | Fs.constants.O_CREAT | Fs.constants.O_TRUNC | (Fs.constants.O_NOFOLLOW ?? 0)

/** An error in the words of this module: the parser's (strict mode turns its warnings into errors) and zlib's. */
const tarError = (cause: unknown): Error => {
  if (cause instanceof TarError) return cause
  const message = cause instanceof Error ? cause.message : String(cause)
  const field = (name: string): string | undefined =>
    typeof cause === "object" && cause !== null && name in cause ? String((cause as Record<string, unknown>)[name]) : undefined
  const tarCode = field("tarCode")
  if (tarCode !== undefined) {
    if (/truncated/i.test(message)) return new TarError("truncated tar archive")
    if (tarCode === "TAR_ENTRY_INVALID") return new TarError(`corrupt tar header (${message})`)
    if (/unrecognized archive format/i.test(message)) return new TarError("not a tar archive")
    return new TarError(message)
  }
  if (field("code")?.startsWith("Z_") === true) return new TarError(`not a valid gzip stream (${message})`)
  // The file system's own errors (a missing file, a full disk) keep their words.
  return cause instanceof Error ? cause : new TarError(message)
}

const isGzipMagic = (head: Buffer): boolean => head[0] === 0x1f && head[1] === 0x8b

/** Unpacks `tgz` into `dest` (which must exist); returns the number of files written. */
export const extractTgz = async (tgz: string, dest: string, limits: TarLimits = defaultTarLimits): Promise<number> => {
  const root = Path.resolve(dest, "package")
  const maxEntries = limits.maxEntries ?? defaultTarLimits.maxEntries ?? Infinity
  // Headers and padding come on top of the entries' bytes: at most about two blocks per entry.
  const maxStreamBytes = limits.maxTotalBytes + 1024 * Math.min(maxEntries, 1_000_000) + 1024 * 1024
  const made = new Map<string, Promise<unknown>>()
  let entries = 0
  let total = 0
  let files = 0
  let sawEnd = false

  let error: Error | undefined
  let reject: (cause: Error) => void = () => undefined
  const failure = new Promise<never>((_, rej) => {
    reject = rej
  })
  failure.catch(() => undefined)
  const fail = (cause: unknown): void => {
    if (error !== undefined) return
    error = tarError(cause)
    reject(error)
  }

  /** Counts an entry against the limits when its header is read, before any of its bytes. */
  const admit = (entry: Tar.ReadEntry): boolean => {
    entries++
    if (entries > maxEntries) {
      fail(new TarError(`the archive has more than ${maxEntries} entries`))
      return false
    }
    if (entry.size > limits.maxEntryBytes) {
      fail(new TarError(`entry ${JSON.stringify(entry.path)} is larger than ${limits.maxEntryBytes} bytes`))
      return false
    }
    total += entry.size
    if (total > limits.maxTotalBytes) {
      fail(new TarError(`unpacked size exceeds ${limits.maxTotalBytes} bytes`))
      return false
    }
    return true
  }

  const write = async (entry: Tar.ReadEntry, relative: string): Promise<void> => {
    const target = Path.resolve(root, relative)
    if (!target.startsWith(root + Path.sep)) throw new TarError(`unsafe entry path ${JSON.stringify(relative)}`)
    const dir = Path.dirname(target)
    let making = made.get(dir)
    if (making === undefined) {
      making = FsP.mkdir(dir, { recursive: true })
      made.set(dir, making)
    }
    await making
    const file = await FsP.open(target, writeFlags, 0o644)
    try {
      const copy = async () => {
        for await (const chunk of entry) await file.write(chunk)
      }
      // On failure the parser stops feeding this entry: do not wait for bytes that will not come.
      await Promise.race([copy(), failure])
    } finally {
      await file.close()
    }
    files++
  }

  // Entries come one at a time (the parser waits for each to be read); the writes run in order.
  let work: Promise<void> = Promise.resolve()
  const parser = new Tar.Parser({
    strict: true,
    brotli: false,
    zstd: false,
    maxMetaEntrySize: Math.min(1024 * 1024, limits.maxEntryBytes),
    onReadEntry: (entry) => {
      if (error !== undefined || !admit(entry)) return void entry.resume()
      let relative: string | undefined
      try {
        relative = entryPath(entry.path)
      } catch (cause) {
        fail(cause)
        return void entry.resume()
      }
      if (relative === undefined || !fileTypes.has(entry.type)) return void entry.resume()
      const path = relative
      work = work.then(() => error === undefined ? write(entry, path) : void entry.resume()).catch(fail)
    }
  })
  parser.on("error", fail)
  // Skipped by the parser itself (unknown types, oversized metadata): still counted, still bounded.
  parser.on("ignoredEntry", (entry: Tar.ReadEntry) => void admit(entry))
  parser.on("eof", () => {
    sawEnd = true
  })

  const input = Stream.pipeline(Fs.createReadStream(tgz), Zlib.createGunzip(), () => undefined)
  let fed = 0
  let head = Buffer.alloc(0)
  try {
    for await (const chunk of input as AsyncIterable<Buffer>) {
      if (fed === 0 && head.length + chunk.length < 2) {
        head = Buffer.concat([head, chunk])
        continue
      }
      const data = head.length > 0 ? Buffer.concat([head, chunk]) : chunk
      head = Buffer.alloc(0)
      // A gzip inside the gzip would be unpacked again by the parser, outside these limits.
      if (fed === 0 && isGzipMagic(data)) fail(new TarError("not a tar archive (compressed twice)"))
      fed += data.length
      if (fed > maxStreamBytes) fail(new TarError(`unpacked size exceeds ${limits.maxTotalBytes} bytes`))
      if (error !== undefined) break
      if (!parser.write(data)) await Promise.race([once(parser, "drain"), failure]).catch(() => undefined)
      // Whatever follows the end-of-archive blocks is never decompressed.
      if (error !== undefined || sawEnd) break
    }
  } catch (cause) {
    fail(cause)
  }
  if (error === undefined) {
    if (!sawEnd && fed % 512 !== 0) fail(new TarError("truncated tar archive"))
    else {
      const ended = once(parser, "end")
      parser.end()
      await Promise.race([ended, failure]).catch(() => undefined)
    }
  }
  await work.catch(() => undefined)
  if (error !== undefined) throw error
  return files
}
