/**
 * The fast search (src/rest/fastSearch.ts) answers `GET /fhir/{type}?...` exactly as the general path does:
 * the same status, headers in the same order, the same Bundle (its id and meta.lastUpdated aside) and the same
 * request log line. A `Prefer` header always takes the general path, so each search is compared with its twin
 * sent with `Prefer: handling=strict` (the default handling). `/healthz?verbose=1` counts what the fast path
 * answered, which tells the two paths apart.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { backends } from "../support/backends.ts"
import { call, rawCall, type RawReply, startServer, type TestServer } from "../support/server.ts"

class Server extends Context.Tag("test/FastSearchServer")<Server, TestServer>() {}


/** One GET, keeping the raw header order; the body as text. */
const raw = (url: string, headers: Record<string, string> = {}) =>
  Effect.map(rawCall("GET", url, headers), (reply) => ({ ...reply, body: reply.bytes.toString("utf8") }))

const varying = new Set(["x-request-id", "date", "content-length"])
const stable = (reply: RawReply) => reply.headers.filter(([name]) => !varying.has(name))
/** The Bundle without what differs between any two answers. */
const comparable = (body: string) => {
  const { id: _id, meta: _meta, ...rest } = JSON.parse(body)
  return rest
}

const fastSearches = (url: string) =>
  Effect.map(call("GET", `${url}/healthz?verbose=1`), (reply) => reply.json.fast_path?.searches as number | undefined)

