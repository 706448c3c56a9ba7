import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Schema, TestClock } from "effect"
import { AppConfig } from "../../src/config/AppConfig.ts"
import { Database, layer as databaseLayer } from "../../src/db/Database.ts"
import { migrate } from "../../src/db/Migrations.ts"
import { layer as writerLayer, Writer } from "../../src/db/Writer.ts"
import { GovernanceSettings, settingsOf } from "../../src/governance/Governance.ts"
import { AuditKey, bufferCapacity, make as makeTrail } from "../../src/governance/audit/AuditTrail.ts"
import { verify } from "../../src/governance/audit/chain.ts"
import type { Completion } from "../../src/http/FrontDoor.ts"
import { anonymous } from "../../src/http/Principal.ts"
import { make as makeReadiness, Readiness, Reasons } from "../../src/http/Readiness.ts"
import { classify } from "../../src/http/Route.ts"
import { backends, freshDatabase } from "../support/backends.ts"

const settings = (audit: Partial<AppConfig["audit"]> = {}) => {
  const config = Schema.decodeUnknownSync(AppConfig)({})
  return settingsOf({ ...config, audit: { ...config.audit, ...audit } })
}

const completion = (path: string, status: number, method = "GET"): Completion => ({
  principal: anonymous("10.0.0.9"),
  route: classify(method, path),
  requestId: "req",
  client: "10.0.0.9",
  method,
  path,
  url: path,
  status,
  bytesIn: undefined,
  bytesOut: 0,
  durationMs: 1,
  aborted: false
})

/** A migrated database and Writer; `broken.on` makes every commit fail, as a database that does not answer. */
const setup = (kind: (typeof backends)[number]["kind"], audit: Partial<AppConfig["audit"]> = {}) =>
  Effect.gen(function*() {
    const options = yield* freshDatabase(kind)
    const database = yield* Layer.build(databaseLayer(options))
    yield* migrate({ fhirVersion: "r4" }).pipe(Effect.provide(database))
    const writer = yield* Layer.build(Layer.provide(writerLayer, Layer.succeedContext(database)))
    const broken = { on: false }
    // Counts the appender's commits; `during` runs as one starts (requests that complete while it appends).
    const commits = { count: 0, during: undefined as (() => void) | undefined }
    const real = writer.unsafeMap.get(Writer.key) as Writer["Type"]
    const flaky = Writer.of({
      ...real,
      commit: (command) =>
        Effect.suspend(() => {
          if (broken.on) return Effect.die("database down")
          commits.count += 1
          const during = commits.during
          commits.during = undefined
          during?.()
          return real.commit(command)
        })
    })
    const readiness = yield* makeReadiness
    yield* readiness.serving(Effect.succeed({ status: "ok" }), Effect.succeed({}))
    const layer = Layer.mergeAll(
      Layer.succeedContext(database),
      Layer.succeed(Writer, flaky),
      Layer.succeed(GovernanceSettings, settings(audit)),
      Layer.succeed(AuditKey, undefined),
      Layer.succeed(Readiness, readiness)
    )
    return { layer, broken, readiness, commits }
  })

const rows = Effect.flatMap(Database, (db) => db.writer<{ kind: string; outcome: string; event: string }>`SELECT kind, outcome, event FROM svc_audit ORDER BY seq`)

