/**
 * The ResourceStore port: validation ahead of the Writer's queue, and storage failures wrapped as
 * `StoreError`, on SQLite file, memory and Postgres, with the R4 catalog.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer } from "effect"
import { build } from "../../src/catalog/Catalog.ts"
import { Database } from "../../src/db/Database.ts"
import { FhirError } from "../../src/http/FhirError.ts"
import { createCommand, prevalidatedOf } from "../../src/store/commands.ts"
import { readCurrent } from "../../src/store/reads.ts"
import { layer, ResourceStore, StoreSettings, type WriteScope } from "../../src/store/ResourceStore.ts"
import { Writer } from "../../src/db/Writer.ts"
import { backends } from "../support/backends.ts"
import { following, idsOf } from "../support/feed.ts"
import { withStore } from "../support/store.ts"
import { loadCatalog } from "../validation/support.ts"

// The R4 catalog, as the validation tests load it (undefined, with a notice, where it cannot be had outside CI).
const loaded = await loadCatalog()
const catalog = loaded ?? build([], 1)

const scope: WriteScope = { base: "http://localhost/fhir", catalog, maxBundleEntries: 10, maxPageBytes: 1_000_000 }

const settings = Layer.succeed(StoreSettings, {
  updateAsCreate: true,
  referencePolicy: "fhir",
  allowedExtensionDomains: [],
  maxIndexRows: 50_000,
  maxPatchOperations: 1_000
})

/** The ResourceStore on the test's Writer and database. */
const withResourceStore = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.provide(effect, Layer.provide(layer, settings))

const invalidPatient = { resourceType: "Patient", birthDate: "the first of May" }

for (const backend of backends) {
  describe.skipIf(backend.skip || loaded === undefined)(`the ResourceStore on ${backend.kind}`, () => {
    it.scoped("refuses an invalid create before it is queued, while the Writer is busy with another command", () =>
      withStore(backend.kind, withResourceStore(Effect.gen(function*() {
        const store = yield* ResourceStore
        const writer = yield* Writer
        const gate = yield* Deferred.make<void>()
        const busy = yield* Effect.fork(writer.exclusive(Deferred.await(gate)))
        const refused = yield* Effect.flip(store.prevalidate(scope, { interaction: "create", type: "Patient", id: "p1", resource: invalidPatient }))
        expect(refused.status).toBe(422)
        expect(refused.diagnostics).toContain("Patient/p1 is not valid")
        expect(refused.diagnostics).toContain("the first of May")
        // A Bundle over server.max_bundle_entries is refused as the command would refuse it.
        const bundle = { resourceType: "Bundle", type: "collection", entry: Array.from({ length: 11 }, () => ({ resource: { resourceType: "Basic" } })) }
        const tooLarge = yield* Effect.flip(store.prevalidate(scope, { interaction: "create", type: "Bundle", id: "b1", resource: bundle }))
        expect(tooLarge.status).toBe(413)
        // Nor is an update of one validated: its command refuses it.
        expect(yield* store.prevalidate(scope, { interaction: "update", type: "Bundle", id: "b1", resource: { ...bundle, id: "b1" } })).toBeUndefined()
        // An update is validated ahead too, but its command answers (its version checks come first).
        const update = yield* store.prevalidate(scope, { interaction: "update", type: "Patient", id: "p1", resource: { ...invalidPatient, id: "p1" } })
        expect(update?.validation.issues.some((issue) => issue.severity === "error")).toBe(true)
        // What the command's own first checks refuse is left to it.
        expect(yield* store.prevalidate(scope, { interaction: "create", type: "Nothing", id: "x", resource: { resourceType: "Nothing" } })).toBeUndefined()
        yield* Deferred.succeed(gate, undefined)
        yield* Fiber.join(busy)
        expect(yield* writer.commits).toBe(0)
      }))))

    it.scoped("writes a create with the validation done ahead of it, not validating it again", () =>
      withStore(backend.kind, withResourceStore(Effect.gen(function*() {
        const store = yield* ResourceStore
        const { writer: sql } = yield* Database
        const resource = { resourceType: "Patient", gender: "female" }
        const ahead = yield* store.prevalidate(scope, { interaction: "create", type: "Patient", id: "p2", resource })
        expect(ahead?.validation.issues.filter((issue) => issue.severity === "error")).toEqual([])
        const written = yield* store.transaction(scope, (env) => createCommand({ ...env, prevalidated: prevalidatedOf([ahead]) }, "Patient", resource, "p2"))
        expect(written.value.stored.version).toBe(1)
        // The command takes the validation it is given for that very resource: one that found an error refuses it.
        const marked = {
          resource,
          id: "p3",
          validation: { issues: [{ severity: "error" as const, code: "invariant", expression: "Patient", diagnostics: "found ahead" }], references: [] }
        }
        const refused = yield* Effect.flip(store.transaction(scope, (env) => createCommand({ ...env, prevalidated: prevalidatedOf([marked]) }, "Patient", resource, "p3")))
        expect(refused).toBeInstanceOf(FhirError)
        expect((refused as FhirError).diagnostics).toContain("found ahead")
        // Another resource, or another id, is validated by the command itself.
        const copy = yield* store.transaction(scope, (env) => createCommand({ ...env, prevalidated: prevalidatedOf([marked]) }, "Patient", { ...resource }, "p3"))
        expect(copy.value.stored.version).toBe(1)
        expect((yield* readCurrent(sql, "Patient", "p2"))?.version).toBe(1)
      }))))

    it.scoped("wraps a write's failed statement as a StoreError, and commits nothing of it", () =>
      withStore(backend.kind, withResourceStore(Effect.gen(function*() {
        const store = yield* ResourceStore
        const writer = yield* Writer
        const { writer: sql } = yield* Database
        const feed = yield* following()
        const failed = yield* Effect.flip(store.transaction(scope, (env) =>
          Effect.zipRight(createCommand(env, "Patient", { resourceType: "Patient" }, "p4"), env.sql`SELECT * FROM no_such_table`)))
        expect(failed._tag).toBe("StoreError")
        if (failed._tag !== "StoreError") return
        expect(failed.limit).toBeUndefined()
        expect(failed.reason).toContain("no_such_table")
        expect(yield* readCurrent(sql, "Patient", "p4")).toBeUndefined()
        expect(yield* writer.commits).toBe(0)
        yield* store.transaction(scope, (env) => createCommand(env, "Patient", { resourceType: "Patient" }, "p5"))
        expect(idsOf(yield* feed.take(1))).toEqual(["p5"])
      }))))

    if (backend.kind === "postgres") {
      it.scoped("says when a write's statement ran past its deadline", () =>
        withStore(backend.kind, withResourceStore(Effect.gen(function*() {
          const store = yield* ResourceStore
          const failed = yield* Effect.flip(store.transaction(scope, (env) =>
            Effect.zipRight(env.sql`SET LOCAL statement_timeout = 20`, env.sql`SELECT pg_sleep(5)`)))
          expect(failed._tag).toBe("StoreError")
          if (failed._tag === "StoreError") expect(failed.limit).toBe("deadline")
        }))))
    }
  })
}
