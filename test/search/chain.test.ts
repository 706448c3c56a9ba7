/**
 * Chained parameters and `_has` over HTTP on SQLite and Postgres, with the real R4 search parameters
 * (https://hl7.org/fhir/R4/search.html#chaining, #has). Each test marks its resources with its own
 * identifier system, so the tests share one server per backend without seeing each other's data.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { type BackendKind, pgAvailable } from "../support/backends.ts"
import { realPackageCache, registryUrl, skipRealPackages } from "../support/npmRegistry.ts"
import { call, startServer, type TestServer } from "../support/server.ts"

class Server extends Context.Tag("test/ChainServer")<Server, TestServer>() {}

const create = (resource: Record<string, unknown>) =>
  Effect.gen(function*() {
    const { base } = yield* Server
    const reply = yield* call("POST", `${base}/${String(resource["resourceType"])}`, { body: resource })
    expect([reply.status, reply.text.slice(0, 300)]).toEqual([201, reply.text.slice(0, 300)])
    return `${String(resource["resourceType"])}/${String(reply.json.id)}`
  })

const get = (path: string, headers?: Record<string, string>) =>
  Effect.flatMap(Server, ({ base }) => call("GET", `${base}/${path}`, headers === undefined ? {} : { headers }))

/** The `Type/id` of every match of `path`, sorted. */
const found = (path: string) =>
  Effect.gen(function*() {
    const reply = yield* get(path)
    expect([path, reply.status, reply.text.slice(0, 300)]).toEqual([path, 200, reply.text.slice(0, 300)])
    return (reply.json.entry ?? [])
      .filter((entry: any) => entry.search.mode === "match")
      .map((entry: any) => `${entry.resource.resourceType}/${entry.resource.id}`)
      .sort() as Array<string>
  })

const sorted = (...refs: ReadonlyArray<string>) => [...refs].sort()

const tag = (system: string) => ({ identifier: [{ system: `urn:chain:${system}`, value: "1" }] })
const of = (system: string) => `identifier=${encodeURIComponent(`urn:chain:${system}|1`)}`
const observation = (system: string, elements: Record<string, unknown>) =>
  create({ resourceType: "Observation", ...tag(system), status: "final", code: { text: "x" }, ...elements })
const coded = (code: string) => ({ coding: [{ system: "http://example.org/lab-codes", code }] })

const backendsUnderTest: ReadonlyArray<{ readonly kind: BackendKind; readonly skip: boolean }> = [
  { kind: "sqlite", skip: false },
  { kind: "postgres", skip: !pgAvailable }
]

