/**
 * Every example instance of the R4 specification (hl7.fhir.r4.examples@4.0.1) survives create → read
 * unchanged but for `id` and `meta.versionId` / `meta.lastUpdated`. The server installs the real R4
 * packages (through the registry npm is configured with, cached across runs).
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { realPackageCache, registryUrl, skipRealPackages } from "../support/npmRegistry.ts"
import { call, startServer, type TestServer } from "../support/server.ts"

class Server extends Context.Tag("test/ExamplesServer")<Server, TestServer>() {}

/** Every resource instance of the package, conformance resources included (they are examples too). */
const loadExamples = (): ReadonlyArray<{ readonly file: string; readonly resource: Record<string, any> }> => {
  const folder = join(realPackageCache, "hl7.fhir.r4.examples#4.0.1", "package")
  return readdirSync(folder)
    .filter((file) => file.endsWith(".json") && !file.startsWith(".") && file !== "package.json")
    .map((file) => ({ file, resource: JSON.parse(readFileSync(join(folder, file), "utf8")) }))
    .filter(({ resource }) => typeof resource.resourceType === "string")
}

/** What the server may change: the id and the version metadata. */
const comparable = (resource: Record<string, any>) => {
  const { id: _id, meta, ...rest } = resource
  const { versionId: _v, lastUpdated: _l, ...keptMeta } = meta ?? {}
  return Object.keys(keptMeta).length > 0 ? { ...rest, meta: keptMeta } : rest
}

describe.skipIf(skipRealPackages)("the R4 examples", () => {
  layer(
    // Bundle-resources.json is 30 MB: above the default 16 MiB request limit, so this server allows 64 MiB.
    Layer.scoped(Server, startServer("sqlite", {
      server: { max_body_bytes: 64 * 1024 * 1024 },
      conformance: { package_registry: registryUrl ?? "", package_cache: realPackageCache }
    })),
    { timeout: 600_000, excludeTestServices: true }
  )((it) => {
    it.effect("survive create and read unchanged in JSON", () =>
      Effect.gen(function*() {
        const { base } = yield* Server
        const examples = loadExamples()
        expect(examples.length).toBeGreaterThan(5000)
        const failures: Array<string> = []
        yield* Effect.forEach(examples, ({ file, resource }) =>
          Effect.gen(function*() {
            const created = yield* call("POST", `${base}/${resource.resourceType}`, { body: resource })
            if (created.status !== 201) return void failures.push(`${file}: create ${created.status} ${created.text.slice(0, 200)}`)
            const read = yield* call("GET", `${base}/${resource.resourceType}/${created.json.id}`)
            if (JSON.stringify(comparable(read.json)) !== JSON.stringify(comparable(resource))) {
              expect(comparable(read.json)).toEqual(comparable(resource))
            }
          }), { concurrency: 8, discard: true })
        console.log(`R4 examples: ${examples.length} created and read back, ${failures.length} refused`)
        expect(failures).toEqual([])
      }), 600_000)
  })
})
