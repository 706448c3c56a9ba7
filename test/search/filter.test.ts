/**
 * `_filter` over HTTP on SQLite and Postgres with the real R4 packages: each expression finds exactly what
 * the equivalent plain search finds (and the resources the test expects), the comparisons plain search has
 * no words for find what the filter spec says, and an unknown parameter or unreadable value inside
 * `_filter` is a 400. Each test marks its resources with its own identifier system.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { type BackendKind, pgAvailable } from "../support/backends.ts"
import { realPackageCache, registryUrl, skipRealPackages } from "../support/npmRegistry.ts"
import { call, startServer, type TestServer } from "../support/server.ts"

class Server extends Context.Tag("test/FilterServer")<Server, TestServer>() {}

const create = (resource: Record<string, unknown>) =>
  Effect.gen(function*() {
    const { base } = yield* Server
    const reply = yield* call("POST", `${base}/${String(resource["resourceType"])}`, { body: resource })
    expect([reply.status, reply.text.slice(0, 300)]).toEqual([201, reply.text.slice(0, 300)])
    return reply.json.id as string
  })

const mark = (system: string) => [{ system: `urn:filter:${system}`, value: "1" }]
const of = (system: string) => `identifier=${encodeURIComponent(`urn:filter:${system}|1`)}`

/** The sorted ids `type?query` matches among the test's own resources, asserting a 200. */
const found = (type: string, system: string, query: string) =>
  Effect.gen(function*() {
    const { base } = yield* Server
    const reply = yield* call("GET", `${base}/${type}?${query}&${of(system)}&_count=1000`)
    expect([reply.status, reply.text.slice(0, 400)]).toEqual([200, reply.text.slice(0, 400)])
    return (reply.json.entry ?? []).filter((e: any) => e.search.mode === "match").map((e: any) => e.resource.id as string).sort() as Array<string>
  })

const filter = (expression: string) => `_filter=${encodeURIComponent(expression)}`

/** `_filter=expression` finds what `plain` finds, and that is `expected`. */
const same = (type: string, system: string, expression: string, plain: string, expected: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const byFilter = yield* found(type, system, filter(expression))
    const byPlain = yield* found(type, system, plain)
    expect({ expression, ids: byFilter }).toEqual({ expression, ids: byPlain })
    expect({ expression, ids: byFilter }).toEqual({ expression, ids: [...expected].sort() })
  })

/** `_filter=expression` finds `expected`, where plain search has no equivalent. */
const finds = (type: string, system: string, expression: string, expected: ReadonlyArray<string>) =>
  Effect.map(found(type, system, filter(expression)), (ids) => expect({ expression, ids }).toEqual({ expression, ids: [...expected].sort() }))

const backendsUnderTest: ReadonlyArray<{ readonly kind: BackendKind; readonly skip: boolean }> = [
  { kind: "sqlite", skip: false },
  { kind: "postgres", skip: !pgAvailable }
]

