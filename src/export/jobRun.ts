/**
 * One export job worked on (docs/export.md, "Jobs"): each type in turn, read a batch at a time as of the job's
 * transaction commit (read.ts, about 4 MiB a batch) and appended to the type's current NDJSON file; after each batch the file is
 * flushed to the disk and the checkpoint recorded (jobs.ts), which also renews the lease. A job that is no longer
 * the worker's (cancelled, or taken over) stops at its next checkpoint.
 *
 * No resource is written twice or lost across starts: a file is served up to the length its last checkpoint
 * recorded, and a start never writes into a file of an earlier start (the disk name carries the start), so what
 * an earlier start wrote after its last checkpoint is never served, and the new start goes on after the last id
 * recorded. Memory holds one batch.
 */
import { Clock, Effect } from "effect"
import type { FileHandle } from "node:fs/promises"
import { mkdir, open, rm, writeFile } from "node:fs/promises"
import { join } from "node:path"
import type { Catalog } from "../catalog/Catalog.ts"
import type { Database } from "../db/Database.ts"
import type { Writer } from "../db/Writer.ts"
import { checkpoint, complete, type Job, type OutputFile, type Progress, type WorkerId } from "./jobs.ts"
import { nextBatchRows, readBatch, segmentsOf } from "./read.ts"

export interface WorkerContext {
  readonly db: Database["Type"]
  readonly writer: Writer["Type"]
  readonly catalog: Effect.Effect<Catalog>
  /** `export.dir`: the jobs' directories are in it. */
  readonly dir: string
  readonly maxFileBytes: number
  readonly worker: WorkerId
}

/** A file system step that failed: the job is given up for now (and started again, at most three times in all). */
export class ExportIoError extends Error {
  override readonly name = "ExportIoError"
}

const io = <A>(what: string, run: () => Promise<A>): Effect.Effect<A, ExportIoError> =>
  Effect.tryPromise({ try: run, catch: (cause) => new ExportIoError(`${what}: ${cause instanceof Error ? cause.message : String(cause)}`) })

/** The directory of a job's files. */
export const jobDirectory = (dir: string, id: string): string => join(dir, id)

/** The name of a type's `n`th file, as the manifest's URLs give it. */
export const fileName = (type: string, n: number): string => `${type}.${n}.ndjson`

/** The name of the file of OperationOutcomes (a name no resource type's file can have). */
export const errorFileName = "error.1.ndjson"

/** Removes a job's directory and everything in it. */
export const removeJobFiles = (dir: string, id: string): Effect.Effect<void> =>
  Effect.ignore(io("removing the job's files", () => rm(jobDirectory(dir, id), { recursive: true, force: true })))

const newline = Buffer.from("\n")

/** Writes every byte of `chunks` (`bytes` in all) at the file's position: a write may take fewer than it is given. */
const writeAll = async (handle: FileHandle, chunks: ReadonlyArray<Uint8Array>, bytes: number): Promise<void> => {
  let left = [...chunks]
  let remaining = bytes
  while (remaining > 0) {
    const { bytesWritten } = await handle.writev(left)
    remaining -= bytesWritten
    if (remaining === 0) return
    // Drop what was written, and the written part of the chunk it stopped in.
    let skip = bytesWritten
    while (skip > 0 && skip >= left[0]!.byteLength) skip -= left.shift()!.byteLength
    if (skip > 0) left = [left[0]!.subarray(skip), ...left.slice(1)]
  }
}

/** The file being appended to: its entry in the output, and the open handle. */
interface Part {
  entry: OutputFile
  readonly handle: FileHandle
}

/** How a run ended: the job done, or no longer this worker's to write. */
export type RunEnd = "completed" | "stopped"

