/**
 * Every search parameter type, prefix and modifier over HTTP, on SQLite and Postgres, with the real R4
 * packages, checked against FHIR R4's definitions (https://hl7.org/fhir/R4/search.html).
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { backends } from "../support/backends.ts"
import { realPackageCache, registryUrl, skipRealPackages } from "../support/npmRegistry.ts"
import { call, startServer, type TestServer } from "../support/server.ts"

class Server extends Context.Tag("test/SearchTypesServer")<Server, TestServer>() {}

const ucum = "http://unitsofmeasure.org"

/** Creates each resource and answers its id, in order. */
const createAll = (base: string, resources: ReadonlyArray<Record<string, unknown>>) =>
  Effect.forEach(resources, (resource) =>
    Effect.map(call("POST", `${base}/${String(resource["resourceType"])}`, { body: resource }), (reply) => {
      expect(reply.status, reply.text).toBe(201)
      return reply.json.id as string
    }))

/** The ids among `mine` that `type?query` matches, in the order of `mine`. */
const matching = (base: string, type: string, query: string, mine: ReadonlyArray<string>) =>
  Effect.map(call("GET", `${base}/${type}?${query}&_count=1000`), (reply) => {
    expect(reply.status, `${type}?${query}: ${reply.text}`).toBe(200)
    const found = new Set((reply.json.entry ?? []).filter((e: any) => e.search.mode === "match").map((e: any) => e.resource.id as string))
    return mine.filter((id) => found.has(id))
  })

/** Names each of `ids` by its label, so that a failed expectation reads as the data. */
const labelled = (labels: ReadonlyArray<string>, ids: ReadonlyArray<string>) => (found: ReadonlyArray<string>) =>
  found.map((id) => labels[ids.indexOf(id)])

