/**
 * The audit trail (spec: Events, "Audit events"; Limits, `audit.*`): who did what to which resource, as
 * AuditEvents (events.ts) in a hash chain (chain.ts), read through `/_audit` and checked by `/_audit/verify`
 * (endpoint.ts).
 *
 * Three ways in. A change is appended by the Writer inside the transaction that makes it (`commitHookLayer`, the
 * Writer's `CommitHook`): an acknowledged write always has its row, a rolled-back one none. Reads, searches,
 * refusals and admin access (reading `/_audit`, `/_usage`, `/_requests`) come from a completion listener that
 * only pushes the completion onto a bounded buffer; the authorization server's decisions (SecurityEvents.ts)
 * are pushed onto the same buffer by `record`. A fiber turns them into AuditEvents and appends them in
 * batches, one chain append per Writer commit, and drains what is left when the process stops.
 *
 * When the database cannot take them, rows wait in the buffer, requests keep being served, and `/readyz` says
 * unavailable until the buffer drains; past the buffer's capacity events are counted and a `lost` row saying
 * how many is appended once the database answers again, so nothing is dropped silently.
 */
import { Context, Duration, Effect, Layer, Option, type Redacted, Schedule, type Scope } from "effect"
import { Database } from "../../db/Database.ts"
import { CommitHook, Writer } from "../../db/Writer.ts"
import type { Completion, CompletionListener } from "../../http/FrontDoor.ts"
import { Readiness, Reasons } from "../../http/Readiness.ts"
import { GovernanceSettings, type GovernanceRules } from "../Governance.ts"
import { append, type ChainKey, cutOlder } from "./chain.ts"
import { adminPaths, type AuditEvent, lostEvent, packChange, type Packed, packRequest, type Pending, sampledEvent } from "./events.ts"
import { auditRoutes } from "./endpoint.ts"

/** `SVC_AUDIT_KEY` (src/config/Secrets.ts, checked there to be at least 16 bytes), or undefined. */
export class AuditKey extends Context.Tag("svc/governance/AuditKey")<AuditKey, Redacted.Redacted<string> | undefined>() {}

/** No key: a plain SHA-256 chain. */
export const noAuditKey: Layer.Layer<AuditKey> = Layer.succeed(AuditKey, undefined)

/**
 * The Writer's hook that appends one AuditEvent per changed resource in the commits' transaction (one chain
 * append for a group commit's commits); none when
 * `audit.enabled` is false. Built once at start-up, where it warns when the chain has no key.
 */
export const commitHookLayer: Layer.Layer<CommitHook, never, GovernanceSettings | AuditKey | Database> = Layer.effect(
  CommitHook,
  Effect.gen(function*() {
    const settings = yield* GovernanceSettings
    if (!settings.audit.enabled) return undefined
    const key = yield* AuditKey
    const db = yield* Database
    if (key === undefined) {
      yield* Effect.logWarning("SVC_AUDIT_KEY is not set: the audit trail is chained with a plain hash, which catches mistakes but not a forger")
    }
    return (sql, commits) =>
      append(sql, db.dialect, key, commits.flatMap((commit) => commit.changes.map((change) => packChange(commit.commitTs, commit.origin, change))))
  })
)

/** Events waiting for the database at most; more are counted and reported by a `lost` row. */
export const bufferCapacity = 50_000

/** Events appended by one commit at most. */
export const batchRows = 5000

/** How often retention looks for rows past `audit.retention_days`. */
export const retentionInterval = Duration.hours(1)

/**
 * How long the appender gathers events after the first one before it appends them, unless `batchRows` are
 * waiting or someone waits for them (`flush`): at thousands of reads a second, one commit then carries
 * hundreds of events instead of a few, and the Writer is not taken from the writes once per read.
 */
export const gatherFor = Duration.seconds(1)

/** How long a failed append waits before it tries again. */
const retryAfter = Duration.seconds(1)

/** How long `/_audit` waits for the events queued before it to be appended, before it answers anyway. */
const flushWait = Duration.seconds(2)

const readInteractions: ReadonlySet<string> = new Set(["read", "vread", "search", "history", "operation"])

/** A refusal with no known caller: limited to `audit.unattributed_per_second` detailed rows. */
const unattributed = (completion: Completion): boolean =>
  completion.principal._tag !== "Authorized" && (completion.status === 401 || completion.status === 403 || completion.status === 429)

type Entry = Pending | AuditEvent

export interface AuditTrail {
  readonly rules: GovernanceRules
  /** `audit.enabled`: whether anything is recorded. */
  readonly enabled: boolean
  /**
   * Queues an event that is not a FHIR request (the authorization server's decisions, SecurityEvents.ts), made
   * by `eventAt` from the trail's clock. An `unattributed` one (a refusal of a caller who proved nothing) shares
   * the limit of the front door's refusals with no known caller. Nothing when `audit.enabled` is false.
   */
  readonly record: (eventAt: (timeMillis: number) => AuditEvent, unattributed: boolean) => void
  /** Waits until what was queued before the call is appended (or `flushWait` passed). */
  readonly flush: Effect.Effect<void>
  /** Events waiting in the buffer. */
  readonly waiting: () => number
  /** Deletes the rows past `audit.retention_days` now, in batches; returns how many. */
  readonly retain: Effect.Effect<number>
}

