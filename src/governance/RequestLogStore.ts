/**
 * The stored request log (spec: Limits, "Metering, request log, audit": `request_log.store`,
 * `retention_hours`, `refused_per_second`; Endpoints: `GET /_requests`). The front door hands every
 * completed request to `listener`, which only appends it to a bounded in-memory buffer: it runs on every
 * request, so it takes the time, maybe counts a refusal, and pushes one small record. A fiber writes the
 * buffer through the Writer in batches (one transaction each) every `flushEvery` on Effect's Clock, sooner
 * when a batch is full, and once more when the server stops; another deletes rows older than the retention.
 *
 * A batch that cannot be written goes back to the buffer and is tried again: nothing is lost while the
 * database is away, up to `bufferRows` rows waiting. Past that bound a completion is dropped and counted
 * (`notStored().dropped`), so that an outage costs memory that is bounded and a count that says what is
 * missing. Refused requests (throttled or unattributed: `isRefused`) are kept at most `refusedPerSecond` a
 * second of the clock, so that a flood of refusals does not fill the log; the rest are counted
 * (`notStored().refused`). Both counts are this server's since it started.
 */
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Duration, Effect, type Scope, SubscriptionRef } from "effect"
import { Database } from "../db/Database.ts"
import { flatInsert, type FlatValue } from "../db/multiRowInsert.ts"
import { Writer } from "../db/Writer.ts"
import type { LeaseLost } from "../db/WriterLease.ts"
import type { Completion, CompletionListener } from "../http/FrontDoor.ts"
import { callerKey, type Principal } from "../http/Principal.ts"

export interface RequestLogOptions {
  readonly retentionHours: number
  /** Refused requests stored per second of the clock; 0 stores every one. */
  readonly refusedPerSecond: number
  /** `--smart`: a caller without a token is unattributed, and its failures are refusals. */
  readonly smart: boolean
  /** Rows waiting to be written, at most; beyond, completions are dropped and counted. */
  readonly bufferRows?: number
  /** Rows per insert transaction; a buffer this full is written without waiting for the next tick. */
  readonly batchRows?: number
  readonly flushEvery?: Duration.DurationInput
  readonly pruneEvery?: Duration.DurationInput
  /** Rows deleted per retention transaction. */
  readonly pruneRows?: number
}

export const defaults = {
  bufferRows: 20_000,
  batchRows: 5_000,
  flushEvery: Duration.seconds(1),
  pruneEvery: Duration.minutes(5),
  pruneRows: 5_000
}

/**
 * Whether a completed request is a refusal, stored at most `refused_per_second` a second: a 429 (throttled)
 * or 401 (no usable token) always; under `--smart`, any 4xx or 5xx of a caller without a token (anonymous or
 * unresolved), whose key is only an address anyone can take. Without `--smart` every caller is anonymous and
 * its 404s and 400s are ordinary answers, stored as such.
 */
export const isRefused = (status: number, principal: Principal, smart: boolean): boolean =>
  status === 429 || status === 401 || (smart && status >= 400 && principal._tag !== "Authorized")

/** One stored row, as `/_requests` serves it. */
export interface RequestLogRow {
  readonly id: number
  /** Completion, milliseconds since the epoch. */
  readonly time: number
  readonly requestId: string
  readonly method: string
  readonly path: string
  readonly status: number
  readonly durationMs: number
  readonly client: string
  readonly caller: string
  readonly interaction: string
  readonly resourceType: string | null
  readonly cost: string
  readonly bytesIn: number | null
  readonly bytesOut: number | null
  readonly aborted: boolean
}

/** A completion waiting in the buffer, with the time it completed. */
interface Pending {
  readonly completion: Completion
  readonly time: number
}

export interface NotStored {
  /** Refusals past `refused_per_second`. */
  readonly refused: number
  /** Completions dropped because the buffer was full (the database could not take them). */
  readonly dropped: number
}

/** The buffer and its counts: synchronous, for the listener. */
export const makeBuffer = (options: {
  readonly refusedPerSecond: number
  readonly smart: boolean
  readonly bufferRows: number
  readonly batchRows: number
  readonly now: () => number
  /** Called when the buffer reaches a batch. */
  readonly full: () => void
}) => {
  const { bufferRows, batchRows, refusedPerSecond, smart, now } = options
  let pending: Array<Pending> = []
  let second = -1
  let refusedInSecond = 0
  const counts = { refused: 0, dropped: 0 }

  const listener: CompletionListener = (completion) => {
    const time = now()
    if (refusedPerSecond > 0 && isRefused(completion.status, completion.principal, smart)) {
      const current = Math.floor(time / 1000)
      if (current !== second) {
        second = current
        refusedInSecond = 0
      }
      if (refusedInSecond >= refusedPerSecond) {
        counts.refused++
        return
      }
      refusedInSecond++
    }
    if (pending.length >= bufferRows) {
      counts.dropped++
      return
    }
    pending.push({ completion, time })
    if (pending.length === batchRows) options.full()
  }

  /** Everything waiting, oldest first; the buffer is empty after. */
  const take = (): Array<Pending> => {
    const taken = pending
    pending = []
    return taken
  }

  /** Rows that could not be written go back ahead of those that came since; past the bound the newest are dropped. */
  const putBack = (rows: ReadonlyArray<Pending>) => {
    const merged = rows.length === 0 ? pending : rows.concat(pending)
    if (merged.length > bufferRows) {
      counts.dropped += merged.length - bufferRows
      merged.length = bufferRows
    }
    pending = merged
  }

  return {
    listener,
    take,
    putBack,
    size: (): number => pending.length,
    notStored: (): NotStored => ({ refused: counts.refused, dropped: counts.dropped })
  }
}

