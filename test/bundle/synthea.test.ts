/**
 * The 55 Synthea patients (../shared/data/synthea) as transaction Bundles at `POST /fhir`, as a
 * client loading a population sees them: each answered with a transaction-response, every
 * resource stored once, every `urn:uuid:` reference rewritten to the resource its fullUrl named.
 * On SQLite and on Postgres (when one answers), each server with the real R4 packages (Synthea
 * uses about twenty resource types; the tests' stand-in packages know two).
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { type BackendKind, pgAvailable } from "../support/backends.ts"
import { realPackageCache, registryUrl, skipRealPackages } from "../support/npmRegistry.ts"
import { call, startServer, type TestServer } from "../support/server.ts"
import { countByType, loadRefusedSynthea, loadSynthea, referencesIn, refusedSynthea, skipSynthea, type SyntheaBundle, syntheaValidation } from "../support/synthea.ts"

class Server extends Context.Tag("test/SyntheaServer")<Server, TestServer>() {}

const bundles: ReadonlyArray<SyntheaBundle> = skipSynthea ? [] : loadSynthea()
/** The bundles refused for defects of the data, each a 422 that names them; nothing of them is stored. */
const refused: ReadonlyArray<SyntheaBundle> = skipSynthea ? [] : loadRefusedSynthea()
const expectedCounts = countByType(bundles)
const entryCount = bundles.reduce((sum, { bundle }) => sum + bundle.entry.length, 0)

/** A resource the server created, from `response.location` of its entry. */
interface Created {
  readonly type: string
  readonly id: string
  /** The URL to read it back at. */
  readonly url: string
}

/** `Type/id/_history/n`, relative to `base` (as FHIR writes it) or absolute under it. */
const parseLocation = (base: string, location: unknown): (Created & { readonly version: string }) | undefined => {
  if (typeof location !== "string") return undefined
  const relative = location.startsWith(`${base}/`) ? location.slice(base.length + 1) : location
  const match = /^([A-Z][A-Za-z]+)\/([A-Za-z0-9\-.]{1,64})\/_history\/([0-9]+)$/.exec(relative)
  if (match === null) return undefined
  return { type: match[1]!, id: match[2]!, version: match[3]!, url: `${base}/${relative}` }
}

/** How many versions of `type` the server holds: the `total` of its type history. */
const historyTotal = (base: string, type: string) =>
  Effect.gen(function*() {
    const reply = yield* call("GET", `${base}/${type}/_history?_count=1`)
    expect([type, reply.status]).toEqual([type, 200])
    return reply.json.total as number
  })

/** At most `n` problems in a message, and how many there were. */
const firstOf = (problems: ReadonlyArray<string>, n = 10): Array<string> =>
  problems.length <= n ? [...problems] : [...problems.slice(0, n), `... ${problems.length - n} more`]

const backendsUnderTest: ReadonlyArray<{ readonly kind: BackendKind; readonly skip: boolean }> = [
  { kind: "sqlite", skip: false },
  { kind: "postgres", skip: !pgAvailable }
]