export const make: Effect.Effect<AuditTrail, never, GovernanceSettings | AuditKey | Database | Writer | Scope.Scope> = Effect.gen(function*() {
  const settings = yield* GovernanceSettings
  const audit = settings.audit
  const key: ChainKey = yield* AuditKey
  const db = yield* Database
  const writer = yield* Writer
  const clock = yield* Effect.clock

  const buffer: Array<Entry> = []
  let enqueued = 0
  let appended = 0
  let lost = 0
  let failing = false
  let wake: (() => void) | undefined
  // Set while the appender gathers: resumes it before `gatherFor` has passed.
  let hurry: (() => void) | undefined
  const waiters: Array<{ readonly target: number; readonly resume: () => void }> = []

  const push = (entry: Entry) => {
    if (buffer.length >= bufferCapacity) {
      lost += 1
      return
    }
    buffer.push(entry)
    enqueued += 1
    const resume = wake
    wake = undefined
    resume?.()
    if (buffer.length >= batchRows) hurryUp()
  }

  const hurryUp = () => {
    const resume = hurry
    hurry = undefined
    resume?.()
  }

  // Refusals with no known caller in the current second: detailed up to the limit, then only counted.
  let second = -1
  let detailed = 0
  let sampled = 0
  const closeSecond = (now: number) => {
    const current = Math.floor(now / 1000)
    if (current === second) return
    if (sampled > 0) push(sampledEvent(second * 1000, sampled))
    second = current
    detailed = 0
    sampled = 0
  }

  /** Whether a refusal with no known caller at `now` is recorded in detail; if not, it is counted. */
  const detailedNow = (now: number): boolean => {
    if (audit.unattributed_per_second === 0) return true
    closeSecond(now)
    if (detailed >= audit.unattributed_per_second) {
      sampled += 1
      return false
    }
    detailed += 1
    return true
  }

  const listener: CompletionListener = (completion) => {
    // The governance endpoints (admin access), the export job endpoints (a job's status and files are the data of
    // an export) and GraphQL (its queries read resources) are recorded with their path and query, whatever their answer.
    const admin = completion.route.interaction === "root-endpoint" &&
      (adminPaths.has(completion.path) || completion.path.startsWith("/export/") || completion.path === "/graphql")
    if (!admin && completion.status < 400 && !(audit.reads && readInteractions.has(completion.route.interaction))) return
    const now = clock.unsafeCurrentTimeMillis()
    if (!admin && unattributed(completion) && !detailedNow(now)) return
    push({ completion, timeMillis: now, admin })
  }

  const record = (eventAt: (timeMillis: number) => AuditEvent, unattributedEvent: boolean) => {
    if (!audit.enabled) return
    const now = clock.unsafeCurrentTimeMillis()
    if (unattributedEvent && !detailedNow(now)) return
    push(eventAt(now))
  }

  const eventOf = (entry: Entry): AuditEvent | Packed => ("resourceType" in entry ? entry : packRequest(entry, audit.include_query))

  const settle = () => {
    for (let i = waiters.length - 1; i >= 0; i--) {
      const waiter = waiters[i]!
      if (waiter.target <= appended) {
        waiters.splice(i, 1)
        waiter.resume()
      }
    }
  }

  /** Appends one batch from the buffer's front; false when the database refused it (the batch stays). */
  const appendBatch: Effect.Effect<boolean> = Effect.uninterruptible(Effect.suspend(() => {
    const batch = buffer.slice(0, batchRows)
    const lostNow = lost
    const events = batch.map(eventOf)
    if (lostNow > 0) events.push(lostEvent(clock.unsafeCurrentTimeMillis(), lostNow))
    return writer.commit(() => append(db.writer, db.dialect, key, events)).pipe(
      Effect.map(() => {
        buffer.splice(0, batch.length)
        appended += batch.length
        lost -= lostNow
        if (failing) failing = false
        settle()
        return true
      }),
      Effect.catchAllCause((cause) =>
        (failing ? Effect.logDebug("audit events could not be appended", cause) : Effect.logError("audit events could not be appended; they wait in memory", cause)).pipe(
          Effect.map(() => {
            failing = true
            return false
          })
        )
      )
    )
  }))

  /**
   * Appends the events queued before `target` was counted (in batches of at most `batchRows`; a batch also takes
   * those queued since, up to its size); stops at the first failure. Events that come while it appends wait for
   * the next gathering: chasing them kept the appender committing every few milliseconds under a steady load of
   * reads, a transaction (and a WAL flush) for a handful of rows.
   */
  const drainUntil = (target: number): Effect.Effect<boolean> => Effect.suspend(() => {
    if ((appended >= target || buffer.length === 0) && lost === 0) return Effect.succeed(true)
    return Effect.flatMap(appendBatch, (ok) => (ok ? drainUntil(target) : Effect.succeed(false)))
  })

  /** Appends what is queued now (see `drainUntil`), or, with `all`, until nothing is (the server is stopping). */
  const drainOf = (all: boolean): Effect.Effect<boolean> => Effect.suspend(() => {
    closeSecond(clock.unsafeCurrentTimeMillis())
    return drainUntil(all ? Number.POSITIVE_INFINITY : enqueued)
  })
  const drain = drainOf(false)
  const drainAll = drainOf(true)

  /** Until a push wakes it, or, while refusals are being counted, a second passes (to close that second). */
  const nextPush: Effect.Effect<void> = Effect.suspend(() => {
    const pushed = Effect.async<void>((resume) => {
      wake = () => resume(Effect.void)
      return Effect.sync(() => void (wake = undefined))
    })
    return sampled > 0 ? Effect.race(pushed, Effect.sleep(Duration.seconds(1))) : pushed
  })

  /** Waits `gatherFor`, or less when a batch is full or someone waits for the events (`flush`). */
  const gather: Effect.Effect<void> = Effect.suspend(() =>
    buffer.length >= batchRows || waiters.length > 0
      ? Effect.void
      : Effect.race(
        Effect.async<void>((resume) => {
          // The race starts this side on a fiber of its own: a flush or a full batch may have come meanwhile.
          if (buffer.length >= batchRows || waiters.length > 0) return resume(Effect.void)
          hurry = () => resume(Effect.void)
          return Effect.sync(() => void (hurry = undefined))
        }),
        Effect.sleep(gatherFor)
      )
  )

  if (audit.enabled) {
    // Registered before the loop starts, so it runs after the loop is stopped: what is left is appended.
    yield* Effect.addFinalizer(() =>
      drainAll.pipe(Effect.timeout(Duration.seconds(5)), Effect.ignore, Effect.zipRight(Effect.suspend(() =>
        buffer.length > 0 || lost > 0 ? Effect.logError(`${buffer.length + lost} audit events could not be written before the process stopped`) : Effect.void
      )))
    )
    yield* Effect.forkScoped(Effect.forever(Effect.gen(function*() {
      if (buffer.length === 0 && lost === 0) yield* nextPush
      // A second of counted refusals that has closed is queued before the wait, so that a flush waits for it.
      closeSecond(clock.unsafeCurrentTimeMillis())
      yield* gather
      const ok = yield* drain
      if (!ok) yield* Effect.sleep(retryAfter)
    })))
    const readiness = yield* Effect.serviceOption(Readiness)
    if (Option.isSome(readiness)) {
      yield* readiness.value.require(() => ((failing && buffer.length > 0) || lost > 0 ? Reasons.auditBacklog : undefined))
    }
  }

  const retainOnce = (beforeMillis: number): Effect.Effect<number> =>
    Effect.gen(function*() {
      let total = 0
      for (;;) {
        const { value } = yield* writer.commit(() => cutOlder(db.writer, db.dialect, beforeMillis))
        total += value
        if (value === 0) return total
      }
    }).pipe(Effect.catchAllCause((cause) => Effect.as(Effect.logError("audit retention failed", cause), 0)))

  const retain: Effect.Effect<number> = audit.retention_days === undefined
    ? Effect.succeed(0)
    : Effect.flatMap(
      Effect.sync(() => clock.unsafeCurrentTimeMillis()),
      (now) => retainOnce(now - audit.retention_days! * 86_400_000)
    )
  if (audit.retention_days !== undefined) {
    yield* Effect.forkScoped(Effect.repeat(retain, Schedule.spaced(retentionInterval)))
  }

  const flush: Effect.Effect<void> = Effect.suspend(() => {
    if (appended >= enqueued) return Effect.void
    const target = enqueued
    return Effect.async<void>((resume) => {
      const waiter = { target, resume: () => resume(Effect.void) }
      waiters.push(waiter)
      hurryUp()
      return Effect.sync(() => {
        const at = waiters.indexOf(waiter)
        if (at !== -1) waiters.splice(at, 1)
      })
    }).pipe(Effect.timeout(flushWait), Effect.ignore)
  })

  const trail: AuditTrail = {
    rules: { policies: [], listeners: [], routes: {} },
    enabled: audit.enabled,
    record,
    flush,
    waiting: () => buffer.length,
    retain
  }
  return {
    ...trail,
    rules: {
      policies: [],
      listeners: audit.enabled ? [listener] : [],
      routes: auditRoutes({ flush, smart: settings.smart, publicUrl: settings.publicUrl, key, db })
    }
  }
})

/** The part as Governance gathers it. */
export const rules = Effect.map(make, (trail) => trail.rules)
