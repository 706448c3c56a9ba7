/**
 * The terminology pull as a user sees it (docs/terminology-pull.md), on SQLite and Postgres with the real R4
 * packages, the server on the TestClock and its sources on loopback: a FHIR server's base (paged searches), a
 * Bundle file and an NDJSON file behind HTTP Basic credentials are pulled at start into ordinary resources
 * (`GET CodeSystem?url=`), their ValueSets usable by `:in` as soon as the pull is done; every
 * `terminology.refresh_minutes` (2 here: the TestClock moves through each minute's timers of the whole server) the
 * pull comes again, writes nothing for what did not change and updates what did; a failure after a success
 * keeps serving what was pulled, shows in `/healthz?verbose=1` and is retried after 1, then 2 minutes. On a
 * first start a source that cannot be pulled stops the start; once the database holds what it pulled, a source
 * that is down no longer does. A replica pulls nothing, and serves what its primary pulled.
 */
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Exit, TestClock } from "effect"
import { backends, freshDatabase } from "../support/backends.ts"
import { realPackageCache, registryUrl, skipRealPackages } from "../support/npmRegistry.ts"
import { templateFor } from "../support/r4Template.ts"
import { call, startServer, startServerOn, type TestServer } from "../support/server.ts"
import { closedPort, startTerminologySource, type TerminologySource } from "../support/terminologySource.ts"

const start = Date.parse("2026-05-04T10:00:00Z")
const real = { package_registry: registryUrl ?? "", package_cache: realPackageCache }

/** Lets Node run what is ready (sockets, the database) without moving any clock. */
const turn = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))

const colorsUrl = "http://example.org/fhir/CodeSystem/colors"
const warmUrl = "http://example.org/fhir/ValueSet/warm"
const allColorsUrl = "http://example.org/fhir/ValueSet/all-colors"

const colors = (codes: ReadonlyArray<string>) => ({
  resourceType: "CodeSystem",
  id: "colors",
  meta: { versionId: "7", lastUpdated: "2020-01-01T00:00:00Z" },
  url: colorsUrl,
  version: "1",
  name: "Colors",
  status: "active",
  content: "complete",
  concept: codes.map((code) => ({ code, display: code }))
})
const warm = (codes: ReadonlyArray<string>) => ({
  resourceType: "ValueSet",
  id: "warm",
  url: warmUrl,
  version: "1",
  name: "Warm",
  status: "active",
  compose: { include: [{ system: colorsUrl, concept: codes.map((code) => ({ code })) }] }
})
const codeSystem = (name: string, id = name) => ({
  resourceType: "CodeSystem",
  id,
  url: `http://example.org/fhir/CodeSystem/${name}`,
  version: "1",
  name,
  status: "active",
  content: "complete",
  concept: [{ code: "a" }, { code: "b" }]
})
const conceptMap = (from: string, to: string) => ({
  resourceType: "ConceptMap",
  id: `${from}-to-${to}`,
  url: `http://example.org/fhir/ConceptMap/${from}-to-${to}`,
  version: "1",
  status: "active",
  group: [{ source: `http://example.org/fhir/CodeSystem/${from}`, target: `http://example.org/fhir/CodeSystem/${to}`, element: [{ code: "a", target: [{ code: "b", equivalence: "wider" }] }] }]
})

