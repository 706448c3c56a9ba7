/**
 * `includedResources` on its own, over a database with hand-written reference index rows (no catalog, no
 * HTTP): the rules, iteration over a cycle, the cap, deleted targets, and the `restrict` condition that
 * keeps every included resource inside a set (what a patient-scoped token will use).
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import type { SearchParameterDef } from "../../src/catalog/definitions.ts"
import { Database } from "../../src/db/Database.ts"
import type { Include } from "../../src/search/parse/SearchRequest.ts"
import { includedResources, maxIterated, type ResourceKey, TooManyIncluded } from "../../src/search/plan/include.ts"
import { deleteResource, putVersion } from "../../src/store/versions.ts"
import { backends } from "../support/backends.ts"
import { withStore } from "../support/store.ts"

const reference = (base: string, code: string, target: ReadonlyArray<string>): SearchParameterDef => ({
  url: `http://example.org/SearchParameter/${base}-${code}`,
  version: undefined,
  name: code,
  resource: {},
  code,
  base: [base],
  type: "reference",
  expression: `${base}.${code}`,
  target,
  modifiers: [],
  comparators: [],
  multipleOr: true,
  multipleAnd: true,
  chain: [],
  components: []
})

const subject = reference("Observation", "subject", ["Patient", "Group"])
const performer = reference("Observation", "performer", ["Practitioner", "Patient"])
const link = reference("Patient", "link", ["Patient", "RelatedPerson"])

const rule = (param: SearchParameterDef, options: { readonly targetType?: string; readonly iterate?: boolean } = {}): Include => ({
  kind: "parameter",
  sourceType: param.base[0]!,
  param,
  iterate: options.iterate ?? false,
  ...(options.targetType === undefined ? {} : { targetType: options.targetType })
})

/** A small world: resources by `Type/id`, and their references by parameter code. */
const world = (sql: SqlClient.SqlClient, resources: Record<string, Record<string, ReadonlyArray<string>>>) =>
  Effect.gen(function*() {
    const keys = new Map<string, ResourceKey>()
    for (const name of Object.keys(resources)) {
      const [type, id] = name.split("/") as [string, string]
      const stored = yield* putVersion(sql, { type, id, resource: { resourceType: type }, commitTs: 1 })
      keys.set(name, { rkey: stored.rkey, type, id })
    }
    for (const [name, references] of Object.entries(resources)) {
      const source = keys.get(name)!
      for (const [param, targets] of Object.entries(references)) {
        for (const target of targets) {
          const [targetType, targetId] = target.split("/")
          yield* sql`INSERT INTO search_reference (rkey, type, param, target_type, target_id) VALUES (${source.rkey}, ${source.type}, ${param}, ${targetType!}, ${targetId!})`
        }
      }
    }
    return (name: string) => keys.get(name)!
  })

const names = (found: ReadonlyArray<{ readonly type: string; readonly id: string }>) => found.map((r) => `${r.type}/${r.id}`)

