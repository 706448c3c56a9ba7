/**
 * The scope matrix, reading (docs/smart.md, "Scopes"): read, vread, history, search (with chains, `_has`,
 * `_include`/`_revinclude`, across types and in compartments) and `$everything`, for v1 and v2 scopes in
 * patient, user and system context, against the in-memory store with the real R4 packages. Patient A's token
 * never sees anything of patient B's record; a type not granted is a 403 naming a scope; a v2 query keeps to
 * what it matches; paging and totals count only what the caller may see.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { skipRealPackages } from "../support/npmRegistry.ts"
import type { Reply, TestServer } from "../support/server.ts"
import { as, type Caller, included, matches, seed, showsNothingOfB, startEnforcedServer } from "./enforcementSupport.ts"

class Server extends Context.Tag("test/EnforcementServer")<Server, TestServer>() {}

const get = (caller: Caller, path: string) => Effect.flatMap(Server, (server) => as(server, caller, "GET", path))

/** A 403 whose OperationOutcome says `forbidden` and names a scope that would allow it. */
const expectForbidden = (reply: Reply, scope: string) => {
  expect([reply.status, reply.json?.issue?.[0]?.code]).toEqual([403, "forbidden"])
  expect(reply.json.issue[0].diagnostics).toContain(scope)
}

/** Every match of `path` by `caller`, following `next` links; asserts each page is a 200. */
const pagedThrough = (caller: Caller, path: string) =>
  Effect.gen(function*() {
    const server = yield* Server
    const seen: Array<string> = []
    let next: string | undefined = `${server.base}/${path}`
    let total: number | undefined
    for (let pages = 0; next !== undefined && pages < 20; pages++) {
      const reply: Reply = yield* as(server, caller, "GET", next)
      expect([next, reply.status]).toEqual([next, 200])
      if (caller !== "anonymous" && caller !== "systemReader") expect(showsNothingOfB(reply)).toBe(true)
      total ??= reply.json.total
      seen.push(...matches(reply))
      next = reply.json.link?.find((link: any) => link.relation === "next")?.url
    }
    return { seen: seen.sort(), total }
  })

