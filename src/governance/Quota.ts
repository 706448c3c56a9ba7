/**
 * Quotas (spec: Limits, "Quotas (`[quota]`)"): totals a caller may not pass in a UTC day or month, in
 * requests, writes (classes write and bundle) and bytes (in and out together), as an admission policy of the
 * front door after the rate limit, so the fast handlers and the Effect edge give one answer and a throttled
 * request does not count against a quota.
 *
 * The subject of a quota is the client for a caller with a token (all its users together;
 * `[quota.clients.<client_id>]` names client ids) and the address for a caller without one (such callers
 * share the default totals). The counts are metering's (svc_usage, Metering.ts): the policy cannot wait for
 * the database, so it keeps per subject the day's and month's totals in memory. A background fiber rereads
 * them every `refresh_seconds` on the clock, for the subjects seen in the last ten refreshes (the others keep
 * what they counted, a floor, and are read again when they come back); a subject seen for the first time is
 * read at once, in the background, and admitted meanwhile on what this server counted since. Between two reads the totals grow by this
 * server's completions, and admitted requests still running count as requests and writes already.
 *
 * Exactness: a request is refused when the total has reached the limit, so on one server a quota is met
 * exactly, except for bytes, known at completion only (the request that crosses the limit passes, the next
 * is refused). Over a fleet each server sees the others' counts as of its last read (their metering flushes
 * every few seconds, then `refresh_seconds`): a quota can be overrun by what other servers admit within one
 * refresh. Metering's own bound (counts of callers beyond its bound go to `other`) is a bound of quotas too.
 */
import { dayOfInstant } from "./days.ts"
import { type Clock, Duration, Effect, Queue, Schedule, Stream, SubscriptionRef } from "effect"
import type { AppConfig } from "../config/AppConfig.ts"
import type { AdmissionPolicy, Completion, CompletionListener, Refusal } from "../http/FrontDoor.ts"
import type { Principal } from "../http/Principal.ts"
import type { GovernanceRules } from "./Governance.ts"
import type { ClientTotals, Metering } from "./Metering.ts"

export type QuotaSettings = AppConfig["quota"]

export type QuotaField =
  | "requests_per_day"
  | "writes_per_day"
  | "bytes_per_day"
  | "requests_per_month"
  | "writes_per_month"
  | "bytes_per_month"

/** Month fields first: when a day's and the month's quota are both reached, the later reset is the answer. */
export const quotaFields: ReadonlyArray<QuotaField> = [
  "requests_per_month",
  "writes_per_month",
  "bytes_per_month",
  "requests_per_day",
  "writes_per_day",
  "bytes_per_day"
]

/** One total a subject may not pass. */
export interface Check {
  readonly field: QuotaField
  readonly limit: number
  readonly period: "day" | "month"
  readonly measure: "requests" | "writes" | "bytes"
}

/** The quotas of one kind of subject; undefined where nothing is limited. */
export type Checks = ReadonlyArray<Check> | undefined

export interface QuotaLimits {
  /** Callers without an override, and callers without a token. */
  readonly main: Checks
  /** Clients with `[quota.clients.<id>]`. */
  readonly clients: ReadonlyMap<string, Checks>
}

type Totals = Partial<Record<QuotaField, number | undefined>>

const checksOf = (totals: Totals): Checks => {
  const checks: Array<Check> = []
  for (const field of quotaFields) {
    const limit = totals[field]
    // 0 is no limit: an override's 0 lifts the default's.
    if (limit === undefined || limit === 0) continue
    const [measure, , period] = field.split("_") as ["requests" | "writes" | "bytes", "per", "day" | "month"]
    checks.push({ field, limit, period, measure })
  }
  return checks.length === 0 ? undefined : checks
}

/** The quotas `settings` configure: an override takes the default's value for each field it does not set. */
export const limitsOf = (settings: QuotaSettings): QuotaLimits => {
  const defaults: Totals = {}
  for (const field of quotaFields) defaults[field] = settings[field]
  const clients = new Map<string, Checks>()
  for (const [client, override] of Object.entries(settings.clients)) {
    const merged: Totals = {}
    for (const field of quotaFields) merged[field] = override[field] ?? defaults[field]
    clients.set(client, checksOf(merged))
  }
  return { main: checksOf(defaults), clients }
}

interface Count {
  requests: number
  writes: number
  bytes: number
}

const zero = (): Count => ({ requests: 0, writes: 0, bytes: 0 })

