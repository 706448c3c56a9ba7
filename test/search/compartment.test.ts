/**
 * Compartment search (`[base]/{Compartment}/{id}/{type}` and `/*`) and search across types
 * (`[base]?_type=...`) over HTTP on SQLite and Postgres, with the real R4 packages (the compartment
 * definitions and search parameters are R4 core's). Each test marks its resources with its own tag, so
 * the tests share one server per backend without seeing each other's data.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { type BackendKind, pgAvailable } from "../support/backends.ts"
import { realPackageCache, registryUrl, skipRealPackages } from "../support/npmRegistry.ts"
import { call, type Reply, startServer, type TestServer } from "../support/server.ts"

class Server extends Context.Tag("test/CompartmentServer")<Server, TestServer>() {}

const tagSystem = "urn:compartment-test"
const tagged = (tag: string) => ({ meta: { tag: [{ system: tagSystem, code: tag }] } })
const tagQuery = (tag: string) => `_tag=${encodeURIComponent(`${tagSystem}|${tag}`)}`

/** A resource created on the server, as the server answered it. */
const create = (resource: Record<string, unknown>) =>
  Effect.gen(function*() {
    const { base } = yield* Server
    const reply = yield* call("POST", `${base}/${String(resource["resourceType"])}`, { body: resource })
    expect([reply.status, reply.text.slice(0, 300)]).toEqual([201, reply.text.slice(0, 300)])
    return reply.json
  })

/** The reply to `path` (relative to the base). */
const get = (path: string) => Effect.flatMap(Server, ({ base }) => call("GET", `${base}/${path}`))

/** `Type/id` of every match of a searchset, sorted. */
const refs = (bundle: any): Array<string> =>
  (bundle.entry ?? []).filter((e: any) => e.search.mode === "match").map((e: any) => `${e.resource.resourceType}/${e.resource.id}`).sort()

/** The matches of `path`, a 200 searchset. */
const found = (path: string) =>
  Effect.gen(function*() {
    const reply = yield* get(path)
    expect([path, reply.status, reply.status === 200 ? "" : reply.text.slice(0, 300)]).toEqual([path, 200, ""])
    expect(reply.json.type).toBe("searchset")
    return refs(reply.json)
  })

/** Every match of `path` following `next` links from the first page; asserts each link stays on `prefix`. */
const pagedThrough = (path: string, prefix: string) =>
  Effect.gen(function*() {
    const { base } = yield* Server
    const seen: Array<string> = []
    let next: string | undefined = `${base}/${path}`
    let pages = 0
    while (next !== undefined) {
      const reply: Reply = yield* call("GET", next)
      expect([next, reply.status]).toEqual([next, 200])
      for (const link of reply.json.link) expect(link.url.startsWith(`${base}/${prefix}?`) || link.url.startsWith(`${base}${prefix}?`)).toBe(true)
      seen.push(...refs(reply.json))
      next = reply.json.link.find((link: any) => link.relation === "next")?.url
      pages++
      expect(pages).toBeLessThan(50)
    }
    return { seen, pages }
  })

const ref = (resource: any) => `${resource.resourceType}/${resource.id}`

const backendsUnderTest: ReadonlyArray<{ readonly kind: BackendKind; readonly skip: boolean }> = [
  { kind: "sqlite", skip: false },
  { kind: "postgres", skip: !pgAvailable }
]