for (const backend of backendsUnderTest) {
  describe.skipIf(skipRealPackages || skipSynthea || backend.skip)(`Synthea transactions on ${backend.kind}`, () => {
    /** Filled by the first test: the type history totals before loading, and per bundle, per entry, what was created. */
    let loaded: { readonly before: Map<string, number>; readonly created: ReadonlyArray<ReadonlyArray<Created>> } | undefined
    /** Filled on first use: every created resource as read back through its location, by `Type/id`. */
    let stored: Map<string, Record<string, any>> | undefined

    const afterLoading = () => {
      if (loaded === undefined) throw new Error("the bundles were not all committed (see the first test)")
      return loaded
    }

    const readBack = () =>
      Effect.gen(function*() {
        if (stored !== undefined) return stored
        const { created } = afterLoading()
        const all = created.flat()
        const problems: Array<string> = []
        const read = new Map<string, Record<string, any>>()
        yield* Effect.forEach(all, (resource) =>
          Effect.gen(function*() {
            const reply = yield* call("GET", resource.url)
            if (reply.status !== 200) return void problems.push(`${resource.url}: ${reply.status} ${reply.text.slice(0, 200)}`)
            if (reply.json?.resourceType !== resource.type || reply.json?.id !== resource.id) {
              return void problems.push(`${resource.url}: read ${reply.json?.resourceType}/${reply.json?.id}`)
            }
            read.set(`${resource.type}/${resource.id}`, reply.json)
          }), { concurrency: 8, discard: true })
        expect(firstOf(problems)).toEqual([])
        expect(read.size).toBe(entryCount)
        stored = read
        return read
      })

    layer(
      Layer.scoped(Server, startServer(backend.kind, {
        conformance: { package_registry: registryUrl ?? "", package_cache: realPackageCache },
        validation: syntheaValidation
      })),
      { timeout: 600_000, excludeTestServices: true }
    )((it) => {
      it.effect(`commits each of the ${bundles.length} bundles: 200, a transaction-response, a 201 Created with a location per entry`, () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          expect(bundles.length + refused.length).toBe(55)
          for (const { file, text } of refused) {
            const reply = yield* call("POST", base, { body: text })
            expect([file, reply.status]).toEqual([file, 422])
            // A transaction stops at its first invalid entry: the outcome names that entry's defect.
            expect([file, refusedSynthea[file]!.some((reason) => reply.text.includes(reason))]).toEqual([file, true])
          }
          const before = new Map<string, number>()
          for (const type of expectedCounts.keys()) before.set(type, yield* historyTotal(base, type))

          const created: Array<ReadonlyArray<Created>> = []
          const started = performance.now()
          for (const { file, bundle, text } of bundles) {
            expect([file, bundle.type]).toEqual([file, "transaction"])
            const reply = yield* call("POST", base, { body: text })
            expect([file, reply.status, reply.status === 200 ? "" : reply.text.slice(0, 500)]).toEqual([file, 200, ""])
            expect(reply.json).toMatchObject({ resourceType: "Bundle", type: "transaction-response" })
            expect([file, reply.json.entry?.length]).toEqual([file, bundle.entry.length])
            const problems: Array<string> = []
            const ofBundle = bundle.entry.map((entry, index): Created => {
              const response = reply.json.entry[index]?.response ?? {}
              const location = parseLocation(base, response.location)
              if (!/^201\b/.test(String(response.status))) problems.push(`entry ${index}: status ${response.status}`)
              if (location === undefined || location.type !== entry.resource.resourceType || location.version !== "1") {
                problems.push(`entry ${index} (${entry.resource.resourceType}): location ${response.location}`)
              }
              if (response.etag !== 'W/"1"') problems.push(`entry ${index}: etag ${response.etag}`)
              if (typeof response.lastModified !== "string" || Number.isNaN(Date.parse(response.lastModified))) {
                problems.push(`entry ${index}: lastModified ${response.lastModified}`)
              }
              return location ?? { type: "", id: "", url: "" }
            })
            expect([file, firstOf(problems)]).toEqual([file, []])
            created.push(ofBundle)
          }
          const seconds = (performance.now() - started) / 1000
          console.log(`Synthea on ${backend.kind}: ${bundles.length} transactions, ${entryCount} resources in ${seconds.toFixed(1)} s ` +
            `(${Math.round(entryCount / seconds)} resources/s, for information)`)

          const ids = created.flat().map(({ type, id }) => `${type}/${id}`)
          expect(new Set(ids).size).toBe(entryCount)
          loaded = { before, created }
        }), 900_000)

      it.effect("stores as many resources of each type as the bundles hold", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const { before } = afterLoading()
          const added: Record<string, number> = {}
          for (const type of expectedCounts.keys()) added[type] = (yield* historyTotal(base, type)) - (before.get(type) ?? 0)
          expect(added).toEqual(Object.fromEntries(expectedCounts))
        }), 120_000)

      it.effect("leaves every reference resolvable: each names a created resource or a contained one, none a urn:uuid", () =>
        Effect.gen(function*() {
          const read = yield* readBack()
          const problems: Array<string> = []
          let checked = 0
          for (const [key, resource] of read) {
            const contained = new Set<string>((resource.contained ?? []).map((c: { id?: string }) => `#${c.id}`))
            for (const [path, reference] of referencesIn(resource)) {
              checked++
              if (reference.startsWith("#") ? !contained.has(reference) : !read.has(reference)) {
                problems.push(`${key} ${path}: ${reference}`)
              }
            }
          }
          expect(firstOf(problems)).toEqual([])
          expect(checked).toBeGreaterThan(entryCount)
        }), 600_000)

      it.effect("points each bundle's Observations and Encounters at that bundle's Patient", () =>
        Effect.gen(function*() {
          const { created } = afterLoading()
          const read = yield* readBack()
          const problems: Array<string> = []
          let checked = 0
          bundles.forEach(({ file, bundle }, b) => {
            const patients = bundle.entry.flatMap((entry, index) => (entry.resource.resourceType === "Patient" ? [index] : []))
            expect([file, patients.length]).toEqual([file, 1])
            const patient = created[b]![patients[0]!]!
            bundle.entry.forEach((entry, index) => {
              const type = entry.resource.resourceType
              if (type !== "Observation" && type !== "Encounter") return
              const mine = created[b]![index]!
              const resource = read.get(`${mine.type}/${mine.id}`)
              const reference = resource?.["subject"]?.reference ?? resource?.["patient"]?.reference
              checked++
              if (reference !== `Patient/${patient.id}`) problems.push(`${file} entry ${index} ${type}/${mine.id}: ${reference}, not Patient/${patient.id}`)
            })
          })
          expect(firstOf(problems)).toEqual([])
          expect(checked).toBe((expectedCounts.get("Observation") ?? 0) + (expectedCounts.get("Encounter") ?? 0))
        }), 600_000)

      it.effect("rewrites each urn:uuid reference to the resource whose fullUrl it named, and keeps every other one as sent", () =>
        Effect.gen(function*() {
          const { created } = afterLoading()
          const read = yield* readBack()
          const problems: Array<string> = []
          bundles.forEach(({ file, bundle }, b) => {
            const byFullUrl = new Map(bundle.entry.map((entry, index) => [entry.fullUrl, created[b]![index]!]))
            bundle.entry.forEach((entry, index) => {
              const mine = created[b]![index]!
              const readBackReferences = referencesIn(read.get(`${mine.type}/${mine.id}`))
              const sent = referencesIn(entry.resource)
              const expected = new Map([...sent].map(([path, reference]) => {
                const target = byFullUrl.get(reference)
                return [path, target === undefined ? reference : `${target.type}/${target.id}`]
              }))
              const mismatch = [...new Set([...expected.keys(), ...readBackReferences.keys()])]
                .filter((path) => expected.get(path) !== readBackReferences.get(path))
                .map((path) => `${path}: sent ${sent.get(path)}, expected ${expected.get(path)}, read ${readBackReferences.get(path)}`)
              if (mismatch.length > 0) problems.push(`${file} entry ${index} (${mine.type}/${mine.id}): ${mismatch.join("; ")}`)
            })
          })
          expect(firstOf(problems)).toEqual([])
        }), 600_000)
    })
  })
}
