/**
 * History windows (https://hl7.org/fhir/R4/http.html#history): `_since`, `_at` and the paging snapshot
 * `_until`, at instance, type and system level. The server runs on the TestClock, so every version is
 * committed at a time the test chose, and each window is checked for exactly the versions it must give.
 *
 * The versions, in seconds after `start` (A and B are Patients, O an Observation):
 *   10 A1 create · 20 O1 create · 30 A2 update · 40 B1 create · 50 B2 delete · 60 A3 update · 70 O2 update
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, type Scope, TestClock } from "effect"
import { backends, type BackendKind } from "../support/backends.ts"
import { call, startServer } from "../support/server.ts"

/** Later than any commit of a database the tests start from, so commit timestamps are the clock's. */
const start = Date.parse("2090-01-01T00:00:00Z")
/** The instant `seconds` after `start`, as FHIR writes it. */
const at = (seconds: number): string => new Date(start + Math.round(seconds * 1000)).toISOString()

interface Timeline {
  readonly base: string
  /** `Patient/<id>` of A and B, `Observation/<id>` of O. */
  readonly paths: Readonly<Record<"A" | "B" | "O", string>>
  /** Reads `path` and lists its entries as `A2 PUT` (the resource, its version, the method). */
  readonly entries: (path: string) => Effect.Effect<ReadonlyArray<string>>
  /** Every entry of the history at `url`, following `next` links, with the total each page gave. */
  readonly pages: (url: string) => Effect.Effect<{ readonly entries: ReadonlyArray<string>; readonly totals: ReadonlyArray<number> }>
}

/** Moves the clock to `seconds` after `start` and makes one write there, checking its commit time. */
const writeAt = (seconds: number, method: string, url: string, body?: unknown) =>
  Effect.gen(function*() {
    yield* TestClock.setTime(start + seconds * 1000)
    const reply = yield* call(method, url, body === undefined ? {} : { body })
    expect([method, url, reply.status]).toEqual([method, url, method === "POST" ? 201 : method === "PUT" ? 200 : 204])
    expect(reply.headers.get("x-svc-commit-ts")).toBe(String((start + seconds * 1000) * 1000))
    if (reply.json !== undefined) expect(reply.json.meta.lastUpdated).toBe(at(seconds))
    return reply.json?.id as string | undefined
  })

/** A server started at `start`, with the versions above written. */
const timeline = (kind: BackendKind): Effect.Effect<Timeline, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    yield* TestClock.setTime(start)
    const { base } = yield* startServer(kind)
    const a = yield* writeAt(10, "POST", `${base}/Patient`, { resourceType: "Patient", gender: "female" })
    const o = yield* writeAt(20, "POST", `${base}/Observation`, { resourceType: "Observation", status: "preliminary", code: { text: "o" } })
    const paths = { A: `Patient/${a}`, B: "", O: `Observation/${o}` }
    yield* writeAt(30, "PUT", `${base}/${paths.A}`, { resourceType: "Patient", id: a, gender: "male" })
    const b = yield* writeAt(40, "POST", `${base}/Patient`, { resourceType: "Patient", gender: "other" })
    paths.B = `Patient/${b}`
    yield* writeAt(50, "DELETE", `${base}/${paths.B}`)
    yield* writeAt(60, "PUT", `${base}/${paths.A}`, { resourceType: "Patient", id: a, gender: "unknown" })
    yield* writeAt(70, "PUT", `${base}/${paths.O}`, { resourceType: "Observation", id: o, status: "final", code: { text: "o" } })

    const names = new Map(Object.entries(paths).map(([name, path]) => [`${base}/${path}`, name]))
    const summary = (entry: any): string => {
      const version = /^W\/"(\d+)"$/.exec(entry.response.etag)?.[1]
      const name = names.get(entry.fullUrl) ?? entry.fullUrl.slice(base.length + 1)
      // A delete has no resource; every other version carries its own.
      const carried = entry.request.method === "DELETE" ? entry.resource === undefined : entry.resource?.meta?.versionId === version
      return `${name}${version} ${entry.request.method}${carried ? "" : " (resource does not match)"}`
    }
    const read = (url: string) =>
      Effect.gen(function*() {
        const reply = yield* call("GET", url)
        expect([url, reply.status]).toEqual([url, 200])
        expect(reply.json).toMatchObject({ resourceType: "Bundle", type: "history" })
        return reply.json
      })
    const entries = (path: string) =>
      Effect.gen(function*() {
        const bundle = yield* read(`${base}/${path}${path.includes("?") ? "&" : "?"}_count=1000`)
        const listed: ReadonlyArray<string> = (bundle.entry ?? []).map(summary)
        expect([path, bundle.total]).toEqual([path, listed.length])
        return listed
      })
    const pages = (url: string) =>
      Effect.gen(function*() {
        const listed: Array<string> = []
        const totals: Array<number> = []
        let next: string | undefined = url
        while (next !== undefined) {
          const bundle: any = yield* read(next)
          listed.push(...(bundle.entry ?? []).map(summary))
          totals.push(bundle.total)
          next = bundle.link.find((l: any) => l.relation === "next")?.url
        }
        return { entries: listed, totals }
      })
    return { base, paths, entries, pages }
  })