for (const backend of backendsUnderTest) {
  describe.skipIf(skipRealPackages || backend.skip)(`_filter on ${backend.kind} (R4 catalog)`, () => {
    layer(
      Layer.scoped(Server, startServer(backend.kind, { conformance: { package_registry: registryUrl ?? "", package_cache: realPackageCache } })),
      { timeout: 300_000, excludeTestServices: true }
    )((it) => {
      /** Five patients of the test `system`; the last has no name, gender or birth date. */
      const patients = (system: string) =>
        Effect.gen(function*() {
          const patient = (elements: Record<string, unknown>) => create({ resourceType: "Patient", identifier: mark(system), ...elements })
          const peter = yield* patient({ name: [{ family: "Abbott", given: ["Peter"] }], gender: "male", birthDate: "1999-12-31" })
          const petra = yield* patient({ name: [{ family: "Müller", given: ["Petra"] }], gender: "female", birthDate: "2000-05-20" })
          const abigail = yield* patient({ name: [{ family: "Smith", given: ["Abigail"] }], gender: "female", birthDate: "2010" })
          const zoe = yield* patient({ name: [{ family: "ABBOTT-Jones", given: ["Zoe"] }], gender: "other", birthDate: "2000" })
          const nobody = yield* patient({})
          return { peter, petra, abigail, zoe, nobody }
        })

      it.effect("and, or, not and parentheses find what repeated parameters, comma lists and :not find", () =>
        Effect.gen(function*() {
          const { peter, petra, abigail, zoe, nobody } = yield* patients("logic")
          const p = (expression: string, plain: string, expected: ReadonlyArray<string>) => same("Patient", "logic", expression, plain, expected)
          yield* p("birthdate ge 2000 and gender eq female", "birthdate=ge2000&gender=female", [petra, abigail])
          yield* p("gender eq female or gender eq other", "gender=female,other", [petra, abigail, zoe])
          // A resource without a gender meets not(gender eq male), as it meets gender:not=male.
          yield* p("not(gender eq male)", "gender:not=male", [petra, abigail, zoe, nobody])
          yield* p("gender ne male", "gender:not=male", [petra, abigail, zoe, nobody])
          yield* p("(gender eq female or gender eq male) and not(birthdate ge 2005)", "gender=female,male&birthdate=lt2005", [peter, petra])
          // Left to right, no precedence: (male or female) and born from 2005.
          yield* p("gender eq male or gender eq female and birthdate ge 2005", "gender=male,female&birthdate=ge2005", [abigail])
          yield* p("gender eq male or (gender eq female and birthdate ge 2005)", "gender=male,female&_id:not=" + petra, [peter, abigail])
          yield* p("birthdate lt 2000 or birthdate ge 2010", "birthdate=lt2000,ge2010", [peter, abigail])
          yield* p(`_id eq ${peter} or _id eq ${nobody}`, `_id=${peter},${nobody}`, [peter, nobody])
          yield* p("birthdate pr false", "birthdate:missing=true", [nobody])
          yield* p("gender pr true and not(gender eq other)", "gender:missing=false&gender:not=other", [peter, petra, abigail])
          // Several _filter parameters are ANDed, with each other and with the plain parameters.
          const both = yield* found("Patient", "logic", `${filter("gender eq female")}&${filter("birthdate lt 2005")}&name=pet`)
          expect(both).toEqual([petra])
        }))

      it.effect("strings: sw and co as plain search, eq the whole value case aside, ew and gt at the end and in order", () =>
        Effect.gen(function*() {
          const { peter, petra, abigail, zoe } = yield* patients("strings")
          const p = (expression: string, plain: string, expected: ReadonlyArray<string>) => same("Patient", "strings", expression, plain, expected)
          yield* p(`name sw "ab"`, "name=ab", [peter, abigail, zoe])
          yield* p(`name co "BOT"`, "name:contains=bot", [peter, zoe])
          yield* p(`family eq "ABBOTT"`, "family:exact=Abbott", [peter])
          yield* p(`family eq muller`, "family:exact=Müller", [petra])
          yield* finds("Patient", "strings", `family ew "jones"`, [zoe])
          yield* finds("Patient", "strings", `family ew "bott"`, [peter])
          // By code point of the normalised text: abbott, abbott-jones, muller, smith.
          yield* finds("Patient", "strings", `family gt "m"`, [petra, abigail])
          yield* finds("Patient", "strings", `family le "abbott-jones"`, [peter, zoe])
          yield* finds("Patient", "strings", `given eq "peter" and family ne "smith"`, [peter])
        }))

      it.effect("dates: the operator is the prefix; co and po compare the ranges", () =>
        Effect.gen(function*() {
          const { peter, petra, abigail, zoe } = yield* patients("dates")
          const p = (expression: string, plain: string, expected: ReadonlyArray<string>) => same("Patient", "dates", expression, plain, expected)
          yield* p("birthdate eq 2000", "birthdate=2000", [petra, zoe])
          yield* p("birthdate sa 2000", "birthdate=sa2000", [abigail])
          yield* p("birthdate eb 2000-05", "birthdate=eb2000-05", [peter])
          yield* p("birthdate le 2000-05-20", "birthdate=le2000-05-20", [peter, petra, zoe])
          // co: the birth date's own range holds May 2000 (only the whole year 2000 does); po: they overlap.
          yield* finds("Patient", "dates", "birthdate co 2000-05", [zoe])
          yield* finds("Patient", "dates", "birthdate po 2000-05", [petra, zoe])
          yield* finds("Patient", "dates", "birthdate po 1999-12-31T23:00:00Z", [peter])
        }))

      it.effect("tokens, quantities and references: eq, ss, sb, in, ni, re and pr as their modifiers", () =>
        Effect.gen(function*() {
          const { peter, petra, abigail } = yield* patients("coded")
          const obs = (elements: Record<string, unknown>) => create({ resourceType: "Observation", identifier: mark("coded"), ...elements })
          const loinc = (code: string) => ({ coding: [{ system: "http://loinc.org", code }] })
          const mg = (value: number, code: string) => ({ valueQuantity: { value, unit: code, system: "http://unitsofmeasure.org", code } })
          const o1 = yield* obs({ status: "final", code: loinc("2339-0"), subject: { reference: `Patient/${peter}` }, ...mg(5.4, "mg") })
          const o2 = yield* obs({ status: "amended", code: loinc("2345-7"), subject: { reference: `Patient/${petra}` }, ...mg(2, "g") })
          const o3 = yield* obs({ status: "corrected", code: loinc("2339-0"), subject: { reference: `Patient/${abigail}` } })
          const o4 = yield* obs({ status: "final", code: loinc("718-7") })
          const o = (expression: string, plain: string, expected: ReadonlyArray<string>) => same("Observation", "coded", expression, plain, expected)
          const statuses = "http://hl7.org/fhir/observation-status"
          yield* o("code eq loinc|2339-0", `code=${encodeURIComponent("http://loinc.org|2339-0")}`, [o1, o3])
          yield* o("code eq http://loinc.org|2339-0 or code eq 718-7", "code=http://loinc.org|2339-0,718-7", [o1, o3, o4])
          yield* o(`status ss ${statuses}|amended`, `status:below=${statuses}|amended`, [o2, o3])
          yield* o(`status sb ${statuses}|corrected`, `status:above=${statuses}|corrected`, [o2, o3])
          yield* o("status in http://hl7.org/fhir/ValueSet/observation-status", "status:in=http://hl7.org/fhir/ValueSet/observation-status", [o1, o2, o3, o4])
          yield* o("status ni http://hl7.org/fhir/ValueSet/observation-status", "status:not-in=http://hl7.org/fhir/ValueSet/observation-status", [])
          yield* o("value-quantity gt 5|ucum|mg", `value-quantity=${encodeURIComponent("gt5|http://unitsofmeasure.org|mg")}`, [o1, o2])
          yield* o("value-quantity ap 2000|http://unitsofmeasure.org|mg", `value-quantity=${encodeURIComponent("ap2000|http://unitsofmeasure.org|mg")}`, [o2])
          yield* o(`subject re Patient/${peter}`, `subject=Patient/${peter}`, [o1])
          yield* o(`patient re ${petra}`, `patient=${petra}`, [o2])
          yield* o("subject pr false", "subject:missing=true", [o4])
          yield* o("value-quantity pr true", "value-quantity:missing=false", [o1, o2])
        }))

      it.effect("paths through references find what chains find; a bracketed filter restricts the targets", () =>
        Effect.gen(function*() {
          const { peter, petra, abigail } = yield* patients("chains")
          const obs = (elements: Record<string, unknown>) => create({ resourceType: "Observation", identifier: mark("chains"), status: "final", code: { text: "x" }, ...elements })
          const o1 = yield* obs({ subject: { reference: `Patient/${peter}` } })
          const o2 = yield* obs({ subject: { reference: `Patient/${petra}` } })
          const o3 = yield* obs({ subject: { reference: `Patient/${abigail}` } })
          const o4 = yield* obs({})
          const o = (expression: string, plain: string, expected: ReadonlyArray<string>) => same("Observation", "chains", expression, plain, expected)
          yield* o(`patient.name sw "Ab"`, "patient.name=Ab", [o1, o3])
          yield* o("subject:Patient.gender eq female", "subject:Patient.gender=female", [o2, o3])
          yield* o("subject.birthdate ge 2005", "subject:Patient.birthdate=ge2005", [o3])
          yield* o(`patient.family eq "abbott"`, "patient.family:exact=Abbott", [o1])
          yield* o("patient[gender eq female].birthdate ge 2005", "patient.gender=female&patient.birthdate=ge2005", [o3])
          yield* o("patient[gender eq male] pr true", "patient.gender=male", [o1])
          yield* o(`patient[gender eq female and name co "etr"] pr true`, "patient.gender=female&patient.name:contains=etr", [o2])
          yield* o(`subject.name sw "pet"`, "subject:Patient.name=pet", [o1, o2])
          // not() around a path: an observation without a patient meets it too.
          yield* finds("Observation", "chains", "not(patient.gender eq female)", [o1, o4])
          yield* finds("Observation", "chains", "patient[gender eq male] pr false", [o2, o3, o4])
          yield* finds("Observation", "chains", "patient.gender ne female", [o1])
        }))

      it.effect("an unknown parameter or an unreadable value inside _filter is a 400; handling=lenient sets the _filter aside", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const unknown = yield* call("GET", `${base}/Patient?${filter("gender eq female and shoe-size gt 40")}`)
          expect(unknown.status).toBe(400)
          expect(unknown.json.resourceType).toBe("OperationOutcome")
          expect(unknown.json.issue[0].diagnostics).toBe("The _filter expression 'gender eq female and shoe-size gt 40' cannot be used at position 22: 'shoe-size' is not a search parameter of Patient")
          const unreadable = yield* call("GET", `${base}/Patient?${filter("birthdate ge 2000-02-30")}`)
          expect(unreadable.status).toBe(400)
          expect(unreadable.json.issue[0].diagnostics).toContain("The value '2000-02-30' of search parameter 'birthdate' in _filter")
          const syntax = yield* call("GET", `${base}/Patient?${filter("gender eq female or")}`)
          expect(syntax.status).toBe(400)
          expect(syntax.json.issue[0].diagnostics).toContain("cannot be read at position")
          const chained = yield* call("GET", `${base}/Observation?${filter("patient.birthdate lt soon")}`)
          expect(chained.status).toBe(400)
          expect(chained.json.issue[0].diagnostics).toContain("'soon'")

          const { petra } = yield* patients("lenient")
          const lenient = yield* call("GET", `${base}/Patient?${filter("birthdate ge nope")}&gender=female&${of("lenient")}`, { headers: { prefer: "handling=lenient" } })
          expect(lenient.status).toBe(200)
          expect(lenient.headers.get("preference-applied")).toBe("handling=lenient")
          const matches = lenient.json.entry.filter((e: any) => e.search.mode === "match").map((e: any) => e.resource.id).sort()
          expect(matches).toHaveLength(2)
          expect(matches).toContain(petra)
          const outcome = lenient.json.entry.find((e: any) => e.search.mode === "outcome")
          expect(outcome.resource.issue[0].diagnostics).toContain("_filter")
          expect(lenient.json.link[0].url).not.toContain("_filter")
          // Two _filters, one set aside: the links keep the other.
          const one = yield* call("GET", `${base}/Patient?${filter("birthdate ge nope")}&${filter("gender eq female")}&${of("lenient")}`, { headers: { prefer: "handling=lenient" } })
          expect(one.status).toBe(200)
          const self = new URL(one.json.link[0].url)
          expect(self.searchParams.getAll("_filter")).toEqual(["gender eq female"])
        }))
    })
  })
}
