import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer, Redacted, Schema, type Scope, TestClock } from "effect"
import { AppConfig } from "../../src/config/AppConfig.ts"
import { readSecrets } from "../../src/config/Secrets.ts"
import type { Change } from "../../src/db/ChangeFeed.ts"
import { Database, layer as databaseLayer } from "../../src/db/Database.ts"
import { migrate } from "../../src/db/Migrations.ts"
import { layer as writerLayer, withOrigin, Writer } from "../../src/db/Writer.ts"
import { GovernanceSettings, settingsOf } from "../../src/governance/Governance.ts"
import { AuditKey, commitHookLayer, make as makeTrail } from "../../src/governance/audit/AuditTrail.ts"
import { append, type ChainKey, cutOlder, hashOf, verify } from "../../src/governance/audit/chain.ts"
import { createHash, createHmac } from "node:crypto"
import { changeEvent } from "../../src/governance/audit/events.ts"
import { backends, freshDatabase, pgAvailable } from "../support/backends.ts"

const key: ChainKey = Redacted.make("0123456789abcdef-audit-key")

const settings = (audit: Partial<AppConfig["audit"]> = {}) => {
  const config = Schema.decodeUnknownSync(AppConfig)({})
  return settingsOf({ ...config, audit: { ...config.audit, ...audit } })
}

/** A migrated database with the Writer and its audit hook. */
const setup = (kind: (typeof backends)[number]["kind"], audit: Partial<AppConfig["audit"]> = {}, chainKey: ChainKey = key) =>
  Effect.gen(function*() {
    const options = yield* freshDatabase(kind)
    const database = yield* Layer.build(databaseLayer(options))
    yield* migrate({ fhirVersion: "r4" }).pipe(Effect.provide(database))
    const inputs = Layer.mergeAll(Layer.succeedContext(database), Layer.succeed(GovernanceSettings, settings(audit)), Layer.succeed(AuditKey, chainKey))
    const writer = yield* Layer.build(Layer.provideMerge(Layer.provide(writerLayer, commitHookLayer), inputs))
    return writer
  })

type Services = Context.Context<Database | Writer | GovernanceSettings | AuditKey>

const change = (id: string, version = 1): Change => ({ type: "Patient", id, version, op: version === 1 ? "create" : "update", resource: "{}" })

/** `n` commits of one created Patient each, made for a caller. */
const writes = (n: number, prefix = "p") =>
  Effect.gen(function*() {
    const writer = yield* Writer
    for (let i = 1; i <= n; i++) {
      yield* writer.commit(({ record }) => Effect.sync(() => record(change(`${prefix}${i}`)))).pipe(
        withOrigin({ actor: "client:app", requestId: `r${i}`, client: "127.0.0.1" })
      )
    }
  })

const verified = Effect.flatMap(Database, (db) => verify(db.writer, key))
const exec = (text: string) => Effect.flatMap(Database, (db) => db.writer.unsafe(text))

const run = <A, E>(kind: (typeof backends)[number]["kind"], body: Effect.Effect<A, E, Database | Writer | GovernanceSettings | AuditKey | Scope.Scope>) =>
  Effect.flatMap(setup(kind), (services: Services) => Effect.provide(body, services))

