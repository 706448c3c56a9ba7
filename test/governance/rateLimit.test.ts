/** The token buckets, the anonymous and client limits, memory bound, and the small counters for SMART and /sync. */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Schema, TestClock } from "effect"
import type { IncomingMessage } from "node:http"
import { refuseUnavailable } from "../../src/cli/unavailable.ts"
import { AppConfig, RateLimitSection } from "../../src/config/AppConfig.ts"
import type { Refusal } from "../../src/http/FrontDoor.ts"
import type { Principal } from "../../src/http/Principal.ts"
import { classify } from "../../src/http/Route.ts"
import { authFailures, buckets, limitOf, limitsOf, liveQueryAllowed, syncConnections } from "../../src/governance/RateLimit.ts"

const settings = (section: Record<string, unknown>) => Schema.decodeUnknownSync(RateLimitSection)(section)

const read = classify("GET", "/fhir/Patient/1")
const search = classify("GET", "/fhir/Patient?name=x")
const write = classify("POST", "/fhir/Patient")
const exportRoute = classify("GET", "/fhir/$export")

const anonymousAt = (address: string): Principal => ({ _tag: "Anonymous", address })
const client = (clientId: string, user?: string): Principal => ({
  _tag: "Authorized",
  address: "10.0.0.1",
  clientId,
  user,
  scopes: [],
  patient: undefined
})
const request = {} as IncomingMessage

/** A bucket policy on the test clock, and a way to ask it with the headers it set. */
const limiter = (section: Record<string, unknown>, options: { smart?: boolean; share?: () => number; maxBuckets?: number } = {}) =>
  Effect.map(Effect.clock, (clock) => {
    const made = buckets({
      limits: limitsOf(settings(section), options.smart ?? false),
      clock,
      share: options.share ?? (() => 1),
      ...(options.maxBuckets !== undefined ? { maxBuckets: options.maxBuckets } : {})
    })
    const ask = (route: typeof read, principal: Principal) => {
      const headers: Record<string, string> = {}
      const refusal = made.policy(route, principal, request, (name, value) => void (headers[name] = value))
      return { refusal, headers }
    }
    return { ...made, ask }
  })

/** How many requests of `route` pass in a row. */
const passes = (ask: (route: typeof read, principal: Principal) => { refusal: Refusal | undefined }, route: typeof read, principal: Principal) => {
  let n = 0
  while (ask(route, principal).refusal === undefined && n < 10_000) n++
  return n
}

