/**
 * One backfill job run to its end: the resources it covers in row-key order, a batch per Writer
 * transaction holding their new index rows and the cursor, and the record of what the index now holds
 * in the transaction that finds nothing left. A resource that cannot be read is logged and passed over;
 * so is one whose rows the database refuses, found by redoing a failed batch one resource at a time.
 */
import type { LeaseLost } from "../../db/WriterLease.ts"
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Effect } from "effect"
import type { Catalog } from "../../catalog/Catalog.ts"
import type { Database } from "../../db/Database.ts"
import type { Writer } from "../../db/Writer.ts"
import { extractIndex } from "../extract/extractIndex.ts"
import { replaceIndexes, type ResourceIndex } from "../IndexWriter.ts"
import { countJob, finishJob, type Job, nextCandidates, planJob, readState, saveCursor } from "./BackfillState.ts"
import { typeFingerprints } from "./fingerprint.ts"
import { parseJson } from "../../json/Json.ts"

export interface Progress {
  readonly running: boolean
  /**
   * The resource types whose index the job under way rebuilds: until it is done, a search on them may
   * miss resources written before their parameters changed.
   */
  readonly types: ReadonlyArray<string>
  /** The generation of the catalog the last job brought (or brings) the index to. */
  readonly generation: number | undefined
  /** Resources of the job done so far, those done before a resume included, and of how many. */
  readonly done: number
  readonly total: number
  readonly failed: number
}

export interface Report {
  /** The job that ran; undefined when the index was already up to date. */
  readonly job: string | undefined
  /** Resources found done already because the job resumed. */
  readonly resumed: number
  readonly indexed: number
  readonly failed: number
  readonly total: number
}

export interface JobContext {
  readonly db: Database["Type"]
  readonly writer: Writer["Type"]
  /** Resources per Writer transaction. */
  readonly batchSize: number
  /** A progress log line every this many batches. */
  readonly logEvery: number
  readonly report: (update: (progress: Progress) => Progress) => Effect.Effect<void>
}

interface Failure {
  readonly type: string
  readonly id: string
  readonly reason: string
}

interface Step {
  readonly finished: boolean
  readonly last: number
  readonly indexed: number
  readonly failures: ReadonlyArray<Failure>
}

/** Indexes up to `limit` resources after `after` in one transaction; finishes the job when none is left. */
const step = (context: JobContext, sql: SqlClient.SqlClient, job: Job, catalog: Catalog, after: number, limit: number) =>
  Effect.map(context.writer.commit(() =>
    Effect.gen(function*() {
      const candidates = yield* nextCandidates(sql, job, after, limit)
      if (candidates.length === 0) {
        yield* finishJob(sql, job)
        return { finished: true, last: after, indexed: 0, failures: [] }
      }
      const indexes: Array<ResourceIndex> = []
      const failures: Array<Failure> = []
      for (const candidate of candidates) {
        try {
          const resource = parseJson(candidate.content) as Record<string, unknown>
          indexes.push({ rkey: candidate.rkey, type: candidate.type, rows: extractIndex(resource, catalog) })
        } catch (error) {
          failures.push({ type: candidate.type, id: candidate.id, reason: String(error) })
        }
      }
      yield* replaceIndexes(sql, indexes)
      const last = candidates[candidates.length - 1]!.rkey
      yield* saveCursor(sql, job, last)
      return { finished: false, last, indexed: indexes.length, failures }
    })
  ), (result): Step => result.value)

/** Passes over the next resource without indexing it. */
const skip = (context: JobContext, sql: SqlClient.SqlClient, job: Job, after: number, reason: string) =>
  Effect.map(context.writer.commit(() =>
    Effect.gen(function*() {
      const [next] = yield* nextCandidates(sql, job, after, 1)
      if (next === undefined) return { finished: false, last: after, indexed: 0, failures: [] }
      yield* saveCursor(sql, job, next.rkey)
      return { finished: false, last: next.rkey, indexed: 0, failures: [{ type: next.type, id: next.id, reason }] }
    })
  ), (result): Step => result.value)

/** After a failed batch: the same resources one per transaction, passing over those that fail alone. */
const oneByOne = (context: JobContext, sql: SqlClient.SqlClient, job: Job, catalog: Catalog, after: number, error: SqlError) =>
  Effect.gen(function*() {
    yield* Effect.logWarning("search index batch failed; indexing its resources one at a time", { job: job.key, reason: error.message })
    let last = after
    let indexed = 0
    const failures: Array<Failure> = []
    for (let i = 0; i < context.batchSize; i++) {
      const one = yield* step(context, sql, job, catalog, last, 1).pipe(
        Effect.catchTag("SqlError", (failed) => skip(context, sql, job, last, failed.message))
      )
      if (one.finished) return { ...one, last, indexed, failures }
      last = one.last
      indexed += one.indexed
      failures.push(...one.failures)
    }
    return { finished: false, last, indexed, failures }
  })

const upToDate: Report = { job: undefined, resumed: 0, indexed: 0, failed: 0, total: 0 }

/** Brings the index up to `catalog`, resuming the job the database records when it is the same one. */
export const runJob = (context: JobContext, catalog: Catalog): Effect.Effect<Report, SqlError | LeaseLost> =>
  Effect.gen(function*() {
    const { db, report } = context
    const sql = db.writer
    const generation = catalog.generation
    const started = yield* Clock.currentTimeMillis
    const job = planJob(typeFingerprints(catalog), yield* db.withReader(readState))
    if (job === undefined) {
      yield* report((current) => ({ ...current, types: [], generation }))
      return upToDate
    }
    const counts = yield* db.withReader((reader) => countJob(reader, job))
    yield* report(() => ({ running: true, types: job.types, generation, done: counts.done, total: counts.total, failed: 0 }))
    yield* Effect.logInfo("search index backfill started", {
      job: job.key,
      generation,
      types: job.types.length,
      packages: job.packages !== undefined,
      resources: counts.total,
      resumed_at: counts.done
    })
    let after = job.after
    let indexed = 0
    let failed = 0
    for (let batches = 1;; batches++) {
      const result = yield* step(context, sql, job, catalog, after, context.batchSize).pipe(
        Effect.catchTag("SqlError", (error) => oneByOne(context, sql, job, catalog, after, error))
      )
      for (const failure of result.failures) {
        yield* Effect.logWarning("resource could not be indexed for search", { job: job.key, ...failure })
      }
      after = result.last
      indexed += result.indexed
      failed += result.failures.length
      const done = counts.done + indexed + failed
      const total = Math.max(done, counts.total)
      yield* report(() => ({ running: !result.finished, types: result.finished ? [] : job.types, generation, done, total, failed }))
      const ms = (yield* Clock.currentTimeMillis) - started
      if (result.finished) {
        yield* Effect.logInfo("search index backfilled", { job: job.key, generation, resources: indexed, failed, total: done, ms })
        return { job: job.key, resumed: counts.done, indexed, failed, total: done }
      }
      if (batches % context.logEvery === 0) {
        yield* Effect.logInfo("search index backfill progress", { job: job.key, done, total: counts.total, failed, ms })
      }
      // Lets waiting writes and requests in between batches.
      yield* Effect.yieldNow()
    }
  }).pipe(Effect.ensuring(context.report((current) => ({ ...current, running: false }))))
