/**
 * Search over the 55 Synthea patients (../shared/data/synthea), checked against an answer computed
 * here from the bundles' JSON: every search below returns exactly the resources FHIR R4 says it
 * should (https://hl7.org/fhir/R4/search.html), paged through its `next` links, none twice. The
 * expected sets come from plain TypeScript over the resources as sent (their `urn:uuid:` references
 * read as the `Type/id` the server created), not from the server's index. On SQLite and Postgres,
 * each server with the real R4 packages (the search parameters are R4 core's).
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { type BackendKind, pgAvailable } from "../support/backends.ts"
import { realPackageCache, registryUrl, skipRealPackages } from "../support/npmRegistry.ts"
import { call, type Reply, startServer, type TestServer } from "../support/server.ts"
import { loadSynthea, skipSynthea, type SyntheaBundle, syntheaValidation } from "../support/synthea.ts"
import { type Bounds, dateBounds, matchesDate, normalized, periodBounds } from "../support/searchExpect.ts"

class Server extends Context.Tag("test/SyntheaSearchServer")<Server, TestServer>() {}

const bundles: ReadonlyArray<SyntheaBundle> = skipSynthea ? [] : loadSynthea()

const loinc = "http://loinc.org"
const snomed = "http://snomed.info/sct"
const ucum = "http://unitsofmeasure.org"
const actCode = "http://terminology.hl7.org/CodeSystem/v3-ActCode"
const bodyHeight = "8302-2"
const bodyWeight = "29463-7"

/** A resource as the server holds it: the bundle's JSON with the created id and its references rewritten. */
interface Stored {
  readonly type: string
  readonly id: string
  readonly resource: Record<string, any>
}

/** `Type/id` from a `response.location` of `Type/id/_history/n`, relative to `base` or under it. */
const locationOf = (base: string, location: unknown): { readonly type: string; readonly id: string } | undefined => {
  if (typeof location !== "string") return undefined
  const relative = location.startsWith(`${base}/`) ? location.slice(base.length + 1) : location
  const match = /^([A-Z][A-Za-z]+)\/([A-Za-z0-9\-.]{1,64})\/_history\/[0-9]+$/.exec(relative)
  return match === null ? undefined : { type: match[1]!, id: match[2]! }
}

/** `value` with every `reference` that names a fullUrl of its bundle replaced by the created `Type/id`. */
const rewritten = (value: unknown, created: ReadonlyMap<string, string>): any => {
  if (Array.isArray(value)) return value.map((item) => rewritten(item, created))
  if (typeof value !== "object" || value === null) return value
  return Object.fromEntries(Object.entries(value).map(([key, child]) =>
    [key, key === "reference" && typeof child === "string" ? created.get(child) ?? child : rewritten(child, created)]))
}

const codings = (concept: any): ReadonlyArray<{ readonly system?: string; readonly code?: string }> => concept?.coding ?? []

/** Token `system|code` on a CodeableConcept: a coding with both (an undefined system matches any). */
const hasCoding = (concept: any, system: string | undefined, code: string): boolean =>
  codings(concept).some((coding) => coding.code === code && (system === undefined || coding.system === system))

/** At most `n` items of a list in a message, and how many there were. */
const firstOf = (items: ReadonlyArray<string>, n = 10): Array<string> =>
  items.length <= n ? [...items] : [...items.slice(0, n), `... ${items.length - n} more`]

const backendsUnderTest: ReadonlyArray<{ readonly kind: BackendKind; readonly skip: boolean }> = [
  { kind: "sqlite", skip: false },
  { kind: "postgres", skip: !pgAvailable }
]

