/**
 * Rate limits (spec: Limits, "Rate limits (`[rate_limit]`)"): a token bucket per caller, in cost units, as
 * an admission policy of the front door, so the fast handlers and the Effect edge give one answer. A bucket
 * holds at most its burst and fills at its rate; a request takes its class's cost (`[rate_limit.cost]`) or is
 * refused with 429 and `Retry-After`. Every answer of a limited caller carries `RateLimit-Limit`,
 * `RateLimit-Remaining` and `RateLimit-Reset`. The fleet's limits are shared out: each server takes its part
 * (Fleet.ts). Also here, to be called when SMART and `/sync` land: the per-address count of unknown tokens,
 * `/sync` connections per caller and live queries per connection.
 */
import { type Clock, Effect } from "effect"
import type { AppConfig } from "../config/AppConfig.ts"
import type { AdmissionPolicy, Refusal } from "../http/FrontDoor.ts"
import { callerKey, type Principal } from "../http/Principal.ts"
import type { CostClass } from "../http/Route.ts"
import { Fleet } from "./Fleet.ts"
import type { GovernanceRules, GovernanceSettings } from "./Governance.ts"

export type RateLimitSettings = AppConfig["rate_limit"]

/** One kind of bucket, with the fleet's whole rate and burst (each server takes its share). */
export interface Limit {
  /** How a refusal names it: "the default limit", "the anonymous limit", `client my-app's limit`. */
  readonly name: string
  /** Cost units per second. */
  readonly rate: number
  /** The most a bucket holds. */
  readonly burst: number
}

/** The buckets' limits as the settings give them; undefined where callers are not limited (exempt). */
export interface Limits {
  readonly main: Limit
  readonly anonymous: Limit | undefined
  /** Clients with an override; undefined for an exempt client (`requests_per_second = 0`). */
  readonly clients: ReadonlyMap<string, Limit | undefined>
  readonly cost: Readonly<Record<CostClass, number>>
  /** The dearest cost: no bucket, whatever its share, holds less. */
  readonly dearest: number
}

/**
 * The limits `settings` configure (`requests_per_second` set: load.ts refuses an enabled section without
 * it). Unset values: `burst` is one second's rate but never below the dearest cost; the anonymous rate is a
 * tenth of the main rate under `--smart` (callers with no token are then strangers) and the main rate
 * without (every caller has no token), its burst likewise a tenth of the main burst under `--smart`, never
 * below the dearest cost; an override without `burst` takes its own rate's default burst, one without
 * `requests_per_second` the main rate. A rate of 0 exempts.
 */
export const limitsOf = (settings: RateLimitSettings, smart: boolean): Limits => {
  const cost = settings.cost
  const dearest = Math.max(...Object.values(cost))
  const burstFor = (rate: number) => Math.max(rate, dearest)
  const rate = settings.requests_per_second ?? 0
  const main: Limit = { name: "the default limit", rate, burst: settings.burst ?? burstFor(rate) }
  const anonymousRate = settings.anonymous_requests_per_second ?? (smart ? rate / 10 : rate)
  const anonymousBurst = settings.anonymous_burst ??
    (settings.anonymous_requests_per_second !== undefined
      ? burstFor(anonymousRate)
      : Math.max(smart ? main.burst / 10 : main.burst, dearest))
  const anonymous = anonymousRate > 0 ? { name: "the anonymous limit", rate: anonymousRate, burst: anonymousBurst } : undefined
  const clients = new Map<string, Limit | undefined>()
  for (const [client, override] of Object.entries(settings.clients)) {
    const clientRate = override.requests_per_second ?? rate
    const burst = override.burst ?? (override.requests_per_second !== undefined ? burstFor(clientRate) : main.burst)
    clients.set(client, clientRate > 0 ? { name: `client ${client}'s limit`, rate: clientRate, burst } : undefined)
  }
  return { main, anonymous, clients, cost, dearest }
}

/** The limit of `principal`'s bucket; undefined when it is not limited. */
export const limitOf = (limits: Limits, principal: Principal): Limit | undefined => {
  if (principal._tag !== "Authorized") return limits.anonymous
  const override = limits.clients.get(principal.clientId)
  if (override !== undefined || limits.clients.has(principal.clientId)) return override
  return limits.main.rate > 0 ? limits.main : undefined
}

