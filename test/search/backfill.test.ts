/**
 * The search index backfill as a user sees it, on every storage kind: the packages' own resources are
 * searchable once the server is ready.
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
          expect(ids(onPatient.json)).toEqual(["individual-gender"])
          const patient = yield* call("GET", `${base}/StructureDefinition?url=http://hl7.org/fhir/StructureDefinition/Patient`)
          expect(ids(patient.json)).toEqual(["Patient"])
          const verbose = yield* call("GET", `${url}/healthz?verbose=1`)
          expect(verbose.json.search_index).toMatchObject({ state: "idle", failed: 0 })
        }))
    })
  })
}