for (const backend of backendsUnderTest) {
  describe.skipIf(skipRealPackages || backend.skip)(`compartments and search across types on ${backend.kind}`, () => {
    layer(
      Layer.scoped(Server, startServer(backend.kind, { conformance: { package_registry: registryUrl ?? "", package_cache: realPackageCache } })),
      { timeout: 600_000, excludeTestServices: true }
    )((it) => {
      it.effect("searches a patient's compartment by type, with parameters, and the practitioner's by performer", () =>
        Effect.gen(function*() {
          const tag = tagged("by-type")
          const a = yield* create({ resourceType: "Patient", ...tag })
          const b = yield* create({ resourceType: "Patient", ...tag })
          const doctor = yield* create({ resourceType: "Practitioner", ...tag })
          const observation = (patient: any, code: string, extra: Record<string, unknown> = {}) =>
            create({ resourceType: "Observation", ...tag, status: "final", code: { coding: [{ system: "http://loinc.org", code }] }, subject: { reference: ref(patient) }, ...extra })
          const a1 = yield* observation(a, "8302-2")
          const a2 = yield* observation(a, "29463-7", { performer: [{ reference: ref(doctor) }] })
          const b1 = yield* observation(b, "8302-2")
          const condition = yield* create({ resourceType: "Condition", ...tag, subject: { reference: ref(a) }, code: { text: "x" } })

          expect(yield* found(`Patient/${a.id}/Observation`)).toEqual([ref(a1), ref(a2)].sort())
          expect(yield* found(`Patient/${a.id}/Observation?code=8302-2`)).toEqual([ref(a1)])
          expect(yield* found(`Patient/${a.id}/Observation?code=http://loinc.org|29463-7&status=final`)).toEqual([ref(a2)])
          expect(yield* found(`Patient/${b.id}/Observation`)).toEqual([ref(b1)])
          expect(yield* found(`Patient/${a.id}/Condition`)).toEqual([ref(condition)])
          // The focal resource is in its own compartment.
          expect(yield* found(`Patient/${a.id}/Patient`)).toEqual([ref(a)])
          expect(yield* found(`Practitioner/${doctor.id}/Observation`)).toEqual([ref(a2)])
          // An unknown patient has an empty compartment.
          expect(yield* found("Patient/no-such-patient/Observation")).toEqual([])
          // Counting and the entries' fullUrls.
          const counted = yield* get(`Patient/${a.id}/Observation?_summary=count`)
          expect(counted.json.total).toBe(2)
          const { base } = yield* Server
          const bundle = (yield* get(`Patient/${a.id}/Condition`)).json
          expect(bundle.entry[0].fullUrl).toBe(`${base}/${ref(condition)}`)
          const posted = yield* call("POST", `${base}/Patient/${a.id}/Observation/_search`, {
            body: "code=8302-2",
            headers: { "content-type": "application/x-www-form-urlencoded" }
          })
          expect([posted.status, refs(posted.json)]).toEqual([200, [ref(a1)]])
        }))

      it.effect("refuses a type outside the compartment, an unknown type or compartment, and an unknown parameter", () =>
        Effect.gen(function*() {
          const a = yield* create({ resourceType: "Patient", ...tagged("refusals") })
          const outside = yield* get(`Patient/${a.id}/Organization`)
          expect(outside.status).toBe(400)
          expect(outside.json.resourceType).toBe("OperationOutcome")
          expect(outside.json.issue[0].diagnostics).toContain("Organization is not in the Patient compartment")
          const unknownType = yield* get(`Patient/${a.id}/NoSuchType`)
          expect(unknownType.status).toBe(404)
          expect(unknownType.json.issue[0].diagnostics).toContain("NoSuchType")
          const notCompartment = yield* get(`Observation/${a.id}/Patient`)
          expect(notCompartment.status).toBe(404)
          expect(notCompartment.json.issue[0].diagnostics).toContain("Observation is not a compartment")
          const unknownParameter = yield* get(`Patient/${a.id}/Observation?nonsense=1`)
          expect(unknownParameter.status).toBe(400)
          expect(unknownParameter.json.issue[0].diagnostics).toContain("nonsense")
          expect(unknownParameter.headers.get("vary")).toBe("Prefer")
          const star = yield* get(`Patient/${a.id}/*?code=8302-2`)
          expect(star.status).toBe(400)
          expect(star.json.issue[0].diagnostics).toContain("'code' is not defined on every type searched")
          const wrongType = yield* get(`Patient/${a.id}/*?_type=Organization`)
          expect(wrongType.status).toBe(400)
          expect(wrongType.json.issue[0].diagnostics).toContain("'Organization' is not in the Patient compartment")
          const lenient = yield* call("GET", `${(yield* Server).base}/Patient/${a.id}/*?code=8302-2`, { headers: { prefer: "handling=lenient" } })
          expect(lenient.status).toBe(200)
          expect(lenient.json.entry.find((e: any) => e.search.mode === "outcome").resource.issue[0].diagnostics).toContain("'code'")
        }))

      it.effect("searches every type of a compartment with *, narrowed by _type, paging with links back to the compartment", () =>
        Effect.gen(function*() {
          const tag = tagged("star")
          const a = yield* create({ resourceType: "Patient", ...tag })
          const other = yield* create({ resourceType: "Patient", ...tag })
          const organization = yield* create({ resourceType: "Organization", ...tag, name: "not in the compartment" })
          const members: Array<string> = [ref(a)]
          for (let i = 0; i < 5; i++) {
            members.push(ref(yield* create({ resourceType: "Observation", ...tag, status: "final", code: { text: `o${i}` }, subject: { reference: ref(a) }, performer: [{ reference: ref(organization) }] })))
          }
          members.push(ref(yield* create({ resourceType: "Encounter", ...tag, status: "finished", class: { code: "AMB" }, subject: { reference: ref(a) } })))
          members.push(ref(yield* create({ resourceType: "Condition", ...tag, subject: { reference: ref(a) }, code: { text: "c" } })))
          yield* create({ resourceType: "Observation", ...tag, status: "final", code: { text: "theirs" }, subject: { reference: ref(other) } })

          expect(yield* found(`Patient/${a.id}/*`)).toEqual([...members].sort())
          expect(yield* found(`Patient/${a.id}/*?_type=Encounter,Condition`)).toEqual(members.filter((m) => m.startsWith("Encounter/") || m.startsWith("Condition/")).sort())
          expect(yield* found(`Patient/${a.id}/*?_type=Observation&code:text=o3`)).toEqual([members[4]!])
          expect(yield* found(`Patient/${a.id}/*?_lastUpdated=gt2000-01-01&_id=${a.id}`)).toEqual([ref(a)])

          const { seen, pages } = yield* pagedThrough(`Patient/${a.id}/*?_count=3`, `Patient/${a.id}/*`)
          expect(pages).toBe(3)
          expect(seen.length).toBe(members.length)
          expect([...seen].sort()).toEqual([...members].sort())
          const typed = yield* pagedThrough(`Patient/${a.id}/Observation?_count=2&_sort=-_lastUpdated`, `Patient/${a.id}/Observation`)
          expect(typed.pages).toBe(3)
          expect(typed.seen.sort()).toEqual(members.filter((m) => m.startsWith("Observation/")).sort())
          // Sorted across types by a common parameter.
          const sorted = (yield* get(`Patient/${a.id}/*?_sort=-_lastUpdated&_count=100`)).json
          const instants = sorted.entry.map((e: any) => e.resource.meta.lastUpdated as string)
          expect(instants).toEqual([...instants].sort().reverse())
        }))

      it.effect("follows a resource into another compartment when it is updated, and out of every one when deleted", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const tag = tagged("moves")
          const a = yield* create({ resourceType: "Patient", ...tag })
          const b = yield* create({ resourceType: "Patient", ...tag })
          const observation = yield* create({ resourceType: "Observation", ...tag, status: "final", code: { text: "moving" }, subject: { reference: ref(a) } })
          expect(yield* found(`Patient/${a.id}/Observation`)).toEqual([ref(observation)])
          const moved = yield* call("PUT", `${base}/${ref(observation)}`, { body: { ...observation, subject: { reference: ref(b) } } })
          expect(moved.status).toBe(200)
          expect(yield* found(`Patient/${a.id}/Observation`)).toEqual([])
          expect(yield* found(`Patient/${b.id}/Observation`)).toEqual([ref(observation)])
          expect(yield* found(`Patient/${b.id}/*`)).toEqual([ref(b), ref(observation)].sort())
          const deleted = yield* call("DELETE", `${base}/${ref(observation)}`)
          expect(deleted.status).toBe(204)
          expect(yield* found(`Patient/${b.id}/Observation`)).toEqual([])
          expect(yield* found(`Patient/${a.id}/*`)).toEqual([ref(a)])
          yield* call("DELETE", `${base}/${ref(b)}`)
          expect(yield* found(`Patient/${b.id}/*`)).toEqual([])
        }))

      it.effect("searches across the types _type names at system level, with their common parameters, and pages with links on the base", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const tag = tagged("system")
          const patient = yield* create({ resourceType: "Patient", ...tag, gender: "female" })
          const observation = yield* create({ resourceType: "Observation", ...tag, status: "final", code: { coding: [{ system: "http://loinc.org", code: "8302-2" }] }, subject: { reference: ref(patient) } })
          const condition = yield* create({ resourceType: "Condition", ...tag, code: { coding: [{ system: "http://loinc.org", code: "8302-2" }] }, subject: { reference: ref(patient) } })
          const organization = yield* create({ resourceType: "Organization", ...tag, name: "Acme" })
          const all = [patient, observation, condition, organization].map(ref).sort()

          // Every type, common parameters only.
          expect(yield* found(`?${tagQuery("system")}`)).toEqual(all)
          expect(yield* found(`?_id=${patient.id},${organization.id}&${tagQuery("system")}`)).toEqual([ref(patient), ref(organization)].sort())
          expect(yield* found(`?_type=Patient,Organization&${tagQuery("system")}`)).toEqual([ref(patient), ref(organization)].sort())
          // A parameter defined on every type named.
          expect(yield* found(`?_type=Observation,Condition&code=8302-2&${tagQuery("system")}`)).toEqual([ref(observation), ref(condition)].sort())
          expect(yield* found(`?_type=Observation,Condition&patient=${ref(patient)}`)).toEqual([ref(observation), ref(condition)].sort())
          // POST [base]/_search reads the form body.
          const posted = yield* call("POST", `${base}/_search`, { body: `_type=Observation&${tagQuery("system")}`, headers: { "content-type": "application/x-www-form-urlencoded" } })
          expect([posted.status, refs(posted.json)]).toEqual([200, [ref(observation)]])

          const { seen, pages } = yield* pagedThrough(`?${tagQuery("system")}&_count=1&_total=accurate`, "")
          expect(pages).toBe(4)
          expect(seen.sort()).toEqual(all)
          const first = (yield* get(`?${tagQuery("system")}&_count=1&_total=accurate`)).json
          expect(first.total).toBe(4)
          expect(first.link.find((l: any) => l.relation === "next").url).toMatch(new RegExp(`^${base}\\?`))
        }))

      it.effect("adds _include and _revinclude to a compartment search and to a search across types", () =>
        Effect.gen(function*() {
          const tag = tagged("includes")
          const patient = yield* create({ resourceType: "Patient", ...tag })
          const encounter = yield* create({ resourceType: "Encounter", ...tag, status: "finished", class: { code: "AMB" }, subject: { reference: ref(patient) } })
          const observation = yield* create({
            resourceType: "Observation", ...tag, status: "final", code: { text: "x" }, subject: { reference: ref(patient) }, encounter: { reference: ref(encounter) }
          })
          const included = (bundle: any) =>
            (bundle.entry ?? []).filter((e: any) => e.search.mode === "include").map((e: any) => `${e.resource.resourceType}/${e.resource.id}`).sort()
          const inCompartment = yield* get(`${ref(patient)}/Encounter?_include=Encounter:patient&_revinclude=Observation:encounter`)
          expect(inCompartment.status).toBe(200)
          expect(refs(inCompartment.json)).toEqual([ref(encounter)])
          expect(included(inCompartment.json)).toEqual([ref(observation), ref(patient)].sort())
          const acrossTypes = yield* get(`?_type=Encounter,Observation&${tagQuery("includes")}&_include=Encounter:patient&_include=Observation:encounter`)
          expect(acrossTypes.status).toBe(200)
          // The Encounter is a match, so Observation:encounter does not repeat it; the Patient comes in once.
          expect(refs(acrossTypes.json)).toEqual([ref(encounter), ref(observation)].sort())
          expect(included(acrossTypes.json)).toEqual([ref(patient)])
        }))

      it.effect("runs compartment searches and searches across types as GET entries of a batch and a transaction", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const tag = tagged("bundle")
          const patient = yield* create({ resourceType: "Patient", ...tag })
          const encounter = yield* create({ resourceType: "Encounter", ...tag, status: "finished", class: { code: "AMB" }, subject: { reference: ref(patient) } })
          for (const type of ["batch", "transaction"]) {
            const reply = yield* call("POST", base, {
              body: {
                resourceType: "Bundle",
                type,
                entry: [
                  { request: { method: "GET", url: `${ref(patient)}/Encounter` } },
                  { request: { method: "GET", url: `${ref(patient)}/*?_type=Encounter,Patient` } },
                  { request: { method: "GET", url: `?_type=Encounter&${tagQuery("bundle")}` } },
                  ...(type === "batch" ? [{ request: { method: "GET", url: `${ref(patient)}/Organization` } }] : [])
                ]
              }
            })
            expect([type, reply.status, reply.text.slice(0, 300)]).toEqual([type, 200, reply.text.slice(0, 300)])
            const [byType, all, system, refused] = reply.json.entry
            expect(refs(byType.resource)).toEqual([ref(encounter)])
            expect(refs(all.resource)).toEqual([ref(encounter), ref(patient)].sort())
            expect(all.resource.link[0].url.startsWith(`${base}/${ref(patient)}/*?`)).toBe(true)
            expect(refs(system.resource)).toEqual([ref(encounter)])
            if (type === "batch") {
              expect(refused.response.status.startsWith("400")).toBe(true)
              expect(refused.response.outcome.issue[0].diagnostics).toContain("not in the Patient compartment")
            }
          }
        }))

      it.effect("answers 400 naming the parameter a type searched lacks, an unknown type, and refuses _type on one type as not supported (400)", () =>
        Effect.gen(function*() {
          const lacking = yield* get("?_type=Observation,Patient&code=8302-2")
          expect(lacking.status).toBe(400)
          expect(lacking.json.issue[0].diagnostics).toContain("Search parameter 'code' is not defined on every type searched: not on Patient")
          expect(lacking.headers.get("vary")).toBe("Prefer")
          const noTypes = yield* get("?gender=female")
          expect(noTypes.status).toBe(400)
          expect(noTypes.json.issue[0].diagnostics).toContain("'gender' cannot be used across all resource types")
          const unknown = yield* get("?_type=Observation,NoSuchType")
          expect(unknown.status).toBe(400)
          expect(unknown.json.issue[0].diagnostics).toContain("Unknown resource type 'NoSuchType'")
          const sort = yield* get("?_sort=birthdate")
          expect(sort.status).toBe(400)
          expect(sort.json.issue[0].diagnostics).toContain("Search parameter 'birthdate' of '_sort' cannot be used across all resource types")
          const typeLevel = yield* get("Observation?_type=Patient")
          expect(typeLevel.status).toBe(400)
          expect(typeLevel.json.issue[0].code).toBe("not-supported")
          const badValue = yield* get("?_lastUpdated=yesterday")
          expect(badValue.status).toBe(400)
          expect(badValue.json.issue[0].diagnostics).toContain("yesterday")
        }))
    })
  })
}