describe("rate limit buckets", () => {
  it.effect("a caller spends its burst in cost units per class, then refills at the rate", () =>
    Effect.gen(function*() {
      const { ask } = yield* limiter({ requests_per_second: 10, burst: 20 })
      const caller = client("app")
      // Reads cost 1: twenty pass, the next is refused.
      expect(passes(ask, read, caller)).toBe(20)
      yield* TestClock.adjust("1 second")
      // Ten units back: five searches at 2.
      expect(passes(ask, search, caller)).toBe(5)
      yield* TestClock.adjust("2 seconds")
      // Twenty units (the burst): one export at 20, then nothing.
      expect(passes(ask, exportRoute, caller)).toBe(1)
      expect(ask(read, caller).refusal).toBeDefined()
      // Never more than the burst, however long the caller waits.
      yield* TestClock.adjust("1 hour")
      expect(passes(ask, write, caller)).toBe(10)
    }))

  it.effect("the cost table is the configured one", () =>
    Effect.gen(function*() {
      const { ask } = yield* limiter({ requests_per_second: 1, burst: 30, cost: { read: 3, export: 30 } })
      expect(passes(ask, read, client("app"))).toBe(10)
    }))

  it.effect("a refusal is 429 throttled with Retry-After until the bucket holds the cost, naming the limit", () =>
    Effect.gen(function*() {
      const { ask } = yield* limiter({ requests_per_second: 4, burst: 20 })
      const caller = client("app")
      expect(passes(ask, search, caller)).toBe(10)
      const { refusal, headers } = ask(exportRoute, caller)
      expect(refusal).toMatchObject({ status: 429, code: "throttled", headers: { "retry-after": "5" } })
      expect(refusal!.diagnostics).toContain("the default limit (4 cost units per second, burst 20)")
      expect(refusal!.diagnostics).toContain("a request of class export costs 20")
      expect(headers).toEqual({ "ratelimit-limit": "20", "ratelimit-remaining": "0", "ratelimit-reset": "5" })
      // A refused request takes nothing: after 1.5 s, 6 units, so 14 short of an export: 4 s (3.5 rounded up).
      yield* TestClock.adjust("1500 millis")
      expect(ask(exportRoute, caller).refusal?.headers).toEqual({ "retry-after": "4" })
    }))

  it.effect("admitted answers carry the RateLimit headers", () =>
    Effect.gen(function*() {
      const { ask } = yield* limiter({ requests_per_second: 10, burst: 100 })
      const { refusal, headers } = ask(search, client("app"))
      expect(refusal).toBeUndefined()
      // 98 left; 2 units to refill at 10 per second: 0.2 s, rounded up to 1.
      expect(headers).toEqual({ "ratelimit-limit": "100", "ratelimit-remaining": "98", "ratelimit-reset": "1" })
    }))

  it.effect("each caller has its own bucket: client plus user, or an address", () =>
    Effect.gen(function*() {
      const { ask } = yield* limiter({ requests_per_second: 1, burst: 20 })
      expect(passes(ask, read, client("app", "alice"))).toBe(20)
      expect(passes(ask, read, client("app", "bob"))).toBe(20)
      expect(passes(ask, read, client("app"))).toBe(20)
      expect(passes(ask, read, anonymousAt("10.0.0.1"))).toBe(20)
      expect(passes(ask, read, anonymousAt("10.0.0.2"))).toBe(20)
    }))

  it.effect("a client override sets its own rate and burst; 0 exempts the client", () =>
    Effect.gen(function*() {
      const { ask } = yield* limiter({
        requests_per_second: 1,
        burst: 20,
        clients: { big: { requests_per_second: 100, burst: 200 }, free: { requests_per_second: 0 }, burstOnly: { burst: 40 } }
      })
      expect(passes(ask, read, client("big", "u"))).toBe(200)
      const refused = ask(read, client("big", "u")).refusal!
      expect(refused.diagnostics).toContain("client big's limit (100 cost units per second, burst 200)")
      yield* TestClock.adjust("1 second")
      expect(passes(ask, read, client("big", "u"))).toBe(100)
      // Exempt: never refused, and no headers.
      expect(passes(ask, exportRoute, client("free"))).toBe(10_000)
      expect(ask(read, client("free")).headers).toEqual({})
      // An override of the burst alone keeps the main rate.
      expect(passes(ask, read, client("burstOnly"))).toBe(40)
      yield* TestClock.adjust("3 seconds")
      expect(passes(ask, read, client("burstOnly"))).toBe(3)
      // Any other client has the default limit.
      expect(passes(ask, read, client("other"))).toBe(20)
    }))

  it.effect("an override of the rate alone takes a burst of one second of it", () =>
    Effect.gen(function*() {
      const { ask } = yield* limiter({ requests_per_second: 1, burst: 20, clients: { fast: { requests_per_second: 50 } } })
      expect(passes(ask, read, client("fast"))).toBe(50)
    }))
})

