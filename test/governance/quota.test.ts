/**
 * Quotas (src/governance/Quota.ts) on each database, on the TestClock: the limits settings give (overrides
 * field by field, 0 lifting a limit), day and month rollover in UTC with the reset instant and Retry-After,
 * requests still running, bytes, a client's users counted together, the reread that sees another server's
 * counts on the same database, and the start-up rule that quotas need metering.
 */
import { NodeFileSystem } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import type { IncomingMessage } from "node:http"
import { Effect, Layer, Schema, TestClock } from "effect"
import { AppConfig } from "../../src/config/AppConfig.ts"
import { Governance, GovernanceSettings, layer as governanceLayer, settingsOf as governanceSettingsOf } from "../../src/governance/Governance.ts"
import { noAuditKey } from "../../src/governance/audit/AuditTrail.ts"
import { make as makeMetering, type Metering } from "../../src/governance/Metering.ts"
import { limitsOf, make as makeQuota, type Quota, resetOf } from "../../src/governance/Quota.ts"
import { admit, type Completion, type Refusal } from "../../src/http/FrontDoor.ts"
import { anonymous, type Principal } from "../../src/http/Principal.ts"
import { classify } from "../../src/http/Route.ts"
import { backends } from "../support/backends.ts"
import { withStore } from "../support/store.ts"
import { loadTomlError } from "../config/support.ts"

const token = (clientId: string, user?: string): Principal => ({ _tag: "Authorized", address: "127.0.0.1", clientId, user, scopes: [], patient: undefined })

const requests = {
  read: ["GET", "/fhir/Patient/1"],
  write: ["POST", "/fhir/Patient"],
  bundle: ["POST", "/fhir"]
} as const

type Kind = keyof typeof requests

const settingsOf = (quota: Record<string, unknown>) => Schema.decodeUnknownSync(AppConfig)({ quota }).quota

const completion = (principal: Principal, kind: Kind, bytes: number): Completion => ({
  principal,
  route: classify(requests[kind][0], requests[kind][1]),
  requestId: "r",
  client: principal.address,
  method: requests[kind][0],
  path: requests[kind][1],
  url: requests[kind][1],
  status: 200,
  bytesIn: 0,
  bytesOut: bytes,
  durationMs: 1,
  aborted: false
})

/** One server: metering and quotas on one database, as Governance.ts makes them. */
const server = (quota: Record<string, unknown>) =>
  Effect.gen(function*() {
    // The clock jumps days here: the flushes are the tests' own.
    const metering = yield* makeMetering({ enabled: true, smart: false, flushEvery: "1000 days" })
    const settings = settingsOf(quota)
    const q = yield* makeQuota({ limits: limitsOf(settings), metering, refresh: `${settings.refresh_seconds} seconds` })
    return { metering, quota: q }
  })

/** Asks admission, and when admitted answers the request (both listeners, as the door calls them). */
const ask = (s: { readonly metering: Metering; readonly quota: Quota }, principal: Principal, kind: Kind = "read", bytes = 10) => {
  const route = classify(requests[kind][0], requests[kind][1])
  const refusal = s.quota.policy(route, principal, {} as IncomingMessage, () => {})
  if (refusal !== undefined) return refusal
  const done = completion(principal, kind, bytes)
  s.metering.listener(done)
  s.quota.listener(done)
  return undefined
}

const refused = (refusal: Refusal | undefined): Refusal => {
  expect(refusal).toBeDefined()
  return refusal!
}

