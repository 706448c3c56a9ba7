/**
 * Paging as a client sees it (docs/search.md, "Paging"): `next` and `previous` links that carry keyset
 * cursors, refused with a 400 when changed; pages bounded in bytes by `server.max_page_bytes` in searches,
 * includes, compartments, `$everything` and history; the limits on a search's size and on `_offset`; and
 * Bundles without empty arrays. On SQLite (file and memory) and Postgres.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { backends } from "../support/backends.ts"
import { call, type Reply, startServer, type TestServer } from "../support/server.ts"

class Server extends Context.Tag("test/PagingRestServer")<Server, TestServer>() {}

/** A page holds this many bytes of resources at most (the resources below are 300 bytes or about 4,000). */
const maxPageBytes = 10_000

/** The paths of the empty arrays in a JSON value (FHIR JSON has none). */
const emptyArrays = (value: unknown, path = "$"): Array<string> => {
  if (Array.isArray(value)) return value.length === 0 ? [path] : value.flatMap((item, i) => emptyArrays(item, `${path}[${i}]`))
  if (typeof value === "object" && value !== null) return Object.entries(value).flatMap(([key, item]) => emptyArrays(item, `${path}.${key}`))
  return []
}

const linkOf = (bundle: any, relation: string): string | undefined => (bundle.link ?? []).find((link: any) => link.relation === relation)?.url
const idsOf = (bundle: any): Array<string> => (bundle.entry ?? []).filter((e: any) => e.search?.mode !== "include").map((e: any) => e.resource.id)

/** Follows `relation` links from `url`: each page's ids, in the order served. */
const follow = (url: string, relation: "next" | "previous") =>
  Effect.gen(function*() {
    const pages: Array<Array<string>> = []
    let at: string | undefined = url
    while (at !== undefined) {
      const reply: Reply = yield* call("GET", at)
      expect([at, reply.status, reply.status === 200 ? "" : reply.text]).toEqual([at, 200, ""])
      pages.push(idsOf(reply.json))
      at = linkOf(reply.json, relation)
      expect(pages.length).toBeLessThan(100)
    }
    return pages
  })

const patient = (family: string, extra: Record<string, unknown> = {}) => ({ resourceType: "Patient", name: [{ family }], ...extra })

/** A Patient of about `bytes` bytes as stored. */
const sized = (family: string, bytes: number) => patient(family, { name: [{ family, given: ["x".repeat(bytes)] }] })

const create = (base: string, body: unknown) =>
  Effect.map(call("POST", `${base}/${(body as { resourceType: string }).resourceType}`, { body }), (reply) => {
    expect([reply.status, reply.status === 201 ? "" : reply.text]).toEqual([201, ""])
    return reply.json
  })

/** A cursor with one character changed. */
const tampered = (url: string): string => {
  const cursor = new URL(url).searchParams.get("_cursor")!
  const at = cursor.indexOf(".") - 2
  const changed = `${cursor.slice(0, at)}${cursor[at] === "A" ? "B" : "A"}${cursor.slice(at + 1)}`
  const out = new URL(url)
  out.searchParams.set("_cursor", changed)
  return out.toString()
}

