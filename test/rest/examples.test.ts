/**
 * Every example instance of the R4 specification (hl7.fhir.r4.examples@4.0.1) survives create → read
 * unchanged but for `id` and `meta.versionId` / `meta.lastUpdated`, except the known invalid ones
 * (test/support/r4ExampleDefects.ts), which are refused with 422. The server installs the real R4
 * packages (through the registry npm is configured with, cached across runs).
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { realPackageCache, registryUrl, skipRealPackages } from "../support/npmRegistry.ts"
import { conformanceTypes } from "../../src/packages/LoadedPackage.ts"
import { defects, referenceTypeDefects, terminologyDefects, withoutBase } from "../support/r4ExampleDefects.ts"
import { call, startServer, type TestServer } from "../support/server.ts"
import { parseJson } from "../../src/json/Json.ts"
import { isCanonical, isMarked, lexicalOf } from "../../src/json/lexical.ts"

class Server extends Context.Tag("test/ExamplesServer")<Server, TestServer>() {}

/**
 * A Subscription example made `off`, its endpoint on a closed loopback port: the server delivers to an active
 * Subscription (the examples' criteria match example Observations) and writes its status, and a test talks to
 * 127.0.0.1 only. Other resources as they are.
 */
const quieted = (resource: Record<string, any>): Record<string, any> =>
  resource.resourceType === "Subscription" ? { ...resource, status: "off", channel: { ...resource.channel, endpoint: "http://127.0.0.1:9/example" } } : resource

/** Every resource instance of the package, conformance resources included (they are examples too); Subscriptions quieted. */
const loadExamples = (): ReadonlyArray<{ readonly file: string; readonly resource: Record<string, any> }> => {
  const folder = join(realPackageCache, "hl7.fhir.r4.examples#4.0.1", "package")
  return readdirSync(folder)
    .filter((file) => file.endsWith(".json") && !file.startsWith(".") && file !== "package.json")
    .map((file) => ({ file, resource: quieted(JSON.parse(readFileSync(join(folder, file), "utf8"))) }))
    .filter(({ resource }) => typeof resource.resourceType === "string")
}

/** The numbers of JSON text (in value position) that JavaScript would write otherwise, as written. */
const decimalTexts = (text: string): ReadonlyArray<string> =>
  [...text.matchAll(/[:,[]\s*(-?\d[\d.eE+-]*)(?=[\s,}\]])/g)].map((m) => m[1]!).filter((n) => !isCanonical(n))

/** A JSON value's text with every object's keys in order and each number as written (decimals kept). */
const canonical = (value: unknown, holder?: object, key?: string | number): string => {
  if (typeof value === "number") return (holder === undefined ? undefined : lexicalOf(holder, key!)) ?? String(value)
  if (Array.isArray(value)) return `[${value.map((item, i) => canonical(item, value, i)).join(",")}]`
  if (typeof value === "object" && value !== null) {
    const record = value as Record<string, unknown>
    return `{${Object.keys(record).sort().map((name) => `${JSON.stringify(name)}:${canonical(record[name], record, name)}`).join(",")}}`
  }
  return JSON.stringify(value)
}

/**
 * Served JSON text without what a new version changes (meta.versionId, meta.lastUpdated), with the
 * narrative's line ends as XML gives them back, in `canonical` form (FHIR JSON's member order is not
 * significant: XML gives the definition's order).
 */
const versionless = (text: string): string => {
  const resource = parseJson(text) as Record<string, any>
  const normalise = (value: unknown): void => {
    if (Array.isArray(value)) value.forEach(normalise)
    else if (typeof value === "object" && value !== null) {
      const record = value as Record<string, unknown>
      for (const key of Object.keys(record)) {
        const item = record[key]
        if (key === "div" && typeof item === "string") record[key] = item.replace(/\r\n?/g, "\n")
        else normalise(item)
      }
    }
  }
  normalise(resource)
  delete resource.meta?.versionId
  delete resource.meta?.lastUpdated
  if (resource.meta !== undefined && Object.keys(resource.meta).length === 0) delete resource.meta
  return canonical(resource)
}