describe("anonymous callers", () => {
  const section = { requests_per_second: 50, burst: 100 }

  it("without --smart an anonymous caller has the main rate and burst", () => {
    const limits = limitsOf(settings(section), false)
    expect(limitOf(limits, anonymousAt("1.2.3.4"))).toEqual({ name: "the anonymous limit", rate: 50, burst: 100 })
    expect(limitOf(limits, client("app"))).toEqual({ name: "the default limit", rate: 50, burst: 100 })
  })

  it("with --smart a caller with no token has a tenth, its burst never below the dearest cost", () => {
    expect(limitOf(limitsOf(settings(section), true), anonymousAt("1.2.3.4"))).toEqual({ name: "the anonymous limit", rate: 5, burst: 20 })
    expect(limitOf(limitsOf(settings({ requests_per_second: 50, burst: 500 }), true), anonymousAt("1.2.3.4")))
      .toEqual({ name: "the anonymous limit", rate: 5, burst: 50 })
    // A token not resolved yet is limited as a caller with no token, by its address.
    const unresolved: Principal = { _tag: "Unresolved", address: "1.2.3.4", token: "t" }
    expect(limitOf(limitsOf(settings(section), true), unresolved)?.name).toBe("the anonymous limit")
  })

  it("anonymous_requests_per_second and anonymous_burst are taken as given; a rate alone has a burst of one second of it", () => {
    expect(limitOf(limitsOf(settings({ ...section, anonymous_requests_per_second: 5, anonymous_burst: 25 }), true), anonymousAt("a")))
      .toEqual({ name: "the anonymous limit", rate: 5, burst: 25 })
    expect(limitOf(limitsOf(settings({ ...section, anonymous_requests_per_second: 30 }), false), anonymousAt("a")))
      .toEqual({ name: "the anonymous limit", rate: 30, burst: 30 })
    expect(limitOf(limitsOf(settings({ ...section, anonymous_requests_per_second: 0 }), false), anonymousAt("a"))).toBeUndefined()
  })

  it("an unset burst is one second of the rate, never below the dearest cost", () => {
    expect(limitsOf(settings({ requests_per_second: 50 }), false).main.burst).toBe(50)
    expect(limitsOf(settings({ requests_per_second: 5 }), false).main.burst).toBe(20)
  })

  it("a main rate of 0 limits only the callers with a limit of their own", () => {
    const limits = limitsOf(settings({ requests_per_second: 0, clients: { app: { requests_per_second: 10 } } }), false)
    expect(limitOf(limits, client("other"))).toBeUndefined()
    expect(limitOf(limits, anonymousAt("a"))).toBeUndefined()
    expect(limitOf(limits, client("app"))?.rate).toBe(10)
  })

  it.effect("callers with no token spend the anonymous bucket, with the token the default one", () =>
    Effect.gen(function*() {
      const { ask } = yield* limiter(section, { smart: true })
      expect(passes(ask, read, anonymousAt("1.2.3.4"))).toBe(20)
      expect(ask(read, anonymousAt("1.2.3.4")).refusal!.diagnostics).toContain("the anonymous limit (5 cost units per second, burst 20)")
      expect(passes(ask, read, client("app"))).toBe(100)
    }))
})

describe("a share of the fleet's limits", () => {
  it.effect("each server takes its share of rate and burst, never a burst below the dearest cost", () =>
    Effect.gen(function*() {
      let servers = 4
      const { ask } = yield* limiter({ requests_per_second: 100, burst: 200 }, { share: () => 1 / servers })
      expect(passes(ask, read, client("a"))).toBe(50)
      expect(ask(read, client("a")).refusal!.diagnostics).toContain("this server's share 0.25")
      yield* TestClock.adjust("1 second")
      expect(passes(ask, read, client("a"))).toBe(25)
      // A fleet of 20: 10 units of burst would refuse every export, so the bucket holds the dearest cost.
      servers = 20
      expect(passes(ask, read, client("b"))).toBe(20)
      // The fleet shrinks to one: the whole limit.
      servers = 1
      expect(passes(ask, read, client("c"))).toBe(200)
    }))
})

