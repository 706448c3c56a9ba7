/**
 * `_include` and `_revinclude` as a client sees them (https://hl7.org/fhir/R4/search.html#include, the spec's
 * Search rules 7-9), over HTTP on SQLite and Postgres. The servers install the real R4 packages (the
 * reference parameters are R4 core's). Each test marks its resources with its own identifier system, so
 * the tests share one server per backend without seeing each other's data.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { randomUUID } from "node:crypto"
import { type BackendKind, pgAvailable } from "../support/backends.ts"
import { realPackageCache, registryUrl, skipRealPackages } from "../support/npmRegistry.ts"
import { call, startServer, type TestServer } from "../support/server.ts"

class Server extends Context.Tag("test/IncludeServer")<Server, TestServer>() {}

const identifier = (system: string) => [{ system: `urn:include:${system}`, value: "1" }]
const of = (system: string) => `identifier=${encodeURIComponent(`urn:include:${system}|1`)}`

/** A resource created on the server, as `Type/id`. */
const create = (system: string, resource: Record<string, unknown>) =>
  Effect.gen(function*() {
    const { base } = yield* Server
    const type = String(resource["resourceType"])
    const reply = yield* call("POST", `${base}/${type}`, { body: { identifier: identifier(system), ...resource } })
    expect([reply.status, reply.text.slice(0, 300)]).toEqual([201, reply.text.slice(0, 300)])
    return `${type}/${reply.json.id as string}`
  })

const update = (reference: string, resource: Record<string, unknown>) =>
  Effect.gen(function*() {
    const { base } = yield* Server
    const [type, id] = reference.split("/")
    const reply = yield* call("PUT", `${base}/${reference}`, { body: { resourceType: type, id, ...resource } })
    expect([reply.status, reply.text.slice(0, 300)]).toEqual([200, reply.text.slice(0, 300)])
  })

const remove = (reference: string) =>
  Effect.gen(function*() {
    const { base } = yield* Server
    const reply = yield* call("DELETE", `${base}/${reference}`)
    expect([reference, reply.status < 300]).toEqual([reference, true])
  })

/** A searchset Bundle of `path` (relative to the base, or absolute), asserting a 200. */
const search = (path: string) =>
  Effect.gen(function*() {
    const { base } = yield* Server
    const url = path.startsWith("http") ? path : `${base}/${path}`
    const reply = yield* call("GET", url)
    expect([path, reply.status, reply.text.slice(0, 300)]).toEqual([path, 200, reply.text.slice(0, 300)])
    return reply.json
  })

const ref = (resource: any) => `${resource.resourceType}/${resource.id}`
/** The `Type/id` of the entries of one mode, in the Bundle's order. */
const mode = (bundle: any, which: "match" | "include") =>
  (bundle.entry ?? []).filter((entry: any) => entry.search?.mode === which).map((entry: any) => ref(entry.resource))
const sorted = (refs: ReadonlyArray<string>) => [...refs].sort()
/** The sorted includes of a search. */
const includes = (path: string) => Effect.map(search(path), (bundle) => sorted(mode(bundle, "include")))

const backendsUnderTest: ReadonlyArray<{ readonly kind: BackendKind; readonly skip: boolean }> = [
  { kind: "sqlite", skip: false },
  { kind: "postgres", skip: !pgAvailable }
]

