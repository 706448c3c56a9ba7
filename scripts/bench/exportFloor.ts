/**
 * The export's floor, on SQLite: the current version of every resource read from the svc database with
 * better-sqlite3 in one ordered pass and written to an NDJSON file per type, with nothing else: no job,
 * no batches, no progress, no HTTP. No export on Node can write the same files from the same database
 * faster, so svc's resources/s is read as a share of it (docs/performance.md, "Export").
 */
import Database from "better-sqlite3"
import { closeSync, mkdirSync, openSync, rmSync, writeSync } from "node:fs"
import { join } from "node:path"

export interface ExportFloor {
  readonly resources: number
  readonly seconds: number
  readonly resourcesPerSec: number
  readonly megabytes: number
}

/** Bytes gathered before one write to the file. */
const bufferBytes = 1 << 20

/** Writes every current resource of `file` to `dir/<Type>.ndjson`, timed; the files are removed afterwards. */
export const exportFloor = (file: string, dir: string): ExportFloor => {
  mkdirSync(dir, { recursive: true })
  const db = new Database(file, { readonly: true, fileMustExist: true })
  const started = performance.now()
  let resources = 0
  let bytes = 0
  let type: string | undefined
  let fd: number | undefined
  let pending: Array<string> = []
  let pendingBytes = 0
  const flush = () => {
    if (fd !== undefined && pending.length > 0) bytes += writeSync(fd, pending.join(""))
    pending = []
    pendingBytes = 0
  }
  try {
    const rows = db.prepare(
      "select r.type as type, v.content as content from resources r join resource_versions v on v.rkey = r.rkey and v.version = r.version " +
      "where r.deleted = 0 order by r.type, r.rkey"
    ).iterate() as Iterable<{ type: string; content: string }>
    for (const row of rows) {
      if (row.type !== type) {
        flush()
        if (fd !== undefined) closeSync(fd)
        type = row.type
        fd = openSync(join(dir, `${type}.ndjson`), "w")
      }
      const line = `${row.content}\n`
      pending.push(line)
      pendingBytes += line.length
      resources++
      if (pendingBytes >= bufferBytes) flush()
    }
    flush()
  } finally {
    if (fd !== undefined) closeSync(fd)
    db.close()
  }
  const seconds = (performance.now() - started) / 1000
  rmSync(dir, { recursive: true, force: true })
  return { resources, seconds, resourcesPerSec: resources / seconds, megabytes: bytes / 2 ** 20 }
}
