/**
 * Export jobs as rows of `svc_export_jobs` (migration 0017; docs/export.md, "Jobs"): made at kick-off, taken by
 * the server that works on them under a lease, checkpointed after every batch, finished, failed or cancelled.
 * Every change goes through the Writer, so a server that lost the writer lease (fenced) changes no job; reads
 * take any connection.
 *
 * A job is taken when it is queued, or running under a lease that ran out, that a server took under an older
 * writer-lease epoch (a standby has taken over since), or (`exclusive`, SQLite: the one process that can open the
 * database) that another process took. Each take counts as a start; a job started `maxStarts` times without
 * finishing is failed instead of taken again.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Effect } from "effect"
import type { Database } from "../db/Database.ts"
import type { Writer } from "../db/Writer.ts"
import type { LeaseLost } from "../db/WriterLease.ts"

/** How long a job's lease lasts (spec: Limits, "Export job lease"). */
export const leaseMillis = 30_000
/** How often a server working on a job renews its lease. */
export const renewMillis = 10_000
/** Starts of an unfinished job before it is failed (spec: Limits). */
export const maxStarts = 3

export type JobState = "queued" | "running" | "completed" | "failed" | "cancelled"

/** What a job exports, fixed at kick-off. */
export interface ExportSpec {
  readonly level: "system" | "patient" | "group"
  /** The Group of a group-level export. */
  readonly group?: string
  /** The types to export, in the order their files are written. */
  readonly types: ReadonlyArray<string>
  /** `_since`, in microseconds since the epoch: only versions committed after it. */
  readonly since?: number
  /** `_typeFilter` by type: the queries (after `Type?`), any of which a resource must match. */
  readonly filters: Readonly<Record<string, ReadonlyArray<string>>>
  /** Patient and group level: the patients whose data is exported; absent for every patient. */
  readonly patients?: ReadonlyArray<string>
  /** What `Prefer: handling=lenient` left out, written to the manifest's `error` file. */
  readonly warnings: ReadonlyArray<string>
}

/** Who asked, as the worker needs it to apply the same grants: a token's client, user, scopes and patient. */
export type Caller =
  | { readonly _tag: "Anonymous" }
  | {
    readonly _tag: "Authorized"
    readonly clientId: string
    readonly user: string | undefined
    readonly scopes: ReadonlyArray<string>
    readonly patient: string | undefined
  }

/**
 * A file of the output: its name in the manifest's URL, its name in the job's directory (which carries the start
 * that wrote it), how many resources and bytes it holds (it is served up to `bytes`), and whether it is the
 * `error` file of OperationOutcomes.
 */
export interface OutputFile {
  readonly type: string
  readonly name: string
  readonly disk: string
  readonly count: number
  readonly bytes: number
  readonly error?: boolean
}

/** The last checkpoint: the type being written (index into `spec.types`), the segment of its patients, the last id written. */
export interface Progress {
  readonly type: number
  readonly segment: number
  readonly after: string | null
  readonly files: ReadonlyArray<OutputFile>
  readonly written: number
}

export const noProgress: Progress = { type: 0, segment: 0, after: null, files: [], written: 0 }

export interface Job {
  readonly id: string
  /** The client that started it (`client:<id>`), or "" for a caller without a token. */
  readonly owner: string
  readonly caller: Caller
  readonly state: JobState
  /** The kick-off's URL, as the manifest repeats it. */
  readonly request: string
  readonly spec: ExportSpec
  /** The commit the export is consistent with. */
  readonly transactionTs: number
  readonly createdAt: number
  readonly finishedAt: number | undefined
  readonly starts: number
  readonly leaseHolder: string | undefined
  readonly progress: Progress
  readonly message: string | undefined
}

/** The server working on jobs: its name, its writer-lease epoch, and whether no other process can be working. */
export interface WorkerId {
  readonly holder: string
  readonly epoch: number
  readonly exclusive: boolean
}

interface Row {
  readonly id: string
  readonly owner: string
  readonly caller: string
  readonly state: string
  readonly request: string
  readonly spec: string
  readonly transaction_ts: number | string
  readonly created_at: number | string
  readonly finished_at: number | string | null
  readonly starts: number | string
  readonly lease_holder: string | null
  readonly progress: string
  readonly message: string | null
}

