/** Writes keep the search index in step, in the same transaction, on every storage kind. */
import { referenceCheck } from "../../src/validation/referencePolicy.ts"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { build } from "../../src/catalog/Catalog.ts"
import { Database } from "../../src/db/Database.ts"
import { type CommandEnv, createCommand, deleteCommand, runCommand, updateCommand } from "../../src/store/commands.ts"
import { Writer } from "../../src/db/Writer.ts"
import { backends } from "../support/backends.ts"
import { withStore } from "../support/store.ts"

// "#" would start a URL fragment: join the folder name as a path.
const folder = join(fileURLToPath(new URL("../fixtures/packages/mirror/", import.meta.url)), "hl7.fhir.r4.core#4.0.1", "package")
const catalog = build(
  readdirSync(folder).filter((file) => file !== "package.json").map((file) => JSON.parse(readFileSync(join(folder, file), "utf8"))),
  1
)

/** Runs `command` in one Writer transaction, as the REST API does. */
const run = <A, E>(command: (env: CommandEnv) => Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    const { writer: sql } = yield* Database
    const writer = yield* Writer
    return (yield* writer.commit((commit) => runCommand({ sql, catalog, updateAsCreate: false, base: "", references: referenceCheck("fhir", "", catalog), commit }, command))).value
  })

const genderRows = (id: string) =>
  Effect.flatMap(Database, ({ writer: sql }) =>
    sql<{ value: string }>`
      SELECT t.value FROM search_token t JOIN resources r ON r.rkey = t.rkey
      WHERE t.type = 'Patient' AND t.param = 'gender' AND r.id = ${id}`
  ).pipe(Effect.map((rows) => rows.map((row) => row.value)))

for (const backend of backends) {
  describe.skipIf(backend.skip)(`the search index on ${backend.kind}`, () => {
    it.scoped("holds a Patient's gender after create, only the new value after update, nothing after delete", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const created = yield* run((env) => createCommand(env, "Patient", { resourceType: "Patient", gender: "female" }))
        expect(yield* genderRows(created.id)).toEqual(["female"])
        yield* run((env) => updateCommand(env, "Patient", created.id, { resourceType: "Patient", id: created.id, gender: "male" }, undefined))
        expect(yield* genderRows(created.id)).toEqual(["male"])
        yield* run((env) => deleteCommand(env, "Patient", created.id))
        expect(yield* genderRows(created.id)).toEqual([])
      })))

    it.scoped("writes no index rows when the write fails", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const failed = yield* run((env) =>
          Effect.zipRight(createCommand(env, "Patient", { resourceType: "Patient", gender: "other", id: "x" }), Effect.fail("stop" as const))
        ).pipe(Effect.flip)
        expect(failed).toBe("stop")
        const { writer: sql } = yield* Database
        expect(yield* sql`SELECT * FROM search_token WHERE value = 'other'`).toEqual([])
      })))
  })
}
