/**
 * A system-level Bulk Data `$export` (docs/export.md) of a server holding the 55 Synthea patients
 * (../shared/data/synthea) and the real R4 packages, on SQLite and on Postgres (when one answers), read back
 * as a client reads it: every file of the manifest downloaded and each line compared with the server's
 * contents. Every resource of the server is exported exactly once, each line byte for byte what
 * `GET [type]/[id]` answers, and each type's files hold as many lines as the manifest counts and the server
 * holds. On SQLite the files are cut at 1 MiB (`export.max_file_bytes`), so that most types span several files;
 * on Postgres they keep the default (one file per type here). The whole set loads in under 20 seconds, so no
 * subset is taken; reading every resource back by id is most of the file's time (about a minute on Postgres).
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer, Schedule } from "effect"
import { type BackendKind, pgAvailable } from "../support/backends.ts"
import { realPackageCache, registryUrl, skipRealPackages } from "../support/npmRegistry.ts"
import { call, type Reply, startServer, type TestServer } from "../support/server.ts"
import { loadSynthea, skipSynthea, type SyntheaBundle, syntheaValidation } from "../support/synthea.ts"

class Server extends Context.Tag("test/ExportSyntheaServer")<Server, TestServer>() {}

const bundles: ReadonlyArray<SyntheaBundle> = skipSynthea ? [] : loadSynthea()
const defaultMaxFileBytes = 268_435_456
const entryCount = bundles.reduce((sum, { bundle }) => sum + bundle.entry.length, 0)

interface Manifest {
  readonly transactionTime: string
  readonly request: string
  readonly requiresAccessToken: boolean
  readonly output: ReadonlyArray<{ readonly type: string; readonly url: string; readonly count: number }>
  readonly error: ReadonlyArray<unknown>
}

/** One line of an exported file, with the file it came from. */
interface Line {
  readonly file: string
  /** The file's size in bytes (its every line, each with its newline). */
  readonly fileBytes: number
  readonly text: string
  readonly type: string
  readonly id: string
  readonly lastUpdated: string | undefined
}

/** At most `n` problems in a message, and how many there were. */
const firstOf = (problems: ReadonlyArray<string>, n = 10): Array<string> =>
  problems.length <= n ? [...problems] : [...problems.slice(0, n), `... ${problems.length - n} more`]

/** `Type/id` from a transaction-response entry's `Type/id/_history/n` location, relative to `base` or under it. */
const createdRef = (base: string, location: unknown): string | undefined => {
  if (typeof location !== "string") return undefined
  const relative = location.startsWith(`${base}/`) ? location.slice(base.length + 1) : location
  return /^([A-Z][A-Za-z]+\/[A-Za-z0-9\-.]{1,64})\/_history\/[0-9]+$/.exec(relative)?.[1]
}

/** Posts every bundle (four at a time, as a loader would) and gives the `Type/id` of every resource created. */
const loadAll = Effect.gen(function*() {
  const { base } = yield* Server
  const created = yield* Effect.forEach(bundles, ({ file, text }) =>
    Effect.gen(function*() {
      const reply = yield* call("POST", base, { body: text })
      expect([file, reply.status, reply.status === 200 ? "" : reply.text.slice(0, 500)]).toEqual([file, 200, ""])
      return (reply.json.entry as ReadonlyArray<any>).map((entry) => createdRef(base, entry.response?.location) ?? `${file}: ${entry.response?.location}`)
    }), { concurrency: 4 })
  return created.flat()
})

/** Asks for the status until the job is no longer queued or running (each request waits for its end, Prefer: wait). */
const finished = (statusUrl: string) =>
  call("GET", statusUrl, { headers: { prefer: "wait=30" } }).pipe(
    Effect.filterOrFail((reply) => reply.status !== 202, (reply) => new Error(`still ${reply.headers.get("x-progress")}`)),
    Effect.retry(Schedule.recurs(10)),
    Effect.orDie
  )

/** How many resources of each type the server holds (`_summary=count` of each type its CapabilityStatement lists). */
const serverCounts = Effect.gen(function*() {
  const { base } = yield* Server
  const metadata = yield* call("GET", `${base}/metadata`)
  expect(metadata.status).toBe(200)
  const types: ReadonlyArray<string> = metadata.json.rest[0].resource.map((resource: { type: string }) => resource.type)
  expect(types.length).toBeGreaterThan(100)
  const counts = new Map<string, number>()
  yield* Effect.forEach(types, (type) =>
    Effect.gen(function*() {
      const reply = yield* call("GET", `${base}/${type}?_summary=count`)
      expect([type, reply.status]).toEqual([type, 200])
      if (reply.json.total > 0) counts.set(type, reply.json.total)
    }), { concurrency: 8, discard: true })
  return counts
})