/** The three sources of a server: a FHIR server's base, a Bundle file, an NDJSON file behind credentials. */
const sourcesOf = (source: TerminologySource) => {
  source.resources.set("CodeSystem", [colors(["red", "green", "blue"]), codeSystem("shapes"), codeSystem("sizes")])
  source.resources.set("ValueSet", [warm(["red"])])
  source.resources.set("ConceptMap", [conceptMap("shapes", "sizes")])
  source.extraEntries = [{ resourceType: "OperationOutcome", issue: [{ severity: "information", code: "informational", diagnostics: "searched" }] }]
  const allColors = { resourceType: "ValueSet", id: "all-colors", url: allColorsUrl, version: "1", status: "active", compose: { include: [{ system: colorsUrl }] } }
  source.files.set("/files/terminology.json", {
    contentType: "application/fhir+json",
    body: JSON.stringify({
      resourceType: "Bundle",
      type: "collection",
      entry: [
        { resource: allColors },
        { resource: { resourceType: "Patient", name: [{ family: "Not terminology" }] } },
        { resource: { resourceType: "CodeSystem", status: "active", content: "complete" } },
        // The R4 package's own: held, not from this source.
        { resource: { resourceType: "ValueSet", url: "http://hl7.org/fhir/ValueSet/administrative-gender", version: "4.0.1", status: "active" } },
        { resource: { ...codeSystem("broken"), status: "nonsense" } },
        { resource: allColors }
      ]
    })
  })
  source.authorization = `Basic ${Buffer.from("reader:s3cret").toString("base64")}`
  source.files.set("/private/terminology.ndjson", {
    contentType: "application/fhir+ndjson",
    // `moods` asks for the id a CodeSystem of the R4 package has: it gets one of the server's.
    body: [JSON.stringify(codeSystem("moods", "administrative-gender")), "{not json", JSON.stringify(conceptMap("moods", "shapes")), ""].join("\n")
  })
  return {
    fhir: source.base,
    bundle: `${source.url}/files/terminology.json`,
    ndjson: `${source.url}/private/terminology.ndjson`,
    ndjsonWithCredentials: `http://reader:s3cret@${source.url.slice("http://".length)}/private/terminology.ndjson`
  }
}

const verbose = (server: TestServer) => Effect.map(call("GET", `${server.url}/healthz?verbose=1`), (reply) => reply.json)

/** Waits, without moving the clock, until every source has finished `n` attempts (at most 30 s of real time). */
const attempted = (server: TestServer, n: number) =>
  Effect.gen(function*() {
    const until = Date.now() + 30_000
    for (;;) {
      const health = yield* verbose(server)
      const sources: Array<any> = health.terminology.sources
      if (sources.every((source) => source.attempts >= n && !source.pulling)) return health
      if (Date.now() > until) expect.fail(`no attempt ${n} of every source: ${JSON.stringify(health.terminology)}`)
      yield* turn
    }
  })

const entries = (reply: { readonly json: any }): Array<any> => (reply.json?.entry ?? []).map((entry: any) => entry.resource)

const one = (server: TestServer, type: string, url: string) =>
  Effect.gen(function*() {
    const reply = yield* call("GET", `${server.base}/${type}?url=${encodeURIComponent(url)}`)
    expect(reply.status, reply.text).toBe(200)
    const found = entries(reply)
    expect(found.length, `${type}?url=${url}`).toBe(1)
    return found[0]
  })

const observation = (server: TestServer, code: string) =>
  Effect.gen(function*() {
    const reply = yield* call("POST", `${server.base}/Observation`, {
      body: { resourceType: "Observation", status: "final", code: { coding: [{ system: colorsUrl, code }] } }
    })
    expect(reply.status, reply.text).toBe(201)
    return reply.json.id as string
  })

const inValueSet = (server: TestServer, url: string) =>
  Effect.gen(function*() {
    const reply = yield* call("GET", `${server.base}/Observation?code:in=${encodeURIComponent(url)}&_count=100`)
    expect(reply.status, reply.text).toBe(200)
    return entries(reply).map((resource) => resource.id as string).sort()
  })

const historyTotal = (server: TestServer, path: string) =>
  Effect.map(call("GET", `${server.base}/${path}/_history`), (reply) => reply.json.total as number)

/** Versions of every CodeSystem, ValueSet and ConceptMap (the R4 packages' too): what the pulls have written. */
const terminologyVersions = (server: TestServer) =>
  Effect.map(
    Effect.forEach(["CodeSystem", "ValueSet", "ConceptMap"], (type) => historyTotal(server, type)),
    (totals) => totals.reduce((sum, n) => sum + n, 0)
  )

const nothing = { other_type: 0, unreadable: 0, no_url: 0, repeated: 0, held: 0, refused: 0 }