describe.each(backends)("the audit chain on $kind", ({ kind, skip }) => {
  it.scoped.skipIf(skip)("a write's row commits with it, a rolled-back write has none, and the chain verifies", () =>
    run(kind, Effect.gen(function*() {
      yield* writes(10)
      const writer = yield* Writer
      const failed = yield* Effect.either(writer.commit(({ record }) => Effect.zipRight(Effect.sync(() => record(change("gone"))), Effect.fail("no"))))
      expect(failed._tag).toBe("Left")
      const db = yield* Database
      const rows = yield* db.writer<{ seq: number; entity: string; agent: string; action: string }>`SELECT seq, entity, agent, action FROM svc_audit ORDER BY seq`
      expect(rows.map((row) => row.entity)).toEqual(Array.from({ length: 10 }, (_, i) => `Patient/p${i + 1}`))
      expect(rows.every((row) => row.agent === "client:app" && row.action === "C")).toBe(true)
      expect(yield* verified).toMatchObject({ rows_checked: 10, ok: true, first_problem: null, keyed: true })
      // Another key does not verify the first row.
      expect((yield* verify(db.writer, Redacted.make("another-key-of-16-bytes"))).first_problem).toEqual({ seq: 1, kind: "altered" })
    })))

  it.scoped.skipIf(skip)("finds an altered row", () =>
    run(kind, Effect.gen(function*() {
      yield* writes(10)
      yield* exec(`UPDATE svc_audit SET event = replace(event, 'client:app', 'client:evil'), agent = 'client:evil' WHERE seq = 5`)
      expect(yield* verified).toMatchObject({ ok: false, rows_checked: 4, first_problem: { seq: 5, kind: "altered" } })
    })))

  it.scoped.skipIf(skip)("finds an altered index column", () =>
    run(kind, Effect.gen(function*() {
      yield* writes(10)
      yield* exec(`UPDATE svc_audit SET entity = 'Patient/other' WHERE seq = 7`)
      expect((yield* verified).first_problem).toEqual({ seq: 7, kind: "altered" })
    })))

  it.scoped.skipIf(skip)("finds a removed row, in the middle and at the end", () =>
    run(kind, Effect.gen(function*() {
      yield* writes(10)
      yield* exec(`DELETE FROM svc_audit WHERE seq = 5`)
      expect(yield* verified).toMatchObject({ ok: false, rows_checked: 4, first_problem: { seq: 5, kind: "removed" } })
      yield* exec(`INSERT INTO svc_audit SELECT 5, time, kind, action, outcome, agent, client, entity, event, prev_hash, hash FROM svc_audit WHERE seq = 4`)
      yield* exec(`DELETE FROM svc_audit WHERE seq >= 5`)
      expect((yield* verified).first_problem).toEqual({ seq: 5, kind: "removed" })
    })))

  it.scoped.skipIf(skip)("finds an inserted row, in the middle (the rest renumbered) and past the end", () =>
    run(kind, Effect.gen(function*() {
      yield* writes(10)
      yield* exec(`INSERT INTO svc_audit SELECT 11, time, kind, action, outcome, agent, client, entity, event, hash, hash FROM svc_audit WHERE seq = 10`)
      expect((yield* verified).first_problem).toEqual({ seq: 11, kind: "inserted" })
      yield* exec(`DELETE FROM svc_audit WHERE seq = 11`)
      expect((yield* verified).ok).toBe(true)
      yield* exec(`UPDATE svc_audit SET seq = seq + 1000 WHERE seq >= 5`)
      yield* exec(`UPDATE svc_audit SET seq = seq - 999 WHERE seq >= 1000`)
      yield* exec(`INSERT INTO svc_audit SELECT 5, time, kind, action, outcome, agent, client, 'Patient/forged', replace(event, 'p3', 'forged'), hash, 'forged' FROM svc_audit WHERE seq = 4`)
      expect(yield* verified).toMatchObject({ ok: false, rows_checked: 4, first_problem: { seq: 5, kind: "inserted" } })
    })))

  it.scoped.skipIf(skip)("finds two rows swapped", () =>
    run(kind, Effect.gen(function*() {
      yield* writes(10)
      yield* exec(`UPDATE svc_audit SET seq = -1 WHERE seq = 5`)
      yield* exec(`UPDATE svc_audit SET seq = 5 WHERE seq = 6`)
      yield* exec(`UPDATE svc_audit SET seq = 6 WHERE seq = -1`)
      expect(yield* verified).toMatchObject({ ok: false, rows_checked: 4, first_problem: { seq: 5, kind: "reordered" } })
    })))

  it.scoped.skipIf(skip)("verifies across pages of rows", () =>
    run(kind, Effect.gen(function*() {
      const db = yield* Database
      const writer = yield* Writer
      const events = Array.from({ length: 2500 }, (_, i) => changeEvent(1_000_000 + i, { actor: "system", requestId: null }, change(`x${i}`)))
      yield* writer.commit(() => append(db.writer, db.dialect, key, events))
      expect(yield* verified).toMatchObject({ rows_checked: 2500, ok: true })
      // A batch this large is chained in the order of the resources (`sortedFrom`): x0, x1, x10, x100, ...
      const order = (yield* db.writer<{ readonly entity: string }>`SELECT entity FROM svc_audit ORDER BY seq`).map((row) => row.entity)
      expect(order).toEqual(events.map((_, i) => `Patient/x${i}`).sort())
      yield* exec(`UPDATE svc_audit SET event = replace(event, '"system"', '"systen"') WHERE seq = 2101`)
      expect((yield* verified).first_problem).toEqual({ seq: 2101, kind: "altered" })
    })))

  it.scoped.skipIf(skip)("a trail cut by retention still verifies, and an alteration after the cut is still found", () =>
    Effect.gen(function*() {
      const services = yield* setup(kind, { retention_days: 1 })
      yield* Effect.gen(function*() {
        // Written at the test clock's start (time 0).
        yield* writes(5, "old")
        const trail = yield* makeTrail
        yield* TestClock.adjust("2 days")
        yield* writes(3, "new")
        // The retention fiber runs at each hour that passes; a run now takes what it has not yet.
        yield* trail.retain
        const db = yield* Database
        const rows = yield* db.writer<{ seq: number | string }>`SELECT seq FROM svc_audit ORDER BY seq`
        expect(rows.map((row) => Number(row.seq))).toEqual([6, 7, 8])
        expect(yield* verified).toMatchObject({ ok: true, rows_checked: 3, from_seq: 5 })
        yield* exec(`UPDATE svc_audit SET event = replace(event, 'new2', 'new9') WHERE seq = 7`)
        expect((yield* verified).first_problem).toEqual({ seq: 7, kind: "altered" })
        yield* exec(`DELETE FROM svc_audit WHERE seq = 6`)
        expect((yield* verified).first_problem).toEqual({ seq: 6, kind: "removed" })
      }).pipe(Effect.provide(services))
    }))

  it.scoped.skipIf(skip)("cutOlder deletes only a run of the oldest rows", () =>
    run(kind, Effect.gen(function*() {
      const db = yield* Database
      const writer = yield* Writer
      const at = (ms: number, id: string) => changeEvent(ms * 1000, { actor: "system", requestId: null }, change(id))
      yield* writer.commit(() => append(db.writer, db.dialect, key, [at(1000, "a"), at(2000, "b"), at(9000, "c"), at(1500, "d")]))
      const { value } = yield* writer.commit(() => cutOlder(db.writer, db.dialect, 5000))
      expect(value).toBe(2)
      expect(yield* verified).toMatchObject({ ok: true, rows_checked: 2, from_seq: 2 })
    })))
})