for (const backend of backends.filter((b) => b.kind !== "memory")) {
  describe.skipIf(backend.skip || skipRealPackages)(`search parameter types on ${backend.kind}`, () => {
    layer(
      Layer.scoped(Server, startServer(backend.kind, { conformance: { package_registry: registryUrl ?? "", package_cache: realPackageCache } })),
      { timeout: 300_000, excludeTestServices: true }
    )((it) => {
      it.effect("date prefixes follow FHIR's range rules across precisions", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const dates = ["2019", "2019-12-31", "2020", "2020-01", "2020-01-15", "2020-02-01", "2021"]
          const family = `Dates${backend.kind}`
          const ids = yield* createAll(base, dates.map((birthDate) => ({ resourceType: "Patient", name: [{ family }], birthDate })))
          const find = (value: string) => Effect.map(matching(base, "Patient", `family=${family}&birthdate=${value}`, ids), labelled(dates, ids))
          expect(yield* find("2020-01")).toEqual(["2020-01", "2020-01-15"])
          expect(yield* find("eq2020-01")).toEqual(["2020-01", "2020-01-15"])
          expect(yield* find("ge2020-01")).toEqual(["2020", "2020-01", "2020-01-15", "2020-02-01", "2021"])
          expect(yield* find("gt2020-01")).toEqual(["2020", "2020-02-01", "2021"])
          expect(yield* find("lt2020-01")).toEqual(["2019", "2019-12-31"])
          expect(yield* find("le2020-01")).toEqual(["2019", "2019-12-31", "2020-01", "2020-01-15"])
          expect(yield* find("sa2020-01")).toEqual(["2020-02-01", "2021"])
          expect(yield* find("eb2020-01")).toEqual(["2019", "2019-12-31"])
          expect(yield* find("ne2020-01")).toEqual(["2019", "2019-12-31", "2020", "2020-02-01", "2021"])
          expect(yield* find("2020")).toEqual(["2020", "2020-01", "2020-01-15", "2020-02-01"])
          // Both ranges overlap the year 2020 and January 2020 partly: ge and lt each keep them.
          expect(yield* find("ge2020-01-15&birthdate=lt2020-02")).toEqual(["2020", "2020-01", "2020-01-15"])
          expect(yield* find("ge2020-01-15&birthdate=le2020-01-15")).toEqual(["2020", "2020-01", "2020-01-15"])
          expect(yield* find("ap2020-01-15")).toContain("2020-01-15")
        }))

      it.effect("dateTimes with a timezone are compared as instants", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const code = { coding: [{ system: "http://example.org/codes", code: `tz-${backend.kind}` }] }
          const ids = yield* createAll(base, [
            { resourceType: "Observation", status: "final", code, effectiveDateTime: "2020-01-31T23:30:00-05:00" },
            { resourceType: "Observation", status: "final", code, effectiveDateTime: "2020-01-31T23:30:00Z" }
          ])
          const find = (value: string) => matching(base, "Observation", `code=http://example.org/codes|tz-${backend.kind}&date=${value}`, ids)
          expect(yield* find("2020-01")).toEqual([ids[1]])
          expect(yield* find("2020-02-01")).toEqual([ids[0]])
          expect(yield* find("gt2020-01-31T23:45:00Z")).toEqual([ids[0]])
          expect(yield* find("lt2020-02-01T01:00:00%2B01:00")).toEqual([ids[1]])
          expect(yield* find("lt2020-02-01T00:00:00%2B01:00")).toEqual([])
        }))

      it.effect("quantities match in their own unit and in another UCUM unit of the same kind", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const code = { coding: [{ system: "http://example.org/codes", code: `qty-${backend.kind}` }] }
          const values = [
            { value: 5.4, unit: "mg", system: ucum, code: "mg" },
            { value: 5400, unit: "ug", system: ucum, code: "ug" },
            { value: 6, unit: "mg", system: ucum, code: "mg" },
            { value: 5.4, unit: "mmol/L", system: ucum, code: "mmol/L" },
            { value: 5.4, unit: "tablets" }
          ]
          const labels = ["5.4 mg", "5400 ug", "6 mg", "5.4 mmol/L", "5.4 tablets"]
          const ids = yield* createAll(base, values.map((valueQuantity) => ({ resourceType: "Observation", status: "final", code, valueQuantity })))
          const find = (value: string) =>
            Effect.map(matching(base, "Observation", `code=http://example.org/codes|qty-${backend.kind}&value-quantity=${encodeURIComponent(value)}`, ids), labelled(labels, ids))
          expect(yield* find(`5.4|${ucum}|mg`)).toEqual(["5.4 mg", "5400 ug"])
          expect(yield* find(`0.0054|${ucum}|g`)).toEqual(["5.4 mg", "5400 ug"])
          expect(yield* find(`gt0.0055|${ucum}|g`)).toEqual(["6 mg"])
          expect(yield* find("5.4||mg")).toEqual(["5.4 mg", "5400 ug"])
          expect(yield* find("5.4")).toEqual(["5.4 mg", "5.4 mmol/L", "5.4 tablets"])
          expect(yield* find("5.4||tablets")).toEqual(["5.4 tablets"])
          expect(yield* find("le5.4")).toEqual(["5.4 mg", "5.4 mmol/L", "5.4 tablets"])
          expect(yield* find(`ap5|${ucum}|mg`)).toEqual(["5.4 mg", "5400 ug"])
          expect(yield* find("5.40")).toEqual(["5.4 mg", "5.4 mmol/L", "5.4 tablets"])
          expect(yield* find("5")).toEqual(["5.4 mg", "5.4 mmol/L", "5.4 tablets"])
          expect(yield* find("5.0")).toEqual([])
        }))

      it.effect("quantities in units beyond the hand table of UCUM units match in another unit of the same kind", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const code = { coding: [{ system: "http://example.org/codes", code: `ucum-${backend.kind}` }] }
          const values = [
            { value: 11, unit: "st", system: ucum, code: "[stone_av]" },
            { value: 70, unit: "kg", system: ucum, code: "kg" },
            { value: 1, unit: "pt", system: ucum, code: "[pt_us]" },
            { value: 140, unit: "mEq/L", system: ucum, code: "meq/L" }
          ]
          const labels = ["11 [stone_av]", "70 kg", "1 [pt_us]", "140 meq/L"]
          const ids = yield* createAll(base, values.map((valueQuantity) => ({ resourceType: "Observation", status: "final", code, valueQuantity })))
          const find = (value: string) =>
            Effect.map(matching(base, "Observation", `code=http://example.org/codes|ucum-${backend.kind}&value-quantity=${encodeURIComponent(value)}`, ids), labelled(labels, ids))
          // 11 stone are 69.853 kg; 70 kg are 11.023 stone.
          expect(yield* find(`69.85|${ucum}|kg`)).toEqual(["11 [stone_av]"])
          expect(yield* find("69.85||kg")).toEqual(["11 [stone_av]"])
          expect(yield* find(`gt69|${ucum}|kg`)).toEqual(["11 [stone_av]", "70 kg"])
          expect(yield* find(`11|${ucum}|[stone_av]`)).toEqual(["11 [stone_av]", "70 kg"])
          expect(yield* find(`lt11.01|${ucum}|[stone_av]`)).toEqual(["11 [stone_av]"])
          expect(yield* find(`0.47|${ucum}|L`)).toEqual(["1 [pt_us]"])
          expect(yield* find(`140|${ucum}|mmol/L`)).toEqual(["140 meq/L"])
        }))

      it.effect("numbers use the precision of the value searched for", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const { json: patient } = yield* call("POST", `${base}/Patient`, { body: { resourceType: "Patient" } })
          const probabilities = [0.2, 0.3, 0.4, 0.5]
          const ids = yield* createAll(base, probabilities.map((probabilityDecimal) => ({
            resourceType: "RiskAssessment",
            status: "final",
            subject: { reference: `Patient/${patient.id}` },
            prediction: [{ probabilityDecimal }]
          })))
          const find = (value: string) => Effect.map(matching(base, "RiskAssessment", `subject=Patient/${patient.id}&probability=${value}`, ids), labelled(probabilities.map(String), ids))
          expect(yield* find("0.3")).toEqual(["0.3"])
          expect(yield* find("0.30")).toEqual(["0.3"])
          expect(yield* find("gt0.3")).toEqual(["0.4", "0.5"])
          expect(yield* find("ge0.3")).toEqual(["0.3", "0.4", "0.5"])
          expect(yield* find("lt0.3")).toEqual(["0.2"])
          expect(yield* find("ne0.3")).toEqual(["0.2", "0.4", "0.5"])
          expect(yield* find("0.3,0.5")).toEqual(["0.3", "0.5"])
        }))

      it.effect("tokens with and without a system, :not, :text, :of-type and :missing", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const marker = `tok${backend.kind}${Date.now()}`
          const mr = { coding: [{ system: "http://terminology.hl7.org/CodeSystem/v2-0203", code: "MR" }], text: "Medical record number" }
          const ids = yield* createAll(base, [
            { resourceType: "Patient", identifier: [{ system: "http://a.example", value: marker, type: mr }], gender: "female" },
            { resourceType: "Patient", identifier: [{ value: marker }], gender: "male" },
            { resourceType: "Patient", identifier: [{ system: "http://b.example", value: marker }] }
          ])
          const labels = ["a", "none", "b"]
          const find = (query: string) => Effect.map(matching(base, "Patient", `identifier=${encodeURIComponent(`http://a.example|${marker}`)},${marker}&${query}`, ids), labelled(labels, ids))
          const only = (query: string) => Effect.map(matching(base, "Patient", query, ids), labelled(labels, ids))
          expect(yield* only(`identifier=${marker}`)).toEqual(["a", "none", "b"])
          expect(yield* only(`identifier=http://a.example|${marker}`)).toEqual(["a"])
          expect(yield* only(`identifier=|${marker}`)).toEqual(["none"])
          expect(yield* only("identifier=http://b.example|")).toEqual(["b"])
          expect(yield* only(`identifier:of-type=http://terminology.hl7.org/CodeSystem/v2-0203|MR|${marker}`)).toEqual(["a"])
          expect(yield* only(`identifier=${marker}&gender:not=female`)).toEqual(["none", "b"])
          expect(yield* only(`identifier=${marker}&gender:missing=true`)).toEqual(["b"])
          expect(yield* only(`identifier=${marker}&gender:missing=false`)).toEqual(["a", "none"])
          expect(yield* find("gender=female,male")).toEqual(["a", "none"])

          const glucose = { coding: [{ system: "http://loinc.org", code: "2339-0", display: "Glucose [Mass/volume] in Blood" }] }
          const [observation] = yield* createAll(base, [{ resourceType: "Observation", status: "final", code: glucose, subject: { identifier: { value: marker } } }])
          const text = (value: string) => matching(base, "Observation", `code:text=${encodeURIComponent(value)}&subject:identifier=${marker}`, [observation!])
          expect(yield* text("glucose")).toEqual([observation])
          expect(yield* text("BLOOD")).toEqual([observation])
          expect(yield* text("mass/volume")).toEqual([observation])
          expect(yield* text("lucose")).toEqual([])
        }))

      it.effect(":in, :not-in, :below and :above use the ValueSets and CodeSystems of the packages", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const code = { coding: [{ system: "http://example.org/codes", code: `vs-${backend.kind}` }] }
          const statuses = ["final", "amended", "corrected", "preliminary"]
          const ids = yield* createAll(base, statuses.map((status) => ({ resourceType: "Observation", status, code })))
          const find = (query: string) => Effect.map(matching(base, "Observation", `code=http://example.org/codes|vs-${backend.kind}&${query}`, ids), labelled(statuses, ids))
          expect(yield* find("status:below=http://hl7.org/fhir/observation-status|amended")).toEqual(["amended", "corrected"])
          expect(yield* find("status:above=http://hl7.org/fhir/observation-status|corrected")).toEqual(["amended", "corrected"])
          expect(yield* find("status:in=http://hl7.org/fhir/ValueSet/observation-status")).toEqual(statuses)
          expect(yield* find("status:not-in=http://hl7.org/fhir/ValueSet/observation-status")).toEqual([])
          const unknown = yield* call("GET", `${base}/Observation?status:in=http://example.org/no-such-valueset`)
          expect(unknown.status).toBe(400)
          expect(unknown.json.issue[0].diagnostics).toContain("the ValueSet http://example.org/no-such-valueset is not known to this server")
        }))

      it.effect(":in uses a CodeSystem and ValueSet created through the API once they are written, and forgets a deleted one", () =>
        Effect.gen(function*() {
          const { base, searchIndexed } = yield* Server
          const system = `http://example.org/CodeSystem/colours-${backend.kind}`
          const valueSet = `http://example.org/ValueSet/colours-${backend.kind}`
          const query = `${base}/Observation?code:in=${valueSet}`
          expect((yield* call("GET", query)).status).toBe(400)
          const codes = yield* call("POST", `${base}/CodeSystem`, {
            body: { resourceType: "CodeSystem", url: system, status: "active", content: "complete", concept: [{ code: "red" }, { code: "blue" }] }
          })
          expect(codes.status).toBe(201)
          const set = yield* call("POST", `${base}/ValueSet`, {
            body: { resourceType: "ValueSet", url: valueSet, status: "active", compose: { include: [{ system, concept: [{ code: "red" }] }] } }
          })
          expect(set.status).toBe(201)
          const observation = (code: string) =>
            Effect.map(call("POST", `${base}/Observation`, { body: { resourceType: "Observation", status: "final", code: { coding: [{ system, code }] } } }), (r) => r.json.id as string)
          const red = yield* observation("red")
          yield* observation("blue")
          yield* searchIndexed
          const found = yield* call("GET", query)
          expect(found.status).toBe(200)
          expect(found.json.entry.map((entry: any) => entry.resource.id)).toEqual([red])
          expect((yield* call("DELETE", `${base}/ValueSet/${set.json.id}`)).status).toBeLessThan(300)
          yield* searchIndexed
          expect((yield* call("GET", query)).status).toBe(400)
        }))

      it.effect("strings: accent- and case-insensitive prefixes, :exact and :contains", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const suffix = backend.kind
          const names = [`Müller${suffix}`, `Muller${suffix}`, `Mullerova${suffix}`, `Smith${suffix}`]
          const ids = yield* createAll(base, names.map((family) => ({ resourceType: "Patient", name: [{ family, given: ["Anna Maria"] }] })))
          const find = (query: string) => Effect.map(matching(base, "Patient", query, ids), labelled(names, ids))
          expect(yield* find(`family=muller${suffix}`)).toEqual([`Müller${suffix}`, `Muller${suffix}`])
          expect(yield* find("family=MULL")).toEqual([`Müller${suffix}`, `Muller${suffix}`, `Mullerova${suffix}`])
          expect(yield* find(`family:exact=${encodeURIComponent(`Müller${suffix}`)}`)).toEqual([`Müller${suffix}`])
          expect(yield* find(`family:exact=muller${suffix}`)).toEqual([])
          expect(yield* find(`family:contains=ova${suffix}`)).toEqual([`Mullerova${suffix}`])
          expect(yield* find(`name=anna%20maria&family=mu`)).toEqual([`Müller${suffix}`, `Muller${suffix}`, `Mullerova${suffix}`])
          expect(yield* find(`family=smith${suffix},mullerova${suffix}`)).toEqual([`Mullerova${suffix}`, `Smith${suffix}`])
        }))

      it.effect("references: Type/id, bare id, :Type, :identifier and absolute URLs", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const [patient, group] = yield* createAll(base, [{ resourceType: "Patient" }, { resourceType: "Group", type: "person", actual: true }])
          const marker = `ref${backend.kind}${Date.now()}`
          const ids = yield* createAll(base, [
            { resourceType: "Observation", status: "final", code: { text: "x" }, subject: { reference: `Patient/${patient}` } },
            { resourceType: "Observation", status: "final", code: { text: "x" }, subject: { reference: `Group/${group}` } },
            { resourceType: "Observation", status: "final", code: { text: "x" }, subject: { identifier: { system: "http://ids.example", value: marker } } },
            { resourceType: "Observation", status: "final", code: { text: "x" }, subject: { reference: `${base}/Patient/${patient}` } }
          ])
          // Under the default reference policy (strict) a reference to another server is refused.
          const elsewhere = yield* call("POST", `${base}/Observation`, {
            body: { resourceType: "Observation", status: "final", code: { text: "x" }, subject: { reference: `http://elsewhere.example/fhir/Patient/${patient}` } }
          })
          expect(elsewhere.status).toBe(422)
          const labels = ["patient", "group", "identifier", "absolute"]
          const find = (query: string) => Effect.map(matching(base, "Observation", query, ids), labelled(labels, ids))
          expect(yield* find(`subject=Patient/${patient}`)).toEqual(["patient"])
          expect(yield* find(`subject=${patient}`)).toEqual(["patient"])
          expect(yield* find(`subject:Group=${group}`)).toEqual(["group"])
          expect(yield* find(`subject=Patient/${patient},Group/${group}`)).toEqual(["patient", "group"])
          expect(yield* find(`subject:identifier=http://ids.example|${marker}`)).toEqual(["identifier"])
          expect(yield* find(`subject=${encodeURIComponent(`${base}/Patient/${patient}`)}`)).toEqual(["absolute"])
          expect(yield* find(`patient=${patient}`)).toEqual(["patient"])
          expect(yield* find(`subject:missing=true&code:text=x`)).toEqual([])
        }))

      it.effect("uris: exact, :below and :above by path", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const root = `http://example.org/${backend.kind}/fhir`
          const urls = [`${root}/ValueSet/a`, `${root}/ValueSet/a/b`, `${root}/ValueSetX`, `${root}`]
          const ids = yield* createAll(base, urls.map((url) => ({ resourceType: "ValueSet", status: "draft", url })))
          const find = (query: string) => Effect.map(matching(base, "ValueSet", query, ids), labelled(urls, ids))
          expect(yield* find(`url=${root}/ValueSet/a`)).toEqual([`${root}/ValueSet/a`])
          expect(yield* find(`url:below=${root}/ValueSet`)).toEqual([`${root}/ValueSet/a`, `${root}/ValueSet/a/b`])
          expect(yield* find(`url:below=${root}/ValueSet/`)).toEqual([`${root}/ValueSet/a`, `${root}/ValueSet/a/b`])
          expect(yield* find(`url:above=${root}/ValueSet/a/b/c`)).toEqual([`${root}/ValueSet/a`, `${root}/ValueSet/a/b`, root])
        }))

      it.effect("composites match both parts on the same element", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const system = `http://example.org/${backend.kind}/bp`
          const component = (code: string, value: number) => ({ code: { coding: [{ system, code }] }, valueQuantity: { value, system: ucum, code: "mm[Hg]", unit: "mmHg" } })
          const ids = yield* createAll(base, [
            { resourceType: "Observation", status: "final", code: { text: "bp" }, component: [component("systolic", 150), component("diastolic", 90)] },
            { resourceType: "Observation", status: "final", code: { text: "bp" }, component: [component("systolic", 110), component("diastolic", 150)] }
          ])
          const find = (value: string) => Effect.map(matching(base, "Observation", `component-code-value-quantity=${encodeURIComponent(value)}`, ids), labelled(["high", "crossed"], ids))
          expect(yield* find(`${system}|systolic$gt140`)).toEqual(["high"])
          expect(yield* find(`${system}|systolic$gt140|${ucum}|mm[Hg]`)).toEqual(["high"])
          expect(yield* find(`${system}|diastolic$gt140`)).toEqual(["crossed"])
          expect(yield* find(`${system}|systolic$lt140,${system}|diastolic$lt100`)).toEqual(["high", "crossed"])
          expect(yield* find(`${system}|systolic$150`)).toEqual(["high"])
        }))

      it.effect("near finds Locations within a distance", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const name = `near-${backend.kind}-${Date.now()}`
          const places = [
            { label: "here", latitude: 42.2565, longitude: -83.6948 },
            { label: "5 km north", latitude: 42.3015, longitude: -83.6948 },
            { label: "50 km east", latitude: 42.2565, longitude: -83.0874 }
          ]
          const ids = yield* createAll(base, places.map((p) => ({ resourceType: "Location", name, position: { latitude: p.latitude, longitude: p.longitude } })))
          const find = (near: string) => Effect.map(matching(base, "Location", `name=${name}&near=${encodeURIComponent(near)}`, ids), labelled(places.map((p) => p.label), ids))
          expect(yield* find("42.2565|-83.6948|1|km")).toEqual(["here"])
          expect(yield* find("42.2565|-83.6948|10|km")).toEqual(["here", "5 km north"])
          expect(yield* find(`42.2565|-83.6948|100|km`)).toEqual(["here", "5 km north", "50 km east"])
          expect(yield* find("42.2565|-83.6948|4000|m")).toEqual(["here"])
          expect(yield* find("42.2565|-83.6948|4|[mi_i]")).toEqual(["here", "5 km north"])
          expect(yield* find("42.2565|-83.6948")).toEqual(["here"])
          const bad = yield* call("GET", `${base}/Location?near=${encodeURIComponent("42.2565|-83.6948|4|kg")}`)
          expect(bad.status).toBe(400)
        }))

      it.effect("common parameters: _lastUpdated, _tag, _profile, _security, _source, _text, _content, _list", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const marker = `common${backend.kind}${Date.now()}`
          const before = new Date(Date.now() - 60_000).toISOString()
          const ids = yield* createAll(base, [
            {
              resourceType: "Patient",
              meta: {
                tag: [{ system: "http://tags.example", code: marker }],
                profile: ["http://example.org/StructureDefinition/special"],
                security: [{ system: "http://terminology.hl7.org/CodeSystem/v3-Confidentiality", code: "R" }],
                source: `http://source.example/${marker}`
              },
              text: { status: "generated", div: `<div xmlns="http://www.w3.org/1999/xhtml">Wears a purple hat ${marker}</div>` },
              name: [{ family: marker }]
            },
            { resourceType: "Patient", name: [{ family: marker, given: ["Zebediah"] }] }
          ])
          const labels = ["tagged", "plain"]
          const find = (query: string) => Effect.map(matching(base, "Patient", `family=${marker}&${query}`, ids), labelled(labels, ids))
          expect(yield* find(`_lastUpdated=ge${encodeURIComponent(before)}`)).toEqual(["tagged", "plain"])
          expect(yield* find(`_lastUpdated=lt${encodeURIComponent(before)}`)).toEqual([])
          expect(yield* find(`_tag=http://tags.example|${marker}`)).toEqual(["tagged"])
          expect(yield* find("_profile=http://example.org/StructureDefinition/special")).toEqual(["tagged"])
          expect(yield* find("_security=R")).toEqual(["tagged"])
          expect(yield* find(`_source=http://source.example/${marker}`)).toEqual(["tagged"])
          expect(yield* find("_text=purple%20HAT")).toEqual(["tagged"])
          expect(yield* find("_text=zebediah")).toEqual([])
          expect(yield* find("_content=zebediah")).toEqual(["plain"])
          expect(yield* find("_content=purple,zebediah")).toEqual(["tagged", "plain"])
          const { json: list } = yield* call("POST", `${base}/List`, {
            body: { resourceType: "List", status: "current", mode: "working", entry: [{ item: { reference: `Patient/${ids[1]}` } }] }
          })
          expect(yield* find(`_list=${list.id}`)).toEqual(["plain"])
        }))

      it.effect("every unreadable value is a 400 naming it, and handling=lenient sets it aside", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const cases: ReadonlyArray<readonly [string, string, string]> = [
            ["Patient", "birthdate", "2020-13"],
            ["Patient", "birthdate", "gt2020-02-30"],
            ["RiskAssessment", "probability", "abc"],
            ["Observation", "value-quantity", "5|x"],
            ["Observation", "component-code-value-quantity", "http://loinc.org|8480-6"],
            ["Location", "near", "42.25"],
            ["Patient", "gender:missing", "maybe"],
            ["Patient", "identifier:of-type", "a|b"],
            ["Patient", "nonsense", "1"],
            ["Patient", "family:nonsense", "x"]
          ]
          for (const [type, parameter, value] of cases) {
            const strict = yield* call("GET", `${base}/${type}?${parameter}=${encodeURIComponent(value)}`)
            expect([parameter, strict.status]).toEqual([parameter, 400])
            expect(strict.json.resourceType).toBe("OperationOutcome")
            expect(strict.json.issue[0].diagnostics).toContain(parameter.split(":")[0])
            if (!parameter.includes("nonsense")) expect(strict.json.issue[0].diagnostics).toContain(value)
            const lenient = yield* call("GET", `${base}/${type}?${parameter}=${encodeURIComponent(value)}&_count=1`, { headers: { prefer: "handling=lenient" } })
            expect([parameter, lenient.status]).toEqual([parameter, 200])
            expect(lenient.headers.get("preference-applied")).toBe("handling=lenient")
            const outcome = lenient.json.entry.find((e: any) => e.search.mode === "outcome")
            expect(outcome.resource.issue[0]).toMatchObject({ severity: "warning" })
            expect(lenient.json.link.find((l: any) => l.relation === "self").url).not.toContain(parameter.split(":")[0])
          }
        }))
    })
  })
}
