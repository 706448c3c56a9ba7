/**
 * `Search.run` without any Bundle: the page's matches with their stored JSON text, the total, what
 * `_include`/`_revinclude` add, the warnings and the page positions, on SQLite file, memory and Postgres,
 * with the fixture catalog (Patient gender, family and identifier, Observation subject).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { build } from "../../src/catalog/Catalog.ts"
import { Database } from "../../src/db/Database.ts"
import { type CommandEnv, createCommand, runCommand } from "../../src/store/commands.ts"
import * as Search from "../../src/search/Search.ts"
import { Writer } from "../../src/db/Writer.ts"
import { referenceCheck } from "../../src/validation/referencePolicy.ts"
import { backends } from "../support/backends.ts"
import { withStore } from "../support/store.ts"

// "#" would start a URL fragment: join the folder name as a path.
const folder = join(fileURLToPath(new URL("../fixtures/packages/mirror/", import.meta.url)), "hl7.fhir.r4.core#4.0.1", "package")
const catalog = build(
  readdirSync(folder).filter((file) => file !== "package.json").map((file) => JSON.parse(readFileSync(join(folder, file), "utf8"))),
  1
)

/** Creates `resource` in one Writer transaction, as the REST API does; its `Type/id`. */
const create = (resource: Record<string, unknown>) =>
  Effect.gen(function*() {
    const { writer: sql } = yield* Database
    const writer = yield* Writer
    const type = String(resource["resourceType"])
    const written = yield* writer.commit((commit) =>
      runCommand(
        { sql, catalog, updateAsCreate: false, base: "", references: referenceCheck("fhir", "", catalog), commit },
        (env: CommandEnv) => createCommand(env, type, resource)
      )
    )
    return `${type}/${written.value.id}`
  })

/** `Search.run` of `query` on a reader. */
const run = (scope: Parameters<typeof Search.run>[2], query: string, options: { readonly lenient?: boolean; readonly warnings?: ReadonlyArray<string> } = {}) =>
  Effect.flatMap(Database, (db) =>
    db.withReader((sql) =>
      Search.run(sql, {
        catalog,
        params: new URLSearchParams(query),
        lenient: options.lenient ?? false,
        ...(options.warnings === undefined ? {} : { warnings: options.warnings })
      }, scope)))

const names = (rows: ReadonlyArray<Search.SearchRow>) => rows.map((row) => `${row.type}/${row.id}`)

/** The stored text of the current version of `Type/id`. */
const storedText = (name: string) =>
  Effect.gen(function*() {
    const { writer: sql } = yield* Database
    const [type, id] = name.split("/") as [string, string]
    const [row] = yield* sql<{ readonly content: string }>`
      SELECT v.content FROM resources r JOIN resource_versions v ON v.rkey = r.rkey AND v.version = r.version WHERE r.type = ${type} AND r.id = ${id}`
    return row!.content
  })

for (const backend of backends) {
  describe.skipIf(backend.skip)(`Search.run on ${backend.kind}`, () => {
    it.scoped("returns the page's matches with their stored text, the total and the next page's position", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const system = "urn:test:run"
        const ann = yield* create({ resourceType: "Patient", gender: "female", identifier: [{ system, value: "1" }], name: [{ family: "Ann" }] })
        yield* create({ resourceType: "Patient", gender: "male", identifier: [{ system, value: "2" }] })
        const cat = yield* create({ resourceType: "Patient", gender: "female", identifier: [{ system, value: "3" }] })

        const first = yield* run("Patient", "gender=female&_total=accurate&_count=1")
        expect(names(first.matches)).toEqual([ann])
        expect(first.matches[0]).toMatchObject({ mode: "match", version: 1 })
        expect(first.matches[0]!.content).toBe(yield* storedText(ann))
        expect([first.total, first.included, first.outcome]).toEqual([2, [], []])
        expect(first.paging.path).toBe("Patient")
        expect(first.paging.params.toString()).toBe("gender=female&_total=accurate&_count=1")
        expect(first.paging.links.map((link) => link.relation)).toEqual(["self", "first", "next"])
        expect(first.paging.links[0]!.at).toEqual({ offset: 0 })

        const next = first.paging.links.find((link) => link.relation === "next")!.at
        expect("cursor" in next).toBe(true)
        const second = yield* run("Patient", `gender=female&_total=accurate&_count=1&_cursor=${"cursor" in next ? next.cursor : ""}`)
        expect(names(second.matches)).toEqual([cat])
        expect(second.paging.links.map((link) => link.relation)).toEqual(["self", "first", "previous"])

        const counted = yield* run("Patient", "gender=female&_summary=count")
        expect([counted.matches, counted.total]).toEqual([[], 2])
      })))

    it.scoped("adds what _include and _revinclude reach as included rows, each once and none a match", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const patient = yield* create({ resourceType: "Patient", gender: "other" })
        const observation = (value: string) =>
          create({ resourceType: "Observation", status: "final", code: { text: value }, subject: { reference: patient } })
        const one = yield* observation("one")
        const two = yield* observation("two")

        const forward = yield* run("Observation", `subject=${patient}&_include=Observation:subject`)
        expect(names(forward.matches)).toEqual([one, two])
        expect(names(forward.included)).toEqual([patient])
        expect(forward.included[0]!.mode).toBe("include")
        expect(forward.included[0]!.content).toBe(yield* storedText(patient))

        const reverse = yield* run("Patient", `_id=${patient.split("/")[1]}&_revinclude=Observation:subject`)
        expect(names(reverse.matches)).toEqual([patient])
        expect(names(reverse.included)).toEqual([one, two])
      })))

    it.scoped("searches across types with _type", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const patient = yield* create({ resourceType: "Patient" })
        const observation = yield* create({ resourceType: "Observation", status: "final", code: { text: "x" }, subject: { reference: patient } })
        const ids = [patient, observation].map((name) => name.split("/")[1]).join(",")
        const found = yield* run({ types: undefined, typeParameter: true }, `_type=Patient,Observation&_id=${ids}`)
        expect(names(found.matches).sort()).toEqual([observation, patient].sort())
        expect(found.paging.path).toBe("")
      })))

    it.scoped("puts what lenient set aside and the caller's warnings in the outcome, and leaves the set-aside parameters out of the links", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const patient = yield* create({ resourceType: "Patient", gender: "unknown" })
        const found = yield* run("Patient", "gender=unknown&colour=blue", { lenient: true, warnings: ["the index is being rebuilt"] })
        expect(names(found.matches)).toEqual([patient])
        expect(found.outcome).toEqual([
          { severity: "warning", code: "invalid", diagnostics: "Unknown search parameter 'colour' for resource type Patient (set aside)" },
          { severity: "warning", code: "informational", diagnostics: "the index is being rebuilt" }
        ])
        expect(found.paging.params.toString()).toBe("gender=unknown")
      })))

    it.scoped("refuses what cannot be searched with a SearchError", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const refusal = (query: string) => run("Patient", query).pipe(Effect.catchTag("SqlError", Effect.die), Effect.flip)
        const unknown = yield* refusal("colour=blue")
        expect(unknown).toBeInstanceOf(Search.SearchError)
        expect([unknown._tag, unknown.code, unknown.message]).toEqual(["SearchError", "invalid", "Unknown search parameter 'colour' for resource type Patient"])
        const both = yield* refusal("_summary=true&_elements=gender")
        expect([both._tag, both.code]).toEqual(["SearchError", "invalid"])
      })))
  })
}