for (const backend of backendsUnderTest) {
  describe.skipIf(skipRealPackages || backend.skip)(`chains and _has on ${backend.kind} (R4 catalog)`, () => {
    layer(
      Layer.scoped(Server, startServer(backend.kind, { conformance: { package_registry: registryUrl ?? "", package_cache: realPackageCache } })),
      { timeout: 300_000, excludeTestServices: true }
    )((it) => {
      it.effect("a chain of one and of two levels, with modifiers and prefixes at its end", () =>
        Effect.gen(function*() {
          const acme = yield* create({ resourceType: "Organization", ...tag("levels"), name: "Acme Levels Hospital" })
          const other = yield* create({ resourceType: "Organization", ...tag("levels"), name: "Other Levels Clinic" })
          const ann = yield* create({ resourceType: "Patient", ...tag("levels"), name: [{ family: "Levelsann" }], birthDate: "1990-02-03", managingOrganization: { reference: acme } })
          const bob = yield* create({ resourceType: "Patient", ...tag("levels"), name: [{ family: "Levelsbob" }], birthDate: "1970-01-01", managingOrganization: { reference: other } })
          const a1 = yield* observation("levels", { subject: { reference: ann } })
          const a2 = yield* observation("levels", { subject: { reference: ann } })
          const b1 = yield* observation("levels", { subject: { reference: bob } })
          expect(yield* found(`Observation?${of("levels")}&patient.name=levelsann`)).toEqual(sorted(a1, a2))
          expect(yield* found("Observation?patient.name=Levelsb")).toEqual([b1])
          expect(yield* found("Observation?patient.name:exact=Levelsb")).toEqual([])
          expect(yield* found("Observation?patient.name:exact=Levelsbob")).toEqual([b1])
          expect(yield* found(`Observation?${of("levels")}&patient.birthdate=ge1980`)).toEqual(sorted(a1, a2))
          expect(yield* found("Observation?patient.organization.name=acme%20levels")).toEqual(sorted(a1, a2))
          expect(yield* found(`Observation?patient.organization=${other}`)).toEqual([b1])
          expect(yield* found("Patient?organization.name=Other%20Levels")).toEqual([bob])
          // Repeated chains are ANDed; a comma list at the end is ORed.
          expect(yield* found("Observation?patient.name=levelsann,levelsbob&patient.birthdate=lt1980")).toEqual([b1])
          expect(yield* found("Observation?patient.name=levelsann,levelsbob")).toEqual(sorted(a1, a2, b1))
        }))

      it.effect("the :[type] qualifier picks the target; several targets with the parameter are a 400 naming them", () =>
        Effect.gen(function*() {
          const person = yield* create({ resourceType: "Patient", ...tag("typed"), name: [{ family: "Typedplace" }] })
          const place = yield* create({ resourceType: "Location", ...tag("typed"), name: "Typedplace Ward" })
          const onPerson = yield* observation("typed", { subject: { reference: person } })
          const onPlace = yield* observation("typed", { subject: { reference: place } })
          expect(yield* found("Observation?subject:Patient.name=typedplace")).toEqual([onPerson])
          expect(yield* found("Observation?subject:Location.name=typedplace")).toEqual([onPlace])
          // Only Patient among subject's targets has `birthdate`: no qualifier needed.
          expect(yield* found(`Observation?${of("typed")}&subject.birthdate:missing=true`)).toEqual([onPerson])
          const ambiguous = yield* get("Observation?subject.name=typedplace")
          expect(ambiguous.status).toBe(400)
          expect(ambiguous.json.resourceType).toBe("OperationOutcome")
          const diagnostics = ambiguous.json.issue[0].diagnostics as string
          expect(diagnostics).toContain("subject.name")
          expect(diagnostics).toContain("Patient")
          expect(diagnostics).toContain("Location")
          const wrongType = yield* get("Observation?patient:Organization.name=x")
          expect(wrongType.status).toBe(400)
          expect(wrongType.json.issue[0].diagnostics).toContain("Organization")
        }))

      it.effect("rule 4 behind a chain: an unreadable value is a 400 naming the whole key, set aside with handling=lenient", () =>
        Effect.gen(function*() {
          const bad = yield* get("Observation?patient.birthdate=1990-13-45")
          expect(bad.status).toBe(400)
          const diagnostics = bad.json.issue[0].diagnostics as string
          expect(diagnostics).toContain("'patient.birthdate'")
          expect(diagnostics).toContain("'1990-13-45'")
          expect((yield* get("Observation?patient.shoe-size=4")).status).toBe(400)
          expect((yield* get("Observation?code.name=x")).status).toBe(400)
          const person = yield* create({ resourceType: "Patient", ...tag("lenient"), name: [{ family: "Lenientchain" }] })
          const obs = yield* observation("lenient", { subject: { reference: person } })
          const lenient = yield* get("Observation?patient.name=lenientchain&patient.birthdate=nope", { prefer: "handling=lenient" })
          expect(lenient.status).toBe(200)
          expect(lenient.json.entry.filter((e: any) => e.search.mode === "match").map((e: any) => `Observation/${e.resource.id}`)).toEqual([obs])
          expect(lenient.json.entry.find((e: any) => e.search.mode === "outcome").resource.issue[0].diagnostics).toContain("patient.birthdate")
        }))

      it.effect("a chain sees only current resources: a renamed or deleted target stops matching", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const person = yield* create({ resourceType: "Patient", ...tag("current"), name: [{ family: "Currentfirst" }] })
          const obs = yield* observation("current", { subject: { reference: person } })
          expect(yield* found("Observation?patient.name=currentfirst")).toEqual([obs])
          const renamed = yield* call("PUT", `${base}/${person}`, { body: { resourceType: "Patient", id: person.split("/")[1], ...tag("current"), name: [{ family: "Currentsecond" }] } })
          expect(renamed.status).toBe(200)
          expect(yield* found("Observation?patient.name=currentfirst")).toEqual([])
          expect(yield* found("Observation?patient.name=currentsecond")).toEqual([obs])
          // A target that is deleted is no longer a match (the default reference policy refuses the delete
          // of a referenced resource only when configured; here the Observation goes first).
          const target = yield* create({ resourceType: "Patient", ...tag("current"), name: [{ family: "Currentgone" }] })
          const pointing = yield* create({ resourceType: "Observation", ...tag("current"), status: "final", code: { text: "x" }, subject: { reference: target } })
          expect(yield* found("Observation?patient.name=currentgone")).toEqual([pointing])
          expect((yield* call("DELETE", `${base}/${target}`)).status).toBeLessThan(300)
          expect(yield* found("Observation?patient.name=currentgone")).toEqual([])
        }))

      it.effect("_has: alone, combined with a parameter and a chain, and nested", () =>
        Effect.gen(function*() {
          const ann = yield* create({ resourceType: "Patient", ...tag("has"), gender: "female", name: [{ family: "Hasann" }] })
          const bob = yield* create({ resourceType: "Patient", ...tag("has"), gender: "male", name: [{ family: "Hasbob" }] })
          const cat = yield* create({ resourceType: "Patient", ...tag("has"), gender: "female", name: [{ family: "Hascat" }] })
          const doc = yield* create({ resourceType: "Practitioner", ...tag("has"), name: [{ family: "Hasdoctor" }] })
          const annHeight = yield* observation("has", { subject: { reference: ann }, code: coded("has-1"), performer: [{ reference: doc }] })
          yield* observation("has", { subject: { reference: bob }, code: coded("has-1") })
          yield* observation("has", { subject: { reference: cat }, code: coded("has-2") })
          // A panel on cat's record whose member is ann's Observation.
          yield* observation("has", { subject: { reference: cat }, code: coded("has-panel"), hasMember: [{ reference: annHeight }] })
          const patients = of("has")
          expect(yield* found(`Patient?_has:Observation:patient:code=has-1`)).toEqual(sorted(ann, bob))
          expect(yield* found(`Patient?_has:Observation:patient:code=has-1,has-2`)).toEqual(sorted(ann, bob, cat))
          expect(yield* found(`Patient?_has:Observation:patient:code=has-1&gender=female`)).toEqual([ann])
          expect(yield* found(`Patient?${patients}&_has:Observation:patient:code=has-1&_has:Observation:patient:code=has-2`)).toEqual([])
          expect(yield* found(`Patient?_has:Observation:patient:performer:Practitioner.name=hasdoctor`)).toEqual([ann])
          // Nested: patients with an Observation that a panel Observation has as a member.
          expect(yield* found(`Patient?_has:Observation:patient:_has:Observation:has-member:code=has-panel`)).toEqual([ann])
          // A chain and _has together: Observations of patients who have a has-2 Observation. Observation.patient
          // refers to Patient and Group, and either can have Observations: the chain names its type.
          expect(yield* found(`Observation?${patients}&patient:Patient._has:Observation:patient:code=has-2`)).toHaveLength(2)
          expect((yield* get(`Observation?patient._has:Observation:patient:code=has-2`)).status).toBe(400)
          expect(yield* found(`Patient?_has:Observation:patient:code=no-such-code`)).toEqual([])
          const bad = yield* get("Patient?_has:Observation:patient:date=soon")
          expect(bad.status).toBe(400)
          expect(bad.json.issue[0].diagnostics).toContain("_has:Observation:patient:date")
          expect((yield* get("Patient?_has:Observation:encounter:code=x")).status).toBe(400)
        }))

      it.effect("a resource that refers to several targets of a chain is one match, on every page and both paths", () =>
        Effect.gen(function*() {
          // Each report refers to two results with the code: their ranges of the reference index both hold it
          // (src/search/plan/scope.ts, chainedPage), and the merged page must show it once.
          const result = () => observation("several", { code: coded("several-1") })
          const reports: Array<string> = []
          for (let n = 0; n < 3; n++) {
            const [first, second] = [yield* result(), yield* result()]
            reports.push(yield* create({ resourceType: "DiagnosticReport", status: "final", code: { text: "x" }, result: [{ reference: first }, { reference: second }] }))
          }
          const path = "DiagnosticReport?result.code=http://example.org/lab-codes|several-1"
          expect(yield* found(path)).toEqual(sorted(...reports))
          for (const headers of [{}, { prefer: "handling=strict" }]) {
            const seen: Array<string> = []
            for (let offset = 0; offset < 4; offset++) {
              const reply = yield* get(`${path}&_count=1&_offset=${offset}`, headers)
              expect(reply.status).toBe(200)
              seen.push(...(reply.json.entry ?? []).map((entry: any) => `DiagnosticReport/${entry.resource.id}`))
            }
            expect(seen).toEqual(reports)
          }
        }))

      it.effect("chains work in conditional interactions and in Bundle searches", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const person = yield* create({ resourceType: "Patient", ...tag("cond"), name: [{ family: "Conditionalchain" }] })
          const obs = yield* observation("cond", { subject: { reference: person } })
          const bundle = yield* call("POST", base, {
            body: { resourceType: "Bundle", type: "batch", entry: [{ request: { method: "GET", url: "Observation?patient.name=conditionalchain" } }] }
          })
          expect(bundle.status).toBe(200)
          expect(bundle.json.entry[0].resource.entry.map((e: any) => `Observation/${e.resource.id}`)).toEqual([obs])
          const deleted = yield* call("DELETE", `${base}/Observation?patient.name=conditionalchain`)
          expect(deleted.status).toBeLessThan(300)
          expect(yield* found("Observation?patient.name=conditionalchain")).toEqual([])
        }))
    })
  })
}
