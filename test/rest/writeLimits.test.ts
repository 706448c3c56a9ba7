/**
 * What one write may ask for (docs/rest.md, "Limits"): search index values per resource, operations per
 * patch, entries per Bundle stored as a resource; each over HTTP and inside a transaction, on every storage kind.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { backends } from "../support/backends.ts"
import { realPackageCache, registryUrl, skipRealPackages } from "../support/npmRegistry.ts"
import { call, startServer, type TestServer } from "../support/server.ts"

class Server extends Context.Tag("test/WriteLimitsServer")<Server, TestServer>() {}

const limits = { max_index_rows: 30, max_patch_operations: 3, max_bundle_entries: 4 }

/** A Patient with `n` names of distinct families: several index rows per name (`name`, `family`, `phonetic`), a few others. */
const patient = (n: number, tag: string) => ({
  resourceType: "Patient",
  name: Array.from({ length: n }, (_, i) => ({ family: `${tag}${i}` }))
})

const familyCount = (base: string, family: string) =>
  Effect.map(call("GET", `${base}/Patient?family:exact=${family}&_summary=count`), (reply) => reply.json.total as number)

const jsonPatch = (base: string, id: string, operations: ReadonlyArray<unknown>) =>
  call("PATCH", `${base}/Patient/${id}`, { body: JSON.stringify(operations), headers: { "content-type": "application/json-patch+json" } })

const fhirPathPatch = (base: string, id: string, count: number) =>
  call("PATCH", `${base}/Patient/${id}`, {
    body: {
      resourceType: "Parameters",
      parameter: Array.from({ length: count }, (_, i) => ({
        name: "operation",
        part: [
          { name: "type", valueCode: "add" },
          { name: "path", valueString: "Patient" },
          { name: "name", valueString: "name" },
          { name: "value", valueHumanName: { family: `Fp${i}` } }
        ]
      }))
    }
  })

const tooCostly = (reply: { status: number; json: any }, setting: string) => {
  expect(reply.status).toBe(413)
  expect(reply.json.resourceType).toBe("OperationOutcome")
  expect(reply.json.issue[0].code).toBe("too-costly")
  expect(reply.json.issue[0].diagnostics).toContain(setting)
}

for (const backend of backends) {
  describe.skipIf(backend.skip || skipRealPackages)(`write limits on ${backend.kind}`, () => {
    const settings = { server: limits, conformance: { package_registry: registryUrl ?? "", package_cache: realPackageCache } }
    layer(Layer.scoped(Server, startServer(backend.kind, settings)), { timeout: 120_000, excludeTestServices: true })((it) => {
      it.effect("a resource with more search index values than server.max_index_rows is a 413 and is not stored; one within it is stored", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          tooCostly(yield* call("POST", `${base}/Patient`, { body: patient(30, "Over") }), "server.max_index_rows")
          expect(yield* familyCount(base, "Over0")).toBe(0)
          const atLimit = yield* call("POST", `${base}/Patient`, { body: patient(2, "At") })
          expect(atLimit.status).toBe(201)
          expect(yield* familyCount(base, "At1")).toBe(1)
          // An update is held to the same limit, and leaves the stored version as it was.
          const id = atLimit.json.id as string
          tooCostly(yield* call("PUT", `${base}/Patient/${id}`, { body: { ...patient(30, "Up"), id } }), "server.max_index_rows")
          expect((yield* call("GET", `${base}/Patient/${id}`)).json.meta.versionId).toBe("1")
        }))

      it.effect("a transaction with one resource over server.max_index_rows is a 413 naming the entry, and writes nothing", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const reply = yield* call("POST", base, {
            body: {
              resourceType: "Bundle",
              type: "transaction",
              entry: [patient(2, "TxOk"), patient(30, "TxOver")].map((resource) => ({ resource, request: { method: "POST", url: "Patient" } }))
            }
          })
          tooCostly(reply, "server.max_index_rows")
          expect(reply.json.issue[0].diagnostics).toContain("Bundle.entry[1]")
          expect(yield* familyCount(base, "TxOk0")).toBe(0)
        }))

      it.effect("a JSON Patch or FHIRPath Patch with more operations than server.max_patch_operations is a 413; one at the limit applies", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const id = (yield* call("POST", `${base}/Patient`, { body: patient(1, "Patched") })).json.id as string
          const add = (family: string) => ({ op: "add", path: "/name/-", value: { family } })
          tooCostly(yield* jsonPatch(base, id, [add("J1"), add("J2"), add("J3"), add("J4")]), "server.max_patch_operations")
          tooCostly(yield* fhirPathPatch(base, id, 4), "server.max_patch_operations")
          expect((yield* call("GET", `${base}/Patient/${id}`)).json.meta.versionId).toBe("1")
          const applied = yield* jsonPatch(base, id, [add("J1"), add("J2"), add("J3")])
          expect(applied.status).toBe(200)
          expect((yield* fhirPathPatch(base, id, 3)).status).toBe(200)
          expect((yield* call("GET", `${base}/Patient/${id}`)).json.name).toHaveLength(7)
        }))

      it.effect("a PATCH entry of a transaction with too many operations is a 413", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const id = (yield* call("POST", `${base}/Patient`, { body: patient(1, "BundlePatched") })).json.id as string
          const operations = Array.from({ length: 4 }, (_, i) => ({ op: "add", path: "/name/-", value: { family: `B${i}` } }))
          const reply = yield* call("POST", base, {
            body: {
              resourceType: "Bundle",
              type: "transaction",
              entry: [{
                resource: { resourceType: "Binary", contentType: "application/json-patch+json", data: Buffer.from(JSON.stringify(operations)).toString("base64") },
                request: { method: "PATCH", url: `Patient/${id}` }
              }]
            }
          })
          tooCostly(reply, "server.max_patch_operations")
        }))

      it.effect("a Bundle stored as a resource holds at most server.max_bundle_entries entries", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const collection = (n: number) => ({
            resourceType: "Bundle",
            type: "collection",
            entry: Array.from({ length: n }, () => ({ fullUrl: `urn:uuid:${crypto.randomUUID()}`, resource: { resourceType: "Patient" } }))
          })
          tooCostly(yield* call("POST", `${base}/Bundle`, { body: collection(5) }), "server.max_bundle_entries")
          expect((yield* call("POST", `${base}/Bundle`, { body: collection(4) })).status).toBe(201)
        }))
    })
  })
}