/** What the policy knows of one subject. */
interface Subject {
  readonly key: string
  /** How the refusal names it: `client app`, `address 10.0.0.1`. */
  readonly name: string
  /** The UTC day `day` and `month` are of. */
  dayKey: string
  day: Count
  month: Count
  /** Admitted and not yet completed: counted as requests (and writes) already. */
  running: number
  runningWrites: number
  /** When the policy last saw it, on the clock. */
  seen: number
  /** Left out of the rereads (not seen for ten refreshes): read again when seen. */
  stale: boolean
}

const isWrite = (cost: string): boolean => cost === "write" || cost === "bundle"

export interface QuotaOptions {
  readonly limits: QuotaLimits
  readonly metering: Metering
  /** `refresh_seconds`. */
  readonly refresh: Duration.DurationInput
  /** The most subjects held; past it the least recently inserted tenth is dropped (default 100 000). */
  readonly maxSubjects?: number
}

export interface Quota {
  readonly rules: GovernanceRules
  readonly policy: AdmissionPolicy
  readonly listener: CompletionListener
  /** Rereads the totals of every subject held now (the background fiber does it every `refresh`). */
  readonly refresh: Effect.Effect<void>
  /** Reads of totals applied since start, and a wait until there are `n` (for tests). */
  readonly reads: Effect.Effect<number>
  readonly awaitReads: (n: number) => Effect.Effect<void>
  /** Subjects held now. */
  readonly held: () => number
}

/** The subject key of a caller: the client for a token (all its users), the address otherwise. */
export const subjectOf = (principal: Principal): string =>
  principal._tag === "Authorized" ? `client:${principal.clientId}` : `address:${principal.address}`

/** The instant `period` that holds `day` ends: the next UTC midnight, or 00:00 UTC of the next month's 1st. */
export const resetOf = (day: string, period: "day" | "month"): number => {
  const [y, m, d] = day.split("-").map(Number) as [number, number, number]
  return period === "day" ? Date.UTC(y, m - 1, d + 1) : Date.UTC(y, m, 1)
}