const finite = (n: number | null | undefined): number | null => (n === null || n === undefined || !Number.isFinite(n) ? null : n)

/** Inserts a batch's rows; `pushRecord` gives their values in this column order. */
const insertRows = flatInsert("svc_request_log", [
  "time", "request_id", "method", "path", "status", "duration_ms", "client", "caller", "interaction", "resource_type",
  "cost", "bytes_in", "bytes_out", "aborted"
])

/** Appends the row's values, in `insertRows`'s column order. */
const pushRecord = (values: Array<FlatValue>, { completion, time }: Pending): void => {
  values.push(
    time,
    completion.requestId,
    completion.method,
    completion.path,
    completion.status,
    completion.durationMs,
    completion.client,
    callerKey(completion.principal),
    completion.route.interaction,
    completion.route.type ?? null,
    completion.route.cost,
    finite(completion.bytesIn),
    finite(completion.bytesOut),
    completion.aborted ? 1 : 0
  )
}

/** What `/_requests` may ask for; every field narrows, `after` continues a page. */
export interface RequestLogFilter {
  readonly client?: string | undefined
  readonly caller?: string | undefined
  /** Statuses from `low` to `high`, both included. */
  readonly status?: { readonly low: number; readonly high: number } | undefined
  readonly method?: string | undefined
  readonly pathPrefix?: string | undefined
  readonly requestId?: string | undefined
  /** Milliseconds since the epoch: `since` included, `until` not. */
  readonly since?: number | undefined
  readonly until?: number | undefined
  /** The last row of the previous page: rows older than it. */
  readonly after?: { readonly time: number; readonly id: number } | undefined
  readonly count: number
}

export interface RequestLogPage {
  readonly rows: ReadonlyArray<RequestLogRow>
  /** More rows follow the last of `rows`. */
  readonly more: boolean
}

interface StoredRow {
  readonly id: number | string
  readonly time: number | string
  readonly request_id: string
  readonly method: string
  readonly path: string
  readonly status: number | string
  readonly duration_ms: number | string
  readonly client: string
  readonly caller: string
  readonly interaction: string
  readonly resource_type: string | null
  readonly cost: string
  readonly bytes_in: number | string | null
  readonly bytes_out: number | string | null
  readonly aborted: number | string | boolean
}

const orNull = (value: number | string | null): number | null => (value === null ? null : Number(value))

const fromStored = (row: StoredRow): RequestLogRow => ({
  id: Number(row.id),
  time: Number(row.time),
  requestId: row.request_id,
  method: row.method,
  path: row.path,
  status: Number(row.status),
  durationMs: Number(row.duration_ms),
  client: row.client,
  caller: row.caller,
  interaction: row.interaction,
  resourceType: row.resource_type,
  cost: row.cost,
  bytesIn: orNull(row.bytes_in),
  bytesOut: orNull(row.bytes_out),
  aborted: Number(row.aborted) === 1
})

export interface RequestLogStore {
  /** The front door's completion listener: O(1), in memory. */
  readonly listener: CompletionListener
  /** Writes what the buffer holds now; a failure leaves the rows in the buffer (logged, never raised). */
  readonly flush: Effect.Effect<void>
  /** Deletes rows older than the retention, in bounded transactions; the number deleted. */
  readonly prune: Effect.Effect<number, SqlError | LeaseLost>
  readonly query: (filter: RequestLogFilter) => Effect.Effect<RequestLogPage, SqlError>
  readonly notStored: () => NotStored
  /** Completions waiting to be written. */
  readonly buffered: () => number
  /** Rounds of the flush and retention fibers completed (each round whether it wrote or failed). */
  readonly flushRounds: SubscriptionRef.SubscriptionRef<number>
  readonly pruneRounds: SubscriptionRef.SubscriptionRef<number>
}

/**
 * The store with its two fibers, in the scope: they stop with it, after a last flush. The Writer's
 * transactions carry no change (`record` is not called): the log is not a FHIR change.
 */
