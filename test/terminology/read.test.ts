/**
 * Reading a terminology source (src/terminology/pull/read.ts, docs/terminology-pull.md "Sources" and "Limits")
 * against sources on loopback: a FHIR server's base told by its CapabilityStatement and searched page by page,
 * a Bundle, a single resource and NDJSON files told by Content-Type or shape; and what is refused: text that is
 * not JSON, a next link to another origin or back to a page read, too many pages, a body over the limit, a
 * redirect to another scheme, a source that does not answer in time. Credentials go to their origin only.
 */
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Exit, Fiber, TestClock } from "effect"
import { basicAuthorization, type Target } from "../../src/terminology/pull/http.ts"
import { defaultReadLimits, type Kind, type Page, type ReadLimits, readSource, searchableTypes } from "../../src/terminology/pull/read.ts"
import { startTerminologySource, type TerminologySource } from "../support/terminologySource.ts"

const targetOf = (text: string): Target => {
  const url = new URL(text)
  const authorization = basicAuthorization(url)
  return { url, credentials: authorization === undefined ? undefined : { origin: url.origin, authorization } }
}

/** Every page read, or the reason reading failed. */
const readAll = (url: string, limits: ReadLimits = defaultReadLimits) =>
  Effect.gen(function*() {
    const pages: Array<Page> = []
    const exit = yield* Effect.exit(readSource(targetOf(url), (page) => Effect.sync(() => void pages.push(page)), limits))
    const urls = pages.flatMap((page) => page.resources.map((resource) => String(resource["url"])))
    return {
      pages,
      urls,
      otherTypes: pages.reduce((n, page) => n + page.otherTypes, 0),
      unreadable: pages.reduce((n, page) => n + page.unreadable, 0),
      kind: Exit.isSuccess(exit) ? exit.value : undefined as Kind | undefined,
      reason: Exit.isFailure(exit) ? String(exit.cause._tag === "Fail" ? (exit.cause.error as { reason: string }).reason : exit.cause) : undefined
    }
  })

const codeSystem = (n: number) => ({ resourceType: "CodeSystem", id: `cs${n}`, url: `http://example.org/fhir/CodeSystem/cs${n}`, status: "active", content: "complete" })

const fill = (source: TerminologySource) => {
  source.resources.set("CodeSystem", [1, 2, 3, 4, 5].map(codeSystem))
  source.resources.set("ValueSet", [{ resourceType: "ValueSet", id: "vs", url: "http://example.org/fhir/ValueSet/vs", status: "active" }])
  source.resources.set("ConceptMap", [])
}

