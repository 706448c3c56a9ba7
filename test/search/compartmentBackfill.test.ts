/**
 * Resources written before the catalog knew a compartment get their membership rows from the backfill,
 * as a database indexed before compartment rows existed does (the fingerprint names the compartments).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { build } from "../../src/catalog/Catalog.ts"
import { Database } from "../../src/db/Database.ts"
import { createCommand, runCommand } from "../../src/store/commands.ts"
import { make as makeBackfill } from "../../src/search/Backfill.ts"
import { Writer } from "../../src/db/Writer.ts"
import { referenceCheck } from "../../src/validation/referencePolicy.ts"
import { backends } from "../support/backends.ts"
import { withStore } from "../support/store.ts"

const folder = join(fileURLToPath(new URL("../fixtures/packages/mirror/", import.meta.url)), "hl7.fhir.r4.core#4.0.1", "package")
const core = readdirSync(folder).filter((file) => file !== "package.json").map((file) => JSON.parse(readFileSync(join(folder, file), "utf8")))

/** The fixture catalog without its Patient CompartmentDefinition, then with it. */
const without = build(core.filter((resource) => resource.resourceType !== "CompartmentDefinition"), 1)
const withCompartment = build(core, 2)

const memberships = Effect.flatMap(Database, ({ writer: sql }) =>
  sql<{ type: string; id: string; compartment: string; target_id: string }>`
    SELECT r.type, r.id, c.compartment, c.target_id FROM search_compartment c JOIN resources r ON r.rkey = c.rkey ORDER BY r.rkey`)

for (const backend of backends) {
  describe.skipIf(backend.skip)(`compartment rows and the backfill on ${backend.kind}`, () => {
    it.scoped("writes the membership of resources written before the compartment was known", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const { writer: sql } = yield* Database
        const writer = yield* Writer
        const create = (type: string, body: Record<string, unknown>, id: string) =>
          writer.commit((commit) =>
            runCommand({ sql, catalog: without, updateAsCreate: false, base: "", references: referenceCheck("fhir", "", without), commit }, (env) =>
              createCommand(env, type, body, id)))
        yield* create("Patient", { resourceType: "Patient" }, "p1")
        yield* create("Observation", { resourceType: "Observation", status: "final", code: { text: "x" }, subject: { reference: "Patient/p1" } }, "o1")
        const backfill = yield* makeBackfill()
        yield* backfill.run(without)
        expect(yield* memberships).toEqual([])
        const report = yield* backfill.run(withCompartment)
        expect(report.indexed).toBe(2)
        expect((yield* memberships).map((row) => `${row.type}/${row.id} in ${row.compartment}/${row.target_id}`))
          .toEqual(["Patient/p1 in Patient/p1", "Observation/o1 in Patient/p1"])
      })))
  })
}