interface Bucket {
  /** Units held at `at`. */
  tokens: number
  /** Milliseconds since the epoch, on the limiter's clock. */
  at: number
  /** Its limit, to tell whether it has filled up since (a full bucket is a fresh one). */
  limit: Limit
}

export interface BucketsOptions {
  readonly limits: Limits
  readonly clock: Clock.Clock
  /** This server's share of the fleet's limits, between 0 and 1 (Fleet.ts). */
  readonly share: () => number
  /** The most buckets kept; beyond it full buckets are dropped, then the oldest (default 100 000). */
  readonly maxBuckets?: number
}

export interface Buckets {
  readonly policy: AdmissionPolicy
  /** Buckets held now. */
  readonly size: () => number
}

/**
 * The bucket policy. Headers follow the IETF RateLimit header fields draft (its separate-field form), read
 * for a bucket: `RateLimit-Limit` is this server's burst (the most a caller may spend at once),
 * `RateLimit-Remaining` the whole units left after this request, `RateLimit-Reset` the whole seconds until
 * the bucket is full again. A refusal adds `Retry-After`: whole seconds until the bucket holds the cost.
 * A refused request takes nothing from the bucket.
 */
export const buckets = (options: BucketsOptions): Buckets => {
  const { limits, clock, share } = options
  const maxBuckets = options.maxBuckets ?? 100_000
  const map = new Map<string, Bucket>()

  /** Units in `bucket` at `now` under `rate` and `burst`. */
  const level = (bucket: Bucket, now: number, rate: number, burst: number) =>
    Math.min(burst, bucket.tokens + ((now - bucket.at) / 1000) * rate)

  /**
   * Makes room under `maxBuckets`: full buckets go first (dropping one changes nothing), then the oldest
   * inserted until a tenth is free, so a sweep comes at most once per tenth of the bound (O(1) per request
   * amortised). A caller whose unfull bucket is dropped starts again with a full one: a flood of addresses
   * gains that, and the memory stays bounded.
   */
  const makeRoom = (now: number) => {
    const part = share()
    for (const [key, bucket] of map) {
      const burst = Math.max(bucket.limit.burst * part, limits.dearest)
      if (level(bucket, now, bucket.limit.rate * part, burst) >= burst) map.delete(key)
    }
    const target = Math.floor(maxBuckets * 0.9)
    for (const key of map.keys()) {
      if (map.size <= target) break
      map.delete(key)
    }
  }

  const policy: AdmissionPolicy = (route, principal, _request, setHeader) => {
    const limit = limitOf(limits, principal)
    if (limit === undefined) return undefined
    const cost = limits.cost[route.cost]
    const part = share()
    const rate = limit.rate * part
    // A share below the dearest cost would refuse that class for ever.
    const burst = Math.max(limit.burst * part, limits.dearest)
    const now = clock.unsafeCurrentTimeMillis()
    const key = callerKey(principal)
    let bucket = map.get(key)
    if (bucket === undefined) {
      if (map.size >= maxBuckets) makeRoom(now)
      bucket = { tokens: burst, at: now, limit }
      map.set(key, bucket)
    }
    let tokens = level(bucket, now, rate, burst)
    const admit = tokens >= cost
    if (admit) tokens -= cost
    bucket.tokens = tokens
    bucket.at = now
    bucket.limit = limit
    setHeader("ratelimit-limit", String(Math.floor(burst)))
    setHeader("ratelimit-remaining", String(Math.floor(tokens)))
    setHeader("ratelimit-reset", String(Math.ceil((burst - tokens) / rate)))
    if (admit) return undefined
    const retryAfter = Math.max(1, Math.ceil((cost - tokens) / rate))
    return throttled(limit, route.cost, cost, retryAfter, part)
  }

  return { policy, size: () => map.size }
}

const throttled = (limit: Limit, costClass: CostClass, cost: number, retryAfter: number, part: number): Refusal => ({
  _tag: "Refused",
  status: 429,
  code: "throttled",
  diagnostics: `rate limit exceeded: ${limit.name} (${show(limit.rate)} cost units per second, burst ${show(limit.burst)}` +
    `${part < 1 ? `, this server's share ${show(part)}` : ""}); a request of class ${costClass} costs ${show(cost)}; retry after ${retryAfter} s`,
  headers: { "retry-after": String(retryAfter) },
  limit: "rate"
})

