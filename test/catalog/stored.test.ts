import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { build, type Catalog, fromEntries } from "../../src/catalog/Catalog.ts"
import { storedEntries } from "../../src/catalog/stored.ts"
import { Database } from "../../src/db/Database.ts"
import { installPackage } from "../../src/packages/Installer.ts"
import { putVersion } from "../../src/store/versions.ts"
import { currentOfTypes } from "../../src/store/reads.ts"
import { Writer } from "../../src/db/Writer.ts"
import { backends } from "../support/backends.ts"
import { withStore } from "../support/store.ts"
import { compartment, operations, searchParameter, searchParameters, structure, structures } from "./fixtures.ts"

type Json = Record<string, unknown>

const narrative = { status: "generated", div: "<div xmlns=\"http://www.w3.org/1999/xhtml\">Patient</div>" }

const resources: ReadonlyArray<Json> = [
  ...structures.filter((sd) => sd["type"] !== "Patient"),
  structure("Patient", {
    text: narrative,
    snapshot: { element: [{ id: "Patient", path: "Patient" }, { id: "Patient.gender", path: "Patient.gender", min: 1, isSummary: true }] }
  }),
  ...searchParameters,
  // No base: a problem.
  searchParameter("CodeSystem-extension", "extension", []),
  compartment("Patient", [{ code: "Observation", param: ["subject"] }, { code: "Bundle" }]),
  ...operations,
  {
    resourceType: "CodeSystem",
    id: "shapes",
    url: "http://example.org/CodeSystem/shapes",
    content: "complete",
    caseSensitive: false,
    concept: [{ code: "Polygon", concept: [{ code: "Square" }] }]
  },
  {
    resourceType: "ValueSet",
    id: "shapes",
    url: "http://example.org/ValueSet/shapes",
    compose: { include: [{ system: "http://example.org/CodeSystem/shapes", filter: [{ property: "concept", op: "is-a", value: "Polygon" }] }] }
  },
  {
    resourceType: "ConceptMap",
    id: "shapes-to-forms",
    url: "http://example.org/ConceptMap/shapes-to-forms",
    sourceCanonical: "http://example.org/ValueSet/shapes",
    targetUri: "http://example.org/ValueSet/forms",
    group: [{
      source: "http://example.org/CodeSystem/shapes",
      target: "http://example.org/CodeSystem/forms",
      element: [{ code: "Square", target: [{ code: "box", equivalence: "wider", dependsOn: [{ property: "http://example.org/size", value: "large" }] }] }],
      unmapped: { mode: "fixed", code: "other" }
    }]
  },
  { resourceType: "NamingSystem", id: "ignored", name: "not compiled" }
]

const sample = {
  name: "example.fhir.catalog",
  version: "1.0.0",
  source: "test",
  checksum: "abc",
  resources: resources.map((resource) => ({ file: `${String(resource["resourceType"])}-${String(resource["id"])}.json`, resource }))
}

/** What a user of the catalog sees, as plain data. */
const seen = (catalog: Catalog) => ({
  fhirVersion: catalog.fhirVersion,
  resourceTypes: catalog.resourceTypes,
  parameters: catalog.resourceTypes.map((type) => [type, [...catalog.searchParameters(type).values()].map((p) => ({ ...p, resource: undefined }))]),
  compartments: catalog.compartments.map((c) => [c.url, c.code, [...c.resources]]),
  operations: catalog.operations.map((op) => ({ ...op, resource: undefined })),
  patient: catalog.structureDefinitionForType("Patient")?.snapshot?.element.map((e) => [e.path, e.min, e.json]),
  tree: [...(catalog.elementTree("Patient") ?? new Map())].map(([name, node]) => [name, node.summary, node.mandatory]),
  concepts: catalog.codeSystem("http://example.org/CodeSystem/shapes")?.concepts().map((c) => [c.code, c.parents, c.children]),
  square: catalog.codeSystem("http://example.org/CodeSystem/shapes")?.concept("square")?.code,
  compose: catalog.valueSet("http://example.org/ValueSet/shapes")?.compose,
  conceptMaps: catalog.conceptMaps.map((map) => [map.url, map.source, map.target, map.systems, map.groups]),
  fromShapes: catalog.conceptMapsBetween("http://example.org/ValueSet/shapes", "http://example.org/ValueSet/forms").map((map) => map.url),
  problems: catalog.problems
})