for (const backend of backendsUnderTest) {
  describe.skipIf(skipRealPackages || backend.skip)(`_include and _revinclude on ${backend.kind} (R4 catalog)`, () => {
    layer(
      Layer.scoped(Server, startServer(backend.kind, { conformance: { package_registry: registryUrl ?? "", package_cache: realPackageCache } })),
      { timeout: 300_000, excludeTestServices: true }
    )((it) => {
      it.effect("includes what the matches refer to, of one target type when given, through every reference with *, and what refers to them", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const s = "basic"
          const org = yield* create(s, { resourceType: "Organization", name: "Acme" })
          const doc = yield* create(s, { resourceType: "Practitioner" })
          const pat = yield* create(s, { resourceType: "Patient", managingOrganization: { reference: org }, generalPractitioner: [{ reference: doc }] })
          const observation = (performer: string) =>
            create(s, { resourceType: "Observation", status: "final", code: { text: "x" }, subject: { reference: pat }, performer: [{ reference: performer }] })
          const o1 = yield* observation(doc)
          const o2 = yield* observation(org)

          const performers = yield* search(`Observation?${of(s)}&_include=Observation:performer`)
          expect(sorted(mode(performers, "match"))).toEqual(sorted([o1, o2]))
          expect(sorted(mode(performers, "include"))).toEqual(sorted([doc, org]))
          // The matches come first; an include entry has its fullUrl and the whole resource.
          expect(performers.entry.map((entry: any) => entry.search.mode)).toEqual(["match", "match", "include", "include"])
          const included = performers.entry.find((entry: any) => ref(entry.resource) === org)
          expect(included.fullUrl).toBe(`${base}/${org}`)
          expect(included.resource.name).toBe("Acme")

          expect(yield* includes(`Observation?${of(s)}&_include=Observation:performer:Practitioner`)).toEqual([doc])
          // Both observations refer to the patient: it is included once.
          expect(yield* includes(`Observation?${of(s)}&_include=Observation:subject`)).toEqual([pat])
          expect(yield* includes(`Observation?${of(s)}&_include=*`)).toEqual(sorted([pat, doc, org]))
          expect(yield* includes(`Observation?${of(s)}&_include=Patient:organization`)).toEqual([])

          const [, patId] = pat.split("/")
          expect(yield* includes(`Patient?_id=${patId}&_revinclude=Observation:subject`)).toEqual(sorted([o1, o2]))
          const both = yield* search(`Patient?_id=${patId}&_include=Patient:organization&_revinclude=Observation:subject`)
          expect(mode(both, "match")).toEqual([pat])
          expect(sorted(mode(both, "include"))).toEqual(sorted([org, o1, o2]))
          expect(yield* includes(`Practitioner?${of(s)}&_revinclude=Observation:performer&_revinclude=Patient:general-practitioner`)).toEqual(sorted([o1, pat]))

          // A plain rule applies to the matches only; with :iterate it applies to what was included too.
          expect(yield* includes(`Observation?${of(s)}&_include=Observation:subject&_include=Patient:general-practitioner`)).toEqual([pat])
          expect(yield* includes(`Observation?${of(s)}&_include=Observation:subject&_include:iterate=Patient:general-practitioner`)).toEqual(sorted([pat, doc]))
        }))

      it.effect("shapes only the matches with _elements, and adds nothing with _summary=count", () =>
        Effect.gen(function*() {
          const s = "shape"
          const pat = yield* create(s, { resourceType: "Patient", gender: "female", birthDate: "1970-01-01" })
          yield* create(s, { resourceType: "Observation", status: "final", code: { text: "x" }, subject: { reference: pat } })
          const shaped = yield* search(`Observation?${of(s)}&_include=Observation:subject&_elements=status`)
          const [match, include] = shaped.entry
          expect(match.search.mode).toBe("match")
          expect(match.resource.subject).toBeUndefined()
          expect(match.resource.meta.tag).toContainEqual(expect.objectContaining({ code: "SUBSETTED" }))
          expect(include.search.mode).toBe("include")
          expect(include.resource.birthDate).toBe("1970-01-01")
          expect(include.resource.meta.tag).toBeUndefined()
          const counted = yield* search(`Observation?${of(s)}&_include=Observation:subject&_summary=count`)
          expect(counted.total).toBe(1)
          expect(counted.entry ?? []).toEqual([])
        }))

      it.effect(":iterate follows a reference cycle to its end and adds each resource once, never the match", () =>
        Effect.gen(function*() {
          const s = "cycle"
          // a -> c -> b -> a through Organization.partOf.
          const a = yield* create(s, { resourceType: "Organization", name: "a" })
          const b = yield* create(s, { resourceType: "Organization", name: "b", partOf: { reference: a } })
          const c = yield* create(s, { resourceType: "Organization", name: "c", partOf: { reference: b } })
          yield* update(a, { identifier: identifier(s), name: "a", partOf: { reference: c } })
          const [, aId] = a.split("/")
          const iterated = yield* search(`Organization?_id=${aId}&_include:iterate=Organization:partof`)
          expect(mode(iterated, "match")).toEqual([a])
          expect(mode(iterated, "include")).toEqual([c, b])
          expect(mode(yield* search(`Organization?_id=${aId}&_revinclude:iterate=Organization:partof`), "include")).toEqual([b, c])
          expect(yield* includes(`Organization?_id=${aId}&_include:iterate=Organization:partof&_revinclude:iterate=Organization:partof`)).toEqual(sorted([b, c]))
          expect(yield* includes(`Organization?_id=${aId}&_include=Organization:partof`)).toEqual([c])
          expect(yield* includes(`Organization?_id=${aId}&_include:iterate=*`)).toEqual(sorted([b, c]))
        }))

      it.effect("a match that another match refers to appears once, as a match", () =>
        Effect.gen(function*() {
          const s = "matched"
          const p2 = yield* create(s, { resourceType: "Patient" })
          const p1 = yield* create(s, { resourceType: "Patient", link: [{ other: { reference: p2 }, type: "seealso" }] })
          const linked = yield* search(`Patient?${of(s)}&_include=Patient:link&_revinclude=Patient:link`)
          expect(sorted(mode(linked, "match"))).toEqual(sorted([p1, p2]))
          expect(mode(linked, "include")).toEqual([])
          const member = yield* create(s, { resourceType: "Observation", status: "final", code: { text: "member" } })
          const panel = yield* create(s, { resourceType: "Observation", status: "final", code: { text: "panel" }, hasMember: [{ reference: member }] })
          const panels = yield* search(`Observation?${of(s)}&_include:iterate=Observation:has-member&_revinclude=Observation:has-member`)
          expect(sorted(mode(panels, "match"))).toEqual(sorted([member, panel]))
          expect(mode(panels, "include")).toEqual([])
          expect(panels.entry.length).toBe(2)
        }))

      it.effect("each page carries the includes of its own matches, and the links keep the rules", () =>
        Effect.gen(function*() {
          const s = "pages"
          const p1 = yield* create(s, { resourceType: "Patient" })
          const p2 = yield* create(s, { resourceType: "Patient" })
          const observation = (subject: string) => create(s, { resourceType: "Observation", status: "final", code: { text: "x" }, subject: { reference: subject } })
          const o1 = yield* observation(p1)
          const o2 = yield* observation(p2)
          const o3 = yield* observation(p1)
          const first = yield* search(`Observation?${of(s)}&_include=Observation:subject&_count=2`)
          expect(mode(first, "match")).toEqual([o1, o2])
          expect(sorted(mode(first, "include"))).toEqual(sorted([p1, p2]))
          const next = first.link.find((link: any) => link.relation === "next").url as string
          expect(decodeURIComponent(next)).toContain("_include=Observation:subject")
          const second = yield* search(next)
          expect(mode(second, "match")).toEqual([o3])
          expect(mode(second, "include")).toEqual([p1])
          expect(second.link.find((link: any) => link.relation === "next")).toBeUndefined()
        }))

      it.effect("leaves out deleted targets and deleted referrers", () =>
        Effect.gen(function*() {
          const s = "deleted"
          const kept = yield* create(s, { resourceType: "Patient" })
          const gone = yield* create(s, { resourceType: "Patient" })
          const o = yield* create(s, { resourceType: "Observation", status: "final", code: { text: "x" }, subject: { reference: kept }, performer: [{ reference: gone }] })
          const dropped = yield* create(s, { resourceType: "Observation", status: "final", code: { text: "y" }, subject: { reference: kept } })
          expect(yield* includes(`Observation?${of(s)}&_include=*`)).toEqual(sorted([kept, gone]))
          yield* remove(gone)
          yield* remove(dropped)
          expect(yield* includes(`Observation?${of(s)}&_include=*`)).toEqual([kept])
          expect(yield* includes(`Observation?${of(s)}&_include=Observation:performer`)).toEqual([])
          const [, keptId] = kept.split("/")
          expect(yield* includes(`Patient?_id=${keptId}&_revinclude=Observation:subject`)).toEqual([o])
        }))

      it.effect("more than 1000 resources added by :iterate is a 400 naming the problem; 1000 is served", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const s = "cap"
          // Organization 0 is part of 1, 1 of 2, ... 1000 of 1001: one transaction.
          const urls = Array.from({ length: 1002 }, () => `urn:uuid:${randomUUID()}`)
          const entry = urls.map((fullUrl, i) => ({
            fullUrl,
            resource: { resourceType: "Organization", identifier: identifier(s), name: `org ${i}`, ...(i + 1 < urls.length ? { partOf: { reference: urls[i + 1] } } : {}) },
            request: { method: "POST", url: "Organization" }
          }))
          const committed = yield* call("POST", base, { body: { resourceType: "Bundle", type: "transaction", entry } })
          expect([committed.status, committed.text.slice(0, 300)]).toEqual([200, committed.text.slice(0, 300)])
          const ids = committed.json.entry.map((e: any) => /^(?:.*\/)?Organization\/([^/]+)\/_history/.exec(e.response.location)![1] as string)

          const within = yield* search(`Organization?_id=${ids[1]}&_include:iterate=Organization:partof&_count=1`)
          expect(mode(within, "include").length).toBe(1000)
          expect(new Set(mode(within, "include")).size).toBe(1000)
          const refused = yield* call("GET", `${base}/Organization?_id=${ids[0]}&_include:iterate=Organization:partof`)
          expect(refused.status).toBe(400)
          expect(refused.json.resourceType).toBe("OperationOutcome")
          expect(refused.json.issue[0].diagnostics).toContain("_include:iterate and _revinclude:iterate would add more than 1000 resources")
          const backwards = yield* call("GET", `${base}/Organization?_id=${ids[1001]}&_revinclude:iterate=Organization:partof`)
          expect(backwards.status).toBe(400)
          // Without :iterate the same rule adds one.
          expect(yield* includes(`Organization?_id=${ids[0]}&_include=Organization:partof`)).toEqual([`Organization/${ids[1]}`])
        }), 300_000)

      it.effect("_revinclude=* is a 400 naming the problem", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          for (const key of ["_revinclude", "_revinclude:iterate"]) {
            const reply = yield* call("GET", `${base}/Patient?${key}=*`)
            expect(reply.status).toBe(400)
            expect(reply.json.issue[0].diagnostics).toContain(`${key}=* is not supported`)
          }
          const unknown = yield* call("GET", `${base}/Patient?_include=Patient:nonsense`)
          expect(unknown.status).toBe(400)
          expect(unknown.json.issue[0].diagnostics).toContain("_include")
        }))

      it.effect("a search inside a batch carries its includes", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const s = "batch"
          const pat = yield* create(s, { resourceType: "Patient" })
          const o = yield* create(s, { resourceType: "Observation", status: "final", code: { text: "x" }, subject: { reference: pat } })
          const reply = yield* call("POST", base, {
            body: { resourceType: "Bundle", type: "batch", entry: [{ request: { method: "GET", url: `Observation?${of(s)}&_include=Observation:subject` } }] }
          })
          expect(reply.status).toBe(200)
          const searchset = reply.json.entry[0].resource
          expect(mode(searchset, "match")).toEqual([o])
          expect(mode(searchset, "include")).toEqual([pat])
        }))

      it.effect("the CapabilityStatement lists each type's searchInclude and searchRevInclude", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const metadata = yield* call("GET", `${base}/metadata`)
          const resource = (type: string) => metadata.json.rest[0].resource.find((r: any) => r.type === type)
          expect(resource("Observation").searchInclude).toEqual(expect.arrayContaining(["*", "Observation:subject", "Observation:has-member"]))
          expect(resource("Patient").searchRevInclude).toEqual(expect.arrayContaining(["Observation:subject", "Encounter:patient", "Patient:link"]))
          expect(resource("Patient").searchRevInclude).not.toContain("Organization:partof")
          expect(resource("Organization").searchRevInclude).toContain("Organization:partof")
        }))
    })
  })
}