export const make = (options: QuotaOptions) =>
  Effect.gen(function*() {
    const { limits, metering } = options
    const clock: Clock.Clock = yield* Effect.clock
    const maxSubjects = options.maxSubjects ?? 100_000
    const refreshMillis = Duration.toMillis(options.refresh)
    const subjects = new Map<string, Subject>()
    /** Subjects not yet read from the database, and the wake-up of the fiber that reads them. */
    const newcomers = new Set<string>()
    const wake = yield* Queue.sliding<void>(1)
    const reads = yield* SubscriptionRef.make(0)

    // The current UTC day, formatted again only when the clock leaves it.
    const dayAt = dayOfInstant()

    /** Starts the subject's counts afresh when its day (or month) is over. */
    const roll = (subject: Subject, now: number) => {
      const day = dayAt(now)
      if (subject.dayKey === day) return
      if (subject.dayKey.slice(0, 7) !== day.slice(0, 7)) subject.month = zero()
      subject.day = zero()
      subject.dayKey = day
    }

    const checksOfPrincipal = (principal: Principal): Checks => {
      if (principal._tag !== "Authorized") return limits.main
      const override = limits.clients.get(principal.clientId)
      return override !== undefined || limits.clients.has(principal.clientId) ? override : limits.main
    }

    const nameOf = (key: string): string =>
      key.startsWith("client:") ? `client ${key.slice(7)}` : `address ${key.slice(8)}`

    /** Makes room under the bound: the tenth inserted first goes (read again when it comes back). */
    const makeRoom = () => {
      const target = Math.floor(maxSubjects * 0.9)
      for (const key of subjects.keys()) {
        if (subjects.size <= target) break
        subjects.delete(key)
        newcomers.delete(key)
      }
    }

    const policy: AdmissionPolicy = (route, principal) => {
      const checks = checksOfPrincipal(principal)
      if (checks === undefined) return undefined
      const now = clock.unsafeCurrentTimeMillis()
      const key = subjectOf(principal)
      let subject = subjects.get(key)
      if (subject === undefined) {
        if (subjects.size >= maxSubjects) makeRoom()
        subject = { key, name: nameOf(key), dayKey: dayAt(now), day: zero(), month: zero(), running: 0, runningWrites: 0, seen: now, stale: true }
        subjects.set(key, subject)
      }
      if (subject.stale) {
        subject.stale = false
        newcomers.add(key)
        wake.unsafeOffer(undefined)
      }
      subject.seen = now
      roll(subject, now)
      const write = isWrite(route.cost)
      for (const check of checks) {
        const counted = check.measure === "requests"
          ? subject[check.period].requests + subject.running
          : check.measure === "writes"
          ? (write ? subject[check.period].writes + subject.runningWrites : -1)
          : subject[check.period].bytes
        if (counted >= check.limit) return overQuota(subject, check, counted, now)
      }
      subject.running++
      if (write) subject.runningWrites++
      return undefined
    }

    const listener: CompletionListener = (completion: Completion) => {
      // Refused by the rate limit or by a quota: not counted, as metering does not count it.
      if (completion.status === 429) return
      // The completion's caller is the admission's: a request counted as running here ends here. (When SMART
      // resolves tokens on the edge, a caller admitted by address and completed by client must end both.)
      const subject = subjects.get(subjectOf(completion.principal))
      if (subject === undefined) return
      const write = isWrite(completion.route.cost)
      if (subject.running > 0) subject.running--
      if (write && subject.runningWrites > 0) subject.runningWrites--
      roll(subject, clock.unsafeCurrentTimeMillis())
      const bytes = (completion.bytesIn ?? 0) + (completion.bytesOut ?? 0)
      for (const count of [subject.day, subject.month]) {
        count.requests++
        if (write) count.writes++
        count.bytes += bytes
      }
    }

    /** Takes the totals read for `day` in place of the counts held (metering's step: nothing counted between). */
    const apply = (day: string, totals: ReadonlyMap<string, ClientTotals>) => {
      for (const [key, read] of totals) {
        const subject = subjects.get(key)
        if (subject === undefined) continue
        subject.dayKey = day
        subject.day = { ...read.day }
        subject.month = { ...read.month }
      }
    }

    const read = (keys: ReadonlyArray<string>) =>
      keys.length === 0 ? Effect.void : metering.totalsMany(keys, apply).pipe(
        Effect.zipRight(SubscriptionRef.update(reads, (n) => n + 1)),
        Effect.catchAll((error) =>
          Effect.logWarning("quota totals could not be read; counting on from the last ones", { error: error.message })
        )
      )

    const refresh = Effect.suspend(() => {
      const now = clock.unsafeCurrentTimeMillis()
      const month = dayAt(now).slice(0, 7)
      const keys: Array<string> = []
      for (const [key, subject] of subjects) {
        if (now - subject.seen <= 10 * refreshMillis || subject.running > 0) {
          keys.push(key)
          continue
        }
        // Not seen for ten refreshes: no longer reread, but kept (what it counted is still a floor) until its
        // month is over and it counts nothing; read again at once when it comes back.
        subject.stale = true
        if (subject.dayKey.slice(0, 7) !== month) subjects.delete(key)
      }
      newcomers.clear()
      return read(keys)
    })

    const readNewcomers = Effect.suspend(() => {
      const keys = [...newcomers]
      newcomers.clear()
      return read(keys)
    })

    yield* Queue.take(wake).pipe(Effect.zipRight(readNewcomers), Effect.forever, Effect.forkScoped)
    yield* refresh.pipe(
      Effect.repeat(Schedule.spaced(options.refresh)),
      Effect.delay(options.refresh),
      Effect.forkScoped
    )

    const awaitReads = (n: number) =>
      reads.changes.pipe(Stream.filter((count) => count >= n), Stream.take(1), Stream.runDrain)

    const quota: Quota = {
      rules: { policies: [policy], listeners: [listener], routes: {} },
      policy,
      listener,
      refresh,
      reads: SubscriptionRef.get(reads),
      awaitReads,
      held: () => subjects.size
    }
    return quota
  })

const overQuota = (subject: Subject, check: Check, counted: number, now: number): Refusal => {
  const reset = resetOf(subject.dayKey, check.period)
  const retryAfter = Math.max(1, Math.ceil((reset - now) / 1000))
  const period = check.period === "day" ? `UTC day ${subject.dayKey}` : `UTC month ${subject.dayKey.slice(0, 7)}`
  return {
    _tag: "Refused",
    status: 429,
    code: "throttled",
    diagnostics: `quota exceeded: ${check.field} = ${check.limit} for ${subject.name}, ${counted} counted in ${period}; ` +
      `it resets at ${new Date(reset).toISOString()}; retry after ${retryAfter} s`,
    headers: { "retry-after": String(retryAfter) },
    limit: "quota"
  }
}

/**
 * The part for Governance.ts: nothing when `[quota]` is off or sets no total; otherwise the policy and its
 * listener, on metering's counts (load.ts refuses quotas with metering off).
 */
export const rules = (settings: QuotaSettings, metering: Metering) =>
  Effect.gen(function*() {
    const none: GovernanceRules = { policies: [], listeners: [], routes: {} }
    if (!settings.enabled) return none
    const limits = limitsOf(settings)
    if (limits.main === undefined && [...limits.clients.values()].every((checks) => checks === undefined)) return none
    const quota = yield* make({ limits, metering, refresh: Duration.seconds(settings.refresh_seconds) })
    return quota.rules
  })