/** What the server may change: the id and the version metadata. */
const comparable = (resource: Record<string, any>) => {
  const { id: _id, meta, ...rest } = resource
  const { versionId: _v, lastUpdated: _l, ...keptMeta } = meta ?? {}
  return Object.keys(keptMeta).length > 0 ? { ...rest, meta: keptMeta } : rest
}

/** XML has no CR in markup (XML 1.0 §2.11): a narrative written with CRLF or CR reads back with LF. */
const narrativeLineEnds = (value: unknown, key = ""): unknown => {
  if (typeof value === "string") return key === "div" ? value.replace(/\r\n?/g, "\n") : value
  if (Array.isArray(value)) return value.map((item) => narrativeLineEnds(item))
  if (typeof value === "object" && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, narrativeLineEnds(v, k)]))
  }
  return value
}

describe.skipIf(skipRealPackages)("the R4 examples", () => {
  layer(
    // Bundle-resources.json is 30 MB: above the default 16 MiB request limit, so this server allows 64 MiB.
    Layer.scoped(Server, startServer("sqlite", {
      server: { max_body_bytes: 64 * 1024 * 1024 },
      // The examples' extensions and references live on the specification's example domains: a user loading
      // them sets the examples mode, in which test/validation/examples.test.ts validates them too.
      validation: { allow_example_urls: true },
      // The examples refer to each other by their own ids, which a create does not keep.
      conformance: { package_registry: registryUrl ?? "", package_cache: realPackageCache, reference_policy: "fhir" }
    })),
    { timeout: 600_000, excludeTestServices: true }
  )((it) => {
    it.effect("survive create and read unchanged in JSON", () =>
      Effect.gen(function*() {
        const { base } = yield* Server
        const examples = loadExamples()
        expect(examples.length).toBeGreaterThan(5000)
        const failures: Array<string> = []
        const refused: Array<string> = []
        yield* Effect.forEach(examples, ({ file, resource }) =>
          Effect.gen(function*() {
            const created = yield* call("POST", `${base}/${resource.resourceType}`, { body: resource })
            const defect = Object.hasOwn(defects, file) || withoutBase.test(file) || Object.hasOwn(referenceTypeDefects, file) || Object.hasOwn(terminologyDefects, file)
            if (defect && created.status === 422) return void refused.push(file)
            if (created.status !== 201) return void failures.push(`${file}: create ${created.status} ${created.text.slice(0, 600)}`)
            const read = yield* call("GET", `${base}/${resource.resourceType}/${created.json.id}`)
            if (JSON.stringify(comparable(read.json)) !== JSON.stringify(comparable(resource))) {
              expect(comparable(read.json)).toEqual(comparable(resource))
            }
          }), { concurrency: 8, discard: true })
        console.log(`R4 examples: ${examples.length - refused.length - failures.length} created and read back, ${refused.length} refused as invalid (known defects), ${failures.length} other failures`)
        expect(failures).toEqual([])
      }), 600_000)

    it.effect("reads and writes FHIR XML when asked by _format, Accept or Content-Type", () =>
      Effect.gen(function*() {
        const { base } = yield* Server
        const xmlBody = `<Patient xmlns="http://hl7.org/fhir"><gender value="female"/><birthDate value="1970-01-01"/></Patient>`
        const created = yield* call("POST", `${base}/Patient`, { body: xmlBody, headers: { "content-type": "application/fhir+xml", accept: "application/fhir+xml" } })
        expect(created.status).toBe(201)
        expect(created.headers.get("content-type")).toContain("application/fhir+xml")
        expect(created.text).toContain('<gender value="female"/>')
        const id = created.headers.get("location")!.split("/")[5]
        const json = yield* call("GET", `${base}/Patient/${id}`)
        expect(json.json).toMatchObject({ resourceType: "Patient", id, gender: "female", birthDate: "1970-01-01" })
        const xml = yield* call("GET", `${base}/Patient/${id}?_format=xml`)
        expect(xml.text).toMatch(/^<\?xml version="1.0" encoding="UTF-8"\?>\s*<Patient xmlns="http:\/\/hl7.org\/fhir">/)
        expect(xml.text.indexOf("<id ")).toBeLessThan(xml.text.indexOf("<meta>"))
        const broken = yield* call("POST", `${base}/Patient`, { body: "<Patient xmlns=\"http://hl7.org/fhir\"><nickname value=\"x\"/></Patient>", headers: { "content-type": "application/fhir+xml", accept: "application/fhir+xml" } })
        expect(broken.status).toBe(400)
        expect(broken.text).toContain("<OperationOutcome")
        expect(broken.text).toContain("nickname")
        const pretty = yield* call("GET", `${base}/Patient/${id}?_pretty=true`)
        expect(pretty.text).toContain('\n  "resourceType": "Patient"')
      }))

    it.effect("keep their decimals as written, and come back from JSON → XML → JSON as the first JSON read", () =>
      Effect.gen(function*() {
        const { base } = yield* Server
        const folder = join(realPackageCache, "hl7.fhir.r4.examples#4.0.1", "package")
        const examples = loadExamples()
        const withDecimals: Array<string> = []
        const failures: Array<string> = []
        yield* Effect.forEach(examples, ({ file, resource }) =>
          Effect.gen(function*() {
            // The file's text as written (its decimals), but a Subscription's, which is quieted and holds no decimal.
            const text = resource.resourceType === "Subscription" ? JSON.stringify(resource) : readFileSync(join(folder, file), "utf8")
            const created = yield* call("POST", `${base}/${resource.resourceType}`, { body: text })
            if (created.status !== 201) return
            const url = `${base}/${resource.resourceType}/${created.json.id}`
            const first = yield* call("GET", url)
            const written = decimalTexts(text)
            if (isMarked(parseJson(text))) withDecimals.push(file)
            const kept = decimalTexts(first.text)
            if (kept.join() !== written.join()) return void failures.push(`${file}: decimals ${written.join(" ")} read back as ${kept.join(" ")}`)
            const xml = yield* call("GET", url, { headers: { accept: "application/fhir+xml" } })
            const put = yield* call("PUT", url, { body: xml.text, headers: { "content-type": "application/fhir+xml" } })
            if (put.status !== 200) return void failures.push(`${file}: PUT of its XML ${put.status} ${put.text.slice(0, 300)}`)
            const last = yield* call("GET", url)
            const before = versionless(first.text)
            const after = versionless(last.text)
            if (before !== after) {
              let at = 0
              while (at < before.length && before[at] === after[at]) at++
              failures.push(`${file}: after XML, ${JSON.stringify(after.slice(Math.max(0, at - 60), at + 60))} where JSON had ${JSON.stringify(before.slice(Math.max(0, at - 60), at + 60))}`)
            }
          }), { concurrency: 8, discard: true })
        console.log(`R4 examples: ${withDecimals.length} accepted with numbers JavaScript writes otherwise; ${failures.length} failures of the JSON → XML → JSON trip`)
        expect(withDecimals.length).toBeGreaterThan(30)
        expect(failures).toEqual([])
      }), 900_000)

    it.effect("survive a trip through XML: read as XML, created from that XML, read back as JSON", () =>
      Effect.gen(function*() {
        const { base } = yield* Server
        // The instances proper (not the conformance resources, which the XML module's own test covers).
        const examples = loadExamples().filter(({ resource }) => !conformanceTypes.has(resource.resourceType))
        expect(examples.length).toBeGreaterThan(700)
        const xmlHeaders = { "content-type": "application/fhir+xml" }
        yield* Effect.forEach(examples, ({ file, resource }) =>
          Effect.gen(function*() {
            const created = yield* call("POST", `${base}/${resource.resourceType}`, { body: resource })
            if (created.status === 422 && (Object.hasOwn(defects, file) || Object.hasOwn(referenceTypeDefects, file) || Object.hasOwn(terminologyDefects, file))) return
            const xml = yield* call("GET", `${base}/${resource.resourceType}/${created.json.id}?_format=xml`)
            expect([file, xml.status]).toEqual([file, 200])
            const again = yield* call("POST", `${base}/${resource.resourceType}`, { body: xml.text, headers: xmlHeaders })
            expect([file, again.status]).toEqual([file, 201])
            const read = yield* call("GET", `${base}/${resource.resourceType}/${again.json.id}`)
            expect([file, narrativeLineEnds(comparable(read.json))]).toEqual([file, narrativeLineEnds(comparable(resource))])
          }), { concurrency: 8, discard: true })
      }), 600_000)
  })
})