const show = (n: number): string => String(Math.round(n * 1000) / 1000)

/**
 * Unknown tokens per address in the current minute (`auth_failures_per_minute`), for SMART: after the limit
 * an address's unknown tokens are refused without a lookup until the minute ends. Windows are whole minutes
 * on the clock; each server counts its own (the limit is not shared over the fleet: a lookup is a local cost).
 */
export interface AuthFailures {
  readonly note: (address: string) => void
  readonly exceeded: (address: string) => boolean
}

export const authFailures = (limit: number | undefined, clock: Clock.Clock, maxAddresses = 100_000): AuthFailures => {
  if (limit === undefined) return { note: () => {}, exceeded: () => false }
  const windows = new Map<string, { minute: number; count: number }>()
  const minuteOf = () => Math.floor(clock.unsafeCurrentTimeMillis() / 60_000)
  const note = (address: string) => {
    const minute = minuteOf()
    const window = windows.get(address)
    if (window !== undefined && window.minute === minute) {
      window.count++
      return
    }
    if (window === undefined && windows.size >= maxAddresses) {
      // Windows of past minutes count nothing any more.
      for (const [key, old] of windows) if (old.minute !== minute) windows.delete(key)
      if (windows.size >= maxAddresses) return
    }
    windows.set(address, { minute, count: 1 })
  }
  const exceeded = (address: string) => {
    const window = windows.get(address)
    return window !== undefined && window.minute === minuteOf() && window.count >= limit
  }
  return { note, exceeded }
}

/** `/sync` connections per caller (`max_sync_connections`): `open` says whether one more may open. */
export interface SyncConnections {
  readonly open: (caller: string) => boolean
  readonly close: (caller: string) => void
  readonly held: (caller: string) => number
}

export const syncConnections = (max: number | undefined): SyncConnections => {
  const held = new Map<string, number>()
  return {
    open: (caller) => {
      const now = held.get(caller) ?? 0
      if (max !== undefined && now >= max) return false
      held.set(caller, now + 1)
      return true
    },
    close: (caller) => {
      const now = held.get(caller) ?? 0
      if (now <= 1) held.delete(caller)
      else held.set(caller, now - 1)
    },
    held: (caller) => held.get(caller) ?? 0
  }
}

/** Whether a `/sync` connection holding `held` live queries may add one (`max_live_queries`). */
export const liveQueryAllowed = (max: number | undefined, held: number): boolean => max === undefined || held < max

/** What the rate-limit part offers the parts to come (SMART, `/sync`). */
export interface RateLimiter {
  readonly authFailures: AuthFailures
  readonly syncConnections: SyncConnections
  readonly liveQueryAllowed: (held: number) => boolean
}

export const limiterOf = (settings: RateLimitSettings, clock: Clock.Clock): RateLimiter => ({
  authFailures: authFailures(settings.enabled ? settings.auth_failures_per_minute : undefined, clock),
  syncConnections: syncConnections(settings.enabled ? settings.max_sync_connections : undefined),
  liveQueryAllowed: (held) => liveQueryAllowed(settings.enabled ? settings.max_live_queries : undefined, held)
})

/**
 * The part for Governance.ts: nothing when `[rate_limit]` is off; otherwise the bucket policy with this
 * server's share of the fleet (`servers`, or the heartbeat count of Fleet.ts).
 */
export const rules = (settings: GovernanceSettings["Type"]) => Effect.gen(function*() {
  const rateLimit = settings.rateLimit
  const none: GovernanceRules = { policies: [], listeners: [], routes: {} }
  if (!rateLimit.enabled || rateLimit.requests_per_second === undefined) return none
  const clock = yield* Effect.clock
  const fleet = yield* Fleet.make(rateLimit.servers)
  const limits = limitsOf(rateLimit, settings.smart)
  const { policy } = buckets({ limits, clock, share: () => 1 / fleet.size() })
  const part: GovernanceRules = { policies: [policy], listeners: [], routes: {} }
  return part
})