const query = (params: Record<string, string>) => `?${new URLSearchParams(params).toString()}`

for (const backend of backends) {
  describe.skipIf(backend.skip)(`history windows on ${backend.kind}`, () => {
    it.scoped("instance level: _since from its instant on, _at the version current during its span", () =>
      Effect.gen(function*() {
        const { base, paths, entries } = yield* timeline(backend.kind)
        const history = (params: Record<string, string>) => entries(`${paths.A}/_history${query(params)}`)
        expect(yield* history({})).toEqual(["A3 PUT", "A2 PUT", "A1 POST"])
        const all = (yield* call("GET", `${base}/${paths.A}/_history`)).json
        expect(all.entry.map((e: any) => e.response.lastModified)).toEqual([at(60), at(30), at(10)])

        expect(yield* history({ _since: at(25) })).toEqual(["A3 PUT", "A2 PUT"])
        // A version committed at the very instant of _since is included ("at or after").
        expect(yield* history({ _since: at(30) })).toEqual(["A3 PUT", "A2 PUT"])
        expect(yield* history({ _since: at(30.001) })).toEqual(["A3 PUT"])
        expect(yield* history({ _since: at(61) })).toEqual([])
        // The same instant with an offset, and without a zone (read as UTC).
        expect(yield* history({ _since: "2090-01-01T01:00:25+01:00" })).toEqual(["A3 PUT", "A2 PUT"])
        expect(yield* history({ _since: "2090-01-01T00:00:25" })).toEqual(["A3 PUT", "A2 PUT"])

        expect(yield* history({ _at: at(45) })).toEqual(["A2 PUT"])
        // At the instant a version is committed it is the current one; a millisecond before, its predecessor.
        expect(yield* history({ _at: at(30) })).toEqual(["A2 PUT"])
        expect(yield* history({ _at: at(29.999) })).toEqual(["A1 POST"])
        expect(yield* history({ _at: at(59.999) })).toEqual(["A2 PUT"])
        expect(yield* history({ _at: at(5) })).toEqual([])
        expect(yield* history({ _at: at(100) })).toEqual(["A3 PUT"])
        // A value of lower precision is a span: every version current at some time in it.
        expect(yield* history({ _at: "2090-01-01T00:00Z" })).toEqual(["A2 PUT", "A1 POST"])
        expect(yield* history({ _at: "2090-01-01" })).toEqual(["A3 PUT", "A2 PUT", "A1 POST"])
        expect(yield* history({ _at: "2089" })).toEqual([])
        // Both: current during _at and created at or after _since.
        expect(yield* history({ _at: at(45), _since: at(25) })).toEqual(["A2 PUT"])
        expect(yield* history({ _at: at(45), _since: at(35) })).toEqual([])
      }))

    it.scoped("type level: a resource deleted by the _at time is there as its delete", () =>
      Effect.gen(function*() {
        const { entries } = yield* timeline(backend.kind)
        const history = (params: Record<string, string>) => entries(`Patient/_history${query(params)}`)
        expect(yield* history({})).toEqual(["A3 PUT", "B2 DELETE", "B1 POST", "A2 PUT", "A1 POST"])
        expect(yield* history({ _since: at(35) })).toEqual(["A3 PUT", "B2 DELETE", "B1 POST"])
        expect(yield* history({ _since: at(50) })).toEqual(["A3 PUT", "B2 DELETE"])
        expect(yield* history({ _at: at(45) })).toEqual(["B1 POST", "A2 PUT"])
        expect(yield* history({ _at: at(50) })).toEqual(["B2 DELETE", "A2 PUT"])
        expect(yield* history({ _at: at(55) })).toEqual(["B2 DELETE", "A2 PUT"])
        expect(yield* history({ _at: at(65) })).toEqual(["A3 PUT", "B2 DELETE"])
        expect(yield* history({ _at: at(15) })).toEqual(["A1 POST"])
        expect(yield* entries(`Observation/_history${query({ _at: at(65) })}`)).toEqual(["O1 POST"])
      }))

    it.scoped("system level: the same windows over every type", () =>
      Effect.gen(function*() {
        const { entries } = yield* timeline(backend.kind)
        const history = (params: Record<string, string>) => entries(`_history${query(params)}`)
        // What was there before the first write: the server's own start (its packages' resources).
        const before = yield* history({ _at: at(5) })
        expect(before.filter((entry) => /^[ABO]\d/.test(entry))).toEqual([])
        expect(yield* history({ _since: at(5) })).toEqual(["O2 PUT", "A3 PUT", "B2 DELETE", "B1 POST", "A2 PUT", "O1 POST", "A1 POST"])
        expect(yield* history({ _since: at(20) })).toEqual(["O2 PUT", "A3 PUT", "B2 DELETE", "B1 POST", "A2 PUT", "O1 POST"])
        expect(yield* history({ _since: at(70) })).toEqual(["O2 PUT"])
        expect(yield* history({ _at: at(45) })).toEqual(["B1 POST", "A2 PUT", "O1 POST", ...before])
        expect(yield* history({ _at: at(75) })).toEqual(["O2 PUT", "A3 PUT", "B2 DELETE", ...before])
        expect(yield* history({})).toEqual(["O2 PUT", "A3 PUT", "B2 DELETE", "B1 POST", "A2 PUT", "O1 POST", "A1 POST", ...before])
      }))

    it.scoped("_until: the pages of one history are those of its first page's time, whatever is written meanwhile", () =>
      Effect.gen(function*() {
        const { base, paths, entries, pages } = yield* timeline(backend.kind)
        // The first pages are read at 70 s; a new version of A is written at 80 s, before the next pages.
        const first = (yield* call("GET", `${base}/Patient/_history?_count=2`)).json
        const firstAt = (yield* call("GET", `${base}/Patient/_history?_count=1&_at=${encodeURIComponent(at(120))}`)).json
        const firstSystem = (yield* call("GET", `${base}/_history${query({ _since: at(5), _count: "3" })}`)).json
        expect([first.total, firstAt.total, firstSystem.total]).toEqual([5, 2, 7])
        yield* writeAt(80, "PUT", `${base}/${paths.A}`, { resourceType: "Patient", id: paths.A.slice(8), active: true })

        const next = (bundle: any): string => bundle.link.find((l: any) => l.relation === "next").url
        const rest = yield* pages(next(first))
        expect(rest).toEqual({ entries: ["B1 POST", "A2 PUT", "A1 POST"], totals: [5, 5] })
        // With _at in the future of the first page, A4 (written before that time, after the first page) does not replace A3.
        const restAt = yield* pages(next(firstAt))
        expect(restAt).toEqual({ entries: ["B2 DELETE"], totals: [2] })
        const restSystem = yield* pages(next(firstSystem))
        expect(restSystem).toEqual({ entries: ["B1 POST", "A2 PUT", "O1 POST", "A1 POST"], totals: [7, 7] })

        // A new history sees the new version.
        expect(yield* entries("Patient/_history")).toEqual(["A4 PUT", "A3 PUT", "B2 DELETE", "B1 POST", "A2 PUT", "A1 POST"])
        expect(yield* entries(`Patient/_history${query({ _at: at(120) })}`)).toEqual(["A4 PUT", "B2 DELETE"])
      }))

    it.scoped("a window value that cannot be read is a 400 OperationOutcome naming it", () =>
      Effect.gen(function*() {
        const { base, paths } = yield* timeline(backend.kind)
        const bad: ReadonlyArray<[string, string]> = [
          ["_since", "yesterday"],
          ["_since", "2090-02-30"],
          ["_since", "2090-01-01T25:00:00Z"],
          ["_since", "2090-01-01T10:00:00+15:00"],
          ["_since", ""],
          ["_at", "2090-13"],
          ["_at", "2090-01-01T10"],
          ["_at", "now"],
          ["_until", "abc"],
          ["_until", "-5"],
          ["_until", at(30)]
        ]
        for (const path of [`${paths.A}/_history`, "Patient/_history", "_history"]) {
          for (const [name, value] of bad) {
            const reply = yield* call("GET", `${base}/${path}${query({ [name]: value })}`)
            expect([path, name, value, reply.status]).toEqual([path, name, value, 400])
            expect(reply.json).toMatchObject({ resourceType: "OperationOutcome", issue: [{ severity: "error", code: "value" }] })
            expect(reply.json.issue[0].diagnostics).toContain(`${name}=${value}`)
          }
        }
      }))
  })
}