for (const backend of backendsUnderTest) {
  describe.skipIf(skipRealPackages || skipSynthea || backend.skip)(`search over the Synthea patients on ${backend.kind}`, () => {
    /** Filled by the first test: every created resource, by type, in the order created. */
    let loaded: ReadonlyMap<string, ReadonlyArray<Stored>> | undefined

    const all = (type: string): ReadonlyArray<Stored> => {
      if (loaded === undefined) throw new Error("the bundles were not all committed (see the first test)")
      return loaded.get(type) ?? []
    }

    /** The ids of `type` whose resource satisfies `test`. */
    const expected = (type: string, test: (resource: Record<string, any>) => boolean): Array<string> =>
      all(type).filter((stored) => test(stored.resource)).map((stored) => stored.id)

    /**
     * Every match of `query` on `type`, in the server's order, following `next` links: each page a 200
     * searchset of matches, no resource twice. With `total`, the first page asks for `_total=accurate`
     * and its total must be what the pages held.
     */
    const searchAll = (type: string, query: string, count = 200, total = false) =>
      Effect.gen(function*() {
        const { base } = yield* Server
        const seen: Array<Record<string, any>> = []
        const ids = new Set<string>()
        const repeated: Array<string> = []
        let first: number | undefined
        let next: string | undefined = `${base}/${type}?${query}&_count=${count}${total ? "&_total=accurate" : ""}`
        let pages = 0
        while (next !== undefined) {
          const reply: Reply = yield* call("GET", next)
          expect([next, reply.status, reply.status === 200 ? "" : reply.text.slice(0, 500)]).toEqual([next, 200, ""])
          expect(reply.json.type).toBe("searchset")
          if (pages === 0) first = reply.json.total
          for (const entry of reply.json.entry ?? []) {
            expect(entry.search?.mode).toBe("match")
            const resource = entry.resource
            expect(resource.resourceType).toBe(type)
            if (ids.has(resource.id)) repeated.push(resource.id)
            ids.add(resource.id)
            seen.push(resource)
          }
          next = (reply.json.link ?? []).find((link: any) => link.relation === "next")?.url
          pages++
          expect(pages).toBeLessThan(1000)
        }
        expect([query, firstOf(repeated)]).toEqual([query, []])
        if (total) expect([query, first]).toEqual([query, seen.length])
        return seen
      })

    /** `_summary=count`'s total for `query` on `type`. */
    const countOf = (type: string, query: string) =>
      Effect.gen(function*() {
        const { base } = yield* Server
        const reply = yield* call("GET", `${base}/${type}?${query === "" ? "" : `${query}&`}_summary=count`)
        expect([query, reply.status]).toEqual([query, 200])
        expect(reply.json.entry ?? []).toEqual([])
        return reply.json.total as number
      })

    /** The search returns exactly `ids` (in any order), and `_summary=count` counts them. */
    const expectExactly = (type: string, query: string, ids: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        const found = (yield* searchAll(type, query)).map((resource) => resource.id as string)
        const want = new Set(ids)
        const got = new Set(found)
        const missing = ids.filter((id) => !got.has(id))
        const unexpected = found.filter((id) => !want.has(id))
        expect([`${type}?${query}`, firstOf(missing), firstOf(unexpected)]).toEqual([`${type}?${query}`, [], []])
        expect([query, found.length]).toEqual([query, ids.length])
        expect([query, yield* countOf(type, query)]).toEqual([query, ids.length])
        return found
      })

    layer(
      Layer.scoped(Server, startServer(backend.kind, {
        conformance: { package_registry: registryUrl ?? "", package_cache: realPackageCache },
        validation: syntheaValidation
      })),
      { timeout: 600_000, excludeTestServices: true }
    )((it) => {
      it.effect(`loads the ${bundles.length} bundles as transactions and records what each fullUrl became`, () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          // 55 bundles, one of them refused for defects of the data (test/support/synthea.ts).
          expect(bundles.length).toBe(54)
          const byType = new Map<string, Array<Stored>>()
          for (const { file, bundle, text } of bundles) {
            const reply = yield* call("POST", base, { body: text })
            expect([file, reply.status, reply.status === 200 ? "" : reply.text.slice(0, 500)]).toEqual([file, 200, ""])
            expect([file, reply.json.entry?.length]).toEqual([file, bundle.entry.length])
            const created = new Map<string, string>()
            const locations = bundle.entry.map((entry, index) => {
              const location = locationOf(base, reply.json.entry[index]?.response?.location)
              expect([file, index, location?.type]).toEqual([file, index, entry.resource.resourceType])
              created.set(entry.fullUrl, `${location!.type}/${location!.id}`)
              return location!
            })
            bundle.entry.forEach((entry, index) => {
              const { type, id } = locations[index]!
              const resource = { ...rewritten(entry.resource, created), id }
              const ofType = byType.get(type) ?? []
              ofType.push({ type, id, resource })
              byType.set(type, ofType)
            })
          }
          expect(byType.get("Patient")?.length).toBe(54)
          loaded = byType
        }), 900_000)

      it.effect("token: system|code, code alone, |code, and a code element's system from its binding", () =>
        Effect.gen(function*() {
          const height = expected("Observation", (o) => hasCoding(o.code, loinc, bodyHeight))
          expect(height.length).toBeGreaterThan(400)
          yield* expectExactly("Observation", `code=${encodeURIComponent(`${loinc}|${bodyHeight}`)}`, height)
          yield* expectExactly("Observation", `code=${bodyHeight}`, expected("Observation", (o) => hasCoding(o.code, undefined, bodyHeight)))
          // `|code` asks for a coding without a system: Synthea always names one.
          yield* expectExactly("Observation", `code=${encodeURIComponent(`|${bodyHeight}`)}`, [])
          // Two codes, ORed.
          yield* expectExactly("Observation", `code=${encodeURIComponent(`${loinc}|${bodyHeight},${loinc}|${bodyWeight}`)}`,
            expected("Observation", (o) => hasCoding(o.code, loinc, bodyHeight) || hasCoding(o.code, loinc, bodyWeight)))

          // The most frequent SNOMED code among the Conditions.
          const conditionCodes = new Map<string, number>()
          for (const { resource } of all("Condition")) {
            for (const coding of codings(resource["code"])) {
              if (coding.system === snomed && coding.code !== undefined) conditionCodes.set(coding.code, (conditionCodes.get(coding.code) ?? 0) + 1)
            }
          }
          const [condition] = [...conditionCodes].sort((a, b) => b[1] - a[1])[0]!
          yield* expectExactly("Condition", `code=${encodeURIComponent(`${snomed}|${condition}`)}`, expected("Condition", (c) => hasCoding(c.code, snomed, condition)))

          yield* expectExactly("Patient", "gender=female", expected("Patient", (p) => p.gender === "female"))
          yield* expectExactly("Patient", "gender=male,other", expected("Patient", (p) => p.gender === "male" || p.gender === "other"))

          // Encounter.class is a Coding.
          for (const cls of ["AMB", "EMER", "IMP"]) {
            const ids = expected("Encounter", (e) => e.class?.system === actCode && e.class?.code === cls)
            expect([cls, ids.length > 0]).toEqual([cls, true])
            yield* expectExactly("Encounter", `class=${encodeURIComponent(`${actCode}|${cls}`)}`, ids)
          }
          yield* expectExactly("Encounter", "class=EMER", expected("Encounter", (e) => e.class?.code === "EMER"))

          // Observation.status is a code: `final` and `http://hl7.org/fhir/observation-status|final` alike.
          const final = expected("Observation", (o) => o.status === "final")
          expect(final.length).toBe(all("Observation").length)
          expect(yield* countOf("Observation", "status=final")).toBe(final.length)
          yield* expectExactly("Observation", `status=${encodeURIComponent("http://hl7.org/fhir/observation-status|final")}`, final)
          yield* expectExactly("Observation", "status=amended", [])
        }), 300_000)

      it.effect("date: a year as ge/lt by instants, with and without a timezone in the query, dateTimes and Periods", () =>
        Effect.gen(function*() {
          const effective = (o: Record<string, any>): Bounds | undefined =>
            o.effectiveDateTime !== undefined ? dateBounds(o.effectiveDateTime) : o.effectivePeriod !== undefined ? periodBounds(o.effectivePeriod) : undefined
          const inRange = (resource: Record<string, any>, ...conditions: ReadonlyArray<string>) => {
            const bounds = effective(resource)
            return bounds !== undefined && conditions.every((condition) => matchesDate(bounds, condition))
          }
          const year2015 = expected("Observation", (o) => inRange(o, "ge2015", "lt2016"))
          expect(year2015.length).toBeGreaterThan(100)
          yield* expectExactly("Observation", "date=ge2015&date=lt2016", year2015)
          // The same instants written in another zone, `+` and `-` offsets encoded.
          const fromNewYork = ["ge2014-12-31T19:00:00-05:00", "lt2015-12-31T19:00:00-05:00"]
          const shifted = expected("Observation", (o) => inRange(o, ...fromNewYork))
          expect(shifted).toEqual(year2015)
          yield* expectExactly("Observation", fromNewYork.map((value) => `date=${encodeURIComponent(value)}`).join("&"), shifted)
          const fromTokyo = ["ge2015-06-01T09:00:00+09:00", "lt2015-07-01T09:00:00+09:00"]
          const june = expected("Observation", (o) => inRange(o, ...fromTokyo))
          expect(june.length).toBeGreaterThan(0)
          yield* expectExactly("Observation", fromTokyo.map((value) => `date=${encodeURIComponent(value)}`).join("&"), june)
          // A bare day, and gt/le.
          yield* expectExactly("Observation", "date=gt2020-06-30&date=le2020-12", expected("Observation", (o) => inRange(o, "gt2020-06-30", "le2020-12")))
          // Encounter.period: a Period covers start..end.
          yield* expectExactly("Encounter", "date=ge2015&date=lt2016", expected("Encounter", (e) => e.period !== undefined && ["ge2015", "lt2016"].every((c) => matchesDate(periodBounds(e.period)!, c))))
          yield* expectExactly("Encounter", "date=2015-03", expected("Encounter", (e) => e.period !== undefined && matchesDate(periodBounds(e.period)!, "2015-03")))

          // Patient.birthDate is a date: eq a day, le a year.
          const birthDates = all("Patient").map(({ resource }) => resource["birthDate"] as string)
          for (const day of [birthDates[0]!, birthDates[20]!, "1939-01-27"]) {
            yield* expectExactly("Patient", `birthdate=${day}`, expected("Patient", (p) => p.birthDate === day))
          }
          expect(expected("Patient", (p) => p.birthDate === "1939-01-27").length).toBe(2)
          const before1950 = expected("Patient", (p) => matchesDate(dateBounds(p.birthDate)!, "le1950"))
          expect(before1950).toEqual(expected("Patient", (p) => p.birthDate < "1951"))
          yield* expectExactly("Patient", "birthdate=le1950", before1950)
          yield* expectExactly("Patient", "birthdate=1963", expected("Patient", (p) => p.birthDate.startsWith("1963-")))
        }), 300_000)

      it.effect("token and date together: one code from a day on", () =>
        Effect.gen(function*() {
          const code = `code=${encodeURIComponent(`${loinc}|${bodyWeight}`)}`
          const ids = expected("Observation", (o) => hasCoding(o.code, loinc, bodyWeight) && matchesDate(dateBounds(o.effectiveDateTime)!, "ge2018-06-01"))
          expect(ids.length).toBeGreaterThan(20)
          yield* expectExactly("Observation", `${code}&date=ge2018-06-01`, ids)
          yield* expectExactly("Observation", `${code}&date=ge2018-06-01&date=lt2019`,
            expected("Observation", (o) => hasCoding(o.code, loinc, bodyWeight) && ["ge2018-06-01", "lt2019"].every((c) => matchesDate(dateBounds(o.effectiveDateTime)!, c))))
        }), 300_000)

      it.effect("string: starts with, case and accents aside, on family names (maiden names too) and on any part of a name", () =>
        Effect.gen(function*() {
          const names = (p: Record<string, any>): ReadonlyArray<Record<string, any>> => p.name ?? []
          const family = (prefix: string) => (p: Record<string, any>) =>
            names(p).some((name) => typeof name["family"] === "string" && normalized(name["family"]).startsWith(normalized(prefix)))
          const anyPart = (prefix: string) => (p: Record<string, any>) =>
            names(p).some((name) =>
              [name["text"], name["family"], ...(name["given"] ?? []), ...(name["prefix"] ?? []), ...(name["suffix"] ?? [])]
                .some((part) => typeof part === "string" && normalized(part).startsWith(normalized(prefix))))
          // `ordo` finds Ordóñez; `O'H` O'Hara; `b` a handful.
          for (const prefix of ["ordo", "Ordóñ", "TREVI", "Mc", "mac", "O'H", "b", "Aufderhar", "zzz"]) {
            const ids = expected("Patient", family(prefix))
            if (!["zzz"].includes(prefix)) expect([prefix, ids.length > 0]).toEqual([prefix, true])
            yield* expectExactly("Patient", `family=${encodeURIComponent(prefix)}`, ids)
          }
          // A maiden name is a second HumanName: the patient is found by either.
          expect(expected("Patient", family("Aufderhar")).some((id) => expected("Patient", family("Grant")).includes(id))).toBe(true)
          const first = all("Patient")[0]!.resource
          const given = first["name"][0]["given"][0] as string
          for (const prefix of [given, given.slice(0, 3).toLowerCase(), "mrs", "Ms.", "conce"]) {
            const ids = expected("Patient", anyPart(prefix))
            expect([prefix, ids.length > 0]).toEqual([prefix, true])
            yield* expectExactly("Patient", `name=${encodeURIComponent(prefix)}`, ids)
          }
          // Two prefixes, ORed; repeated, ANDed.
          yield* expectExactly("Patient", "family=mc,mac", expected("Patient", (p) => family("mc")(p) || family("mac")(p)))
          yield* expectExactly("Patient", "name=mrs&family=b", expected("Patient", (p) => anyPart("mrs")(p) && family("b")(p)))
        }), 300_000)

      it.effect("reference: subject as Type/id, patient as a bare id, for Observations and Encounters", () =>
        Effect.gen(function*() {
          const patients = all("Patient")
          for (const { id } of [patients[0]!, patients[27]!, patients[53]!]) {
            const reference = `Patient/${id}`
            const observations = expected("Observation", (o) => o.subject?.reference === reference)
            expect(observations.length).toBeGreaterThan(0)
            yield* expectExactly("Observation", `subject=${reference}`, observations)
            yield* expectExactly("Observation", `patient=${id}`, observations)
            yield* expectExactly("Observation", `patient=${reference}`, observations)
            yield* expectExactly("Observation", `subject:Patient=${id}`, observations)
            const encounters = expected("Encounter", (e) => e.subject?.reference === reference)
            expect(encounters.length).toBeGreaterThan(0)
            yield* expectExactly("Encounter", `subject=${reference}`, encounters)
            yield* expectExactly("Encounter", `patient=${id}`, encounters)
            // With a code: one patient's heights.
            yield* expectExactly("Observation", `patient=${id}&code=${encodeURIComponent(`${loinc}|${bodyHeight}`)}`,
              expected("Observation", (o) => o.subject?.reference === reference && hasCoding(o.code, loinc, bodyHeight)))
          }
          yield* expectExactly("Observation", "subject=Patient/no-such-patient", [])
        }), 300_000)

      it.effect("chains and _has: Observations by their patient's name, Patients by their Observations' codes", () =>
        Effect.gen(function*() {
          const anyPart = (prefix: string) => (p: Record<string, any>) =>
            (p["name"] ?? []).some((name: Record<string, any>) =>
              [name["text"], name["family"], ...(name["given"] ?? []), ...(name["prefix"] ?? []), ...(name["suffix"] ?? [])]
                .some((part) => typeof part === "string" && normalized(part).startsWith(normalized(prefix))))
          const patientsNamed = (prefix: string) => new Set(expected("Patient", anyPart(prefix)).map((id) => `Patient/${id}`))
          const families = all("Patient").map(({ resource }) => resource["name"][0]["family"] as string)
          for (const family of [families[0]!, families[30]!, "mc", "zzz"]) {
            const named = patientsNamed(family)
            if (family !== "zzz") expect([family, named.size > 0]).toEqual([family, true])
            const observations = expected("Observation", (o) => named.has(o.subject?.reference))
            yield* expectExactly("Observation", `patient.name=${encodeURIComponent(family)}`, observations)
            yield* expectExactly("Observation", `subject:Patient.name=${encodeURIComponent(family)}`, observations)
          }
          // Two levels: Observations whose Encounter's service provider has a name.
          const encountersAt = (name: string) => new Set(all("Encounter")
            .filter(({ resource }) => {
              const org = all("Organization").find((o) => `Organization/${o.id}` === resource["serviceProvider"]?.reference)
              return org !== undefined && normalized(org.resource["name"] ?? "").startsWith(normalized(name))
            })
            .map(({ id }) => `Encounter/${id}`))
          const provider = all("Organization")[0]!.resource["name"] as string
          const atProvider = encountersAt(provider)
          expect(atProvider.size).toBeGreaterThan(0)
          yield* expectExactly("Observation", `encounter.service-provider.name=${encodeURIComponent(provider)}`,
            expected("Observation", (o) => atProvider.has(o.encounter?.reference)))

          // `_has`: the patients with an Observation of a code, alone and with a normal parameter.
          const withCode = (code: string) => new Set(all("Observation")
            .filter(({ resource }) => hasCoding(resource["code"], undefined, code))
            .map(({ resource }) => resource["subject"]?.reference as string))
          const codes = [bodyHeight, "2885-2", "33914-3", "no-such-code"]
          for (const code of codes) {
            const subjects = withCode(code)
            const patients = expected("Patient", (p) => subjects.has(`Patient/${p.id}`))
            if (code !== "no-such-code") expect([code, patients.length > 0]).toEqual([code, true])
            yield* expectExactly("Patient", `_has:Observation:patient:code=${code}`, patients)
            yield* expectExactly("Patient", `_has:Observation:patient:code=${code}&gender=female`,
              expected("Patient", (p) => subjects.has(`Patient/${p.id}`) && p.gender === "female"))
          }
        }), 300_000)

      it.effect("quantity: body weight above 80 kg, asked in kg and in g", () =>
        Effect.gen(function*() {
          const weight = (o: Record<string, any>) => hasCoding(o.code, loinc, bodyWeight) ? o.valueQuantity : undefined
          const heavy = expected("Observation", (o) => {
            const q = weight(o)
            return q !== undefined && q.system === ucum && q.code === "kg" && q.value > 80
          })
          expect(heavy.length).toBeGreaterThan(20)
          expect(heavy.length).toBeLessThan(expected("Observation", (o) => weight(o) !== undefined).length)
          const code = `code=${encodeURIComponent(`${loinc}|${bodyWeight}`)}`
          yield* expectExactly("Observation", `${code}&value-quantity=${encodeURIComponent(`gt80|${ucum}|kg`)}`, heavy)
          yield* expectExactly("Observation", `${code}&value-quantity=${encodeURIComponent(`gt80000|${ucum}|g`)}`, heavy)
          // Without the code, the same values: nothing else is measured in mass units above 80 kg.
          const massAbove = expected("Observation", (o) => o.valueQuantity?.system === ucum && o.valueQuantity?.code === "kg" && o.valueQuantity.value > 80)
          yield* expectExactly("Observation", `value-quantity=${encodeURIComponent(`gt80|${ucum}|kg`)}`, massAbove)
          const light = expected("Observation", (o) => {
            const q = weight(o)
            return q !== undefined && q.system === ucum && q.code === "kg" && q.value <= 20
          })
          yield* expectExactly("Observation", `${code}&value-quantity=${encodeURIComponent(`le20000|${ucum}|g`)}`, light)
        }), 300_000)

      it.effect("_sort: birthdate both ways, and one code's Observations latest first", () =>
        Effect.gen(function*() {
          const birthDates = all("Patient").map(({ resource }) => resource["birthDate"] as string)
          const ascending = [...birthDates].sort()
          const up = yield* searchAll("Patient", "_sort=birthdate", 20, true)
          expect(up.map((p) => p["birthDate"])).toEqual(ascending)
          const down = yield* searchAll("Patient", "_sort=-birthdate", 20)
          expect(down.map((p) => p["birthDate"])).toEqual([...ascending].reverse())
          expect(new Set(down.map((p) => p["id"])).size).toBe(54)

          const code = `code=${encodeURIComponent(`${loinc}|${bodyHeight}`)}`
          const instants = all("Observation")
            .filter(({ resource }) => hasCoding(resource["code"], loinc, bodyHeight))
            .map(({ resource }) => dateBounds(resource["effectiveDateTime"])!.low)
            .sort((a, b) => b - a)
          const latest = yield* searchAll("Observation", `${code}&_sort=-date`, 100, true)
          expect(latest.map((o) => dateBounds(o["effectiveDateTime"])!.low)).toEqual(instants)
          const earliest = yield* searchAll("Observation", `${code}&_sort=date`, 100)
          expect(earliest.map((o) => dateBounds(o["effectiveDateTime"])!.low)).toEqual([...instants].reverse())
        }), 300_000)

      it.effect("_summary=count: totals per type, and for searches with no match", () =>
        Effect.gen(function*() {
          for (const type of ["Patient", "Encounter", "Condition", "Observation", "Procedure", "Immunization"]) {
            // Every resource of these types on this server came from the bundles.
            expect([type, yield* countOf(type, "")]).toEqual([type, all(type).length])
          }
          expect(yield* countOf("Observation", `code=${encodeURIComponent(`${loinc}|${bodyWeight}`)}`))
            .toBe(expected("Observation", (o) => hasCoding(o.code, loinc, bodyWeight)).length)
          expect(yield* countOf("Observation", "code=no-such-code")).toBe(0)
        }), 300_000)

      it.effect("_include and _revinclude: every Encounter once as a match, each page with its matches' patients and the Observations of its encounters", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const observationsOf = new Map<string, Array<string>>()
          for (const { id, resource } of all("Observation")) {
            const encounter = resource["encounter"]?.reference
            if (typeof encounter === "string") observationsOf.set(encounter, [...(observationsOf.get(encounter) ?? []), `Observation/${id}`])
          }
          const patientOf = new Map(all("Encounter").map(({ id, resource }) => [id, resource["subject"]?.reference as string | undefined]))
          const matched = new Map<string, number>()
          let observationsIncluded = 0
          let next: string | undefined = `${base}/Encounter?_include=Encounter:patient&_revinclude=Observation:encounter&_count=200`
          let pages = 0
          while (next !== undefined) {
            const reply: Reply = yield* call("GET", next)
            expect([next, reply.status, reply.status === 200 ? "" : reply.text.slice(0, 500)]).toEqual([next, 200, ""])
            const entries: ReadonlyArray<any> = reply.json.entry ?? []
            expect(entries.filter((entry) => entry.search?.mode !== "match" && entry.search?.mode !== "include")).toEqual([])
            const matches = entries.filter((entry) => entry.search.mode === "match").map((entry) => entry.resource)
            const included = entries.filter((entry) => entry.search.mode === "include").map((entry) => `${entry.resource.resourceType}/${entry.resource.id}`)
            expect(matches.every((resource) => resource.resourceType === "Encounter")).toBe(true)
            for (const { id } of matches) matched.set(id, (matched.get(id) ?? 0) + 1)
            // The page's own includes: each once, none of them a match of the page.
            const want = new Set<string>()
            for (const { id } of matches) {
              const patient = patientOf.get(id)
              if (patient?.startsWith("Patient/")) want.add(patient)
              for (const observation of observationsOf.get(`Encounter/${id}`) ?? []) want.add(observation)
            }
            const got = new Set(included)
            const twice = included.filter((reference, index) => included.indexOf(reference) !== index)
            const missing = [...want].filter((reference) => !got.has(reference))
            const unexpected = included.filter((reference) => !want.has(reference))
            expect([pages, firstOf(twice), firstOf(missing), firstOf(unexpected)]).toEqual([pages, [], [], []])
            expect(matches.filter(({ id }) => got.has(`Encounter/${id}`))).toEqual([])
            observationsIncluded += included.filter((reference) => reference.startsWith("Observation/")).length
            next = (reply.json.link ?? []).find((link: any) => link.relation === "next")?.url
            pages++
            expect(pages).toBeLessThan(1000)
          }
          // Every Encounter exactly once; every Observation of an encounter on the one page of its encounter.
          const encounters = all("Encounter").map(({ id }) => id)
          expect(encounters.length).toBeGreaterThan(200)
          expect([matched.size, firstOf([...matched].filter(([, n]) => n !== 1).map(([id]) => id))]).toEqual([encounters.length, []])
          expect(firstOf(encounters.filter((id) => !matched.has(id)))).toEqual([])
          const ofEncounters = [...observationsOf].filter(([encounter]) => encounter.startsWith("Encounter/")).reduce((n, [, list]) => n + list.length, 0)
          expect(ofEncounters).toBeGreaterThan(1000)
          expect(observationsIncluded).toBe(ofEncounters)
        }), 600_000)

      it.effect("$everything for the patient with the most resources, and the patient's Observations by compartment", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          // The references that put a resource in the Patient compartment: R4's CompartmentDefinition-patient
          // names the parameters, and these are their expressions, for the types Synthea writes.
          const linking: Record<string, (r: Record<string, any>) => ReadonlyArray<any>> = {
            Observation: (r) => [r.subject, ...(r.performer ?? [])],
            Claim: (r) => [r.patient, r.payee?.party],
            ExplanationOfBenefit: (r) => [r.patient, r.payee?.party],
            Encounter: (r) => [r.subject],
            Procedure: (r) => [r.subject, ...(r.performer ?? []).map((p: any) => p.actor)],
            Immunization: (r) => [r.patient],
            DiagnosticReport: (r) => [r.subject],
            Condition: (r) => [r.subject, r.asserter],
            MedicationRequest: (r) => [r.subject],
            CarePlan: (r) => [r.subject, ...(r.activity ?? []).flatMap((a: any) => a.detail?.performer ?? [])],
            Goal: (r) => [r.subject],
            AllergyIntolerance: (r) => [r.patient, r.recorder, r.asserter],
            ImagingStudy: (r) => [r.subject],
            Patient: (r) => (r.link ?? []).map((l: any) => l.other)
          }
          const stored = [...loaded!.values()].flat()
          const byRef = new Map(stored.map((s) => [`${s.type}/${s.id}`, s]))
          const membersOf = (patient: string): Array<Stored> =>
            stored.filter((s) => `${s.type}/${s.id}` === patient || (linking[s.type]?.(s.resource) ?? []).some((link) => link?.reference === patient))
          /** Every `Type/id` a resource refers to, its contained resources aside. */
          const referencesOf = (value: unknown, out: Set<string>): Set<string> => {
            if (Array.isArray(value)) for (const item of value) referencesOf(item, out)
            else if (typeof value === "object" && value !== null) {
              for (const [key, child] of Object.entries(value)) {
                if (key === "reference" && typeof child === "string" && byRef.has(child)) out.add(child)
                else if (key !== "contained") referencesOf(child, out)
              }
            }
            return out
          }
          const [patient, members] = all("Patient")
            .map((p) => [`Patient/${p.id}`, membersOf(`Patient/${p.id}`)] as const)
            .sort((a, b) => b[1].length - a[1].length)[0]!
          const memberRefs = new Set(members.map((s) => `${s.type}/${s.id}`))
          const referred = new Set<string>()
          for (const member of members) referencesOf(member.resource, referred)
          const want = new Set([...memberRefs, ...referred])
          expect(members.length).toBeGreaterThan(300)
          expect([...referred].some((r) => !memberRefs.has(r))).toBe(true)

          const seen: Array<string> = []
          let next: string | undefined = `${base}/${patient}/$everything?_count=200`
          let total: number | undefined
          let pages = 0
          while (next !== undefined) {
            const reply: Reply = yield* call("GET", next)
            expect([next, reply.status, reply.status === 200 ? "" : reply.text.slice(0, 500)]).toEqual([next, 200, ""])
            total ??= reply.json.total
            for (const entry of reply.json.entry ?? []) {
              const found = `${entry.resource.resourceType}/${entry.resource.id}`
              seen.push(found)
              expect([found, entry.search.mode]).toEqual([found, memberRefs.has(found) ? "match" : "include"])
            }
            next = (reply.json.link ?? []).find((link: any) => link.relation === "next")?.url
            pages++
            expect(pages).toBeLessThan(100)
          }
          const got = new Set(seen)
          expect(firstOf(seen.filter((r, i) => seen.indexOf(r) !== i))).toEqual([])
          expect([firstOf([...want].filter((r) => !got.has(r))), firstOf(seen.filter((r) => !want.has(r)))]).toEqual([[], []])
          expect([pages > 1, total]).toEqual([true, want.size])

          // The patient's Observations through the compartment, paged.
          const observations = new Set(members.filter((s) => s.type === "Observation").map((s) => s.id))
          const found: Array<string> = []
          next = `${base}/${patient}/Observation?_count=100`
          while (next !== undefined) {
            const reply: Reply = yield* call("GET", next)
            expect([next, reply.status]).toEqual([next, 200])
            found.push(...(reply.json.entry ?? []).map((entry: any) => entry.resource.id as string))
            next = (reply.json.link ?? []).find((link: any) => link.relation === "next")?.url
            if (next !== undefined) expect(next.startsWith(`${base}/${patient}/Observation?`)).toBe(true)
          }
          expect(found.length).toBe(observations.size)
          expect(new Set(found)).toEqual(observations)
        }), 300_000)
    })
  })
}
