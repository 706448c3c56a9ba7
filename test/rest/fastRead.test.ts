/**
 * The fast read (src/rest/fastRead.ts on a SQLite file, src/rest/fastPg.ts on Postgres) answers
 * `GET /fhir/{type}/{id}` exactly as the general path does:
 * the same status, headers in the same order, the same bytes and the same request log line. A query string
 * (even an empty one) always takes the general path, so each read is compared with its `?` twin.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { backends } from "../support/backends.ts"
import { call, rawCall, type RawReply, startServer, type TestServer } from "../support/server.ts"

class Server extends Context.Tag("test/Server")<Server, TestServer>() {}

/** One request, keeping the raw header order and the body's bytes. */
const raw = (method: string, url: string, headers: Record<string, string> = {}) =>
  Effect.map(rawCall(method, url, headers), (reply) => ({ ...reply, body: reply.bytes }))

/** Headers that differ between any two answers. */
const varying = new Set(["x-request-id", "date"])
const stable = (reply: RawReply) => reply.headers.filter(([name]) => !varying.has(name))

const requestLines = (lines: ReadonlyArray<string>, requestId: string) =>
  lines.map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line["request_id"] === requestId)

/** How many reads the fast path has answered (undefined where there is none: the in-memory database). */
const fastReads = (url: string) => Effect.map(call("GET", `${url}/healthz?verbose=1`), (reply) => reply.json.fast_path?.reads as number | undefined)

const patient = { resourceType: "Patient", name: [{ family: "Ærøskøbing", given: ["Zoë"] }], birthDate: "1980-02-29" }