const jobOf = (row: Row): Job => ({
  id: row.id,
  owner: row.owner,
  caller: JSON.parse(row.caller) as Caller,
  state: row.state as JobState,
  request: row.request,
  spec: JSON.parse(row.spec) as ExportSpec,
  transactionTs: Number(row.transaction_ts),
  createdAt: Number(row.created_at),
  finishedAt: row.finished_at === null ? undefined : Number(row.finished_at),
  starts: Number(row.starts),
  leaseHolder: row.lease_holder ?? undefined,
  progress: JSON.parse(row.progress) as Progress,
  message: row.message ?? undefined
})

type Writes = Effect.Effect<boolean, SqlError | LeaseLost>

/** The job's row, or undefined. */
export const readJob = (sql: SqlClient.SqlClient, id: string): Effect.Effect<Job | undefined, SqlError> =>
  Effect.map(sql<Row>`SELECT * FROM svc_export_jobs WHERE id = ${id}`, (rows) => (rows[0] === undefined ? undefined : jobOf(rows[0])))

/** Records a new job, queued. */
export const insertJob = (
  db: Database["Type"],
  writer: Writer["Type"],
  job: Pick<Job, "id" | "owner" | "caller" | "request" | "spec" | "transactionTs">
): Effect.Effect<void, SqlError | LeaseLost> =>
  Effect.flatMap(Clock.currentTimeMillis, (now) =>
    Effect.asVoid(writer.commit(() =>
      db.writer`INSERT INTO svc_export_jobs (id, owner, caller, state, request, spec, transaction_ts, created_at, starts, progress)
        VALUES (${job.id}, ${job.owner}, ${JSON.stringify(job.caller)}, ${"queued"}, ${job.request}, ${JSON.stringify(job.spec)},
          ${job.transactionTs}, ${now}, ${0}, ${JSON.stringify(noProgress)})`
    )))

/** The jobs `worker` may take at `now`, oldest first (at most 10). */
const takeable = (sql: SqlClient.SqlClient, worker: WorkerId, now: number) =>
  sql<Row>`
    SELECT * FROM svc_export_jobs
    WHERE state = ${"queued"} OR (state = ${"running"} AND (lease_holder IS NULL OR lease_expires <= ${now} OR lease_epoch < ${worker.epoch}
      ${worker.exclusive ? sql`OR lease_holder <> ${worker.holder}` : sql``}))
    ORDER BY created_at, id LIMIT 10`

/** In the Writer's transaction: takes the first of the takeable jobs, failing those started `maxStarts` times. */
const takeFirst = (sql: SqlClient.SqlClient, worker: WorkerId, now: number) =>
  Effect.gen(function*() {
    for (const row of yield* takeable(sql, worker, now)) {
      const job = jobOf(row)
      if (job.starts >= maxStarts) {
        const reason = `the export was started ${job.starts} times without finishing${job.message === undefined ? "" : ` (last: ${job.message})`}`
        yield* sql`UPDATE svc_export_jobs SET state = ${"failed"}, finished_at = ${now}, lease_holder = NULL, lease_expires = NULL, message = ${reason}
          WHERE id = ${job.id}`
        continue
      }
      yield* sql`UPDATE svc_export_jobs SET state = ${"running"}, starts = starts + 1, lease_holder = ${worker.holder},
        lease_epoch = ${worker.epoch}, lease_expires = ${now + leaseMillis} WHERE id = ${job.id}`
      return { ...job, state: "running" as const, starts: job.starts + 1, leaseHolder: worker.holder }
    }
    return undefined
  })

/**
 * Takes the oldest job that may be taken (see the module's comment) for `worker`, counting a start; a job already
 * started `maxStarts` times is failed instead, and the next one looked at. Undefined when there is none. Looked
 * for on a reader first: a server with no job to take commits nothing (and spends no commit timestamp).
 */
export const takeJob = (db: Database["Type"], writer: Writer["Type"], worker: WorkerId): Effect.Effect<Job | undefined, SqlError | LeaseLost> =>
  Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const seen = yield* db.withReader((sql) => takeable(sql, worker, now))
    if (seen.length === 0) return undefined
    return (yield* writer.commit(() => takeFirst(db.writer, worker, now))).value
  })