describe.skipIf(skipRealPackages)("scope enforcement on reads, in memory", () => {
  layer(Layer.scoped(Server, Effect.tap(startEnforcedServer("memory"), seed)), { timeout: 600_000, excludeTestServices: true })((it) => {
    it.effect("read: a patient token reads its own record and shared resources; another patient's is not known (404)", () =>
      Effect.gen(function*() {
        for (const caller of ["patientA", "patientAv1"] as const) {
          for (const path of ["Patient/pa", "Observation/oa-lab", "Observation/oa-vital", "Condition/ca", "Encounter/ea", "Practitioner/dr"]) {
            expect([caller, path, (yield* get(caller, path)).status]).toEqual([caller, path, 200])
          }
          for (const path of ["Patient/pb", "Observation/ob-lab", "Condition/cb", "Encounter/eb", "Observation/nothing-here"]) {
            const reply = yield* get(caller, path)
            expect([caller, path, reply.status, reply.json.issue[0].code]).toEqual([caller, path, 404, "not-found"])
          }
        }
        // B's token, the other way round.
        expect((yield* get("patientB", "Observation/ob-lab")).status).toBe(200)
        expect((yield* get("patientB", "Observation/oa-lab")).status).toBe(404)
        // Without the authorization layer nothing changes.
        expect((yield* get("anonymous", "Observation/ob-lab")).status).toBe(200)
      }))

    it.effect("read: a type the token does not grant is a 403 naming the scope; a token without a patient reads nothing", () =>
      Effect.gen(function*() {
        expectForbidden(yield* get("observationsA", "Condition/ca"), "patient/Condition.r")
        expectForbidden(yield* get("observationsA", "Patient/pa"), "patient/Patient.r")
        expect((yield* get("observationsA", "Observation/oa-lab")).status).toBe(200)
        const none = yield* get("noPatient", "Observation/oa-lab")
        expectForbidden(none, "user/Observation.r")
        expect(none.json.issue[0].diagnostics).toContain("names no patient")
        expectForbidden(yield* get("auditOnly", "Patient/pa"), "system/Patient.r")
        expectForbidden(yield* get("userObservations", "Condition/cb"), "user/Condition.r")
      }))

    it.effect("read: a v2 query keeps to what it matches; user/ scopes grant the whole type", () =>
      Effect.gen(function*() {
        expect((yield* get("labsA", "Observation/oa-lab")).status).toBe(200)
        expect((yield* get("labsA", "Observation/oa-vital")).status).toBe(404)
        expect((yield* get("labsA", "Observation/ob-lab")).status).toBe(404)
        expect((yield* get("userObservations", "Observation/ob-lab")).status).toBe(200)
        expect((yield* get("userObservations", "Observation/oa-vital")).status).toBe(200)
        expect((yield* get("systemReader", "Condition/cb")).status).toBe(200)
      }))

    it.effect("vread and history: the same rules; history at type and system level lists only what may be read", () =>
      Effect.gen(function*() {
        expect((yield* get("patientA", "Observation/oa-lab/_history/1")).status).toBe(200)
        expect((yield* get("patientA", "Observation/ob-lab/_history/1")).status).toBe(404)
        expectForbidden(yield* get("observationsA", "Condition/ca/_history/1"), "Condition")
        expect((yield* get("patientA", "Observation/oa-lab/_history")).json.total).toBe(1)
        expect((yield* get("patientA", "Observation/ob-lab/_history")).status).toBe(404)
        const typeLevel = yield* get("patientA", "Observation/_history?_count=1000")
        expect(typeLevel.status).toBe(200)
        expect(showsNothingOfB(typeLevel)).toBe(true)
        expect(typeLevel.json.entry.map((e: any) => e.resource.id).sort()).toEqual(["oa-lab", "oa-vital"])
        const system = yield* get("patientA", "_history?_count=1000")
        expect(showsNothingOfB(system)).toBe(true)
        expect(system.json.entry.map((e: any) => `${e.resource.resourceType}/${e.resource.id}`)).toContain("Practitioner/dr")
        const labs = yield* get("labsA", "_history?_count=1000")
        expect(labs.json.entry.map((e: any) => `${e.resource.resourceType}/${e.resource.id}`).sort()).toEqual(["Observation/oa-lab", "Patient/pa"])
        expect(labs.json.total).toBe(2)
        expectForbidden(yield* get("observationsA", "Condition/_history"), "Condition")
      }))

    it.effect("search: matches, totals, counts and pages keep to the caller's patient", () =>
      Effect.gen(function*() {
        for (const caller of ["patientA", "patientAv1"] as const) {
          const reply = yield* get(caller, "Observation?_total=accurate")
          expect(matches(reply)).toEqual(["Observation/oa-lab", "Observation/oa-vital"])
          expect(reply.json.total).toBe(2)
          expect((yield* get(caller, "Observation?_summary=count")).json.total).toBe(2)
          expect(matches(yield* get(caller, "Condition"))).toEqual(["Condition/ca"])
          expect(matches(yield* get(caller, "Patient"))).toEqual(["Patient/pa"])
        }
        const paged = yield* pagedThrough("patientA", "Observation?_count=1&_total=accurate")
        expect(paged).toEqual({ seen: ["Observation/oa-lab", "Observation/oa-vital"], total: 2 })
        expect(matches(yield* get("patientB", "Observation"))).toEqual(["Observation/ob-lab", "Observation/ob-vital"])
        expect(matches(yield* get("labsA", "Observation"))).toEqual(["Observation/oa-lab"])
        expect(matches(yield* get("labsA", "Observation?category=vital-signs"))).toEqual([])
        expect(matches(yield* get("userObservations", "Observation"))).toHaveLength(4)
        expect(matches(yield* get("anonymous", "Observation"))).toHaveLength(4)
        expect(matches(yield* get("patientA", "Observation?subject=Patient/pb"))).toEqual([])
        expect(matches(yield* get("patientA", "Observation?_id=ob-lab,oa-lab"))).toEqual(["Observation/oa-lab"])
        const posted = yield* Effect.flatMap(Server, (server) =>
          as(server, "patientA", "POST", "Observation/_search", { body: "code=b-lab,a-lab", headers: { "content-type": "application/x-www-form-urlencoded" } }))
        expect(matches(posted)).toEqual(["Observation/oa-lab"])
        expectForbidden(yield* get("observationsA", "Condition"), "patient/Condition.s")
        expectForbidden(yield* get("noPatient", "Observation"), "Observation")
      }))

    it.effect("search across types: only the types and resources the token may search; _type naming another type is a 403", () =>
      Effect.gen(function*() {
        const both = yield* get("patientA", "?_type=Observation,Condition&_count=100")
        expect(matches(both)).toEqual(["Condition/ca", "Observation/oa-lab", "Observation/oa-vital"])
        // Every type (the conformance resources of the packages among them): the seeded ids only, for short answers.
        const ids = "_id=pa,pb,dr,ea,eb,oa-lab,oa-vital,ob-lab,ob-vital,ca,cb"
        const everything = yield* pagedThrough("patientA", `?${ids}&_count=2&_total=accurate`)
        expect(everything).toEqual({
          seen: ["Condition/ca", "Encounter/ea", "Observation/oa-lab", "Observation/oa-vital", "Patient/pa", "Practitioner/dr"],
          total: 6
        })
        const onlyObservations = yield* pagedThrough("observationsA", `?${ids}`)
        expect(onlyObservations.seen).toEqual(["Observation/oa-lab", "Observation/oa-vital"])
        expect((yield* pagedThrough("anonymous", `?${ids}`)).seen).toHaveLength(11)
        expectForbidden(yield* get("observationsA", "?_type=Observation,Condition"), "Condition")
        const posted = yield* Effect.flatMap(Server, (server) =>
          as(server, "patientA", "POST", "_search", { body: "_type=Observation", headers: { "content-type": "application/x-www-form-urlencoded" } }))
        expect(matches(posted)).toEqual(["Observation/oa-lab", "Observation/oa-vital"])
      }))

    it.effect("chains and _has match only through resources the token may search", () =>
      Effect.gen(function*() {
        // Through the caller's own patient: found.
        expect(matches(yield* get("patientA", "Observation?subject:Patient.name=Ayy"))).toEqual(["Observation/oa-lab", "Observation/oa-vital"])
        expect(matches(yield* get("patientA", "Observation?subject:Patient.name=Bee"))).toEqual([])
        // A's Observation is derived from B's: the chain does not reach B's to match by its code.
        expect(matches(yield* get("patientA", "Observation?derived-from:Observation.code=b-lab"))).toEqual([])
        expect(matches(yield* get("systemReader", "Observation?derived-from:Observation.code=b-lab"))).toEqual(["Observation/oa-lab"])
        // A chain through a shared resource the token may read.
        expect(matches(yield* get("patientA", "Observation?performer:Practitioner.name=Shared"))).toEqual(["Observation/oa-lab"])
        // _has: the laboratory-only token cannot learn of A's vital signs through the Patient.
        expect(matches(yield* get("labsA", "Patient?_has:Observation:subject:category=laboratory"))).toEqual(["Patient/pa"])
        expect(matches(yield* get("labsA", "Patient?_has:Observation:subject:category=vital-signs"))).toEqual([])
        expect(matches(yield* get("patientA", "Patient?_has:Observation:subject:category=vital-signs"))).toEqual(["Patient/pa"])
        expect(matches(yield* get("patientA", "Encounter?_has:Observation:encounter:code=b-lab"))).toEqual([])
        // _filter paths too.
        expect(matches(yield* get("patientA", "Observation?_filter=derived-from:Observation.code eq b-lab"))).toEqual([])
      }))

    it.effect("_include and _revinclude never add what the token may not read (spec Search rule 9)", () =>
      Effect.gen(function*() {
        const derived = yield* get("patientA", "Observation?_id=oa-lab&_include=Observation:derived-from&_include=Observation:performer&_include=Observation:encounter")
        expect(matches(derived)).toEqual(["Observation/oa-lab"])
        expect(included(derived)).toEqual(["Encounter/ea", "Practitioner/dr"])
        expect(included(yield* get("systemReader", "Observation?_id=oa-lab&_include=Observation:derived-from"))).toEqual(["Observation/ob-lab"])
        const rev = yield* get("patientA", "Observation?_id=ob-lab,oa-lab&_revinclude=Observation:derived-from")
        expect(showsNothingOfB(rev)).toBe(true)
        const patient = yield* get("patientA", "Patient?_id=pa&_revinclude=Observation:subject&_revinclude=Condition:subject&_include=Patient:general-practitioner")
        expect(included(patient)).toEqual(["Condition/ca", "Observation/oa-lab", "Observation/oa-vital", "Practitioner/dr"])
        const iterate = yield* get("patientA", "Practitioner?_id=dr&_revinclude:iterate=Patient:general-practitioner&_revinclude:iterate=Observation:subject")
        expect(showsNothingOfB(iterate)).toBe(true)
        expect(included(iterate)).toEqual(["Observation/oa-lab", "Observation/oa-vital", "Patient/pa"])
        // A type the token may not read is not included, even of its own patient.
        expect(included(yield* get("observationsA", "Observation?_id=oa-lab&_include=Observation:subject&_include=Observation:encounter"))).toEqual([])
        expect(included(yield* get("labsA", "Patient?_id=pa&_revinclude=Observation:subject"))).toEqual(["Observation/oa-lab"])
      }))

    it.effect("compartment search: the caller's own patient only; another patient's compartment is a 403", () =>
      Effect.gen(function*() {
        expect(matches(yield* get("patientA", "Patient/pa/Observation"))).toEqual(["Observation/oa-lab", "Observation/oa-vital"])
        expect(matches(yield* get("patientA", "Patient/pa/*?_count=100"))).toEqual(["Condition/ca", "Encounter/ea", "Observation/oa-lab", "Observation/oa-vital", "Patient/pa"])
        expectForbidden(yield* get("patientA", "Patient/pb/Observation"), "Patient/pa")
        expectForbidden(yield* get("patientA", "Patient/pb/*"), "Patient/pa")
        expectForbidden(yield* get("observationsA", "Patient/pa/Condition"), "Condition")
        expect(matches(yield* get("labsA", "Patient/pa/Observation"))).toEqual(["Observation/oa-lab"])
        expect(matches(yield* get("userObservations", "Patient/pb/Observation"))).toEqual(["Observation/ob-lab", "Observation/ob-vital"])
        // An Encounter compartment holds only what the token may see of it.
        expect(showsNothingOfB(yield* get("patientA", "Encounter/eb/*"))).toBe(true)
      }))

    it.effect("$everything: the caller's own patient, filtered by the types it may read; another patient is not known", () =>
      Effect.gen(function*() {
        const own = yield* get("patientA", "Patient/pa/$everything?_count=100")
        expect(own.status).toBe(200)
        expect(showsNothingOfB(own)).toBe(true)
        expect(own.json.entry.map((e: any) => `${e.resource.resourceType}/${e.resource.id}`).sort()).toEqual([
          "Condition/ca", "Encounter/ea", "Observation/oa-lab", "Observation/oa-vital", "Patient/pa", "Practitioner/dr"
        ])
        expect(own.json.total).toBe(6)
        expect((yield* get("patientA", "Patient/pb/$everything")).status).toBe(404)
        const labs = yield* get("labsA", "Patient/pa/$everything")
        expect(labs.json.entry.map((e: any) => `${e.resource.resourceType}/${e.resource.id}`).sort()).toEqual(["Observation/oa-lab", "Patient/pa"])
        expect(labs.json.total).toBe(2)
        expectForbidden(yield* get("observationsA", "Patient/pa/$everything"), "Patient")
        expect((yield* get("patientA", "Encounter/ea/$everything")).status).toBe(200)
        expect((yield* get("patientA", "Encounter/eb/$everything")).status).toBe(404)
        expect((yield* get("systemReader", "Patient/pb/$everything")).json.total).toBeGreaterThan(3)
      }))

    it.effect("/metadata is open to any token", () =>
      Effect.gen(function*() {
        for (const caller of ["auditOnly", "noPatient", "observationsA"] as const) {
          const reply = yield* get(caller, "metadata")
          expect([caller, reply.status, reply.json.resourceType]).toEqual([caller, 200, "CapabilityStatement"])
        }
      }))
  })
})