for (const backend of backends) {
  describe.skipIf(backend.skip)(`includedResources on ${backend.kind}`, () => {
    it.scoped("follows a parameter forwards, to one target type when given, and backwards for _revinclude", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const { writer: sql } = yield* Database
        const key = yield* world(sql, {
          "Patient/p": {},
          "Practitioner/d": {},
          "Observation/o1": { subject: ["Patient/p"], performer: ["Practitioner/d", "Patient/p"] },
          "Observation/o2": { subject: ["Patient/p"], performer: ["Patient/missing"] }
        })
        const o1 = key("Observation/o1")
        const found = yield* includedResources(sql, [o1], [rule(subject), rule(performer)], [])
        expect(names(found)).toEqual(["Patient/p", "Practitioner/d"])
        expect(JSON.parse(found[0]!.content)).toMatchObject({ resourceType: "Patient", id: "p" })
        expect(names(yield* includedResources(sql, [o1], [rule(performer, { targetType: "Practitioner" })], []))).toEqual(["Practitioner/d"])
        expect(names(yield* includedResources(sql, [o1], [{ kind: "wildcard", iterate: false }], []))).toEqual(["Patient/p", "Practitioner/d"])
        // A rule of another type than the matches' adds nothing.
        expect(yield* includedResources(sql, [o1], [rule(link)], [])).toEqual([])
        const p = key("Patient/p")
        expect(names(yield* includedResources(sql, [p], [], [rule(subject)]))).toEqual(["Observation/o1", "Observation/o2"])
        expect(names(yield* includedResources(sql, [p], [], [rule(performer, { targetType: "Practitioner" })]))).toEqual([])
        // A match is never included again.
        expect(names(yield* includedResources(sql, [p, o1], [], [rule(subject)]))).toEqual(["Observation/o2"])
      })))

    it.scoped("iterates over a cycle until nothing is added, each resource once; without :iterate only the matches count", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const { writer: sql } = yield* Database
        const key = yield* world(sql, {
          "Patient/a": { link: ["Patient/b"] },
          "Patient/b": { link: ["Patient/c"] },
          "Patient/c": { link: ["Patient/a"] }
        })
        expect(names(yield* includedResources(sql, [key("Patient/a")], [rule(link, { iterate: true })], []))).toEqual(["Patient/b", "Patient/c"])
        expect(names(yield* includedResources(sql, [key("Patient/a")], [rule(link)], []))).toEqual(["Patient/b"])
        expect(names(yield* includedResources(sql, [key("Patient/a")], [], [rule(link, { iterate: true })]))).toEqual(["Patient/c", "Patient/b"])
      })))

    it.scoped("leaves deleted targets out", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const { writer: sql } = yield* Database
        const key = yield* world(sql, { "Patient/gone": {}, "Patient/here": {}, "Observation/o": { subject: ["Patient/gone", "Patient/here"] } })
        yield* deleteResource(sql, { type: "Patient", id: "gone", commitTs: 2 })
        expect(names(yield* includedResources(sql, [key("Observation/o")], [rule(subject)], []))).toEqual(["Patient/here"])
      })))

    it.scoped("keeps every included resource inside the restriction, and iterates only from those", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const { writer: sql } = yield* Database
        const key = yield* world(sql, {
          "Patient/a": { link: ["Patient/outside"] },
          "Patient/outside": { link: ["Patient/b"] },
          "Patient/b": {},
          "Observation/o": { subject: ["Patient/a", "Patient/outside"] },
          "Observation/o2": { subject: ["Patient/a"] }
        })
        const restrict = sql`r.id <> 'outside'`
        const rules = [rule(subject), rule(link, { iterate: true })]
        expect(names(yield* includedResources(sql, [key("Observation/o")], rules, []))).toEqual(["Patient/a", "Patient/outside", "Patient/b"])
        expect(names(yield* includedResources(sql, [key("Observation/o")], rules, [], { restrict }))).toEqual(["Patient/a"])
        const within = sql`r.id = 'o'`
        expect(names(yield* includedResources(sql, [key("Patient/a")], [], [rule(subject)], { restrict: within }))).toEqual(["Observation/o"])
      })))

    it.scoped(`fails when :iterate would add more than ${maxIterated} resources, and allows exactly that many`, () =>
      withStore(backend.kind, Effect.gen(function*() {
        const { writer: sql } = yield* Database
        // Patient/0 -> Patient/1 -> ... -> Patient/1001
        const chain: Record<string, Record<string, ReadonlyArray<string>>> = {}
        for (let i = 0; i <= maxIterated + 1; i++) chain[`Patient/${i}`] = i <= maxIterated ? { link: [`Patient/${i + 1}`] } : {}
        const key = yield* sql.withTransaction(world(sql, chain))
        const iterate = [rule(link, { iterate: true })]
        expect((yield* includedResources(sql, [key("Patient/1")], iterate, [])).length).toBe(maxIterated)
        const error = yield* Effect.flip(includedResources(sql, [key("Patient/0")], iterate, []))
        expect(error).toBeInstanceOf(TooManyIncluded)
        expect(error.message).toContain(`more than ${maxIterated} resources`)
        // Those a plain rule adds do not count: Patient/1 comes from the plain rule, 1000 more from :iterate.
        expect((yield* includedResources(sql, [key("Patient/0")], [rule(link), ...iterate], [])).length).toBe(maxIterated + 1)
      })))
  })
}
