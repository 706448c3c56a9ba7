/**
 * Search results as a client sees them: `_sort` on each parameter type, `_summary` and `_elements`
 * (on searches and reads), over HTTP on SQLite and Postgres. The servers install the real R4 packages:
 * the sort parameters and the summary flags come from R4 core. Each test marks its resources with its own
 * identifier system, so the tests share one server per backend without seeing each other's data.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { type BackendKind, pgAvailable } from "../support/backends.ts"
import { realPackageCache, registryUrl, skipRealPackages } from "../support/npmRegistry.ts"
import { call, startServer, type TestServer } from "../support/server.ts"

class Server extends Context.Tag("test/ResultsServer")<Server, TestServer>() {}

const subsetted = { system: "http://terminology.hl7.org/CodeSystem/v3-ObservationValue", code: "SUBSETTED" }

/** A resource created on the server, as the server answered it. */
const create = (resource: Record<string, unknown>) =>
  Effect.gen(function*() {
    const { base } = yield* Server
    const reply = yield* call("POST", `${base}/${String(resource["resourceType"])}`, { body: resource })
    expect([reply.status, reply.text.slice(0, 300)]).toEqual([201, reply.text.slice(0, 300)])
    return reply.json
  })

/** A searchset Bundle of `path` (relative to the base), asserting a 200. */
const search = (path: string) =>
  Effect.gen(function*() {
    const { base } = yield* Server
    const reply = yield* call("GET", `${base}/${path}`)
    expect([reply.status, reply.text.slice(0, 300)]).toEqual([200, reply.text.slice(0, 300)])
    return reply.json
  })

const matches = (bundle: any): Array<any> => (bundle.entry ?? []).filter((e: any) => e.search.mode === "match").map((e: any) => e.resource)

/** The ids of the matches of `path`, in the order the server gave them. */
const order = (path: string) => Effect.map(search(path), (bundle) => matches(bundle).map((resource) => resource.id as string))

const identifier = (system: string) => [{ system: `urn:results:${system}`, value: "1" }]

/** A patient of the test `system`, with the elements given. */
const patient = (system: string, elements: Record<string, unknown> = {}) =>
  Effect.map(create({ resourceType: "Patient", identifier: identifier(system), ...elements }), (json) => json.id as string)

const observation = (system: string, elements: Record<string, unknown> = {}) =>
  Effect.map(create({ resourceType: "Observation", identifier: identifier(system), status: "final", code: { text: "weight" }, ...elements }), (json) => json.id as string)

const of = (system: string) => `identifier=${encodeURIComponent(`urn:results:${system}|1`)}`

const backendsUnderTest: ReadonlyArray<{ readonly kind: BackendKind; readonly skip: boolean }> = [
  { kind: "sqlite", skip: false },
  { kind: "postgres", skip: !pgAvailable }
]