describe("quota limits", () => {
  it("an override takes the default field by field; 0 lifts a limit", () => {
    const limits = limitsOf(settingsOf({
      requests_per_day: 100,
      writes_per_month: 50,
      clients: { app: { requests_per_day: 0 }, batch: { writes_per_day: 5 }, free: { requests_per_day: 0, writes_per_month: 0 } }
    }))
    const fields = (checks: typeof limits.main) => checks?.map((c) => `${c.field}=${c.limit}`)
    expect(fields(limits.main)).toEqual(["writes_per_month=50", "requests_per_day=100"])
    expect(fields(limits.clients.get("app"))).toEqual(["writes_per_month=50"])
    expect(fields(limits.clients.get("batch"))).toEqual(["writes_per_month=50", "requests_per_day=100", "writes_per_day=5"])
    expect(limits.clients.get("free")).toBeUndefined()
    expect(limits.clients.has("free")).toBe(true)
  })

  it("a day resets at the next UTC midnight, a month at 00:00 UTC of the next month's 1st", () => {
    expect(new Date(resetOf("2026-11-30", "day")).toISOString()).toBe("2026-12-01T00:00:00.000Z")
    expect(new Date(resetOf("2026-12-31", "month")).toISOString()).toBe("2027-01-01T00:00:00.000Z")
    expect(new Date(resetOf("2028-02-28", "day")).toISOString()).toBe("2028-02-29T00:00:00.000Z")
  })
})