/** Works on `job` (taken by `context.worker`) until it is completed or no longer the worker's. */
export const runJob = (context: WorkerContext, job: Job): Effect.Effect<RunEnd, unknown> =>
  Effect.gen(function*() {
    const { db, writer, worker, spec } = { ...context, spec: job.spec }
    const directory = jobDirectory(context.dir, job.id)
    yield* io("making the job's directory", () => mkdir(directory, { recursive: true }))
    const catalog = yield* context.catalog
    const files: Array<OutputFile> = [...job.progress.files]
    let written = job.progress.written
    let part: Part | undefined
    let opened = 0

    const closePart = Effect.suspend(() => {
      const closing = part
      part = undefined
      return closing === undefined ? Effect.void : io("closing a file", () => closing.handle.close())
    })

    const save = (progress: Progress) =>
      Effect.flatMap(
        part === undefined ? Effect.void : io("writing a file to the disk", () => part!.handle.sync()),
        () => checkpoint(db, writer, job.id, worker, progress)
      )

    /** Appends `lines` of `type`, opening a new file when the current one would pass the size limit: the bytes written. */
    const append = (type: string, lines: ReadonlyArray<string | Uint8Array>) =>
      Effect.gen(function*() {
        let pending: Array<Uint8Array> = []
        let pendingBytes = 0
        let pendingCount = 0
        let total = 0
        const flush = Effect.suspend(() => {
          if (part === undefined || pending.length === 0) return Effect.void
          const target = part
          const chunks = pending
          const bytes = pendingBytes
          const count = pendingCount
          pending = []
          pendingBytes = 0
          pendingCount = 0
          return Effect.map(io("writing a file", () => writeAll(target.handle, chunks, bytes)), () => {
            target.entry = { ...target.entry, count: target.entry.count + count, bytes: target.entry.bytes + bytes }
            files[files.findIndex((file) => file.name === target.entry.name)] = target.entry
          })
        })
        for (const line of lines) {
          const data = typeof line === "string" ? Buffer.from(line, "utf8") : line
          const bytes = data.byteLength + 1
          const size = (part?.entry.bytes ?? 0) + pendingBytes
          if (part === undefined || (size > 0 && size + bytes > context.maxFileBytes)) {
            yield* flush
            yield* closePart
            const n = files.filter((file) => file.type === type && file.error !== true).length + 1
            const name = fileName(type, n)
            const disk = `${job.starts}-${name}`
            const handle = yield* io("opening a file", () => open(join(directory, disk), "w"))
            opened += 1
            const entry: OutputFile = { type, name, disk, count: 0, bytes: 0 }
            files.push(entry)
            part = { entry, handle }
          }
          pending.push(data, newline)
          pendingBytes += bytes
          pendingCount += 1
          total += bytes
        }
        yield* flush
        return total
      })

    /**
     * Reads the next batch and appends it: how many resources and bytes, and the last id. Only these outlive it, so
     * that the batch is garbage before the checkpoint's waits (not carried into the heap's old generation).
     */
    const copyBatch = (type: string, segment: number, after: string | null, limit: number) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const rows = yield* context.db.withReader((sql) =>
          readBatch(sql, catalog, { spec, caller: job.caller, transactionTs: job.transactionTs, type, segment, after, now, rows: limit })
        )
        if (rows.length === 0) return undefined
        const bytes = yield* append(type, rows.map((row) => row.content))
        return { rows: rows.length, bytes, last: rows[rows.length - 1]!.id }
      })

    const run = Effect.gen(function*() {
      for (let t = job.progress.type; t < spec.types.length; t++) {
        const type = spec.types[t]!
        const resumed = t === job.progress.type
        for (let segment = resumed ? job.progress.segment : 0; segment < segmentsOf(spec); segment++) {
          let after = resumed && segment === job.progress.segment ? job.progress.after : null
          let limit = nextBatchRows(0, 0)
          for (;;) {
            const batch = yield* copyBatch(type, segment, after, limit)
            if (batch === undefined) break
            const full = batch.rows >= limit
            limit = nextBatchRows(batch.rows, batch.bytes)
            written += batch.rows
            after = batch.last
            if (!(yield* save({ type: t, segment, after, files, written }))) return "stopped" as const
            if (!full) break
          }
        }
        yield* closePart
        if (!(yield* save({ type: t + 1, segment: 0, after: null, files, written }))) return "stopped" as const
      }
      if (spec.warnings.length > 0 && !files.some((file) => file.error === true)) {
        const name = errorFileName
        const disk = `${job.starts}-${name}`
        const text = spec.warnings.map((warning) =>
          `${JSON.stringify({ resourceType: "OperationOutcome", issue: [{ severity: "warning", code: "not-supported", diagnostics: warning }] })}\n`
        ).join("")
        yield* io("writing the error file", () => writeFile(join(directory, disk), text, { flush: true }))
        files.push({ type: "OperationOutcome", name, disk, count: spec.warnings.length, bytes: Buffer.byteLength(text), error: true })
      }
      const done = yield* complete(db, writer, job.id, worker, { type: spec.types.length, segment: 0, after: null, files, written })
      return done ? "completed" as const : "stopped" as const
    })
    return yield* Effect.ensuring(run, Effect.ignore(closePart)).pipe(
      Effect.tap((end) => Effect.logDebug("export job ran", { job: job.id, end, files_opened: opened }))
    )
  })