describe("memory", () => {
  it.effect("a flood of addresses keeps at most the bound of buckets; full ones go first", () =>
    Effect.gen(function*() {
      const { ask, size } = yield* limiter({ requests_per_second: 10, burst: 20 }, { maxBuckets: 1000 })
      const busy = client("busy")
      expect(passes(ask, read, busy)).toBe(20)
      for (let i = 0; i < 10_000; i++) {
        ask(read, anonymousAt(`10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`))
        expect(size()).toBeLessThanOrEqual(1000)
      }
      // Once the flood's buckets have filled up again they all go at the next sweep.
      yield* TestClock.adjust("1 second")
      ask(read, anonymousAt("192.0.2.1"))
      // The busy caller's bucket was among the oldest and was dropped: it starts full again, which is
      // the leniency of the bound.
      expect(size()).toBeLessThan(1000)
      expect(size()).toBeGreaterThan(0)
    }))

  it.effect("full buckets are dropped before buckets still being spent", () =>
    Effect.gen(function*() {
      const { ask, size } = yield* limiter({ requests_per_second: 1, burst: 20 }, { maxBuckets: 10 })
      // A caller that spent its bucket, then nine that spent one unit each and refill in a second.
      const spender = client("spender")
      expect(passes(ask, read, spender)).toBe(20)
      yield* TestClock.adjust("500 millis")
      for (let i = 0; i < 9; i++) ask(read, anonymousAt(`10.0.0.${i}`))
      yield* TestClock.adjust("1 second")
      // The tenth bucket needs room: the nine full ones go, the spender's stays.
      ask(read, anonymousAt("10.0.1.1"))
      expect(size()).toBe(2)
      expect(ask(read, spender).headers["ratelimit-remaining"]).toBe("0")
    }))
})

describe("counters for SMART and /sync", () => {
  it.effect("auth failures per address in a window of one minute", () =>
    Effect.gen(function*() {
      const failures = authFailures(3, yield* Effect.clock)
      failures.note("1.2.3.4")
      failures.note("1.2.3.4")
      expect(failures.exceeded("1.2.3.4")).toBe(false)
      failures.note("1.2.3.4")
      expect(failures.exceeded("1.2.3.4")).toBe(true)
      expect(failures.exceeded("5.6.7.8")).toBe(false)
      yield* TestClock.adjust("1 minute")
      expect(failures.exceeded("1.2.3.4")).toBe(false)
      failures.note("1.2.3.4")
      expect(failures.exceeded("1.2.3.4")).toBe(false)
    }))

  it.effect("without auth_failures_per_minute nothing is exceeded", () =>
    Effect.gen(function*() {
      const failures = authFailures(undefined, yield* Effect.clock)
      for (let i = 0; i < 100; i++) failures.note("a")
      expect(failures.exceeded("a")).toBe(false)
    }))

  it.effect("the auth failure windows are bounded", () =>
    Effect.gen(function*() {
      const failures = authFailures(1, yield* Effect.clock, 10)
      for (let i = 0; i < 10; i++) failures.note(`a${i}`)
      // Full of this minute's windows: a new address is not counted.
      failures.note("new")
      expect(failures.exceeded("new")).toBe(false)
      yield* TestClock.adjust("1 minute")
      failures.note("new")
      expect(failures.exceeded("new")).toBe(true)
    }))

  it("sync connections per caller", () => {
    const sync = syncConnections(2)
    expect(sync.open("client:a")).toBe(true)
    expect(sync.open("client:a")).toBe(true)
    expect(sync.open("client:a")).toBe(false)
    expect(sync.open("client:b")).toBe(true)
    sync.close("client:a")
    expect(sync.held("client:a")).toBe(1)
    expect(sync.open("client:a")).toBe(true)
    expect(syncConnections(undefined).open("x")).toBe(true)
  })

  it("live queries per connection", () => {
    expect(liveQueryAllowed(2, 1)).toBe(true)
    expect(liveQueryAllowed(2, 2)).toBe(false)
    expect(liveQueryAllowed(undefined, 1_000_000)).toBe(true)
  })
})

describe("start-up", () => {
  it.effect("[rate_limit] and [quota] are no longer refused as unavailable", () =>
    Effect.gen(function*() {
      const limited = Schema.decodeUnknownSync(AppConfig)({ rate_limit: { requests_per_second: 5 } })
      expect(Exit.isSuccess(yield* Effect.exit(refuseUnavailable(limited, [])))).toBe(true)
      const quota = Schema.decodeUnknownSync(AppConfig)({ rate_limit: { requests_per_second: 5 }, quota: { requests_per_day: 5 } })
      expect(Exit.isSuccess(yield* Effect.exit(refuseUnavailable(quota, [])))).toBe(true)
    }))
})