for (const backend of backendsUnderTest) {
  describe.skipIf(skipRealPackages || backend.skip)(`search results on ${backend.kind} (R4 catalog)`, () => {
    layer(
      Layer.scoped(Server, startServer(backend.kind, { conformance: { package_registry: registryUrl ?? "", package_cache: realPackageCache } })),
      { timeout: 300_000, excludeTestServices: true }
    )((it) => {
      it.effect("sorts by a string, accents and case aside, by each resource's smallest value ascending and largest descending, missing last", () =>
        Effect.gen(function*() {
          const zeta = yield* patient("family", { name: [{ family: "Zeta" }] })
          const none = yield* patient("family")
          const alpha = yield* patient("family", { name: [{ family: "alpha" }] })
          const emile = yield* patient("family", { name: [{ family: "Émile" }] })
          const both = yield* patient("family", { name: [{ family: "Aaron" }, { family: "Zz" }] })
          const beta = yield* patient("family", { name: [{ family: "Beta" }] })
          expect(yield* order(`Patient?${of("family")}&_sort=family`)).toEqual([both, alpha, beta, emile, zeta, none])
          expect(yield* order(`Patient?${of("family")}&_sort=-family`)).toEqual([both, zeta, emile, beta, alpha, none])
        }))

      it.effect("sorts by a date of any precision: ascending by where it starts, descending by where it ends", () =>
        Effect.gen(function*() {
          const day = yield* patient("birthdate", { birthDate: "1980-06-01" })
          const year = yield* patient("birthdate", { birthDate: "1980" })
          const none = yield* patient("birthdate")
          const month = yield* patient("birthdate", { birthDate: "1980-06" })
          const before = yield* patient("birthdate", { birthDate: "1979-12-31" })
          // 1980-06 and 1980-06-01 both start on 1 June: the first created comes first.
          expect(yield* order(`Patient?${of("birthdate")}&_sort=birthdate`)).toEqual([before, year, day, month, none])
          expect(yield* order(`Patient?${of("birthdate")}&_sort=-birthdate`)).toEqual([year, month, day, before, none])
        }))

      it.effect("sorts by a token code and by _id, missing last both ways", () =>
        Effect.gen(function*() {
          const male = yield* patient("gender", { gender: "male" })
          const none = yield* patient("gender")
          const unknown = yield* patient("gender", { gender: "unknown" })
          const female = yield* patient("gender", { gender: "female" })
          const other = yield* patient("gender", { gender: "other" })
          expect(yield* order(`Patient?${of("gender")}&_sort=gender`)).toEqual([female, male, other, unknown, none])
          expect(yield* order(`Patient?${of("gender")}&_sort=-gender`)).toEqual([unknown, other, male, female, none])
          const ids = [male, none, unknown, female, other].sort()
          expect(yield* order(`Patient?${of("gender")}&_sort=_id`)).toEqual(ids)
          expect(yield* order(`Patient?${of("gender")}&_sort=-_id`)).toEqual([...ids].reverse())
        }))

      it.effect("sorts quantities by their value in base units, and numbers by value", () =>
        Effect.gen(function*() {
          const quantity = (value: number, code: string) => ({ valueQuantity: { value, unit: code, system: "http://unitsofmeasure.org", code } })
          const gram = yield* observation("quantity", quantity(1, "g"))
          const mg900 = yield* observation("quantity", quantity(900, "mg"))
          const none = yield* observation("quantity", { valueString: "not measured" })
          const mg50 = yield* observation("quantity", quantity(50, "mg"))
          const kg = yield* observation("quantity", quantity(0.002, "kg"))
          expect(yield* order(`Observation?${of("quantity")}&_sort=value-quantity`)).toEqual([mg50, mg900, gram, kg, none])
          expect(yield* order(`Observation?${of("quantity")}&_sort=-value-quantity`)).toEqual([kg, gram, mg900, mg50, none])

          const subject = { reference: `Patient/${yield* patient("probability")}` }
          const risk = (probability: ReadonlyArray<number>) =>
            Effect.map(create({
              resourceType: "RiskAssessment",
              identifier: identifier("probability"),
              status: "final",
              subject,
              ...(probability.length === 0 ? {} : { prediction: probability.map((p) => ({ probabilityDecimal: p })) })
            }), (json) => json.id as string)
          const high = yield* risk([0.9])
          const spread = yield* risk([0.05, 0.95])
          const none2 = yield* risk([])
          const low = yield* risk([0.2])
          expect(yield* order(`RiskAssessment?${of("probability")}&_sort=probability`)).toEqual([spread, low, high, none2])
          expect(yield* order(`RiskAssessment?${of("probability")}&_sort=-probability`)).toEqual([spread, high, low, none2])
        }))

      it.effect("sorts by a reference's target, Type/id", () =>
        Effect.gen(function*() {
          const patients = [yield* patient("subject"), yield* patient("subject"), yield* patient("subject")]
          const made: Array<{ id: string; target: string }> = []
          for (const target of [patients[1]!, patients[0]!, patients[2]!]) {
            made.push({ id: yield* observation("subject", { subject: { reference: `Patient/${target}` } }), target: `Patient/${target}` })
          }
          const none = yield* observation("subject")
          const byTarget = [...made].sort((a, b) => (a.target < b.target ? -1 : a.target > b.target ? 1 : 0)).map((m) => m.id)
          expect(yield* order(`Observation?${of("subject")}&_sort=subject`)).toEqual([...byTarget, none])
          expect(yield* order(`Observation?${of("subject")}&_sort=-subject`)).toEqual([...[...byTarget].reverse(), none])
        }))

      it.effect("sorts by several keys, each in its own direction", () =>
        Effect.gen(function*() {
          const maleNone = yield* patient("keys", { gender: "male" })
          const female1980 = yield* patient("keys", { gender: "female", birthDate: "1980-01-01" })
          const male1985 = yield* patient("keys", { gender: "male", birthDate: "1985-01-01" })
          const female1990 = yield* patient("keys", { gender: "female", birthDate: "1990-01-01" })
          const none1970 = yield* patient("keys", { birthDate: "1970-01-01" })
          expect(yield* order(`Patient?${of("keys")}&_sort=gender,-birthdate`)).toEqual([female1990, female1980, male1985, maleNone, none1970])
          expect(yield* order(`Patient?${of("keys")}&_sort=-birthdate,gender`)).toEqual([female1990, male1985, female1980, none1970, maleNone])
          // Repeated _sort parameters add keys in order.
          expect(yield* order(`Patient?${of("keys")}&_sort=gender&_sort=-birthdate`)).toEqual([female1990, female1980, male1985, maleNone, none1970])
        }))

      it.effect("pages through a sorted result with ties and missing values, without repeats or gaps", () =>
        Effect.gen(function*() {
          const families = ["Moss", "Abbot", "Moss", "Lee", "Zhu", "Abbot", "Moss", "Lee"]
          for (const family of families) yield* patient("paging", { name: [{ family }] })
          for (let i = 0; i < 3; i++) yield* patient("paging")
          const { base } = yield* Server
          const whole = yield* order(`Patient?${of("paging")}&_sort=-family&_count=100`)
          expect(whole.length).toBe(11)
          const seen: Array<string> = []
          let next: string | undefined = `${base}/Patient?${of("paging")}&_sort=-family&_count=3`
          let pages = 0
          while (next !== undefined) {
            const page: any = yield* search(next.slice(base.length + 1))
            seen.push(...matches(page).map((resource) => resource.id))
            next = page.link.find((l: any) => l.relation === "next")?.url
            pages++
          }
          expect(pages).toBe(4)
          expect(seen).toEqual(whole)
          const named = (yield* search(`Patient?${of("paging")}&_sort=-family&_count=100`))
          expect(matches(named).map((resource) => resource.name?.[0]?.family)).toEqual(
            ["Zhu", "Moss", "Moss", "Moss", "Lee", "Lee", "Abbot", "Abbot", undefined, undefined, undefined]
          )
        }))

      it.effect("refuses _sort on a composite parameter with a 400 saying it has no single value to order by", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const reply = yield* call("GET", `${base}/Observation?_sort=code-value-quantity`)
          expect(reply.status).toBe(400)
          expect(reply.json.issue[0].diagnostics).toContain("code-value-quantity")
          expect(reply.json.issue[0].diagnostics).toContain("no single value to order by")
        }))

      const fullPatient = {
        text: { status: "generated", div: "<div xmlns=\"http://www.w3.org/1999/xhtml\">Ann Lee</div>" },
        name: [{ family: "Lee", given: ["Ann"] }],
        gender: "female",
        birthDate: "1970-02-03",
        _birthDate: { extension: [{ url: "http://example.org/exact", valueBoolean: true }] },
        maritalStatus: { text: "married" },
        photo: [{ contentType: "image/png", data: "iVBORw0KGgo=" }],
        contact: [{ name: { family: "Lee", given: ["Bob"] } }],
        communication: [{ language: { text: "English" } }],
        deceasedBoolean: false,
        extension: [{ url: "http://example.org/favourite-colour", valueString: "green" }]
      }

      const fullObservation = (patientId: string) => ({
        text: { status: "generated", div: "<div xmlns=\"http://www.w3.org/1999/xhtml\">Blood pressure</div>" },
        category: [{ text: "vital-signs" }],
        subject: { reference: `Patient/${patientId}` },
        effectiveDateTime: "2020-01-02T10:00:00Z",
        valueString: "normal",
        interpretation: [{ text: "normal" }],
        note: [{ text: "taken sitting" }],
        component: [{
          code: { text: "systolic" },
          valueQuantity: { value: 120, unit: "mm[Hg]" },
          interpretation: [{ text: "normal" }]
        }],
        referenceRange: [{ text: "below 140" }]
      })

      /** The top-level element names of a resource, sorted. */
      const keys = (resource: any): Array<string> => Object.keys(resource).sort()

      it.effect("_summary=true keeps the summary elements of R4, id and meta, tagged SUBSETTED", () =>
        Effect.gen(function*() {
          const patientId = yield* patient("summary", fullPatient)
          const [found] = matches(yield* search(`Patient?${of("summary")}&_summary=true`))
          expect(keys(found)).toEqual(["_birthDate", "birthDate", "deceasedBoolean", "gender", "id", "identifier", "meta", "name", "resourceType"])
          expect(found.name).toEqual(fullPatient.name)
          expect(found._birthDate).toEqual(fullPatient._birthDate)
          expect(found.meta.tag).toEqual([subsetted])
          expect(found.meta.versionId).toBe("1")

          yield* observation("summary", fullObservation(patientId))
          const [obs] = matches(yield* search(`Observation?${of("summary")}&_summary=true`))
          expect(keys(obs)).toEqual(["code", "component", "effectiveDateTime", "id", "identifier", "meta", "resourceType", "status", "subject", "valueString"])
          // Inside a backbone element too only the summary elements stay: a component keeps its code and value.
          expect(obs.component).toEqual([{ code: { text: "systolic" }, valueQuantity: { value: 120, unit: "mm[Hg]" } }])
          expect(obs.meta.tag).toEqual([subsetted])
        }))

      it.effect("_summary=text keeps text, id, meta and the mandatory top-level elements; _summary=data everything but text", () =>
        Effect.gen(function*() {
          const patientId = yield* patient("text", { ...fullPatient, meta: { tag: [{ system: "http://example.org/tags", code: "kept" }] } })
          const [text] = matches(yield* search(`Patient?${of("text")}&_summary=text`))
          expect(keys(text)).toEqual(["id", "meta", "resourceType", "text"])
          expect(text.text).toEqual(fullPatient.text)
          expect(text.meta.tag).toEqual([{ system: "http://example.org/tags", code: "kept" }, subsetted])

          yield* observation("text", fullObservation(patientId))
          const [obsText] = matches(yield* search(`Observation?${of("text")}&_summary=text`))
          expect(keys(obsText)).toEqual(["code", "id", "meta", "resourceType", "status", "text"])

          const [data] = matches(yield* search(`Patient?${of("text")}&_summary=data`))
          expect(keys(data)).toEqual([...keys({ ...fullPatient, id: "", identifier: [], meta: {}, resourceType: "" })].filter((k) => k !== "text"))
          expect(data.contact).toEqual(fullPatient.contact)
          expect(data.meta.tag).toContainEqual(subsetted)
        }))

      it.effect("_elements keeps the listed elements, id, meta and mandatory elements, and ignores names it does not know", () =>
        Effect.gen(function*() {
          const patientId = yield* patient("elements", fullPatient)
          const [found] = matches(yield* search(`Patient?${of("elements")}&_elements=birthDate,photo,nonsense`))
          expect(keys(found)).toEqual(["_birthDate", "birthDate", "id", "meta", "photo", "resourceType"])
          expect(found.meta.tag).toEqual([subsetted])
          const [deceased] = matches(yield* search(`Patient?${of("elements")}&_elements=deceased`))
          expect(keys(deceased)).toEqual(["deceasedBoolean", "id", "meta", "resourceType"])

          yield* observation("elements", fullObservation(patientId))
          const [obs] = matches(yield* search(`Observation?${of("elements")}&_elements=subject,value[x]`))
          expect(keys(obs)).toEqual(["code", "id", "meta", "resourceType", "status", "subject", "valueString"])
          // _summary=false asks for everything, so _elements decides.
          const [withFalse] = matches(yield* search(`Observation?${of("elements")}&_elements=note&_summary=false`))
          expect(keys(withFalse)).toEqual(["code", "id", "meta", "note", "resourceType", "status"])
        }))

      it.effect("serves the stored resource unchanged without _summary or _elements, and refuses _elements with _summary=true", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const id = yield* patient("stored", fullPatient)
          const read = yield* call("GET", `${base}/Patient/${id}`)
          for (const query of ["", "&_summary=false"]) {
            const reply = yield* call("GET", `${base}/Patient?${of("stored")}${query}`)
            expect(reply.text).toContain(`"resource":${read.text}`)
          }
          const refused = yield* call("GET", `${base}/Patient?${of("stored")}&_summary=true&_elements=name`)
          expect(refused.status).toBe(400)
          expect(refused.json.issue[0].diagnostics).toContain("_elements")
        }))

      it.effect("a lenient search shapes its matches but leaves the outcome entry whole", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          yield* patient("lenient", fullPatient)
          const reply = yield* call("GET", `${base}/Patient?${of("lenient")}&_elements=gender&birthdate=not-a-date`, { headers: { prefer: "handling=lenient" } })
          expect(reply.status).toBe(200)
          const outcome = reply.json.entry.find((e: any) => e.search.mode === "outcome").resource
          expect(outcome.issue[0].severity).toBe("warning")
          expect(outcome.meta).toBeUndefined()
          expect(keys(matches(reply.json)[0])).toEqual(["gender", "id", "meta", "resourceType"])
        }))

      it.effect("a read honours _summary and _elements too", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const id = yield* patient("read", fullPatient)
          const summary = yield* call("GET", `${base}/Patient/${id}?_summary=true`)
          expect(summary.status).toBe(200)
          expect(summary.headers.get("etag")).toBe('W/"1"')
          expect(keys(summary.json)).toEqual(["_birthDate", "birthDate", "deceasedBoolean", "gender", "id", "identifier", "meta", "name", "resourceType"])
          expect(summary.json.meta.tag).toEqual([subsetted])
          const elements = yield* call("GET", `${base}/Patient/${id}/_history/1?_elements=gender`)
          expect(keys(elements.json)).toEqual(["gender", "id", "meta", "resourceType"])
          const whole = yield* call("GET", `${base}/Patient/${id}?_summary=false`)
          expect(whole.json.contact).toEqual(fullPatient.contact)
          expect(whole.json.meta.tag).toBeUndefined()
          expect((yield* call("GET", `${base}/Patient/${id}?_summary=count`)).status).toBe(400)
        }))
    })
  })
}