describe("reading a terminology source", () => {
  it.scoped("reads a FHIR server's CodeSystem, ValueSet and ConceptMap searches page by page with _count and Accept", () =>
    Effect.gen(function*() {
      const source = yield* startTerminologySource()
      fill(source)
      source.extraEntries = [{ resourceType: "OperationOutcome", issue: [{ severity: "information", code: "informational" }] }]
      const read = yield* readAll(`${source.base}/`)
      expect(read.kind).toBe("fhir-server")
      expect(read.urls).toEqual([1, 2, 3, 4, 5].map((n) => `http://example.org/fhir/CodeSystem/cs${n}`).concat("http://example.org/fhir/ValueSet/vs"))
      // The OperationOutcome of each search's first page (CodeSystem, ValueSet, ConceptMap).
      expect(read.otherTypes).toBe(3)
      expect(source.requests.map((r) => r.path)).toEqual([
        "/fhir/metadata",
        "/fhir/CodeSystem?_count=100",
        "/fhir/CodeSystem?_count=2&page=2",
        "/fhir/CodeSystem?_count=2&page=3",
        "/fhir/ValueSet?_count=100",
        "/fhir/ConceptMap?_count=100"
      ])
      for (const request of source.requests) expect(request.headers["accept"]).toMatch(/^application\/fhir\+json/)
    }))

  it("searches only the terminology types a CapabilityStatement lists with search-type, all when it lists none", () => {
    expect(searchableTypes({ rest: [{ mode: "server", resource: [{ type: "ValueSet", interaction: [{ code: "search-type" }] }, { type: "CodeSystem", interaction: [{ code: "read" }] }] }] }))
      .toEqual(["ValueSet"])
    expect(searchableTypes({ rest: [{ mode: "server" }] })).toEqual(["CodeSystem", "ValueSet", "ConceptMap"])
    expect(searchableTypes({})).toEqual(["CodeSystem", "ValueSet", "ConceptMap"])
  })

  it.scoped("reads a Bundle file, a single resource and NDJSON told by Content-Type or by its lines", () =>
    Effect.gen(function*() {
      const source = yield* startTerminologySource()
      source.files.set("/files/all.json", {
        contentType: "application/json",
        body: JSON.stringify({
          resourceType: "Bundle",
          type: "collection",
          entry: [{ resource: codeSystem(1) }, { resource: { resourceType: "Patient" } }, {}, { resource: codeSystem(2) }]
        })
      })
      source.files.set("/files/one.json", { contentType: "application/fhir+json", body: JSON.stringify(codeSystem(3)) })
      const lines = `${JSON.stringify(codeSystem(4))}\nnot json\n\n${JSON.stringify({ resourceType: "Patient" })}\n[1]\n${JSON.stringify(codeSystem(5))}\n`
      source.files.set("/files/typed.ndjson", { contentType: "application/fhir+ndjson", body: lines })
      source.files.set("/files/plain.txt", { contentType: "text/plain", body: lines })

      const bundle = yield* readAll(`${source.url}/files/all.json`)
      expect([bundle.kind, bundle.urls, bundle.otherTypes]).toEqual(["bundle", [codeSystem(1).url, codeSystem(2).url], 2])
      const one = yield* readAll(`${source.url}/files/one.json`)
      expect([one.kind, one.urls]).toEqual(["resource", [codeSystem(3).url]])
      for (const path of ["/files/typed.ndjson", "/files/plain.txt"]) {
        const ndjson = yield* readAll(`${source.url}${path}`)
        expect([ndjson.kind, ndjson.urls, ndjson.otherTypes, ndjson.unreadable]).toEqual(["ndjson", [codeSystem(4).url, codeSystem(5).url], 1, 2])
      }
      // A file is asked for at `[url]/metadata` first, then itself.
      expect(source.requests.slice(0, 2).map((r) => r.path)).toEqual(["/files/all.json/metadata", "/files/all.json"])
    }))

  it.scoped("follows a searchset Bundle's next links; refuses one to another origin, one back to a page read, and more pages than the limit", () =>
    Effect.gen(function*() {
      const source = yield* startTerminologySource()
      const other = yield* startTerminologySource()
      fill(source)
      const page = (next: string | undefined) => JSON.stringify({
        resourceType: "Bundle",
        type: "searchset",
        link: next === undefined ? [] : [{ relation: "next", url: next }],
        entry: [{ resource: codeSystem(9) }]
      })
      source.files.set("/files/search.json", { contentType: "application/fhir+json", body: page(`${source.base}/CodeSystem?_count=2&page=2`) })
      const followed = yield* readAll(`${source.url}/files/search.json`)
      expect([followed.kind, followed.urls]).toEqual(["bundle", [codeSystem(9).url, codeSystem(3).url, codeSystem(4).url, codeSystem(5).url]])

      source.files.set("/files/away.json", { contentType: "application/fhir+json", body: page(`${other.url}/files/x.json`) })
      expect((yield* readAll(`${source.url}/files/away.json`)).reason).toBe(`the next page of ${source.url}/files/away.json is on another origin (${other.url}); only ${source.url} is followed`)
      expect(other.requests).toEqual([])

      source.files.set("/files/loop.json", { contentType: "application/fhir+json", body: page("/files/loop.json") })
      expect((yield* readAll(`${source.url}/files/loop.json`)).reason).toBe(`the next page of ${source.url}/files/loop.json is a page already read`)

      const few = yield* readAll(`${source.base}`, { ...defaultReadLimits, maxPages: 2 })
      expect(few.reason).toBe(`${source.base}/CodeSystem?_count=100 has more than 2 pages`)
    }))

  it.scoped("fails on a body that is not JSON or NDJSON, on an error status, on refused credentials and on a body over the size limit", () =>
    Effect.gen(function*() {
      const source = yield* startTerminologySource()
      source.files.set("/files/page.html", { contentType: "text/html", body: "<html><body>terminology</body></html>" })
      source.files.set("/files/big.json", { contentType: "application/json", body: JSON.stringify({ resourceType: "Bundle", type: "collection", entry: [{ resource: codeSystem(1) }] }) })
      source.files.set("/files/array.json", { contentType: "application/json", body: "[1, 2]" })
      expect((yield* readAll(`${source.url}/files/page.html`)).reason).toBe(`GET ${source.url}/files/page.html answered neither a JSON Bundle or resource nor NDJSON`)
      expect((yield* readAll(`${source.url}/files/array.json`)).reason).toBe(`GET ${source.url}/files/array.json answered neither a JSON Bundle or resource nor NDJSON`)
      expect((yield* readAll(`${source.url}/files/missing.json`)).reason).toBe(`GET ${source.url}/files/missing.json answered 404`)
      expect((yield* readAll(`${source.url}/files/big.json`, { ...defaultReadLimits, maxBytes: 50 })).reason).toBe(`GET ${source.url}/files/big.json is larger than 50 bytes`)
      // A server that refuses the credentials, or fails, is not taken for a file server.
      source.authorization = "Basic b3RoZXI6b3RoZXI="
      expect((yield* readAll(`${source.url}/private/x.json`)).reason).toBe(`GET ${source.url}/private/x.json/metadata answered 401`)
      source.failing = true
      expect((yield* readAll(source.base)).reason).toBe(`GET ${source.base}/metadata answered 503`)
    }))

  it.scoped("follows a redirect on http, refuses one to another scheme, and sends credentials only to their origin", () =>
    Effect.gen(function*() {
      const source = yield* startTerminologySource()
      const other = yield* startTerminologySource()
      const bundle = JSON.stringify({ resourceType: "Bundle", type: "collection", entry: [{ resource: codeSystem(1) }] })
      source.files.set("/files/here.json", { contentType: "application/json", body: bundle })
      source.files.set("/files/moved.json", { status: 302, headers: { location: "/files/here.json" }, body: "" })
      source.files.set("/files/away.json", { status: 307, headers: { location: `${other.url}/files/there.json` }, body: "" })
      source.files.set("/files/local.json", { status: 301, headers: { location: "file:///etc/passwd" }, body: "" })
      other.files.set("/files/there.json", { contentType: "application/json", body: bundle })
      const authorization = `Basic ${Buffer.from("reader:s3cret").toString("base64")}`

      const moved = yield* readAll(`http://reader:s3cret@${source.url.slice("http://".length)}/files/moved.json`)
      expect([moved.kind, moved.urls]).toEqual(["bundle", [codeSystem(1).url]])
      expect(source.requests.map((r) => [r.path, r.headers["authorization"]])).toEqual([
        ["/files/moved.json/metadata", authorization],
        ["/files/moved.json", authorization],
        ["/files/here.json", authorization]
      ])
      const away = yield* readAll(`http://reader:s3cret@${source.url.slice("http://".length)}/files/away.json`)
      expect(away.urls).toEqual([codeSystem(1).url])
      expect(other.requests.map((r) => [r.path, r.headers["authorization"]])).toEqual([["/files/there.json", undefined]])

      const local = yield* readAll(`${source.url}/files/local.json`)
      expect(local.reason).toBe(`GET ${source.url}/files/local.json redirects to a file URL; only http and https are followed`)
    }))

  it.scoped("gives up on a source that does not answer within 30 seconds", () =>
    Effect.gen(function*() {
      const source = yield* startTerminologySource()
      source.files.set("/files/slow.json/metadata", { hang: true, body: "" })
      const reading = yield* Effect.fork(readAll(`${source.url}/files/slow.json`))
      while (source.requests.length === 0) yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
      yield* TestClock.adjust(Duration.seconds(29))
      expect(reading.unsafePoll()).toBeNull()
      yield* TestClock.adjust(Duration.seconds(1))
      const read = yield* Fiber.join(reading)
      expect(read.reason).toBe(`GET ${source.url}/files/slow.json/metadata: no answer within 30s`)
    }))
})
