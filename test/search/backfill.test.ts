/**
 * The search index backfill as a user sees it, on every storage kind: the packages' own resources are
 * searchable once the server is ready, and a SearchParameter created, changed or deleted through the
 * API applies to the resources written before it, while the server stays ready.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { fileURLToPath } from "node:url"
import { backends } from "../support/backends.ts"
import { call, startServer, type TestServer } from "../support/server.ts"

class Server extends Context.Tag("test/BackfillServer")<Server, TestServer>() {}

/** Makes SearchParameter and StructureDefinition resource types with `url` (and `base`) parameters. */
const conformanceSearch = fileURLToPath(new URL("../fixtures/packages/conformance-search", import.meta.url))

const ids = (bundle: any): Array<string> =>
  (bundle?.entry ?? []).filter((e: any) => e.search.mode === "match").map((e: any) => e.resource.id).sort()

const familyParameter = {
  resourceType: "SearchParameter",
  url: "http://example.org/fhir/SearchParameter/patient-surname",
  name: "surname",
  status: "active",
  description: "A patient's family name",
  code: "surname",
  base: ["Patient"],
  type: "string",
  expression: "Patient.name.family"
}

for (const backend of backends) {
  describe.skipIf(backend.skip)(`the search index backfill on ${backend.kind}`, () => {
    layer(
      Layer.scoped(Server, startServer(backend.kind, { conformance: { packages: [conformanceSearch] } })),
      { timeout: 60_000, excludeTestServices: true }
    )((it) => {
      it.effect("makes the installed packages' conformance resources searchable before the server is ready", () =>
        Effect.gen(function*() {
          const { base, url } = yield* Server
          expect((yield* call("GET", `${url}/readyz`)).status).toBe(200)
          const gender = yield* call("GET", `${base}/SearchParameter?url=http://hl7.org/fhir/SearchParameter/individual-gender`)
          expect(gender.status).toBe(200)
          expect(ids(gender.json)).toEqual(["individual-gender"])
          const onPatient = yield* call("GET", `${base}/SearchParameter?base=Patient`)
          expect(ids(onPatient.json)).toEqual(["Patient-identifier", "individual-family", "individual-gender"])
          const patient = yield* call("GET", `${base}/StructureDefinition?url=http://hl7.org/fhir/StructureDefinition/Patient`)
          expect(ids(patient.json)).toEqual(["Patient"])
          const verbose = yield* call("GET", `${url}/healthz?verbose=1`)
          expect(verbose.json.search_index).toMatchObject({ state: "idle", failed: 0 })
        }))

      it.effect("applies a SearchParameter created, changed and deleted through the API to the resources written before it", () =>
        Effect.gen(function*() {
          const { base, url, searchIndexed } = yield* Server
          const make = (family: string, given: string) =>
            Effect.map(call("POST", `${base}/Patient`, { body: { resourceType: "Patient", name: [{ family, given: [given] }] } }), (r) => r.json.id as string)
          const ada = yield* make("Lovelace", "Ada")
          const alan = yield* make("Turing", "Alan")
          expect((yield* call("GET", `${base}/Patient?surname=lovelace`)).status).toBe(400)

          const created = yield* call("POST", `${base}/SearchParameter`, { body: familyParameter })
          expect(created.status).toBe(201)
          // The server stays ready while the backfill runs in the background.
          expect((yield* call("GET", `${url}/readyz`)).status).toBe(200)
          yield* searchIndexed
          expect(ids((yield* call("GET", `${base}/Patient?surname=lovelace`)).json)).toEqual([ada])
          expect(ids((yield* call("GET", `${base}/Patient?surname=turing,lovelace`)).json)).toEqual([ada, alan].sort())
          const grace = yield* make("Hopper", "Grace")
          expect(ids((yield* call("GET", `${base}/Patient?surname=hopper`)).json)).toEqual([grace])
          expect(ids((yield* call("GET", `${base}/SearchParameter?url=${familyParameter.url}`)).json)).toEqual([created.json.id])

          const id = created.json.id as string
          const changed = yield* call("PUT", `${base}/SearchParameter/${id}`, { body: { ...familyParameter, id, expression: "Patient.name.given" } })
          expect(changed.status).toBe(200)
          yield* searchIndexed
          expect(ids((yield* call("GET", `${base}/Patient?surname=ada`)).json)).toEqual([ada])
          expect(ids((yield* call("GET", `${base}/Patient?surname=lovelace`)).json)).toEqual([])

          expect((yield* call("DELETE", `${base}/SearchParameter/${id}`)).status).toBeLessThan(300)
          yield* searchIndexed
          expect((yield* call("GET", `${base}/Patient?surname=ada`)).status).toBe(400)
          expect((yield* call("GET", `${url}/readyz`)).status).toBe(200)
        }))
      it.effect("leaves the catalog as it is when a SearchParameter is written with the content it has already", () =>
        Effect.gen(function*() {
          const { base, url, searchIndexed } = yield* Server
          const generation = Effect.map(call("GET", `${url}/healthz?verbose=1`), (reply) => reply.json.catalog.generation as number)
          const { json: gender } = yield* call("GET", `${base}/SearchParameter/individual-gender`)
          const before = yield* generation
          const { id: _id, meta: _meta, ...copy } = gender
          expect((yield* call("POST", `${base}/SearchParameter`, { body: copy })).status).toBe(201)
          yield* searchIndexed
          expect(yield* generation).toBe(before)
          expect((yield* call("POST", `${base}/SearchParameter`, { body: { ...copy, description: "changed" } })).status).toBe(201)
          yield* searchIndexed
          expect(yield* generation).toBe(before + 1)
        }))
    })
  })
}