for (const backend of backends.filter((b) => b.kind !== "memory")) {
  describe.skipIf(backend.skip || skipRealPackages)(`the terminology pull on ${backend.kind}`, () => {
    it.scoped("pulls a FHIR server, a Bundle and an NDJSON file at start and every refresh_minutes, writing only what changed, and keeps serving through a failure", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(start)
        const source = yield* startTerminologySource()
        const urls = sourcesOf(source)
        const server = yield* startServer(backend.kind, {
          conformance: real,
          terminology: { urls: [urls.fhir, urls.bundle, urls.ndjsonWithCredentials], refresh_minutes: 2 }
        })

        // At start: each source read once, what it holds written as ordinary resources.
        const pulledColors = yield* one(server, "CodeSystem", colorsUrl)
        expect(pulledColors).toMatchObject({ id: "colors", meta: { versionId: "1", source: urls.fhir }, concept: [{ code: "red" }, { code: "green" }, { code: "blue" }] })
        expect(yield* one(server, "ValueSet", warmUrl)).toMatchObject({ id: "warm", meta: { source: urls.fhir } })
        expect(yield* one(server, "ConceptMap", "http://example.org/fhir/ConceptMap/shapes-to-sizes")).toMatchObject({ meta: { source: urls.fhir } })
        expect(yield* one(server, "CodeSystem", "http://example.org/fhir/CodeSystem/sizes")).toMatchObject({ id: "sizes" })
        expect(yield* one(server, "ValueSet", allColorsUrl)).toMatchObject({ id: "all-colors", meta: { source: urls.bundle } })
        const moods = yield* one(server, "CodeSystem", "http://example.org/fhir/CodeSystem/moods")
        expect(moods.id).not.toBe("administrative-gender")
        expect(moods.id).toMatch(/^[0-9a-f-]{36}$/)
        expect(moods.meta.source).toBe(urls.ndjson)
        const gender = yield* one(server, "ValueSet", "http://hl7.org/fhir/ValueSet/administrative-gender")
        expect(gender.meta.source).toBeUndefined()
        expect(entries(yield* call("GET", `${server.base}/CodeSystem?url=http://example.org/fhir/CodeSystem/broken`))).toEqual([])

        const first = yield* verbose(server)
        expect(first.terminology).toEqual({
          refresh_minutes: 2,
          sources: [
            expect.objectContaining({
              url: urls.fhir,
              kind: "fhir-server",
              pulling: false,
              attempts: 1,
              failures: 0,
              last_attempt_at: "2026-05-04T10:00:00.000Z",
              last_success_at: "2026-05-04T10:00:00.000Z",
              next_attempt_at: "2026-05-04T10:02:00.000Z",
              last_error: null,
              last_pull: { read: 5, created: 5, updated: 0, unchanged: 0, skipped: { ...nothing, other_type: 3 } }
            }),
            expect.objectContaining({
              url: urls.bundle,
              kind: "bundle",
              attempts: 1,
              last_pull: { read: 5, created: 1, updated: 0, unchanged: 0, skipped: { ...nothing, other_type: 1, no_url: 1, repeated: 1, held: 1, refused: 1 } }
            }),
            expect.objectContaining({
              url: urls.ndjson,
              kind: "ndjson",
              attempts: 1,
              last_pull: { read: 2, created: 2, updated: 0, unchanged: 0, skipped: { ...nothing, unreadable: 1 } }
            })
          ]
        })
        // The searches were paged, asked for FHIR JSON; the credentials went with the NDJSON file's requests.
        expect(source.requests.map((r) => r.path)).toContain("/fhir/CodeSystem?_count=2&page=2")
        for (const request of source.requests) expect(request.headers["accept"]).toMatch(/^application\/fhir\+json/)
        for (const request of source.requests.filter((r) => r.path.startsWith("/private/"))) expect(request.headers["authorization"]).toBe(source.authorization)
        expect(JSON.stringify(first)).not.toContain("s3cret")

        // The catalog holds what was pulled once the server serves: the pulled ValueSets (one of them over the
        // pulled CodeSystem) serve :in.
        const red = yield* observation(server, "red")
        const blue = yield* observation(server, "blue")
        expect(yield* inValueSet(server, warmUrl)).toEqual([red])
        expect(yield* inValueSet(server, allColorsUrl)).toEqual([blue, red].sort())

        // Nothing until the two minutes are up; then the same content writes nothing.
        const versions = yield* terminologyVersions(server)
        const asked = source.requests.length
        yield* TestClock.adjust(Duration.seconds(119))
        for (let n = 0; n < 20; n++) yield* turn
        expect(source.requests.length).toBe(asked)
        yield* TestClock.adjust(Duration.seconds(1))
        const second = yield* attempted(server, 2)
        expect(second.terminology.sources.map((s: any) => s.last_pull)).toEqual([
          { read: 5, created: 0, updated: 0, unchanged: 5, skipped: { ...nothing, other_type: 3 } },
          { read: 5, created: 0, updated: 0, unchanged: 1, skipped: { ...nothing, other_type: 1, no_url: 1, repeated: 1, held: 1, refused: 1 } },
          { read: 2, created: 0, updated: 0, unchanged: 2, skipped: { ...nothing, unreadable: 1 } }
        ])
        expect(second.terminology.sources[0].last_success_at).toMatch(/^2026-05-04T10:02:/)
        expect(yield* terminologyVersions(server)).toBe(versions)
        expect(yield* historyTotal(server, "CodeSystem/colors")).toBe(1)

        // A changed CodeSystem and ValueSet are updated at the next pull (the ValueSet, refused at first for a code
        // the catalog's CodeSystem lacks, once the catalog holds the new CodeSystem); the catalog takes them in.
        source.resources.set("CodeSystem", [colors(["red", "green", "blue", "yellow"]), codeSystem("shapes"), codeSystem("sizes")])
        source.resources.set("ValueSet", [warm(["red", "yellow"])])
        yield* TestClock.adjust(Duration.minutes(2))
        const third = yield* attempted(server, 3)
        expect(third.terminology.sources[0].last_pull).toEqual({ read: 5, created: 0, updated: 2, unchanged: 3, skipped: { ...nothing, other_type: 3 } })
        expect(yield* terminologyVersions(server)).toBe(versions + 2)
        expect(yield* one(server, "CodeSystem", colorsUrl)).toMatchObject({ id: "colors", meta: { versionId: "2" }, concept: [{}, {}, {}, { code: "yellow" }] })
        expect(yield* historyTotal(server, "CodeSystem/colors")).toBe(2)
        const yellow = yield* observation(server, "yellow")
        expect(yield* inValueSet(server, warmUrl)).toEqual([red, yellow].sort())

        // The sources fail: what was pulled is still served, the failure shows, and it is tried again sooner.
        source.failing = true
        yield* TestClock.adjust(Duration.minutes(2))
        const failed = yield* attempted(server, 4)
        expect(failed.terminology.sources).toEqual([
          expect.objectContaining({
            attempts: 4,
            failures: 1,
            last_success_at: expect.stringMatching(/^2026-05-04T10:04:/),
            last_attempt_at: expect.stringMatching(/^2026-05-04T10:06:/),
            last_error: `GET ${urls.fhir}/metadata answered 503`,
            next_attempt_at: expect.stringMatching(/^2026-05-04T10:07:/)
          }),
          expect.objectContaining({ failures: 1, last_error: `GET ${urls.bundle}/metadata answered 503` }),
          expect.objectContaining({ failures: 1, last_error: `GET ${urls.ndjson}/metadata answered 503` })
        ])
        expect(yield* inValueSet(server, warmUrl)).toEqual([red, yellow].sort())
        expect((yield* one(server, "CodeSystem", colorsUrl)).meta.versionId).toBe("2")
        let ready = yield* call("GET", `${server.url}/readyz`)
        for (let n = 0; n < 200 && ready.status !== 200; n++) {
          yield* turn
          ready = yield* call("GET", `${server.url}/readyz`)
        }
        expect(ready.status).toBe(200)
        expect(server.lines.some((line) => line.includes("terminology pull failed") && line.includes(urls.ndjson))).toBe(true)
        expect(server.lines.join("\n")).not.toContain("s3cret")

        yield* TestClock.adjust(Duration.minutes(1))
        const again = yield* attempted(server, 5)
        expect(again.terminology.sources[0]).toMatchObject({ failures: 2, next_attempt_at: expect.stringMatching(/^2026-05-04T10:09:/) })
        source.failing = false
        yield* TestClock.adjust(Duration.minutes(2))
        const recovered = yield* attempted(server, 6)
        expect(recovered.terminology.sources[0]).toMatchObject({
          failures: 2,
          last_error: null,
          last_success_at: expect.stringMatching(/^2026-05-04T10:09:/),
          next_attempt_at: expect.stringMatching(/^2026-05-04T10:11:/)
        })
      }), 240_000)

    it.scoped("does not start when a source cannot be pulled on a first start, and starts when the database holds what it pulled before", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(start)
        const port = yield* closedPort()
        const nowhere = `http://reader:s3cret@127.0.0.1:${port}/fhir`
        const refused = yield* Effect.exit(Effect.scoped(startServer(backend.kind, { conformance: real, terminology: { urls: [nowhere] } })))
        expect(Exit.isFailure(refused)).toBe(true)
        const message = Exit.isFailure(refused) && refused.cause._tag === "Fail" ? String((refused.cause.error as Error).message) : String(refused)
        expect(message).toBe(`terminology source http://127.0.0.1:${port}/fhir could not be pulled on a first start: GET http://127.0.0.1:${port}/fhir/metadata failed: connection refused`)

        const source = yield* startTerminologySource()
        source.resources.set("CodeSystem", [codeSystem("shapes")])
        const database = yield* freshDatabase(backend.kind, 2, yield* Effect.promise(() => templateFor(backend.kind, realPackageCache)))
        const settings = { conformance: real, terminology: { urls: [source.base] } }
        yield* Effect.scoped(Effect.gen(function*() {
          const server = yield* startServerOn(database, settings)
          expect((yield* one(server, "CodeSystem", "http://example.org/fhir/CodeSystem/shapes")).meta.source).toBe(source.base)
        }))
        source.failing = true
        const restarted = yield* startServerOn(database, settings)
        expect((yield* call("GET", `${restarted.url}/readyz`)).status).toBe(200)
        expect((yield* one(restarted, "CodeSystem", "http://example.org/fhir/CodeSystem/shapes")).meta.source).toBe(source.base)
        expect((yield* verbose(restarted)).terminology.sources).toEqual([
          expect.objectContaining({ url: source.base, attempts: 1, failures: 1, last_success_at: null, last_error: `GET ${source.base}/metadata answered 503` })
        ])
      }), 120_000)

    it.scoped.skipIf(backend.kind !== "postgres")("is the primary's alone: a replica pulls nothing and serves what the primary pulled", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(start)
        const source = yield* startTerminologySource()
        source.resources.set("CodeSystem", [colors(["red"])])
        source.resources.set("ValueSet", [warm(["red"])])
        const database = yield* freshDatabase(backend.kind, 2, yield* Effect.promise(() => templateFor(backend.kind, realPackageCache)))
        const settings = { conformance: real, terminology: { urls: [source.base] } }
        const primary = yield* startServerOn(database, settings)
        const asked = source.requests.length
        const replica = yield* startServerOn(database, { ...settings, cluster: { role: "replica", primary_url: primary.url } })
        expect(source.requests.length).toBe(asked)
        const health = yield* verbose(replica)
        expect(health.role).toBe("replica")
        expect(health).not.toHaveProperty("terminology")
        expect(yield* one(replica, "CodeSystem", colorsUrl)).toMatchObject({ id: "colors", meta: { source: source.base } })
        // The replica's catalog holds the pulled ValueSet: `:in` expands it (an unknown one is a 400).
        const known = yield* call("GET", `${replica.base}/Observation?code:in=${encodeURIComponent(warmUrl)}`)
        expect(known.status, known.text).toBe(200)
        const unknown = yield* call("GET", `${replica.base}/Observation?code:in=${encodeURIComponent(`${warmUrl}-not-pulled`)}`)
        expect(unknown.status).toBe(400)
      }), 120_000)
  })
}
