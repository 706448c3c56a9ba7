/**
 * The backfill job against a real database on every storage kind: what it indexes, how it resumes after
 * an interruption, what it does with resources it cannot index, and start-up readiness while it runs.
 */
import { referenceCheck } from "../../src/validation/referencePolicy.ts"
import { describe, expect, it } from "@effect/vitest"
import { SqlError } from "@effect/sql/SqlError"
import { Deferred, Effect, Fiber, Layer } from "effect"
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { indexForSearch } from "../../src/app/Conformance.ts"
import { build, type Catalog } from "../../src/catalog/Catalog.ts"
import { Database } from "../../src/db/Database.ts"
import { make as makeReadiness, Readiness, Reasons } from "../../src/http/Readiness.ts"
import * as Log from "../../src/logging/Log.ts"
import { installPackage } from "../../src/packages/Installer.ts"
import { createCommand, runCommand } from "../../src/store/commands.ts"
import { Backfill, type BackfillOptions, make as makeBackfill } from "../../src/search/Backfill.ts"
import { Writer } from "../../src/db/Writer.ts"
import { backends } from "../support/backends.ts"
import { withStore } from "../support/store.ts"

// "#" would start a URL fragment: join the folder name as a path.
const folder = join(fileURLToPath(new URL("../fixtures/packages/mirror/", import.meta.url)), "hl7.fhir.r4.core#4.0.1", "package")
const core = readdirSync(folder).filter((file) => file !== "package.json").map((file) => JSON.parse(readFileSync(join(folder, file), "utf8")))

const familyParameter = {
  resourceType: "SearchParameter",
  id: "patient-surname",
  url: "http://example.org/fhir/SearchParameter/patient-surname",
  status: "active",
  code: "surname",
  base: ["Patient"],
  type: "string",
  expression: "Patient.name.family"
}

/** The fixture catalog (Patient.gender, Observation.subject, _id), then the same with Patient.family. */
const before = build(core, 1)
const after = build([...core, familyParameter], 2)

const createPatients = (families: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const { writer: sql } = yield* Database
    const writer = yield* Writer
    return yield* Effect.forEach(families, (family) =>
      Effect.map(
        writer.commit((commit) =>
          runCommand({ sql, catalog: before, updateAsCreate: false, base: "", references: referenceCheck("fhir", "", before), commit }, (env) =>
            createCommand(env, "Patient", { resourceType: "Patient", gender: "female", name: [{ family }] }))),
        (result) => result.value
      ))
  })

/** The ids of the Patients with a `family` index row, in row-key order. */
const indexedFamilies = Effect.flatMap(Database, ({ writer: sql }) =>
  sql<{ id: string }>`
    SELECT DISTINCT r.id, r.rkey FROM search_string s JOIN resources r ON r.rkey = s.rkey
    WHERE s.type = 'Patient' AND s.param = 'surname' ORDER BY r.rkey`
).pipe(Effect.map((rows) => rows.map((row) => row.id)))

const backfillState = Effect.flatMap(Database, ({ writer: sql }) =>
  sql<{ job: string | null; last_rkey: number | string }>`SELECT job, last_rkey FROM search_backfill`
).pipe(Effect.map((rows) => ({ job: rows[0]?.job ?? null, lastRkey: Number(rows[0]?.last_rkey) })))

/** A Writer whose commands run through `around` inside their transaction, numbered from 1. */
const writerAround = (around: <A, E, R>(n: number, command: Effect.Effect<A, E, R>) => Effect.Effect<A, E | SqlError, R>) =>
  Effect.map(Writer, (real) => {
    let calls = 0
    return Writer.of({
      ...real,
      commit: (command) =>
        Effect.suspend(() => {
          const n = ++calls
          return real.commit((context) => around(n, command(context)))
        })
    })
  })

const backfillWith = (options: Partial<BackfillOptions>, writer?: Writer["Type"]) =>
  writer === undefined ? makeBackfill(options) : makeBackfill(options).pipe(Effect.provideService(Writer, writer))