/** Runs `update` (which must name the job and the worker's lease) and says whether it changed the row. */
const ours = (db: Database["Type"], writer: Writer["Type"], update: (sql: SqlClient.SqlClient) => Effect.Effect<ReadonlyArray<unknown>, SqlError>): Writes =>
  Effect.map(writer.commit(() => update(db.writer)), (result) => result.value.length > 0)

/** Renews the worker's lease; false when the job is no longer its own and running (cancelled, taken over). */
export const renewLease = (db: Database["Type"], writer: Writer["Type"], id: string, worker: WorkerId): Writes =>
  Effect.flatMap(Clock.currentTimeMillis, (now) =>
    ours(db, writer, (sql) =>
      sql`UPDATE svc_export_jobs SET lease_expires = ${now + leaseMillis}
        WHERE id = ${id} AND state = ${"running"} AND lease_holder = ${worker.holder} RETURNING id`))

/** Records a checkpoint and renews the lease; false when the job is no longer the worker's to write. */
export const checkpoint = (db: Database["Type"], writer: Writer["Type"], id: string, worker: WorkerId, progress: Progress): Writes =>
  Effect.flatMap(Clock.currentTimeMillis, (now) =>
    ours(db, writer, (sql) =>
      sql`UPDATE svc_export_jobs SET progress = ${JSON.stringify(progress)}, lease_expires = ${now + leaseMillis}
        WHERE id = ${id} AND state = ${"running"} AND lease_holder = ${worker.holder} RETURNING id`))

/** Marks the job completed with its last progress (every file). */
export const complete = (db: Database["Type"], writer: Writer["Type"], id: string, worker: WorkerId, progress: Progress): Writes =>
  Effect.flatMap(Clock.currentTimeMillis, (now) =>
    ours(db, writer, (sql) =>
      sql`UPDATE svc_export_jobs SET state = ${"completed"}, progress = ${JSON.stringify(progress)}, finished_at = ${now},
        lease_holder = NULL, lease_expires = NULL
        WHERE id = ${id} AND state = ${"running"} AND lease_holder = ${worker.holder} RETURNING id`))

/** Gives the job up after a failure another start may mend: it can be taken again at once (a start is counted then). */
export const releaseJob = (db: Database["Type"], writer: Writer["Type"], id: string, worker: WorkerId, message: string): Writes =>
  ours(db, writer, (sql) =>
    sql`UPDATE svc_export_jobs SET lease_expires = ${0}, message = ${message}
      WHERE id = ${id} AND state = ${"running"} AND lease_holder = ${worker.holder} RETURNING id`)

/** Cancels (or discards) the job; false when it was already cancelled or is unknown. */
export const cancelJob = (db: Database["Type"], writer: Writer["Type"], id: string): Writes =>
  Effect.flatMap(Clock.currentTimeMillis, (now) =>
    ours(db, writer, (sql) =>
      sql`UPDATE svc_export_jobs SET state = ${"cancelled"}, finished_at = ${now}, lease_holder = NULL, lease_expires = NULL
        WHERE id = ${id} AND state <> ${"cancelled"} RETURNING id`))

/** The ids of jobs that finished (completed, failed or cancelled) before `before`, at most 100. */
export const finishedBefore = (sql: SqlClient.SqlClient, before: number): Effect.Effect<ReadonlyArray<string>, SqlError> =>
  Effect.map(
    sql<{ readonly id: string }>`SELECT id FROM svc_export_jobs WHERE finished_at IS NOT NULL AND finished_at < ${before} ORDER BY finished_at LIMIT 100`,
    (rows) => rows.map((row) => row.id)
  )

/** Removes the jobs' rows. */
export const deleteJobs = (db: Database["Type"], writer: Writer["Type"], ids: ReadonlyArray<string>): Effect.Effect<void, SqlError | LeaseLost> =>
  ids.length === 0 ? Effect.void : Effect.asVoid(writer.commit(() => db.writer`DELETE FROM svc_export_jobs WHERE ${db.writer.in("id", ids)}`))