for (const backend of backends) {
  describe.skipIf(backend.skip)(`fast search on ${backend.kind}`, () => {
    layer(Layer.scoped(Server, startServer(backend.kind)), { timeout: 60_000, excludeTestServices: true })((it) => {
      it.effect("answers with the same status, headers, Bundle and log line as the general path", () =>
        Effect.gen(function*() {
          const { base, lines, url } = yield* Server
          const system = "urn:test:fast-search"
          for (const [family, gender] of [["Fastsearch", "female"], ["Fastsearch", "male"], ["Fastsearch", "female"], ["Other", "female"]]) {
            const created = yield* call("POST", `${base}/Patient`, {
              body: { resourceType: "Patient", gender, name: [{ family }], identifier: [{ system, value: family }] }
            })
            expect(created.status).toBe(201)
          }
          const searches = [
            `Patient?family=fastsearch`,
            `Patient?family=fastsearch&gender=female&_count=1`,
            `Patient?identifier=${encodeURIComponent(`${system}|Fastsearch`)}&_count=2&_offset=1`,
            `Patient?family=fastsearch&_total=accurate&_elements=gender`,
            `Patient?family=fastsearch&_summary=count`,
            `Patient?family=fastsearch&_summary=true&_sort=-_lastUpdated`,
            `Patient?family=fastsearch&_format=json`,
            `Patient?family=nobody-at-all`
          ]
          // Pages reached by cursors: next and previous links, in row-key order and sorted.
          const linked = (bundle: any, relation: string): string => {
            const url: string = bundle.link.find((link: any) => link.relation === relation).url
            return url.slice(url.indexOf("/Patient?") + 1)
          }
          for (const first of [`Patient?family=fastsearch&_count=1`, `Patient?family=fastsearch&_count=1&_sort=-gender,_id`]) {
            const next = linked((yield* call("GET", `${base}/${first}`)).json, "next")
            searches.push(next, linked((yield* call("GET", `${base}/${next}`)).json, "previous"))
          }
          const before = yield* fastSearches(url)
          for (const [i, search] of searches.entries()) {
            const fast = yield* raw(`${base}/${search}`, { "x-request-id": `fast-${i}` })
            const general = yield* raw(`${base}/${search}`, { "x-request-id": `general-${i}`, prefer: "handling=strict" })
            expect([search, fast.status]).toEqual([search, 200])
            expect(stable(fast)).toEqual(stable(general))
            expect(fast.headers.map(([name]) => name)).toEqual(general.headers.map(([name]) => name))
            expect(fast.headers).toContainEqual(["content-length", String(Buffer.byteLength(fast.body))])
            expect(fast.headers).toContainEqual(["x-request-id", `fast-${i}`])
            expect(comparable(fast.body)).toEqual(comparable(general.body))
            const [fastLine] = lines.map((line) => JSON.parse(line)).filter((line) => line.request_id === `fast-${i}`)
            const [generalLine] = lines.map((line) => JSON.parse(line)).filter((line) => line.request_id === `general-${i}`)
            if (backend.kind !== "memory") {
              expect(Object.keys(fastLine)).toEqual(Object.keys(generalLine))
              const { time: _t1, duration_ms: _d1, request_id: _r1, bytes: b1, ...fastRest } = fastLine
              const { time: _t2, duration_ms: _d2, request_id: _r2, bytes: b2, ...generalRest } = generalLine
              expect(fastRest).toEqual(generalRest)
              expect(fastRest).toMatchObject({ method: "GET", path: "/fhir/Patient", status: 200 })
              expect(b1).toBe(Buffer.byteLength(fast.body))
              expect(b2).toBe(Buffer.byteLength(general.body))
            }
          }
          const after = yield* fastSearches(url)
          // A SQLite file and Postgres have the fast search, the in-memory database none; every search above is one it answers.
          if (backend.kind === "memory") expect(after).toBeUndefined()
          else expect((after ?? 0) - (before ?? 0)).toBe(searches.length)
        }))

      it.effect("leaves what it cannot answer alike to the general path", () =>
        Effect.gen(function*() {
          const { base, url } = yield* Server
          const before = yield* fastSearches(url)
          const unknown = yield* raw(`${base}/Patient?no-such-parameter=1`)
          expect(unknown.status).toBe(400)
          expect(JSON.parse(unknown.body).resourceType).toBe("OperationOutcome")
          const lenient = yield* raw(`${base}/Patient?no-such-parameter=1`, { prefer: "handling=lenient" })
          expect(lenient.status).toBe(200)
          expect(lenient.headers).toContainEqual(["preference-applied", "handling=lenient"])
          const xml = yield* raw(`${base}/Patient?family=fastsearch`, { accept: "application/fhir+xml" })
          expect(xml.status).toBe(200)
          expect(xml.headers).toContainEqual(["content-type", "application/fhir+xml; charset=utf-8"])
          const pretty = yield* raw(`${base}/Patient?family=fastsearch&_pretty=true`)
          expect(pretty.body).toContain("\n  \"resourceType\": \"Bundle\"")
          const included = yield* raw(`${base}/Observation?_include=Observation:subject`)
          expect(included.status).toBe(200)
          const unknownType = yield* raw(`${base}/Unicorn?name=x`)
          expect(unknownType.status).toBe(404)
          const changed = yield* raw(`${base}/Patient?family=fastsearch&_cursor=AQ.x`)
          expect([changed.status, JSON.parse(changed.body).issue[0].diagnostics]).toEqual([400, "The value of _cursor cannot be used: it was changed, or made for another search: follow the links of the search's own pages"])
          expect(yield* fastSearches(url)).toEqual(before)
        }))

      it.effect.skipIf(backend.kind !== "postgres")("on a Postgres primary answers a search again from memory until a write changes what it finds", () =>
        Effect.gen(function*() {
          const { base, url } = yield* Server
          const cacheOf = Effect.map(call("GET", `${url}/healthz?verbose=1`), (reply) => reply.json.fast_path.search_cache as { hits: number; misses: number; entries: number })
          const system = "urn:test:search-cache"
          const make = (family: string) =>
            Effect.map(call("POST", `${base}/Patient`, { body: { resourceType: "Patient", name: [{ family }], identifier: [{ system, value: family }] } }), (reply) => reply.json.id as string)
          const organization = yield* call("POST", `${base}/Organization`, { body: { resourceType: "Organization", name: "Cachewell" } })
          const first = yield* make("Cachewell")
          const search = `${base}/Patient?identifier=${encodeURIComponent(system + "|")}&_total=accurate`
          const chained = `${base}/Observation?subject:Patient.family=cachewell`
          const ids = (body: string): Array<string> => (JSON.parse(body).entry ?? []).map((entry: any) => entry.resource.id).sort()
          const fresh = yield* raw(search)
          const before = yield* cacheOf
          // The same search again: both statements (the page and the total) come from memory, the answer is the general path's.
          const again = yield* raw(search)
          const general = yield* raw(search, { prefer: "handling=strict" })
          expect((yield* cacheOf).hits - before.hits).toBe(2)
          expect(comparable(again.body)).toEqual(comparable(fresh.body))
          expect(comparable(again.body)).toEqual(comparable(general.body))
          expect(stable(again)).toEqual(stable(general))
          expect(JSON.parse(again.body).id).not.toBe(JSON.parse(fresh.body).id)
          // Each write answered is seen by the next search: a create, an update that no longer matches, a delete.
          const second = yield* make("Cachewell")
          expect(ids((yield* raw(search)).body)).toEqual([first, second].sort())
          expect(JSON.parse((yield* raw(search)).body).total).toBe(2)
          const moved = yield* call("PUT", `${base}/Patient/${second}`, { body: { resourceType: "Patient", id: second, name: [{ family: "Cachewell" }] } })
          expect(moved.status).toBe(200)
          expect(ids((yield* raw(search)).body)).toEqual([first])
          // A chain reads another type: a write to the target shows too.
          const observation = yield* call("POST", `${base}/Observation`, {
            body: { resourceType: "Observation", status: "final", code: { text: "cached" }, subject: { reference: `Patient/${first}` }, performer: [{ reference: `Organization/${organization.json.id}` }] }
          })
          expect(ids((yield* raw(chained)).body)).toEqual([observation.json.id])
          expect(ids((yield* raw(chained)).body)).toEqual([observation.json.id])
          const renamed = yield* call("PUT", `${base}/Patient/${first}`, { body: { resourceType: "Patient", id: first, name: [{ family: "Elsewhere" }], identifier: [{ system, value: "x" }] } })
          expect(renamed.status).toBe(200)
          expect(ids((yield* raw(chained)).body)).toEqual([])
          expect((yield* call("DELETE", `${base}/Patient/${first}`)).status).toBeLessThan(300)
          const none = yield* raw(search)
          expect(JSON.parse(none.body).total).toBe(0)
          expect(comparable(none.body)).toEqual(comparable((yield* raw(search, { prefer: "handling=strict" })).body))
        }))
    })
  })
}