for (const backend of backends) {
  describe.skipIf(backend.skip)(`paging on ${backend.kind}`, () => {
    layer(Layer.scoped(Server, startServer(backend.kind, { server: { max_page_bytes: maxPageBytes } })), { timeout: 120_000, excludeTestServices: true })((it) => {
      it.effect("writes no empty array: a search without matches, _summary=count, an empty history, compartment, batch and transaction", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const answers: Array<[string, Reply]> = [
            ["search", yield* call("GET", `${base}/Patient?family=nobody-is-called-this`)],
            ["count", yield* call("GET", `${base}/Patient?family=nobody-is-called-this&_summary=count`)],
            ["history", yield* call("GET", `${base}/Patient/_history?_since=2999-01-01`)],
            ["compartment", yield* call("GET", `${base}/Patient/no-such-patient/Observation`)],
            ["system", yield* call("GET", `${base}?_type=Observation&_id=none`)],
            ["batch", yield* call("POST", base, { body: { resourceType: "Bundle", type: "batch" } })],
            ["transaction", yield* call("POST", base, { body: { resourceType: "Bundle", type: "transaction" } })]
          ]
          for (const [name, reply] of answers) {
            expect([name, reply.status, reply.json.resourceType, reply.json.entry, emptyArrays(reply.json)]).toEqual([name, 200, "Bundle", undefined, []])
          }
        }))

      it.effect("shows a JSON Patch, a FHIRPath Patch and a PATCH entry of a transaction as PATCH in history", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const created = yield* create(base, patient("Patched"))
          const jsonPatch = yield* call("PATCH", `${base}/Patient/${created.id}`, {
            body: JSON.stringify([{ op: "add", path: "/gender", value: "female" }]),
            headers: { "content-type": "application/json-patch+json" }
          })
          expect(jsonPatch.status).toBe(200)
          const parameters = {
            resourceType: "Parameters",
            parameter: [{ name: "operation", part: [{ name: "type", valueCode: "replace" }, { name: "path", valueString: "Patient.gender" }, { name: "value", valueCode: "male" }] }]
          }
          expect((yield* call("PATCH", `${base}/Patient/${created.id}`, { body: parameters })).status).toBe(200)
          const transaction = yield* call("POST", base, {
            body: { resourceType: "Bundle", type: "transaction", entry: [{ resource: parameters, request: { method: "PATCH", url: `Patient/${created.id}` } }] }
          })
          expect([transaction.status, transaction.json.entry[0].response.status]).toEqual([200, "200 OK"])
          expect((yield* call("PUT", `${base}/Patient/${created.id}`, { body: { ...patient("Patched"), id: created.id } })).status).toBe(200)
          const history = (yield* call("GET", `${base}/Patient/${created.id}/_history`)).json
          expect(history.entry.map((entry: any) => [entry.request.method, entry.request.url, entry.response.status])).toEqual([
            ["PUT", `Patient/${created.id}`, "200 OK"],
            ["PATCH", `Patient/${created.id}`, "200 OK"],
            ["PATCH", `Patient/${created.id}`, "200 OK"],
            ["PATCH", `Patient/${created.id}`, "200 OK"],
            ["POST", "Patient", "201 Created"]
          ])
        }))

      it.effect("pages by cursors in next links, back by previous links, with _offset still read", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const made: Array<string> = []
          for (let i = 0; i < 11; i++) made.push((yield* create(base, patient("Cursorpaged"))).id)
          const forward = yield* follow(`${base}/Patient?family=cursorpaged&_count=3`, "next")
          expect(forward.map((page) => page.length)).toEqual([3, 3, 3, 2])
          expect(forward.flat()).toEqual(made)
          const first = (yield* call("GET", `${base}/Patient?family=cursorpaged&_count=3`)).json
          expect(linkOf(first, "next")).toMatch(/[?&]_cursor=[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+/)
          expect(linkOf(first, "next")).not.toContain("_offset")
          expect(linkOf(first, "previous")).toBeUndefined()
          // From the last page back to the first, page by page.
          let last = first
          while (linkOf(last, "next") !== undefined) last = (yield* call("GET", linkOf(last, "next")!)).json
          expect(linkOf(last, "self")).toContain("_cursor=")
          const backward = yield* follow(linkOf(last, "self")!, "previous")
          expect(backward.reverse()).toEqual(forward)
          // _offset keeps working, and its page leads on by cursors.
          const offset = (yield* call("GET", `${base}/Patient?family=cursorpaged&_count=3&_offset=4`)).json
          expect(idsOf(offset)).toEqual(made.slice(4, 7))
          expect(linkOf(offset, "self")).toContain("_offset=4")
          expect(idsOf((yield* call("GET", linkOf(offset, "next")!)).json)).toEqual(made.slice(7, 10))
          expect(idsOf((yield* call("GET", linkOf(offset, "previous")!)).json)).toEqual(made.slice(1, 4))
        }))

      it.effect("pages forward and back alike when the page is read from one index range or from a chain's targets", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const [first, second] = [yield* create(base, patient("Chainpaged")), yield* create(base, patient("Chainpaged"))]
          const observations: Array<{ readonly id: string; readonly subject: string }> = []
          for (let i = 0; i < 11; i++) {
            const subject = i % 3 === 0 ? second.id : first.id
            const made = yield* create(base, { resourceType: "Observation", status: "final", code: { text: "chain" }, subject: { reference: `Patient/${subject}` } })
            observations.push({ id: made.id, subject })
          }
          const identified: Array<string> = []
          for (let i = 0; i < 7; i++) identified.push((yield* create(base, patient("Orderedpaged", { identifier: [{ system: "urn:test:ordered", value: "same" }] }))).id)
          const cases: Array<[string, ReadonlyArray<string>]> = [
            [`Observation?subject.family=chainpaged&_count=3`, observations.map((o) => o.id)],
            [`Observation?subject=Patient/${first.id}&_count=2`, observations.filter((o) => o.subject === first.id).map((o) => o.id)],
            [`Patient?identifier=${encodeURIComponent("urn:test:ordered|same")}&_count=3`, identified]
          ]
          for (const [search, expected] of cases) {
            const forward = yield* follow(`${base}/${search}`, "next")
            expect([search, forward.flat()]).toEqual([search, expected])
            let last = (yield* call("GET", `${base}/${search}`)).json
            while (linkOf(last, "next") !== undefined) last = (yield* call("GET", linkOf(last, "next")!)).json
            const backward = yield* follow(linkOf(last, "self")!, "previous")
            expect([search, backward.reverse()]).toEqual([search, forward])
          }
        }))

      it.effect("pages a _sort by cursors, ties and missing values included, as one page of all orders them", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          // Genders and identifiers with ties and gaps (the stand-in packages have no other sortable parameters).
          const genders = ["female", "male", undefined, "female", "other", undefined, "male", "female", "female"]
          for (const [i, gender] of genders.entries()) {
            const identifier = i % 3 === 0 ? [] : [{ system: "urn:test:sort", value: `v${i % 4}` }]
            yield* create(base, patient("Sortpaged", { ...(gender === undefined ? {} : { gender }), ...(identifier.length === 0 ? {} : { identifier }) }))
          }
          for (const sort of ["gender", "-gender", "gender,-identifier", "-identifier,-gender", "-_lastUpdated", "_id"]) {
            const whole = idsOf((yield* call("GET", `${base}/Patient?family=sortpaged&_sort=${sort}&_count=100`)).json)
            expect(whole.length).toBe(genders.length)
            const pages = yield* follow(`${base}/Patient?family=sortpaged&_sort=${sort}&_count=2`, "next")
            expect([sort, pages.flat()]).toEqual([sort, whole])
            const lastPage = (yield* call("GET", `${base}/Patient?family=sortpaged&_sort=${sort}&_count=2&_offset=8`)).json
            const back = yield* follow(linkOf(lastPage, "self")!, "previous")
            expect([sort, back.reverse().flat()]).toEqual([sort, whole])
          }
        }))

      it.effect("refuses a changed, malformed or borrowed cursor, and a cursor with _offset, with a 400", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          for (let i = 0; i < 3; i++) yield* create(base, patient("Cursorchecked"))
          const next = linkOf((yield* call("GET", `${base}/Patient?family=cursorchecked&_count=1`)).json, "next")!
          expect((yield* call("GET", next)).status).toBe(200)
          const borrowed = next.replace("family=cursorchecked", "family=cursorcheckedx")
          const cases: Array<[string, string]> = [
            [tampered(next), "it was changed, or made for another search"],
            [borrowed, "it was changed, or made for another search"],
            [`${base}/Patient?family=cursorchecked&_cursor=not-a-cursor`, "it is not a cursor this server made"],
            [`${base}/Patient?family=cursorchecked&_cursor=${"A".repeat(5000)}.x`, "it is not a cursor this server made"],
            [`${next}&_offset=1`, "_cursor and _offset cannot be used together"],
            [next.replace("_count=1", "_count=1&_sort=family"), "it was changed, or made for another search"]
          ]
          for (const [url, message] of cases) {
            const reply = yield* call("GET", url)
            expect([url, reply.status, reply.json.resourceType]).toEqual([url, 400, "OperationOutcome"])
            expect(reply.json.issue[0].diagnostics).toContain(message)
          }
        }))

      it.effect("bounds a page in bytes: fewer matches and a next link, a resource bigger than the bound alone", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const made: Array<string> = []
          for (const bytes of [4000, 4000, 4000, 300, 300, 15_000, 300]) made.push((yield* create(base, sized("Bytebound", bytes))).id)
          const sizes = new Map<string, number>()
          for (const id of made) sizes.set(id, Buffer.byteLength((yield* call("GET", `${base}/Patient/${id}`)).text))
          // The rule: each page takes resources in order while they add up to the bound, and at least one.
          const expected = (ids: ReadonlyArray<string>) => {
            const pages: Array<Array<string>> = []
            let page: Array<string> = []
            let bytes = 0
            for (const id of ids) {
              if (page.length > 0 && bytes + sizes.get(id)! > maxPageBytes) {
                pages.push(page)
                page = []
                bytes = 0
              }
              page.push(id)
              bytes += sizes.get(id)!
            }
            return [...pages, page]
          }
          const pages = yield* follow(`${base}/Patient?family=bytebound&_count=10`, "next")
          expect(pages).toEqual(expected(made))
          // The general path (a Prefer header) bounds it alike: on SQLite the fast search answered the above.
          const strict = (yield* call("GET", `${base}/Patient?family=bytebound&_count=10`, { headers: { prefer: "handling=strict" } })).json
          expect([idsOf(strict), linkOf(strict, "next")]).toEqual([pages[0], linkOf((yield* call("GET", `${base}/Patient?family=bytebound&_count=10`)).json, "next")])
          expect(pages.length).toBeGreaterThanOrEqual(4)
          expect(pages).toContainEqual([made[5]])
          const page = yield* call("GET", `${base}/Patient?family=bytebound&_count=10&_total=accurate`)
          expect(page.json.total).toBe(7)
          expect(page.text.length).toBeLessThan(maxPageBytes + 2000)
          // Sorted, by _offset, and across types, the same bound.
          expect(yield* follow(`${base}/Patient?family=bytebound&_count=10&_sort=-_lastUpdated`, "next")).toEqual(expected([...made].reverse()))
          expect(idsOf((yield* call("GET", `${base}/Patient?family=bytebound&_count=10&_offset=1`)).json)).toEqual(expected(made.slice(1))[0])
          expect(yield* follow(`${base}?_type=Patient&_id=${made.join(",")}&_count=10`, "next")).toEqual(expected(made))
          // So is a compartment search: the Observations of one Patient.
          const subject = yield* create(base, patient("Boundcompartment"))
          const observations: Array<string> = []
          for (let i = 0; i < 3; i++) {
            observations.push((yield* create(base, { resourceType: "Observation", status: "final", code: { text: "y".repeat(4000) }, subject: { reference: `Patient/${subject.id}` } })).id)
          }
          const members = yield* follow(`${base}/Patient/${subject.id}/Observation?_count=10`, "next")
          expect(members).toEqual([observations.slice(0, 2), observations.slice(2)])
        }))

      it.effect("counts _include and _revinclude against the bound, and refuses what one match alone cannot carry", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const observations: Array<string> = []
          const subjects: Array<string> = []
          for (let i = 0; i < 4; i++) {
            const subject = yield* create(base, sized("Included", 3500))
            subjects.push(subject.id)
            observations.push((yield* create(base, {
              resourceType: "Observation",
              status: "final",
              code: { text: "bound" },
              subject: { reference: `Patient/${subject.id}` }
            })).id)
          }
          const url = `${base}/Observation?_id=${observations.join(",")}&_include=Observation:subject&_count=10`
          const pages: Array<any> = []
          let next: string | undefined = url
          while (next !== undefined) {
            const reply: Reply = yield* call("GET", next)
            expect(reply.status).toBe(200)
            pages.push(reply.json)
            next = linkOf(reply.json, "next")
          }
          // Two Observations (a few hundred bytes each) with their 3,500-byte Patients fill a page of 10,000 bytes.
          expect(pages.map(idsOf)).toEqual([observations.slice(0, 2), observations.slice(2, 4)])
          expect(pages.map((page) => page.entry.filter((e: any) => e.search.mode === "include").map((e: any) => e.resource.id)))
            .toEqual([subjects.slice(0, 2), subjects.slice(2, 4)])
          // A Patient whose Observations outweigh the bound, all but the largest: too costly for one page.
          const heavy = yield* create(base, patient("Heavyincluded"))
          for (let i = 0; i < 4; i++) {
            yield* create(base, { resourceType: "Observation", status: "final", code: { text: "x".repeat(4000) }, subject: { reference: `Patient/${heavy.id}` } })
          }
          const refused = yield* call("GET", `${base}/Patient?_id=${heavy.id}&_revinclude=Observation:subject`)
          expect([refused.status, refused.json.issue?.[0]?.code]).toEqual([400, "too-costly"])
          expect(refused.json.issue[0].diagnostics).toContain("server.max_page_bytes")
        }))

      it.effect("bounds history and $everything pages in bytes, and pages history by cursors", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const subject = yield* create(base, sized("Historybound", 300))
          for (let i = 0; i < 4; i++) {
            const body = { ...sized("Historybound", i % 2 === 0 ? 5000 : 300), id: subject.id }
            expect((yield* call("PUT", `${base}/Patient/${subject.id}`, { body })).status).toBe(200)
          }
          // Newest first: 300, 5000, 300, 5000, 300 bytes (and meta).
          const pages = yield* follow(`${base}/Patient/${subject.id}/_history?_count=10`, "next")
          expect(pages.map((ids) => ids.length)).toEqual([3, 2])
          const first = (yield* call("GET", `${base}/Patient/${subject.id}/_history?_count=2`)).json
          expect(first.total).toBe(5)
          expect(linkOf(first, "next")).toContain("_cursor=")
          const versions = (bundle: any) => bundle.entry.map((e: any) => e.resource.meta.versionId)
          const second = (yield* call("GET", linkOf(first, "next")!)).json
          expect([versions(first), versions(second)]).toEqual([["5", "4"], ["3", "2"]])
          expect(versions((yield* call("GET", linkOf(second, "previous")!)).json)).toEqual(["5", "4"])
          expect((yield* call("GET", tampered(linkOf(first, "next")!))).status).toBe(400)

          for (let i = 0; i < 3; i++) {
            yield* create(base, { resourceType: "Observation", status: "final", code: { text: "x".repeat(4000) }, subject: { reference: `Patient/${subject.id}` } })
          }
          const everything = yield* follow(`${base}/Patient/${subject.id}/$everything?_count=10`, "next")
          expect(everything.map((ids) => ids.length)).toEqual([3, 1])
        }))

      it.effect("refuses a search of too many parameters or alternatives, and an _offset past the largest, with a 400", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const repeated = Array.from({ length: 1000 }, (_, i) => `family=f${i}`).join("&")
          const wide = Array.from({ length: 6 }, () => `_id=${Array.from({ length: 1000 }, (_, i) => `id${i}`).join(",")}`).join("&")
          const cases: Array<[string, string]> = [
            [`Patient?${repeated}`, "The search has 1000 parameters; at most 100 are allowed"],
            [`Patient?${Array.from({ length: 101 }, () => "gender=female").join("&")}`, "at most 100 are allowed"],
            [`Patient?${wide}`, "6000 comma-separated alternatives in all; at most 5000 are allowed"],
            ["Patient?_offset=1000001", "at most 1000000"],
            ["Patient?_offset=9223372036854775806", "at most 1000000"],
            ["_history?_offset=9223372036854775806", "at most 1000000"],
            ["Patient/_history?_offset=1000001", "at most 1000000"],
            ["_history?_until=99999999999999999999", "_until"],
            ["Patient/x/$everything?_offset=9223372036854775806", "at most 1000000"],
            ["Patient?_count=-1", "non-negative integer"],
            ["_history?_count=1.5", "non-negative integer"]
          ]
          for (const [path, message] of cases) {
            const reply = path.length > 4000
              ? yield* call("POST", `${base}/${path.split("?")[0]}/_search`, { body: path.split("?")[1], headers: { "content-type": "application/x-www-form-urlencoded" } })
              : yield* call("GET", `${base}/${path}`)
            expect([path.slice(0, 80), reply.status, reply.json?.resourceType]).toEqual([path.slice(0, 80), 400, "OperationOutcome"])
            expect(reply.json.issue[0].diagnostics).toContain(message)
          }
          // The largest _offset, and a _count of any size (read as 1000), are answered.
          for (const path of ["Patient?_offset=1000000", "Patient?_count=99999999999999999999", "_history?_offset=1000000&_count=99999999999999999999"]) {
            expect([path, (yield* call("GET", `${base}/${path}`)).status]).toEqual([path, 200])
          }
        }))
    })
  })
}