export const make = (options: RequestLogOptions): Effect.Effect<RequestLogStore, never, Database | Writer | Scope.Scope> =>
  Effect.gen(function*() {
    const db = yield* Database
    const writer = yield* Writer
    const clock = yield* Effect.clock
    const batchRows = options.batchRows ?? defaults.batchRows
    const pruneRows = options.pruneRows ?? defaults.pruneRows
    const wake = yield* Effect.makeLatch(false)
    const buffer = makeBuffer({
      refusedPerSecond: options.refusedPerSecond,
      smart: options.smart,
      bufferRows: options.bufferRows ?? defaults.bufferRows,
      batchRows,
      now: () => clock.unsafeCurrentTimeMillis(),
      full: () => wake.unsafeOpen()
    })
    const lock = yield* Effect.makeSemaphore(1)
    const flushRounds = yield* SubscriptionRef.make(0)
    const pruneRounds = yield* SubscriptionRef.make(0)

    const insert = (rows: ReadonlyArray<Pending>) =>
      writer.commit(() =>
        Effect.suspend(() => {
          const values: Array<FlatValue> = []
          for (const row of rows) pushRecord(values, row)
          return insertRows(db.writer, db.dialect, values)
        })
      )

    let failing = false
    const flush = lock.withPermits(1)(Effect.suspend(() => {
      const rows = buffer.take()
      if (rows.length === 0) return Effect.void
      let written = 0
      const batches = Effect.whileLoop({
        while: () => written < rows.length,
        body: () => insert(rows.slice(written, written + batchRows)),
        step: () => void (written = Math.min(rows.length, written + batchRows))
      })
      return batches.pipe(
        Effect.zipRight(Effect.suspend(() => {
          if (!failing) return Effect.void
          failing = false
          return Effect.logInfo("request log rows are stored again", { dropped: buffer.notStored().dropped })
        })),
        Effect.catchAllCause((cause) =>
          Effect.suspend(() => {
            buffer.putBack(rows.slice(written))
            // One warning for an outage, not one a second.
            if (failing) return Effect.void
            failing = true
            return Effect.logWarning("request log rows could not be stored; they wait in memory and are tried again every second", {
              waiting: buffer.size()
            }, cause)
          })
        )
      )
    }))

    const prune = Effect.gen(function*() {
      const cutoff = (yield* Clock.currentTimeMillis) - options.retentionHours * 3_600_000
      let deleted = 0
      while (true) {
        const { value } = yield* writer.commit(() =>
          db.writer<{ readonly id: number }>`
            DELETE FROM svc_request_log WHERE id IN (
              SELECT id FROM svc_request_log WHERE time < ${cutoff} ORDER BY time, id LIMIT ${pruneRows}
            ) RETURNING id`
        )
        deleted += value.length
        if (value.length < pruneRows) return deleted
      }
    })

    const query = (filter: RequestLogFilter) =>
      db.withReader((sql) => {
        const where = [
          ...(filter.client === undefined ? [] : [sql`client = ${filter.client}`]),
          ...(filter.caller === undefined ? [] : [sql`caller = ${filter.caller}`]),
          ...(filter.status === undefined ? [] : [sql`status >= ${filter.status.low} AND status <= ${filter.status.high}`]),
          ...(filter.method === undefined ? [] : [sql`method = ${filter.method}`]),
          ...(filter.pathPrefix === undefined ? [] : [sql`substr(path, 1, ${filter.pathPrefix.length}) = ${filter.pathPrefix}`]),
          ...(filter.requestId === undefined ? [] : [sql`request_id = ${filter.requestId}`]),
          ...(filter.since === undefined ? [] : [sql`time >= ${filter.since}`]),
          ...(filter.until === undefined ? [] : [sql`time < ${filter.until}`]),
          ...(filter.after === undefined ? [] : [
            sql`(time < ${filter.after.time} OR (time = ${filter.after.time} AND id < ${filter.after.id}))`
          ])
        ]
        return sql<StoredRow>`
          SELECT id, time, request_id, method, path, status, duration_ms, client, caller, interaction,
            resource_type, cost, bytes_in, bytes_out, aborted
          FROM svc_request_log WHERE ${sql.and(where)}
          ORDER BY time DESC, id DESC LIMIT ${filter.count + 1}`
      }).pipe(Effect.map((rows) => ({
        rows: rows.slice(0, filter.count).map(fromStored),
        more: rows.length > filter.count
      })))

    const flushEvery = options.flushEvery ?? defaults.flushEvery
    const flushing = Effect.gen(function*() {
      yield* Effect.raceFirst(Effect.sleep(flushEvery), wake.await)
      yield* wake.close
      yield* flush
      yield* SubscriptionRef.update(flushRounds, (n) => n + 1)
    }).pipe(Effect.forever)

    const pruning = Effect.gen(function*() {
      yield* Effect.sleep(options.pruneEvery ?? defaults.pruneEvery)
      yield* prune.pipe(Effect.catchAllCause((cause) => Effect.logWarning("old request log rows could not be deleted; tried again later", cause)))
      yield* SubscriptionRef.update(pruneRounds, (n) => n + 1)
    }).pipe(Effect.forever)

    // The last flush runs after the fibers stop, when the server has drained its requests.
    yield* Effect.addFinalizer(() => flush)
    yield* Effect.forkScoped(flushing)
    yield* Effect.forkScoped(pruning)

    return {
      listener: buffer.listener,
      flush,
      prune,
      query,
      notStored: buffer.notStored,
      buffered: buffer.size,
      flushRounds,
      pruneRounds
    }
  })