describe.each(backends)("the audit buffer on $kind", ({ kind, skip }) => {
  it.scoped.skipIf(skip)("keeps unattributed_per_second detailed refusals a second, then one sampled row saying how many", () =>
    Effect.gen(function*() {
      const { layer } = yield* setup(kind, { unattributed_per_second: 3 })
      yield* Effect.gen(function*() {
        const trail = yield* makeTrail
        const listener = trail.rules.listeners[0]!
        for (let i = 0; i < 10; i++) listener(completion("/fhir/Patient/x", 401))
        // A refusal with a known cause (404) is not limited.
        listener(completion("/fhir/Patient/y", 404))
        yield* trail.flush
        expect((yield* rows).map((row) => row.kind)).toEqual(["read", "read", "read", "read"])
        // The second closes: its count is written.
        yield* TestClock.adjust("1 second")
        yield* Effect.yieldNow()
        yield* trail.flush
        const written = yield* rows
        expect(written.length).toBe(5)
        expect(written[4]!.kind).toBe("sampled")
        expect(JSON.parse(written[4]!.event).outcomeDesc).toContain("sampled: 7 more refusals")
        expect((yield* Effect.flatMap(Database, (db) => verify(db.writer, undefined))).ok).toBe(true)
      }).pipe(Effect.provide(layer))
    }))

  it.scoped.skipIf(skip)("0 keeps every unattributed refusal; admin access is recorded with reads off", () =>
    Effect.gen(function*() {
      const { layer } = yield* setup(kind, { unattributed_per_second: 0, reads: false })
      yield* Effect.gen(function*() {
        const trail = yield* makeTrail
        const listener = trail.rules.listeners[0]!
        for (let i = 0; i < 30; i++) listener(completion("/fhir/Patient/x", 403))
        listener(completion("/fhir/Patient/x", 200))
        listener(completion("/_usage", 200))
        yield* trail.flush
        const written = yield* rows
        expect(written.length).toBe(31)
        expect(written[30]!.kind).toBe("admin")
      }).pipe(Effect.provide(layer))
    }))

  it.scoped.skipIf(skip)("appends a second's events in one commit: those that come during an append wait for the next gathering", () =>
    Effect.gen(function*() {
      const { layer, commits } = yield* setup(kind)
      yield* Effect.gen(function*() {
        const trail = yield* makeTrail
        const listener = trail.rules.listeners[0]!
        for (let i = 0; i < 3; i++) listener(completion(`/fhir/Patient/a${i}`, 200))
        // Reads that complete while the first append runs.
        commits.during = () => {
          for (let i = 0; i < 4; i++) listener(completion(`/fhir/Patient/b${i}`, 200))
        }
        yield* TestClock.adjust("1 second")
        yield* Effect.repeat(Effect.sync(() => commits.count), { until: (n) => n >= 1 })
        // Let the appender finish that append and go on as far as it will without the clock moving.
        for (let i = 0; i < 50; i++) yield* Effect.yieldNow()
        yield* Effect.repeat(Effect.flatMap(rows, (written) => Effect.succeed(written.length)), { until: (n) => n > 0 })
        expect(commits.count).toBe(1)
        expect(trail.waiting()).toBe(4)
        // The next gathering appends them, in one commit.
        yield* TestClock.adjust("1 second")
        yield* trail.flush
        expect(commits.count).toBe(2)
        expect(trail.waiting()).toBe(0)
        expect((yield* rows).length).toBe(7)
      }).pipe(Effect.provide(layer))
    }))

  it.scoped.skipIf(skip)("keeps rows while the database fails, /readyz unavailable until they drain; past the buffer a lost row says how many", () =>
    Effect.gen(function*() {
      const { layer, broken, readiness } = yield* setup(kind)
      yield* Effect.gen(function*() {
        const trail = yield* makeTrail
        const listener = trail.rules.listeners[0]!
        broken.on = true
        for (let i = 0; i < bufferCapacity + 5; i++) listener(completion("/fhir/Patient/x", 200))
        // The first append fails: the rows stay, and /readyz says why.
        const check = yield* Effect.repeat(readiness.check, { until: (result) => result.status === "unavailable" })
        expect(check).toEqual({ status: "unavailable", reason: Reasons.auditBacklog })
        expect(trail.waiting()).toBe(bufferCapacity)
        broken.on = false
        yield* TestClock.adjust("1 second")
        yield* trail.flush
        expect(trail.waiting()).toBe(0)
        expect(yield* readiness.check).toEqual({ status: "ok" })
        const written = yield* rows
        expect(written.length).toBe(bufferCapacity + 1)
        expect(written.filter((row) => row.kind === "lost").map((row) => JSON.parse(row.event).outcomeDesc)).toEqual([
          "5 audit events were not recorded: the database could not take them and the buffer was full"
        ])
      }).pipe(Effect.provide(layer))
    }), 60_000)
})
