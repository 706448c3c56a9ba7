import { describe, expect, it } from "@effect/vitest"
import { Chunk, Deferred, Duration, Effect, Fiber, Logger, Option, TestClock } from "effect"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { chain, fhirRegistries } from "../../src/packages/chain.ts"
import { type FetcherOptions, make } from "../../src/packages/Fetcher.ts"
import { silentServer } from "../support/silentServer.ts"
import { closedPort, packageEntries, packageTgz, registry, resource, tempDir, writeFiles } from "./support.ts"

const fetcher = (cacheDir: string, options: FetcherOptions) =>
  make({ cacheDir, responseTimeout: "2 seconds", npmRegistry: Effect.succeedNone, ...options })

/** Runs `effect` with its log lines collected instead of printed. */
const logged = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const lines: Array<string> = []
    const logger = Logger.make(({ message }) => lines.push(Array.isArray(message) ? message.join(" ") : String(message)))
    const result = yield* effect.pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
    return [result, lines] as const
  })

const sha256 = (data: Buffer) => Crypto.createHash("sha256").update(data).digest("hex")

describe("PackageFetcher", () => {
  it.scopedLive("fetches name@version from an npm-protocol registry into the FHIR cache layout", () =>
    Effect.gen(function*() {
      const cache = yield* tempDir
      const reg = yield* registry([{ name: "test.pkg.a", version: "1.0.0" }])
      const { packages, warnings } = yield* (yield* fetcher(cache, { registry: reg.url })).fetch(["test.pkg.a@1.0.0"])
      expect(warnings).toEqual([])
      expect(packages).toHaveLength(1)
      const pkg = packages[0]!
      expect(pkg).toMatchObject({ name: "test.pkg.a", version: "1.0.0", source: `registry ${reg.url}` })
      expect(pkg.checksum).toBe(sha256(packageTgz({ name: "test.pkg.a", version: "1.0.0" })))
      expect(pkg.manifest["fhirVersions"]).toEqual(["4.0.1"])
      expect(pkg.resources.map((r) => [r.file, r.resource["resourceType"]])).toEqual([
        ["SearchParameter-test.pkg.a-code.json", "SearchParameter"],
        ["StructureDefinition-test.pkg.a.json", "StructureDefinition"]
      ])
      yield* Effect.promise(() => Fs.access(Path.join(cache, "test.pkg.a#1.0.0", "package", "package.json")))
    }))

  it.scopedLive("a cached package is not downloaded again and keeps its checksum", () =>
    Effect.gen(function*() {
      const cache = yield* tempDir
      const reg = yield* registry([{ name: "test.pkg.a", version: "1.0.0" }])
      const first = yield* (yield* fetcher(cache, { registry: reg.url })).fetch(["test.pkg.a@1.0.0"])
      const seen = reg.requests.length
      expect(seen).toBe(2)
      const second = yield* (yield* fetcher(cache, { registry: reg.url })).fetch(["test.pkg.a#1.0.0"])
      expect(reg.requests.length).toBe(seen)
      expect(second.packages[0]!.source).toBe("cache")
      expect(second.packages[0]!.checksum).toBe(first.packages[0]!.checksum)
      expect(second.packages[0]!.resources).toEqual(first.packages[0]!.resources)
    }))

  it.scopedLive("resolves dependencies with a semver range and returns them first", () =>
    Effect.gen(function*() {
      const cache = yield* tempDir
      const reg = yield* registry([
        { name: "test.dep", version: "1.0.0" },
        { name: "test.dep", version: "1.2.0" },
        { name: "test.dep", version: "2.0.0" },
        { name: "test.ig", version: "0.1.0", dependencies: { "test.dep": "^1.0.0" } }
      ])
      const { packages } = yield* (yield* fetcher(cache, { registry: reg.url })).fetch(["test.ig@0.1.0"])
      expect(packages.map((p) => `${p.name}@${p.version}`)).toEqual(["test.dep@1.2.0", "test.ig@0.1.0"])
      const latest = yield* (yield* fetcher(cache, { registry: reg.url })).fetch(["test.dep"])
      expect(latest.packages[0]!.version).toBe("2.0.0")
    }))

  it.scopedLive("a dependency no source has is a warning naming it", () =>
    Effect.gen(function*() {
      const cache = yield* tempDir
      const reg = yield* registry([{ name: "test.ig", version: "0.1.0", dependencies: { "test.nowhere": "3.0.0" } }])
      const { packages, warnings } = yield* (yield* fetcher(cache, { registry: reg.url })).fetch(["test.ig@0.1.0"])
      expect(packages.map((p) => p.name)).toEqual(["test.ig"])
      expect(warnings).toHaveLength(1)
      expect(warnings[0]).toMatchObject({ package: "test.nowhere@3.0.0", requiredBy: "test.ig@0.1.0" })
      expect(warnings[0]!.message).toContain(`registry ${reg.url}`)
    }))

  it.scopedLive("where dependencies are required, a missing one fails the fetch; an installed one is kept, whatever its version", () =>
    Effect.gen(function*() {
      const cache = yield* tempDir
      const reg = yield* registry([
        { name: "test.ig", version: "0.1.0", dependencies: { "test.nowhere": "3.0.0" } },
        { name: "test.uses", version: "0.1.0", dependencies: { "test.dep": "1.0.0" } },
        { name: "test.dep", version: "1.0.0" }
      ])
      const f = yield* fetcher(cache, { registry: reg.url })
      const error = yield* Effect.flip(f.fetch(["test.ig@0.1.0"], { requireDependencies: true }))
      expect(error._tag).toBe("DependencyMissing")
      expect(error.message).toContain("test.nowhere@3.0.0, required by test.ig@0.1.0")
      const { packages, warnings } = yield* f.fetch(["test.uses@0.1.0"], { installed: [{ name: "test.dep", version: "2.0.0" }], requireDependencies: true })
      expect(packages.map((p) => `${p.name}@${p.version}`)).toEqual(["test.uses@0.1.0"])
      expect(warnings.map((w) => w.message)).toEqual(["test.dep@1.0.0 is wanted by test.uses@0.1.0, but test.dep@2.0.0 is installed: keeping it"])
      expect(reg.requests).not.toContain("/test.dep")
    }))

  it.scopedLive("fetches a tarball by a URL of a configured registry, and refuses one that lies outside every source", () =>
    Effect.gen(function*() {
      const cache = yield* tempDir
      const reg = yield* registry([{ name: "test.pkg.a", version: "1.0.0" }])
      const f = yield* fetcher(cache, { registry: reg.url })
      const url = `${reg.url}/test.pkg.a/-/test.pkg.a-1.0.0.tgz`
      const { packages } = yield* f.fetch([{ _tag: "Reference", url }])
      expect(packages[0]).toMatchObject({ name: "test.pkg.a", version: "1.0.0", source: `registry ${reg.url}: ${url}` })
      const port = yield* closedPort
      const outside = yield* Effect.flip(f.fetch([{ _tag: "Reference", url: `http://127.0.0.1:${port}/test.pkg.a-1.0.0.tgz` }]))
      expect(outside._tag).toBe("PackageReferenceRefused")
      const withPassword = yield* Effect.flip(f.fetch([{ _tag: "Reference", url: url.replace("http://", "http://user:secret@") }]))
      expect(withPassword.message).not.toContain("secret@")
    }))

  it.scopedLive("a tarball that fails its integrity check is refused and not cached", () =>
    Effect.gen(function*() {
      const cache = yield* tempDir
      const reg = yield* registry([
        { name: "test.bad", version: "1.0.0", integrity: "wrong" },
        { name: "test.sha1", version: "1.0.0", integrity: "shasum" }
      ])
      const f = yield* fetcher(cache, { registry: reg.url })
      const error = yield* Effect.flip(f.fetch(["test.bad@1.0.0"]))
      expect(error._tag).toBe("PackageIntegrityError")
      expect(error.message).toContain("test.bad@1.0.0")
      expect(error.message).toContain(`registry ${reg.url}`)
      expect(yield* Effect.promise(() => Fs.readdir(cache))).toEqual([])
      const ok = yield* f.fetch(["test.sha1@1.0.0"])
      expect(ok.packages[0]!.name).toBe("test.sha1")
    }))

  // TestClock never moves here: a refused connection must be reported at once, not after the response timeout.
  it.scoped("a source that refuses the connection is skipped at once, without waiting for the response timeout", () =>
    Effect.gen(function*() {
      const cache = yield* tempDir
      const port = yield* closedPort
      const reg = yield* registry([{ name: "test.pkg.a", version: "1.0.0" }])
      const [{ packages }, lines] = yield* logged((yield* fetcher(cache, { registry: [`http://127.0.0.1:${port}`, reg.url] })).fetch(["test.pkg.a@1.0.0"]))
      expect(packages[0]!.source).toBe(`registry ${reg.url}`)
      expect(lines.filter((line) => line.includes("unreachable"))).toHaveLength(1)
      expect(lines.join("\n")).not.toContain("no answer within")
    }))

  it.scoped("a source that never answers is given up after the response timeout, and not before", () =>
    Effect.gen(function*() {
      const cache = yield* tempDir
      const reg = yield* registry([{ name: "test.pkg.a", version: "1.0.0" }])
      const silent = yield* silentServer
      const f = yield* fetcher(cache, { registry: [`http://127.0.0.1:${silent.port}`, reg.url], responseTimeout: "500 millis" })
      const fetching = yield* Effect.fork(logged(f.fetch(["test.pkg.a@1.0.0"])))
      yield* Deferred.await(silent.accepted)
      yield* TestClock.adjust("499 millis")
      // Still waiting: its one timer is the response timeout, due at 500 ms.
      expect(Chunk.toReadonlyArray(yield* TestClock.sleeps())).toEqual([500])
      expect(Option.isNone(yield* Fiber.poll(fetching))).toBe(true)
      expect(reg.requests).toEqual([])
      yield* TestClock.adjust("1 millis")
      const [{ packages }, lines] = yield* Fiber.join(fetching)
      expect(packages[0]!.source).toBe(`registry ${reg.url}`)
      expect(lines).toContain(`package source registry http://127.0.0.1:${silent.port} is unreachable (no answer within 500ms); trying the next`)
    }))

  it.effect("the default chain is the FHIR registries, then the registry npm is configured with (once)", () =>
    Effect.gen(function*() {
      const timeouts = { response: Duration.seconds(5), body: Duration.minutes(10) }
      const labels = (npm: Option.Option<string>) =>
        Effect.map(chain({ registry: undefined, s3: {}, timeouts, npmRegistry: Effect.succeed(npm) }), (sources) => sources.map((s) => s.label))
      const fhir = fhirRegistries.map((url) => `registry ${url}`)
      expect(yield* labels(Option.some("http://127.0.0.1:4873/"))).toEqual([...fhir, "registry http://127.0.0.1:4873"])
      expect(yield* labels(Option.some(`${fhirRegistries[0]}/`))).toEqual(fhir)
      expect(yield* labels(Option.none())).toEqual(fhir)
    }))

  it.scopedLive("a package that is not a FHIR package is refused", () =>
    Effect.gen(function*() {
      const cache = yield* tempDir
      const reg = yield* registry([{
        name: "test.notfhir",
        version: "1.0.0",
        manifest: { fhirVersions: [] },
        files: { "package/README.md": "hello", "package/data.json": "{\"a\":1}" }
      }])
      const error = yield* Effect.flip((yield* fetcher(cache, { registry: reg.url })).fetch(["test.notfhir@1.0.0"]))
      expect(error._tag).toBe("NotAFhirPackage")
      expect(error.message).toContain("test.notfhir@1.0.0")
      expect(error.message).toContain("fhirVersions")
      expect(yield* Effect.promise(() => Fs.readdir(cache))).toEqual([])
    }))

  it.scopedLive("a tarball holding another package than the one asked for is refused", () =>
    Effect.gen(function*() {
      const cache = yield* tempDir
      const reg = yield* registry([{ name: "test.liar", version: "1.0.0", manifest: { name: "test.other" } }])
      const error = yield* Effect.flip((yield* fetcher(cache, { registry: reg.url })).fetch(["test.liar@1.0.0"]))
      expect(error.message).toContain("the tarball holds test.other@1.0.0")
      expect(yield* Effect.promise(() => Fs.readdir(cache))).toEqual([])
    }))

  it.scopedLive("a resource file that is not JSON is named", () =>
    Effect.gen(function*() {
      const cache = yield* tempDir
      const reg = yield* registry([{
        name: "test.broken",
        version: "1.0.0",
        files: { "package/StructureDefinition-broken.json": "{ not json" }
      }])
      const error = yield* Effect.flip((yield* fetcher(cache, { registry: reg.url })).fetch(["test.broken@1.0.0"]))
      expect(error._tag).toBe("ResourceNotJson")
      expect(error.message).toContain("StructureDefinition-broken.json")
      expect(error.message).toContain("test.broken@1.0.0")
    }))

  it.scopedLive("an unknown package lists every source tried", () =>
    Effect.gen(function*() {
      const cache = yield* tempDir
      const port = yield* closedPort
      const reg = yield* registry([])
      const error = yield* Effect.flip(
        (yield* fetcher(cache, { registry: [reg.url, `http://127.0.0.1:${port}`] })).fetch(["test.unknown@1.0.0"])
      )
      expect(error._tag).toBe("PackageNotFound")
      expect(error.message).toContain("test.unknown@1.0.0")
      expect(error.message).toContain(`registry ${reg.url} (no such package)`)
      expect(error.message).toContain(`registry http://127.0.0.1:${port} (`)
    }))

  it.scopedLive("the R4 examples package stands in for a missing R4 core package", () =>
    Effect.gen(function*() {
      const cache = yield* tempDir
      const examples = {
        name: "hl7.fhir.r4.examples",
        version: "4.0.1",
        files: {
          "package/StructureDefinition-Patient.json": resource("StructureDefinition", "Patient"),
          "package/SearchParameter-Patient-name.json": resource("SearchParameter", "Patient-name", { base: ["Patient"] }),
          "package/CodeSystem-gender.json": resource("CodeSystem", "administrative-gender"),
          "package/Patient-example.json": resource("Patient", "example"),
          "package/Bundle-b.json": JSON.stringify({ entry: [], resourceType: "Bundle" })
        }
      }
      const reg = yield* registry([examples, { name: "test.ig", version: "1.0.0", dependencies: { "hl7.fhir.r4.core": "4.0.1" } }])
      const [{ packages }, lines] = yield* logged((yield* fetcher(cache, { registry: reg.url })).fetch(["hl7.fhir.r4.core@4.0.1", "test.ig@1.0.0"]))
      expect(lines).toContain(`hl7.fhir.r4.core@4.0.1 is not in registry ${reg.url}: its conformance resources are taken from hl7.fhir.r4.examples@4.0.1`)
      expect(packages.map((p) => p.name)).toEqual(["hl7.fhir.r4.core", "test.ig"])
      const core = packages[0]!
      expect(core).toMatchObject({ version: "4.0.1", substitutedFrom: "hl7.fhir.r4.examples@4.0.1", source: `registry ${reg.url}` })
      expect(core.resources.map((r) => r.resource["resourceType"]).sort()).toEqual(["CodeSystem", "SearchParameter", "StructureDefinition"])
      const requests = reg.requests.length
      const again = yield* (yield* fetcher(cache, { registry: reg.url })).fetch(["hl7.fhir.r4.core@4.0.1"])
      expect(reg.requests.length).toBe(requests)
      expect(again.packages[0]).toMatchObject({ name: "hl7.fhir.r4.core", substitutedFrom: "hl7.fhir.r4.examples@4.0.1", source: "cache" })
    }))

  it.scopedLive("a missing release default is an error, not a warning", () =>
    Effect.gen(function*() {
      const cache = yield* tempDir
      const reg = yield* registry([])
      const error = yield* Effect.flip((yield* fetcher(cache, { registry: reg.url })).fetch(["hl7.fhir.r4.core@4.0.1"]))
      expect(error._tag).toBe("PackageNotFound")
    }))

  it.scopedLive("loads a package from a mirror directory in each layout", () =>
    Effect.gen(function*() {
      const cache = yield* tempDir
      const mirror = yield* tempDir
      yield* writeFiles(mirror, {
        "test.npm/-/test.npm-1.0.0.tgz": packageTgz({ name: "test.npm", version: "1.0.0" }),
        "test.hash#2.0.0.tgz": packageTgz({ name: "test.hash", version: "2.0.0" }),
        ...Object.fromEntries(Object.entries(packageEntries({ name: "test.folder", version: "3.0.0" }))
          .map(([file, content]) => [`test.folder#3.0.0/${file}`, content]))
      })
      const f = yield* fetcher(cache, { registry: mirror })
      const { packages } = yield* f.fetch(["test.npm@1.0.0", "test.hash@^2", "test.folder@latest"])
      expect(packages.map((p) => `${p.name}@${p.version}`)).toEqual(["test.npm@1.0.0", "test.hash@2.0.0", "test.folder@3.0.0"])
      expect(packages.every((p) => p.source === `mirror ${mirror}` && p.resources.length === 2)).toBe(true)
      const error = yield* Effect.flip(f.fetch(["test.absent@1.0.0"]))
      expect(error.message).toContain(`mirror ${mirror} (no such package)`)
    }))

  it.scopedLive("loads a local .tgz and a directory; a missing path is named", () =>
    Effect.gen(function*() {
      const cache = yield* tempDir
      const dir = yield* tempDir
      const tarball = packageTgz({ name: "test.file", version: "1.0.0" })
      yield* writeFiles(dir, {
        "ig.tgz": tarball,
        ...Object.fromEntries(Object.entries(packageEntries({ name: "test.dir", version: "1.0.0" })).map(([f, c]) => [`ig/${f}`, c])),
        ...Object.fromEntries(Object.entries(packageEntries({ name: "test.flat", version: "1.0.0" }))
          .map(([f, c]) => [`flat/${f.replace(/^package\//, "")}`, c]))
      })
      const f = yield* fetcher(cache, { registry: [] })
      const { packages } = yield* f.fetch([Path.join(dir, "ig.tgz"), Path.join(dir, "ig"), Path.join(dir, "flat")])
      expect(packages.map((p) => [p.name, p.source])).toEqual([
        ["test.file", `file ${Path.join(dir, "ig.tgz")}`],
        ["test.dir", `directory ${Path.join(dir, "ig")}`],
        ["test.flat", `directory ${Path.join(dir, "flat")}`]
      ])
      expect(packages[0]!.checksum).toBe(sha256(tarball))
      expect(packages[1]!.checksum).toMatch(/^[0-9a-f]{64}$/)
      const missing = yield* Effect.flip(f.fetch([Path.join(dir, "nope.tgz")]))
      expect(missing._tag).toBe("PackagePathNotFound")
      expect(missing.message).toContain("nope.tgz")
    }))
})