for (const backend of backends) {
  describe.skipIf(backend.skip)(`fast read on ${backend.kind}`, () => {
    layer(Layer.scoped(Server, startServer(backend.kind)), { timeout: 60_000, excludeTestServices: true })((it) => {
      it.effect("answers with the same status, headers, bytes and log line as the general path", () =>
        Effect.gen(function*() {
          const { base, lines } = yield* Server
          const created = yield* call("POST", `${base}/Patient`, { body: patient })
          expect(created.status).toBe(201)
          const url = `${base}/Patient/${created.json.id}`
          const serverUrl = (yield* Server).url
          const before = yield* fastReads(serverUrl)
          const fast = yield* raw("GET", url, { "x-request-id": "fast-1" })
          // A SQLite file and Postgres answer it on their fast read; the in-memory database has none.
          const after = yield* fastReads(serverUrl)
          expect(backend.kind === "memory" ? after : after! - before!).toBe(backend.kind === "memory" ? undefined : 1)
          const general = yield* raw("GET", `${url}?`, { "x-request-id": "general-1" })
          expect(yield* fastReads(serverUrl)).toBe(after)
          expect(fast.status).toBe(200)
          expect(fast.body.equals(general.body)).toBe(true)
          expect(fast.body.toString("utf8")).toBe(created.text)
          expect(stable(fast)).toEqual(stable(general))
          expect(fast.headers.map(([name]) => name)).toEqual(general.headers.map(([name]) => name))
          expect(fast.headers).toContainEqual(["x-request-id", "fast-1"])
          expect(fast.headers).toContainEqual(["etag", 'W/"1"'])
          expect(fast.headers).toContainEqual(["content-length", String(Buffer.byteLength(created.text))])

          const [fastLine] = requestLines(lines, "fast-1")
          const [generalLine] = requestLines(lines, "general-1")
          expect(fastLine).toBeDefined()
          expect(Object.keys(fastLine!)).toEqual(Object.keys(generalLine!))
          const { time: _t1, duration_ms: d1, request_id: _r1, ...fastRest } = fastLine!
          const { time: _t2, duration_ms: d2, request_id: _r2, ...generalRest } = generalLine!
          expect(fastRest).toEqual(generalRest)
          expect(fastRest).toMatchObject({ method: "GET", path: `/fhir/Patient/${created.json.id}`, status: 200, bytes: fast.body.length })
          expect(typeof d1).toBe("number")
          expect(typeof d2).toBe("number")
        }))

      it.effect("serves the current version right after each write, and what the general path says after a delete", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const created = yield* call("POST", `${base}/Patient`, { body: patient })
          const url = `${base}/Patient/${created.json.id}`
          const updated = yield* call("PUT", url, { body: { ...patient, id: created.json.id, gender: "other" } })
          expect(updated.status).toBe(200)
          const read = yield* raw("GET", url)
          expect(read.body.toString("utf8")).toBe(updated.text)
          expect(read.headers).toContainEqual(["etag", 'W/"2"'])
          expect((yield* call("DELETE", url)).status).toBe(204)
          const gone = yield* raw("GET", url)
          const goneGeneral = yield* raw("GET", `${url}?`)
          expect(gone.status).toBe(410)
          expect(gone.body.equals(goneGeneral.body)).toBe(true)
        }))

      it.effect("leaves conditional reads, other formats, HEAD, unknown ids and unknown types to the general path", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const created = yield* call("POST", `${base}/Patient`, { body: patient })
          const url = `${base}/Patient/${created.json.id}`
          expect((yield* raw("GET", url, { "if-none-match": 'W/"1"' })).status).toBe(304)
          expect((yield* raw("GET", url, { "if-modified-since": created.headers.get("last-modified")! })).status).toBe(304)
          const xml = yield* raw("GET", url, { accept: "application/fhir+xml" })
          expect(xml.status).toBe(200)
          expect(xml.headers).toContainEqual(["content-type", "application/fhir+xml; charset=utf-8"])
          expect(xml.body.toString("utf8")).toContain("<Patient xmlns=\"http://hl7.org/fhir\"")
          const json = yield* raw("GET", url, { accept: "application/json" })
          expect(json.body.toString("utf8")).toBe(created.text)
          expect((yield* raw("GET", url, { accept: "text/plain" })).status).toBe(406)
          const head = yield* raw("HEAD", url)
          expect(head.status).toBe(200)
          expect(head.body.length).toBe(0)
          const missing = yield* raw("GET", `${base}/Patient/no-such-patient`)
          expect(missing.status).toBe(404)
          expect(JSON.parse(missing.body.toString("utf8")).resourceType).toBe("OperationOutcome")
          const unknownType = yield* raw("GET", `${base}/Unicorn/${created.json.id}`)
          expect(unknownType.status).toBe(404)
          expect(unknownType.body.toString("utf8")).toContain("Unicorn is not a resource type this server knows")
          const badRequestId = yield* raw("GET", url, { "x-request-id": "not a token!" })
          const given = badRequestId.headers.find(([name]) => name === "x-request-id")?.[1]
          expect(given).toMatch(/^[0-9a-f-]{36}$/)
        }))

      it.effect.skipIf(backend.kind !== "postgres")("on a Postgres primary answers reads from memory, which follows every write, $meta-add included", () =>
        Effect.gen(function*() {
          const { base, url: serverUrl } = yield* Server
          const cacheOf = Effect.map(call("GET", `${serverUrl}/healthz?verbose=1`), (reply) => reply.json.fast_path.read_cache as { hits: number; misses: number; entries: number })
          const created = yield* call("POST", `${base}/Patient`, { body: patient })
          const url = `${base}/Patient/${created.json.id}`
          const before = yield* cacheOf
          // The create's commit put it there: both reads are hits, and answer what the database holds.
          const first = yield* raw("GET", url)
          const second = yield* raw("GET", url)
          const general = yield* raw("GET", `${url}?`)
          expect((yield* cacheOf).hits - before.hits).toBe(2)
          expect(first.body.equals(general.body)).toBe(true)
          expect(stable(second)).toEqual(stable(general))
          // A version changed in place: the same versionId and Last-Modified, the new meta.
          const added = yield* call("POST", `${url}/$meta-add`, {
            body: { resourceType: "Parameters", parameter: [{ name: "meta", valueMeta: { tag: [{ system: "http://example.org/tags", code: "cached" }] } }] }
          })
          expect(added.status).toBe(200)
          const edited = yield* raw("GET", url)
          const editedGeneral = yield* raw("GET", `${url}?`)
          expect(edited.body.equals(editedGeneral.body)).toBe(true)
          expect(JSON.parse(edited.body.toString("utf8")).meta.tag).toEqual([{ system: "http://example.org/tags", code: "cached" }])
          expect(stable(edited)).toEqual(stable(editedGeneral))
          // Each write answered is seen by the next read.
          for (let n = 0; n < 5; n++) {
            const updated = yield* call("PUT", url, { body: { ...patient, id: created.json.id, birthDate: `198${n}-01-01` } })
            const read = yield* raw("GET", url)
            expect(read.body.toString("utf8")).toBe(updated.text)
          }
        }))
    })
  })
}