const run = (catalog: Catalog, options: Partial<BackfillOptions> = {}) =>
  Effect.flatMap(backfillWith(options), (backfill) => backfill.run(catalog))

const logged = (lines: ReadonlyArray<string>, message: string) =>
  lines.map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line["message"] === message)

for (const backend of backends) {
  describe.skipIf(backend.skip)(`the backfill job on ${backend.kind}`, () => {
    it.scoped("indexes the resources of a type whose parameters changed, and has nothing to do when run again", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const patients = yield* createPatients(["Lovelace", "Turing", "Hopper"])
        yield* run(before)
        expect(yield* indexedFamilies).toEqual([])
        const lines: Array<string> = []
        const report = yield* run(after, { batchSize: 2, logEvery: 1 }).pipe(
          Effect.provide(Log.layer("info").pipe(Layer.provide(Log.memorySink(lines))))
        )
        expect(report).toMatchObject({ resumed: 0, indexed: 3, failed: 0, total: 3 })
        expect(yield* indexedFamilies).toEqual(patients.map((p) => p.id))
        expect(logged(lines, "search index backfill started")[0]).toMatchObject({ generation: 2, types: 1, resources: 3, resumed_at: 0 })
        expect(logged(lines, "search index backfill progress").map((line) => line["done"])).toEqual([2, 3])
        expect(logged(lines, "search index backfilled")[0]).toMatchObject({ generation: 2, resources: 3, failed: 0, total: 3 })
        expect((yield* run(after)).job).toBeUndefined()
        expect(yield* backfillState).toEqual({ job: null, lastRkey: 0 })
      })))

    it.scoped("resumes an interrupted job after the last batch it committed", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const patients = yield* createPatients(["A", "B", "C", "D", "E"])
        yield* run(before)
        const reached = yield* Deferred.make<void>()
        // The second batch writes its rows, then hangs inside its transaction until interrupted.
        const hanging = yield* writerAround((n, command) =>
          n === 2 ? Effect.zipRight(command, Effect.zipRight(Deferred.succeed(reached, undefined), Effect.never)) : command)
        const first = yield* backfillWith({ batchSize: 2 }, hanging)
        const fiber = yield* Effect.fork(first.run(after))
        yield* Deferred.await(reached)
        yield* Fiber.interrupt(fiber)
        expect(yield* indexedFamilies).toEqual(patients.slice(0, 2).map((p) => p.id))
        const state = yield* backfillState
        expect(state.job).not.toBeNull()
        expect(state.lastRkey).toBe(patients[1]!.stored.rkey)

        const report = yield* run(after, { batchSize: 2 })
        expect(report).toMatchObject({ resumed: 2, indexed: 3, total: 5 })
        expect(yield* indexedFamilies).toEqual(patients.map((p) => p.id))
      })))

    it.scoped("logs a resource it cannot read, passes over it and finishes", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const patients = yield* createPatients(["Lovelace", "Turing"])
        yield* run(before)
        const { writer: sql } = yield* Database
        const [broken] = yield* sql<{ rkey: number | string }>`
          INSERT INTO resources (type, id, version, commit_ts, deleted)
          VALUES ('Patient', 'broken', 1, 1, ${sql.onDialectOrElse({ pg: () => false, orElse: () => 0 })}) RETURNING rkey`
        yield* sql`INSERT INTO resource_versions (rkey, version, commit_ts, op, content)
          VALUES (${broken!.rkey}, 1, 1, 'create', '{"resourceType": "Patient", "name": [')`
        const more = yield* createPatients(["Hopper"])
        const lines: Array<string> = []
        const report = yield* run(after).pipe(Effect.provide(Log.layer("info").pipe(Layer.provide(Log.memorySink(lines)))))
        expect(report).toMatchObject({ indexed: 3, failed: 1 })
        expect(yield* indexedFamilies).toEqual([...patients, ...more].map((p) => p.id))
        expect(logged(lines, "resource could not be indexed for search")).toEqual([
          expect.objectContaining({ level: "warn", type: "Patient", id: "broken", reason: expect.stringContaining("JSON") })
        ])
        expect((yield* run(after)).job).toBeUndefined()
      })))

    it.scoped("goes one resource at a time when a batch fails, and passes over only the one that fails alone", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const patients = yield* createPatients(["A", "B", "C"])
        yield* run(before)
        // 1: the batch of three; 2-5: A, B (fails), B passed over, C.
        const failing = yield* writerAround((n, command) =>
          n === 1 || n === 3 ? Effect.zipRight(command, Effect.fail(new SqlError({ message: `injected failure ${n}` }))) : command)
        const backfill = yield* backfillWith({ batchSize: 3 }, failing)
        const report = yield* backfill.run(after)
        expect(report).toMatchObject({ indexed: 2, failed: 1 })
        expect(yield* indexedFamilies).toEqual([patients[0]!.id, patients[2]!.id])
        expect(yield* backfillState).toEqual({ job: null, lastRkey: 0 })
      })))

    it.scoped("indexes the resources a package installs after the index was built", () =>
      withStore(backend.kind, Effect.gen(function*() {
        yield* run(before)
        yield* installPackage({
          name: "example.patients",
          version: "1.0.0",
          source: "test",
          checksum: "x",
          resources: [{ file: "Patient-p.json", resource: { resourceType: "Patient", id: "p", name: [{ family: "Packaged" }] } }]
        })
        expect(yield* indexedFamilies).toEqual([])
        const report = yield* run(after)
        expect(report).toMatchObject({ indexed: 1, failed: 0 })
        expect(yield* indexedFamilies).toEqual(["p"])
        expect((yield* run(after)).job).toBeUndefined()
      })))

    it.scoped("in the background, replaces a job for an older catalog and tells when it is idle", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const patients = yield* createPatients(["A", "B", "C"])
        const backfill = yield* backfillWith({ batchSize: 1 })
        yield* backfill.request(before)
        yield* backfill.request(after)
        yield* backfill.idle
        expect(yield* indexedFamilies).toEqual(patients.map((p) => p.id))
        expect(yield* backfill.progress).toMatchObject({ running: false, types: [], generation: 2, done: 3, total: 3 })
        expect((yield* backfill.run(after)).job).toBeUndefined()
      })))

    it.scoped("keeps start-up readiness at 'indexing resources for search' until the job is done", () =>
      withStore(backend.kind, Effect.gen(function*() {
        yield* createPatients(["A", "B", "C"])
        yield* run(before)
        const readiness = yield* makeReadiness
        const reached = yield* Deferred.make<void>()
        const gate = yield* Deferred.make<void>()
        const gated = yield* writerAround((n, command) =>
          n === 1 ? Effect.zipRight(Deferred.succeed(reached, undefined), Effect.zipRight(Deferred.await(gate), command)) : command)
        const backfill = yield* backfillWith({ batchSize: 2 }, gated)
        const fiber = yield* Effect.fork(indexForSearch(after).pipe(
          Effect.provideService(Readiness, readiness),
          Effect.provideService(Backfill, backfill)
        ))
        yield* Deferred.await(reached)
        expect(yield* readiness.check).toEqual({ status: "starting", reason: Reasons.indexing })
        const phase = yield* readiness.phase
        const details = phase._tag === "starting" && phase.details !== undefined ? yield* phase.details : undefined
        expect(details).toEqual({ search_index: { state: "indexing", generation: 2, types: 1, done: 0, total: 3, failed: 0 } })
        expect((yield* backfill.progress).types).toEqual(["Patient"])
        yield* Deferred.succeed(gate, undefined)
        expect(yield* Fiber.join(fiber)).toMatchObject({ indexed: 3 })
        expect(yield* readiness.check).toEqual({ status: "starting", reason: Reasons.indexing })
      })))
  })
}