for (const backend of backends.filter((b) => b.kind !== "memory")) {
  describe.skipIf(backend.skip)(`quotas on ${backend.kind}`, () => {
    it.scoped("a day's quota resets at 00:00 UTC; on the last day of a month the month resets with it", () =>
      withStore(backend.kind, Effect.gen(function*() {
        yield* TestClock.setTime(Date.parse("2026-11-30T23:59:00Z"))
        const s = yield* server({ requests_per_day: 2 })
        const caller = anonymous("10.0.0.1")
        expect(ask(s, caller)).toBeUndefined()
        expect(ask(s, caller)).toBeUndefined()
        const refusal = refused(ask(s, caller))
        expect(refusal).toMatchObject({ status: 429, code: "throttled", headers: { "retry-after": "60" } })
        expect(refusal.diagnostics).toBe(
          "quota exceeded: requests_per_day = 2 for address 10.0.0.1, 2 counted in UTC day 2026-11-30; " +
            "it resets at 2026-12-01T00:00:00.000Z; retry after 60 s"
        )
        // Another address has its own totals.
        expect(ask(s, anonymous("10.0.0.2"))).toBeUndefined()
        yield* TestClock.adjust("59 seconds")
        expect(refused(ask(s, caller)).headers).toEqual({ "retry-after": "1" })
        yield* TestClock.adjust("1 second")
        expect(ask(s, caller)).toBeUndefined()
      })))

    it.scoped("a month's quota reached before its last day resets at 00:00 UTC of the 1st", () =>
      withStore(backend.kind, Effect.gen(function*() {
        yield* TestClock.setTime(Date.parse("2026-12-30T12:00:00Z"))
        const s = yield* server({ requests_per_day: 2, requests_per_month: 3 })
        const caller = token("app")
        expect(ask(s, caller)).toBeUndefined()
        expect(ask(s, caller)).toBeUndefined()
        expect(refused(ask(s, caller)).diagnostics).toContain("requests_per_day = 2 for client app, 2 counted in UTC day 2026-12-30")
        yield* TestClock.setTime(Date.parse("2026-12-31T12:00:00Z"))
        expect(ask(s, caller)).toBeUndefined()
        const refusal = refused(ask(s, caller))
        expect(refusal.diagnostics).toBe(
          "quota exceeded: requests_per_month = 3 for client app, 3 counted in UTC month 2026-12; " +
            "it resets at 2027-01-01T00:00:00.000Z; retry after 43200 s"
        )
        expect(refusal.headers).toEqual({ "retry-after": "43200" })
        // The month's totals reread from the database say the same.
        yield* s.metering.flush
        yield* s.quota.refresh
        expect(refused(ask(s, caller)).diagnostics).toContain("3 counted in UTC month 2026-12")
        yield* TestClock.setTime(Date.parse("2027-01-01T00:00:00Z"))
        expect(ask(s, caller)).toBeUndefined()
        yield* s.metering.flush
        yield* s.quota.refresh
        expect(ask(s, caller)).toBeUndefined()
        expect(refused(ask(s, caller)).diagnostics).toContain("requests_per_day = 2 for client app, 2 counted in UTC day 2027-01-01")
      })))

    it.scoped("overrides field by field, 0 lifting a limit; a client's users count together", () =>
      withStore(backend.kind, Effect.gen(function*() {
        yield* TestClock.setTime(Date.parse("2026-11-26T10:00:00Z"))
        const s = yield* server({
          requests_per_day: 3,
          writes_per_day: 1,
          clients: { app: { requests_per_day: 0 }, batch: { writes_per_day: 5 } }
        })
        // app: no request total, the default's write total, for all its users together.
        for (let i = 0; i < 5; i++) expect(ask(s, token("app", "u1"))).toBeUndefined()
        expect(ask(s, token("app", "u1"), "write")).toBeUndefined()
        expect(refused(ask(s, token("app", "u2"), "bundle")).diagnostics).toContain("writes_per_day = 1 for client app, 1 counted")
        // Reads are not writes: they still pass.
        expect(ask(s, token("app", "u2"))).toBeUndefined()
        // batch: its own write total, the default's request total.
        expect(ask(s, token("batch"), "write")).toBeUndefined()
        expect(ask(s, token("batch"), "write")).toBeUndefined()
        expect(ask(s, token("batch"), "write")).toBeUndefined()
        expect(refused(ask(s, token("batch"), "write")).diagnostics).toContain("requests_per_day = 3 for client batch, 3 counted")
        // Without an override, the defaults.
        expect(ask(s, token("other"), "write")).toBeUndefined()
        expect(refused(ask(s, token("other"), "write")).diagnostics).toContain("writes_per_day = 1 for client other")
        // The totals reread from the database agree, users summed.
        yield* s.metering.flush
        yield* s.quota.refresh
        expect(refused(ask(s, token("app", "u3"), "write")).diagnostics).toContain("writes_per_day = 1 for client app, 1 counted")
        expect(ask(s, token("app", "u3"))).toBeUndefined()
      })))

    it.scoped("requests still running count; bytes count when they complete", () =>
      withStore(backend.kind, Effect.gen(function*() {
        yield* TestClock.setTime(Date.parse("2026-11-26T10:00:00Z"))
        const s = yield* server({ requests_per_day: 2, bytes_per_day: 100 })
        const read = classify("GET", "/fhir/Patient/1")
        const caller = anonymous("10.0.0.3")
        expect(s.quota.policy(read, caller, {} as IncomingMessage, () => {})).toBeUndefined()
        expect(s.quota.policy(read, caller, {} as IncomingMessage, () => {})).toBeUndefined()
        expect(refused(s.quota.policy(read, caller, {} as IncomingMessage, () => {})).diagnostics).toContain("requests_per_day = 2")
        const other = anonymous("10.0.0.4")
        expect(ask(s, other, "read", 150)).toBeUndefined()
        expect(refused(ask(s, other)).diagnostics).toContain("bytes_per_day = 100 for address 10.0.0.4, 150 counted")
      })))

    it.scoped("the totals are reread every refresh_seconds: a server sees what another counted", () =>
      withStore(backend.kind, Effect.gen(function*() {
        yield* TestClock.setTime(Date.parse("2026-11-26T10:00:00Z"))
        const quota = { requests_per_day: 3, refresh_seconds: 30 }
        const a = yield* server(quota)
        const b = yield* server(quota)
        const caller = token("app", "u1")
        expect(ask(b, caller)).toBeUndefined()
        // b's first sight of the client reads its totals at once, in the background.
        yield* b.quota.awaitReads(1)
        expect(ask(a, caller)).toBeUndefined()
        expect(ask(a, token("app", "u2"))).toBeUndefined()
        yield* a.metering.flush
        // Before the reread b knows only its own request.
        expect(ask(b, caller)).toBeUndefined()
        yield* b.metering.flush
        yield* TestClock.adjust("30 seconds")
        yield* b.quota.awaitReads(2)
        yield* a.quota.awaitReads(2)
        expect(refused(ask(b, caller)).diagnostics).toContain("requests_per_day = 3 for client app, 4 counted")
        expect(refused(ask(a, caller)).diagnostics).toContain("requests_per_day = 3 for client app, 4 counted")
      })))

    it.scoped("the rate limit is asked first: a throttled request does not count against the quota", () =>
      withStore(backend.kind, Effect.gen(function*() {
        yield* TestClock.setTime(Date.parse("2026-11-26T10:00:00Z"))
        const config = Schema.decodeUnknownSync(AppConfig)({
          rate_limit: { requests_per_second: 1, burst: 20, cost: { read: 20, export: 20 }, servers: 1 },
          quota: { requests_per_day: 2 }
        })
        const rules = yield* Layer.build(governanceLayer.pipe(
          Layer.provide(Layer.merge(Layer.succeed(GovernanceSettings, governanceSettingsOf(config)), noAuditKey))
        )).pipe(Effect.map((context) => context.unsafeMap.get(Governance.key) as Governance["Type"]))
        const door = admit(rules.policies)
        const caller = anonymous("10.0.0.6")
        const read = () => {
          const verdict = door(classify("GET", "/fhir/Patient/1"), caller, {} as IncomingMessage, () => {})
          const done = completion(caller, "read", 10)
          for (const listener of rules.listeners) listener(verdict._tag === "Refused" ? { ...done, status: verdict.status } : done)
          return verdict
        }
        expect(read()._tag).toBe("Admitted")
        expect(read()).toMatchObject({ status: 429, diagnostics: expect.stringContaining("rate limit exceeded") })
        yield* TestClock.adjust("20 seconds")
        expect(read()._tag).toBe("Admitted")
        yield* TestClock.adjust("20 seconds")
        expect(read()).toMatchObject({ status: 429, diagnostics: expect.stringContaining("requests_per_day = 2 for address 10.0.0.6, 2 counted") })
      })))

    it.scoped("subjects not seen for ten refreshes are not reread until they come back; a month later they are gone", () =>
      withStore(backend.kind, Effect.gen(function*() {
        yield* TestClock.setTime(Date.parse("2026-11-30T23:58:00Z"))
        const a = yield* server({ requests_per_day: 2, refresh_seconds: 1 })
        const b = yield* server({ requests_per_day: 2, refresh_seconds: 1 })
        const caller = anonymous("10.0.0.5")
        expect(ask(a, caller)).toBeUndefined()
        yield* TestClock.adjust("11 seconds")
        yield* a.quota.refresh
        // b counts one in the meantime; a, not rereading the caller, still knows one.
        expect(ask(b, caller)).toBeUndefined()
        yield* b.metering.flush
        const before = yield* a.quota.reads
        expect(ask(a, caller)).toBeUndefined()
        // Come back, it is read at once: three counted.
        yield* a.quota.awaitReads(before + 1)
        expect(refused(ask(a, caller)).diagnostics).toContain("requests_per_day = 2 for address 10.0.0.5, 3 counted")
        expect(a.quota.held()).toBe(1)
        yield* TestClock.setTime(Date.parse("2026-12-01T00:00:30Z"))
        yield* a.quota.refresh
        expect(a.quota.held()).toBe(0)
      })))
  })
}

describe("start-up", () => {
  it.scoped("quotas need metering", () =>
    Effect.gen(function*() {
      const { message } = yield* loadTomlError(`[metering]\nenabled = false\n[quota]\nrequests_per_day = 10\n`)
      expect(message).toContain("quota.enabled")
      expect(message).toContain("needs metering")
    }).pipe(Effect.provide(NodeFileSystem.layer)))
})
