/**
 * Unpacks a gzipped npm tarball into `<dest>/package/...`, streaming (the R4 examples package is
 * about 190 MB unpacked). Like npm, the first path component is replaced by `package`. Entries that
 * would escape the destination, links and devices are refused or skipped; sizes are bounded.
 * Format: POSIX ustar with pax ('x') and GNU long-name ('L') headers.
 */
import * as Fs from "node:fs"
import * as FsP from "node:fs/promises"
import * as Path from "node:path"
import * as Zlib from "node:zlib"

export interface TarLimits {
  readonly maxEntryBytes: number
  readonly maxTotalBytes: number
}

export const defaultTarLimits: TarLimits = { maxEntryBytes: 128 * 1024 * 1024, maxTotalBytes: 2 * 1024 * 1024 * 1024 }

export class TarError extends Error {}

/** A queue of bytes that hands out exact-size slices as they arrive. */
class Bytes {
  private chunks: Array<Buffer> = []
  private size = 0
  push(chunk: Buffer): void {
    this.chunks.push(chunk)
    this.size += chunk.length
  }
  get available(): number {
    return this.size
  }
  take(n: number): Buffer {
    const all = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks)
    this.chunks = n < all.length ? [all.subarray(n)] : []
    this.size = all.length - n
    return all.subarray(0, n)
  }
}

const text = (block: Buffer, start: number, length: number): string => {
  const field = block.subarray(start, start + length)
  const end = field.indexOf(0)
  return field.subarray(0, end < 0 ? field.length : end).toString("utf8")
}

const octal = (block: Buffer, start: number, length: number): number => {
  if ((block[start]! & 0x80) !== 0) {
    // GNU base-256 for sizes above 8 GiB: always beyond our limits.
    return Number.MAX_SAFE_INTEGER
  }
  const value = text(block, start, length).trim()
  return value === "" ? 0 : parseInt(value, 8)
}

const checksumOk = (block: Buffer): boolean => {
  let sum = 0
  for (let i = 0; i < 512; i++) sum += i >= 148 && i < 156 ? 32 : block[i]!
  return sum === octal(block, 148, 8)
}

const paxPath = (data: Buffer): string | undefined => {
  let offset = 0
  let path: string | undefined
  while (offset < data.length) {
    const space = data.indexOf(0x20, offset)
    const length = space < 0 ? NaN : parseInt(data.subarray(offset, space).toString("ascii"), 10)
    if (!Number.isFinite(length) || length <= 0) break
    const record = data.subarray(space + 1, offset + length - 1).toString("utf8")
    const eq = record.indexOf("=")
    if (record.slice(0, eq) === "path") path = record.slice(eq + 1)
    offset += length
  }
  return path
}

/** The path under `package/`, or undefined for the top folder itself; throws on traversal. */
export const entryPath = (raw: string): string | undefined => {
  if (raw.includes("\0") || raw.includes("\\") || raw.startsWith("/")) throw new TarError(`unsafe entry path ${JSON.stringify(raw)}`)
  const parts = raw.split("/").filter((part) => part !== "" && part !== ".")
  if (parts.includes("..")) throw new TarError(`unsafe entry path ${JSON.stringify(raw)}`)
  return parts.length <= 1 ? undefined : parts.slice(1).join("/")
}

/** Unpacks `tgz` into `dest` (which must exist); returns the number of files written. */
export const extractTgz = async (tgz: string, dest: string, limits: TarLimits = defaultTarLimits): Promise<number> => {
  const root = Path.resolve(dest, "package")
  const made = new Set<string>()
  const bytes = new Bytes()
  let total = 0
  let files = 0
  let header: { readonly type: string; readonly path: string; readonly size: number } | undefined
  let longName: string | undefined
  let done = false

  const write = async (relative: string, data: Buffer): Promise<void> => {
    const target = Path.resolve(root, relative)
    if (!target.startsWith(root + Path.sep)) throw new TarError(`unsafe entry path ${JSON.stringify(relative)}`)
    const dir = Path.dirname(target)
    if (!made.has(dir)) {
      await FsP.mkdir(dir, { recursive: true })
      made.add(dir)
    }
    await FsP.writeFile(target, data)
    files++
  }

  const gunzip = Fs.createReadStream(tgz).pipe(Zlib.createGunzip())
  for await (const chunk of gunzip) {
    if (done) continue
    bytes.push(chunk as Buffer)
    for (;;) {
      if (header === undefined) {
        if (bytes.available < 512) break
        const block = bytes.take(512)
        if (block.every((b) => b === 0)) {
          done = true
          break
        }
        if (!checksumOk(block)) throw new TarError("corrupt tar header")
        const prefix = text(block, 257, 6).startsWith("ustar") ? text(block, 345, 155) : ""
        const name = text(block, 0, 100)
        const size = octal(block, 124, 12)
        if (size > limits.maxEntryBytes) throw new TarError(`entry ${name} is larger than ${limits.maxEntryBytes} bytes`)
        total += size
        if (total > limits.maxTotalBytes) throw new TarError(`unpacked size exceeds ${limits.maxTotalBytes} bytes`)
        header = { type: String.fromCharCode(block[156]!), path: prefix === "" ? name : `${prefix}/${name}`, size }
      }
      const padded = Math.ceil(header.size / 512) * 512
      if (bytes.available < padded) break
      const data = bytes.take(padded).subarray(0, header.size)
      const entry = header
      header = undefined
      if (entry.type === "x") {
        longName = paxPath(data) ?? longName
      } else if (entry.type === "L") {
        longName = text(data, 0, data.length)
      } else if (entry.type === "g") {
        continue
      } else {
        const relative = entryPath(longName ?? entry.path)
        longName = undefined
        if (relative !== undefined && (entry.type === "0" || entry.type === "\0" || entry.type === "7")) {
          await write(relative, data)
        }
      }
    }
  }
  if (!done && (header !== undefined || bytes.available > 0)) throw new TarError("truncated tar archive")
  return files
}