/** The current conformance resources as stored (with the server's id and meta), parsed. */
const storedResources = Effect.gen(function*() {
  const { writer: sql } = yield* Database
  const rows = yield* currentOfTypes(sql, ["StructureDefinition", "SearchParameter", "CompartmentDefinition", "OperationDefinition", "CodeSystem", "ValueSet", "ConceptMap"])
  return rows.map((row) => JSON.parse(row.content) as Json).sort((a, b) =>
    a["resourceType"] === b["resourceType"] ? String(a["id"]) < String(b["id"]) ? -1 : 1 : String(a["resourceType"]) < String(b["resourceType"]) ? -1 : 1)
})

const entryRows = Effect.flatMap(Database, (db) => db.writer<{ readonly n: number | string }>`SELECT count(*) AS n FROM catalog_entries`).pipe(
  Effect.map((rows) => Number(rows[0]?.n))
)

for (const backend of backends) {
  describe.skipIf(backend.skip)(`the catalog from the database on ${backend.kind}`, () => {
    it.scoped("is the catalog of the stored resources, from the entries the installer wrote", () =>
      withStore(backend.kind, Effect.gen(function*() {
        yield* installPackage(sample)
        const { entries, made } = yield* storedEntries
        expect(made).toBe(0)
        const fromDatabase = fromEntries(entries, 1)
        const fromResources = build(yield* storedResources, 1)
        expect(seen(fromDatabase)).toEqual(seen(fromResources))
        expect(fromDatabase.problems.map((p) => p.id)).toEqual(["CodeSystem-extension"])
        // The narrative is left out of what the catalog keeps; the rest of the resource is there.
        const patient = fromDatabase.structureDefinitionForType("Patient")?.resource
        expect(patient?.["text"]).toBeUndefined()
        expect(patient?.["id"]).toBe("Patient")
      })))

    it.scoped("makes the entry of a resource written without one, once, and drops the entries of older versions", () =>
      withStore(backend.kind, Effect.gen(function*() {
        yield* installPackage(sample)
        const writer = yield* Writer
        const { writer: sql } = yield* Database
        const write = (resource: Json) =>
          writer.commit(({ commitTs }) => putVersion(sql, { type: String(resource["resourceType"]), id: String(resource["id"]), resource, commitTs }))
        yield* write(searchParameter("Patient-birthdate", "birthdate", ["Patient"], { type: "date" }))
        const first = yield* storedEntries
        expect(first.made).toBe(1)
        expect(fromEntries(first.entries, 2).searchParameter("Patient", "birthdate")?.type).toBe("date")
        expect((yield* storedEntries).made).toBe(0)
        const before = yield* entryRows
        yield* write(searchParameter("Patient-birthdate", "birthdate", ["Patient"], { type: "string" }))
        const updated = yield* storedEntries
        expect(updated.made).toBe(1)
        expect(fromEntries(updated.entries, 3).searchParameter("Patient", "birthdate")?.type).toBe("string")
        expect(yield* entryRows).toBe(before)
      })))

    it.scoped("makes the entries of ConceptMaps stored by a build that did not compile them", () =>
      withStore(backend.kind, Effect.gen(function*() {
        yield* installPackage(sample)
        // A database of such a build: its ConceptMaps have no entries.
        const { writer: sql } = yield* Database
        yield* sql`DELETE FROM catalog_entries WHERE rkey IN (SELECT rkey FROM resources WHERE type = 'ConceptMap')`
        const { entries, made } = yield* storedEntries
        expect(made).toBe(1)
        const map = fromEntries(entries, 2).conceptMap("http://example.org/ConceptMap/shapes-to-forms")
        expect(map?.groups[0]?.element[0]?.target[0]).toMatchObject({ code: "box", equivalence: "wider", dependsOn: [{ property: "http://example.org/size", value: "large" }] })
        expect(map?.groups[0]?.unmapped).toEqual({ mode: "fixed", code: "other", display: undefined, url: undefined })
        expect((yield* storedEntries).made).toBe(0)
      })))
  })
}