/** Every line of the file at `url`, checked to be NDJSON as the contract writes it. */
const download = (url: string) =>
  Effect.gen(function*() {
    const reply: Reply = yield* call("GET", url, { headers: { accept: "application/fhir+ndjson" } })
    expect([url, reply.status]).toEqual([url, 200])
    expect(reply.headers.get("content-type")).toMatch(/^application\/fhir\+ndjson/)
    expect([url, reply.text.endsWith("\n")]).toEqual([url, true])
    const fileBytes = Buffer.byteLength(reply.text, "utf8")
    return reply.text.slice(0, -1).split("\n").map((text): Line => {
      const resource = JSON.parse(text)
      return { file: url, fileBytes, text, type: resource.resourceType, id: resource.id, lastUpdated: resource.meta?.lastUpdated }
    })
  })

const backendsUnderTest: ReadonlyArray<{ readonly kind: BackendKind; readonly skip: boolean; readonly maxFileBytes: number }> = [
  { kind: "sqlite", skip: false, maxFileBytes: 1_048_576 },
  { kind: "postgres", skip: !pgAvailable, maxFileBytes: defaultMaxFileBytes }
]

for (const backend of backendsUnderTest) {
  describe.skipIf(skipRealPackages || skipSynthea || backend.skip)(`a system-level $export of the Synthea patients on ${backend.kind}`, () => {
    /** Filled by the first test: what the bundles created, the manifest, and every line of every file. */
    let exported: {
      readonly created: ReadonlyArray<string>
      readonly manifest: Manifest
      readonly lines: ReadonlyArray<Line>
      readonly requestedAt: number
    } | undefined

    const afterExport = () => {
      if (exported === undefined) throw new Error("the export did not complete (see the first test)")
      return exported
    }

    layer(
      Layer.scoped(Server, startServer(backend.kind, {
        conformance: { package_registry: registryUrl ?? "", package_cache: realPackageCache },
        validation: syntheaValidation,
        ...(backend.maxFileBytes === defaultMaxFileBytes ? {} : { export: { max_file_bytes: backend.maxFileBytes } })
      })),
      { timeout: 600_000, excludeTestServices: true }
    )((it) => {
      it.effect(`loads the ${bundles.length} bundles, exports the server, and answers with a manifest of files`, () =>
        Effect.gen(function*() {
          const server = yield* Server
          const loadStarted = performance.now()
          const created = yield* loadAll
          expect(firstOf(created.filter((ref) => ref.includes(":")))).toEqual([])
          expect(new Set(created).size).toBe(entryCount)
          const loadSeconds = (performance.now() - loadStarted) / 1000
          yield* server.searchIndexed

          const exportStarted = performance.now()
          const requestedAt = Date.now()
          const kickOff = yield* call("GET", `${server.base}/$export`, { headers: { prefer: "respond-async", accept: "application/fhir+json" } })
          expect(kickOff.status, kickOff.text).toBe(202)
          expect(kickOff.json?.resourceType).toBe("OperationOutcome")
          const statusUrl = kickOff.headers.get("content-location")!
          expect(statusUrl).toMatch(new RegExp(`^${server.url.replace(/\./g, "\\.")}/export/[^/?]+$`))
          const done = yield* finished(statusUrl)
          expect(done.status, done.text).toBe(200)
          expect(done.headers.get("content-type")).toMatch(/^application\/json/)
          // The files are kept for 24 hours from the job's end.
          const expires = Date.parse(done.headers.get("expires") ?? "")
          expect(expires).toBeGreaterThan(Date.now() + 23 * 3600_000)
          const manifest = done.json as Manifest
          expect(manifest).toMatchObject({ request: `${server.base}/$export`, requiresAccessToken: false, error: [] })
          const exportSeconds = (performance.now() - exportStarted) / 1000

          const downloadStarted = performance.now()
          const lines = (yield* Effect.forEach(manifest.output, (entry) => download(entry.url), { concurrency: 4 })).flat()
          console.log(`Synthea $export on ${backend.kind}: loaded ${entryCount} resources in ${loadSeconds.toFixed(1)} s; ` +
            `exported ${lines.length} resources in ${manifest.output.length} files in ${exportSeconds.toFixed(1)} s, ` +
            `downloaded in ${((performance.now() - downloadStarted) / 1000).toFixed(1)} s (for information)`)
          exported = { created, manifest, lines, requestedAt }
        }), 900_000)

      it.effect(`lists the files by type in alphabetical order, named Type.1.ndjson, Type.2.ndjson ..., each counted right and at most ${backend.maxFileBytes} bytes`, () =>
        Effect.gen(function*() {
          const server = yield* Server
          const { manifest, lines } = afterExport()
          const types = manifest.output.map((entry) => entry.type)
          const distinct = [...new Set(types)]
          expect(distinct).toEqual([...distinct].sort())
          // A type's files are next to each other.
          expect(types.filter((type, index) => index === 0 || types[index - 1] !== type)).toEqual(distinct)
          const job = /\/export\/([^/?]+)\/file\?/.exec(manifest.output[0]!.url)?.[1]
          expect(job).toBeDefined()
          const problems: Array<string> = []
          for (const type of distinct) {
            manifest.output.filter((entry) => entry.type === type).forEach((entry, index) => {
              const expected = `${server.url}/export/${job}/file?name=${type}.${index + 1}.ndjson`
              if (entry.url !== expected) problems.push(`${entry.url} is not ${expected}`)
              const inFile = lines.filter((line) => line.file === entry.url)
              if (inFile.length !== entry.count) problems.push(`${entry.url}: ${inFile.length} lines, count ${entry.count}`)
              const strangers = inFile.filter((line) => line.type !== type)
              if (strangers.length > 0) problems.push(`${entry.url}: holds ${strangers[0]!.type}/${strangers[0]!.id}`)
              // A resource larger than the limit is alone in its file.
              const bytes = inFile[0]?.fileBytes ?? 0
              if (bytes > backend.maxFileBytes && inFile.length > 1) problems.push(`${entry.url}: ${bytes} bytes in ${inFile.length} lines`)
            })
          }
          expect(firstOf(problems)).toEqual([])
          const observationFiles = manifest.output.filter((entry) => entry.type === "Observation").length
          if (backend.maxFileBytes === defaultMaxFileBytes) expect(observationFiles).toBe(1)
          else expect(observationFiles).toBeGreaterThan(3)
        }))

      it.effect("exports every resource of the server exactly once: as many of each type as the server holds, every one the bundles created", () =>
        Effect.gen(function*() {
          const { created, manifest, lines } = afterExport()
          const seen = new Map<string, number>()
          for (const line of lines) seen.set(`${line.type}/${line.id}`, (seen.get(`${line.type}/${line.id}`) ?? 0) + 1)
          expect(firstOf([...seen].filter(([, times]) => times > 1).map(([ref, times]) => `${ref} ${times} times`))).toEqual([])
          expect(firstOf(created.filter((ref) => !seen.has(ref)))).toEqual([])

          const held = yield* serverCounts
          const counted = new Map<string, number>()
          for (const entry of manifest.output) counted.set(entry.type, (counted.get(entry.type) ?? 0) + entry.count)
          const linesByType = new Map<string, number>()
          for (const line of lines) linesByType.set(line.type, (linesByType.get(line.type) ?? 0) + 1)
          const sorted = (map: Map<string, number>) => [...map].sort(([a], [b]) => a.localeCompare(b))
          expect(sorted(counted)).toEqual(sorted(held))
          expect(sorted(linesByType)).toEqual(sorted(held))
          // The Synthea types and the packages' conformance resources alike.
          expect(held.get("Observation")).toBeGreaterThan(6000)
          expect(held.get("StructureDefinition")).toBeGreaterThan(600)
        }))

      it.effect("writes each resource byte for byte as GET [type]/[id] answers it, none changed after the transactionTime", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const { manifest, lines, requestedAt } = afterExport()
          const transactionTime = Date.parse(manifest.transactionTime)
          expect(manifest.transactionTime).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/)
          // The last commit before the kick-off: after every write of the load, before the kick-off was answered.
          expect(transactionTime).toBeLessThanOrEqual(requestedAt + 1000)
          const latest = lines.reduce((max, line) => Math.max(max, Date.parse(line.lastUpdated ?? "") || 0), 0)
          expect(latest).toBeLessThanOrEqual(transactionTime)
          expect(transactionTime - latest).toBeLessThan(60_000)

          // Every resource of the Synthea data, and one in 25 of the packages' conformance resources (their reading
          // one by one would be most of this file's time).
          const conformance = new Set(["StructureDefinition", "ValueSet", "CodeSystem", "SearchParameter", "CompartmentDefinition", "OperationDefinition", "ConceptMap", "NamingSystem", "CapabilityStatement", "ImplementationGuide"])
          const compared = lines.filter((line, i) => !conformance.has(line.type) || i % 25 === 0)
          expect(compared.length).toBeGreaterThan(13_000)
          const problems: Array<string> = []
          yield* Effect.forEach(compared, (line) =>
            Effect.gen(function*() {
              const read = yield* call("GET", `${base}/${line.type}/${line.id}`)
              if (read.status !== 200) problems.push(`${line.type}/${line.id}: ${read.status}`)
              else if (read.text !== line.text) problems.push(`${line.type}/${line.id}: the line differs from the read (${line.text.length} and ${read.text.length} characters)`)
            }), { concurrency: 8, discard: true })
          expect(firstOf(problems)).toEqual([])
        }))
    })
  })
}