describe.skipIf(!pgAvailable)("one chain however many servers append", () => {
  it.scoped("two processes' Writers appending at once to one Postgres database make one chain that verifies", () =>
    Effect.gen(function*() {
      const options = yield* freshDatabase("postgres")
      const first = yield* Layer.build(databaseLayer(options))
      yield* migrate({ fhirVersion: "r4" }).pipe(Effect.provide(first))
      const second = yield* Layer.build(databaseLayer(options))
      const server = (database: Context.Context<Database>, name: string) =>
        Effect.gen(function*() {
          const writer = yield* Layer.build(Layer.provide(writerLayer, Layer.succeedContext(database)))
          const db = Context.get(database, Database)
          yield* Effect.forEach(Array.from({ length: 20 }, (_, i) => i), (i) =>
            Context.get(writer, Writer).commit(() =>
              append(db.writer, db.dialect, key, [1, 2, 3].map((n) => changeEvent(1_000_000 + i, { actor: name, requestId: null }, change(`${name}-${i}-${n}`))))
            ), { discard: true })
        })
      yield* Effect.all([server(first, "a"), server(second, "b")], { concurrency: 2 })
      const db = Context.get(first, Database)
      expect(yield* verify(db.writer, key)).toMatchObject({ ok: true, rows_checked: 120 })
      const agents = yield* db.writer<{ agent: string; n: number | string }>`SELECT agent, count(*) AS n FROM svc_audit GROUP BY agent ORDER BY agent`
      expect(agents.map((row) => [row.agent, Number(row.n)])).toEqual([["a", 60], ["b", 60]])
    }))
})

describe("a row's hash", () => {
  it("is HMAC-SHA256 under any key (short, 64-byte, longer, not ASCII), and SHA-256 without one", () => {
    const text = "prev\n42\n{\"subtype\":\"read\",\"note\":\"é€𝄞\"}"
    for (const secret of ["0123456789abcdef", "k".repeat(64), "long-".repeat(20), "clé-de-chaîne-ü-0123456789"]) {
      expect(hashOf(Redacted.make(secret), "prev", 42, text.slice(8))).toBe(createHmac("sha256", secret).update(text).digest("hex"))
      // The same key again, after its first use.
      expect(hashOf(Redacted.make(secret), "p", 1, "x")).toBe(createHmac("sha256", secret).update("p\n1\nx").digest("hex"))
    }
    expect(hashOf(undefined, "prev", 42, text.slice(8))).toBe(createHash("sha256").update(text).digest("hex"))
  })
})

describe("the audit chain's key", () => {
  it.effect("SVC_AUDIT_KEY shorter than 16 bytes is refused at start-up; 16 bytes are taken", () =>
    Effect.gen(function*() {
      const short = yield* Effect.flip(readSecrets({ SVC_AUDIT_KEY: "too-short" }, {}))
      expect(short.message).toContain("SVC_AUDIT_KEY: expected at least 16 bytes")
      const secrets = yield* readSecrets({ SVC_AUDIT_KEY: "sixteen-bytes-ok" }, {})
      expect(Redacted.value(secrets.auditKey!)).toBe("sixteen-bytes-ok")
    }))
})
