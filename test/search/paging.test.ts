/**
 * Paging through a search of more than 10,000 matches by its `next` links
 * (https://hl7.org/fhir/R4/http.html#paging): every match on exactly one page, pages full but the
 * last, the total stated on each page. On SQLite and Postgres, with the fixture catalog.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { type BackendKind, pgAvailable } from "../support/backends.ts"
import { call, type Reply, startServer, type TestServer } from "../support/server.ts"

class Server extends Context.Tag("test/PagingServer")<Server, TestServer>() {}

const matching = 10_050
/** Patients of another gender beside them, which no page may hold. */
const others = 30
const perBundle = 1000

/** A transaction Bundle creating `n` Patients of `gender`. */
const transaction = (n: number, gender: string, from: number) => ({
  resourceType: "Bundle",
  type: "transaction",
  entry: Array.from({ length: n }, (_, i) => ({
    fullUrl: `urn:uuid:00000000-0000-4000-8000-${String(from + i).padStart(12, "0")}`,
    resource: { resourceType: "Patient", gender, name: [{ family: `Paging${from + i}` }] },
    request: { method: "POST", url: "Patient" }
  }))
})

/** Every page of `url` by its `next` links: the ids in the order served, each page's size and total. */
const pagesOf = (url: string) =>
  Effect.gen(function*() {
    const ids: Array<string> = []
    const pages: Array<{ readonly size: number; readonly total: unknown }> = []
    let next: string | undefined = url
    while (next !== undefined) {
      const reply: Reply = yield* call("GET", next)
      expect([next, reply.status]).toEqual([next, 200])
      const entries: ReadonlyArray<any> = reply.json.entry ?? []
      for (const entry of entries) ids.push(entry.resource.id)
      pages.push({ size: entries.length, total: reply.json.total })
      next = (reply.json.link ?? []).find((link: any) => link.relation === "next")?.url
      expect(pages.length).toBeLessThanOrEqual(20)
    }
    return { ids, pages }
  })

const backendsUnderTest: ReadonlyArray<{ readonly kind: BackendKind; readonly skip: boolean }> = [
  { kind: "sqlite", skip: false },
  { kind: "postgres", skip: !pgAvailable }
]

for (const backend of backendsUnderTest) {
  describe.skipIf(backend.skip)(`paging over ${matching} matches on ${backend.kind}`, () => {
    let created: ReadonlyArray<string> = []

    layer(Layer.scoped(Server, startServer(backend.kind)), { timeout: 120_000, excludeTestServices: true })((it) => {
      it.effect(`creates ${matching} female Patients in transactions of ${perBundle}, and ${others} male ones`, () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const ids: Array<string> = []
          const sizes = [...Array.from({ length: Math.floor(matching / perBundle) }, () => perBundle), matching % perBundle]
          let from = 0
          for (const size of sizes) {
            const reply = yield* call("POST", base, { body: transaction(size, "female", from) })
            expect([reply.status, reply.status === 200 ? "" : reply.text.slice(0, 300)]).toEqual([200, ""])
            for (const entry of reply.json.entry) ids.push(/^Patient\/([^/]+)\//.exec(entry.response.location)?.[1] ?? "")
            from += size
          }
          expect((yield* call("POST", base, { body: transaction(others, "male", from) })).status).toBe(200)
          expect(new Set(ids).size).toBe(matching)
          created = ids
        }), 300_000)

      it.effect("pages of 1000 (the most) hold every match once, the total on each", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const { ids, pages } = yield* pagesOf(`${base}/Patient?gender=female&_count=1000&_total=accurate`)
          expect(new Set(ids).size).toBe(ids.length)
          expect([...ids].sort()).toEqual([...created].sort())
          expect(pages.map((page) => page.size)).toEqual([...Array.from({ length: 10 }, () => 1000), 50])
          expect(pages.every((page) => page.total === matching)).toBe(true)
          // A larger _count is read as 1000.
          const capped = yield* call("GET", `${base}/Patient?gender=female&_count=5000`)
          expect(capped.json.entry.length).toBe(1000)
        }), 120_000)

      it.effect("pages of 997 sorted by -_lastUpdated hold every match once, newest transaction first", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const { ids, pages } = yield* pagesOf(`${base}/Patient?gender=female&_sort=-_lastUpdated&_count=997`)
          expect(new Set(ids).size).toBe(ids.length)
          expect([...ids].sort()).toEqual([...created].sort())
          expect(pages.map((page) => page.size)).toEqual([...Array.from({ length: 10 }, () => 997), matching - 9970])
          // The resources of one transaction share a commit time, later transactions come first.
          const bundleOf = new Map(created.map((id, index) => [id, Math.floor(index / perBundle)]))
          const bundles = ids.map((id) => bundleOf.get(id))
          expect(bundles).toEqual([...bundles].sort((a, b) => (b ?? -1) - (a ?? -1)))
          expect([...ids.slice(0, 50)].sort()).toEqual(created.slice(10_000).sort())
        }), 120_000)

      it.effect("counts the matches with _summary=count and leaves the other gender out", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          expect((yield* call("GET", `${base}/Patient?gender=female&_summary=count`)).json.total).toBe(matching)
          expect((yield* call("GET", `${base}/Patient?gender=male&_summary=count`)).json.total).toBe(others)
          const last = yield* call("GET", `${base}/Patient?gender=female&_count=1000&_offset=10000`)
          expect(last.json.entry.length).toBe(50)
          expect((last.json.link ?? []).some((link: any) => link.relation === "next")).toBe(false)
        }), 120_000)
    })
  })
}
