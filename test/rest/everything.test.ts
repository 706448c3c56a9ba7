/**
 * `$everything` on Patient and Encounter over HTTP on SQLite and Postgres, with the real R4 packages (the
 * compartment definitions and the date parameters are R4 core's): the set, `start`/`end`, `_since`,
 * `_type`, paging, a Parameters body, and the refusals.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { type BackendKind, pgAvailable } from "../support/backends.ts"
import { realPackageCache, registryUrl, skipRealPackages } from "../support/npmRegistry.ts"
import { call, type Reply, startServer, type TestServer } from "../support/server.ts"

class Server extends Context.Tag("test/EverythingServer")<Server, TestServer>() {}

const create = (resource: Record<string, unknown>) =>
  Effect.gen(function*() {
    const { base } = yield* Server
    const reply = yield* call("POST", `${base}/${String(resource["resourceType"])}`, { body: resource })
    expect([reply.status, reply.text.slice(0, 300)]).toEqual([201, reply.text.slice(0, 300)])
    return reply.json
  })

const get = (path: string) => Effect.flatMap(Server, ({ base }) => call("GET", `${base}/${path}`))

const ref = (resource: any) => `${resource.resourceType}/${resource.id}`

/** `Type/id` of every entry, in the server's order. */
const entries = (bundle: any): Array<string> => (bundle.entry ?? []).map((e: any) => `${e.resource.resourceType}/${e.resource.id}`)

/** Every entry of `path` following `next` links; no entry twice. */
const pagedThrough = (path: string) =>
  Effect.gen(function*() {
    const { base } = yield* Server
    const seen: Array<string> = []
    let next: string | undefined = `${base}/${path}`
    let pages = 0
    let total: number | undefined
    while (next !== undefined) {
      const reply: Reply = yield* call("GET", next)
      expect([next, reply.status, reply.status === 200 ? "" : reply.text.slice(0, 300)]).toEqual([next, 200, ""])
      expect(reply.json.type).toBe("searchset")
      total ??= reply.json.total
      seen.push(...entries(reply.json))
      next = reply.json.link.find((link: any) => link.relation === "next")?.url
      pages++
      expect(pages).toBeLessThan(100)
    }
    expect(new Set(seen).size).toBe(seen.length)
    return { seen, pages, total }
  })

const sorted = (items: ReadonlyArray<string>) => [...items].sort()

/** A patient with care in 2015, 2018, 2019 and 2020, what it refers to, and another patient's data beside it. */
const story = Effect.gen(function*() {
  const organization = yield* create({ resourceType: "Organization", name: "Managing" })
  const provider = yield* create({ resourceType: "Organization", name: "Provider" })
  const gp = yield* create({ resourceType: "Practitioner", name: [{ family: "General" }] })
  const surgeon = yield* create({ resourceType: "Practitioner", name: [{ family: "Surgeon" }] })
  const medication = yield* create({ resourceType: "Medication", code: { text: "aspirin" } })
  const patient = yield* create({
    resourceType: "Patient",
    managingOrganization: { reference: ref(organization) },
    generalPractitioner: [{ reference: ref(gp) }]
  })
  const other = yield* create({ resourceType: "Patient" })
  const subject = { reference: ref(patient) }
  const encounter = yield* create({
    resourceType: "Encounter",
    status: "finished",
    class: { code: "AMB" },
    subject,
    period: { start: "2015-03-01T10:00:00Z", end: "2015-03-01T11:00:00Z" },
    participant: [{ individual: { reference: ref(surgeon) } }],
    serviceProvider: { reference: ref(provider) }
  })
  const observation = (code: string, extra: Record<string, unknown>) =>
    create({ resourceType: "Observation", status: "final", code: { text: code }, subject, ...extra })
  const in2015 = yield* observation("2015", { effectiveDateTime: "2015-03-01T10:30:00Z", encounter: { reference: ref(encounter) } })
  const in2020 = yield* observation("2020", { effectiveDateTime: "2020-06-01" })
  const undated = yield* observation("undated", {})
  const condition = yield* create({ resourceType: "Condition", subject, code: { text: "c" }, onsetDateTime: "2018-01-01", encounter: { reference: ref(encounter) } })
  const prescription = yield* create({
    resourceType: "MedicationRequest",
    status: "active",
    intent: "order",
    subject,
    authoredOn: "2019-05-05",
    medicationReference: { reference: ref(medication) }
  })
  yield* create({ resourceType: "Observation", status: "final", code: { text: "theirs" }, subject: { reference: ref(other) } })
  return { organization, provider, gp, surgeon, medication, patient, encounter, in2015, in2020, undated, condition, prescription }
})

const backendsUnderTest: ReadonlyArray<{ readonly kind: BackendKind; readonly skip: boolean }> = [
  { kind: "sqlite", skip: false },
  { kind: "postgres", skip: !pgAvailable }
]

for (const backend of backendsUnderTest) {
  describe.skipIf(skipRealPackages || backend.skip)(`$everything on ${backend.kind}`, () => {
    layer(
      Layer.scoped(Server, startServer(backend.kind, { conformance: { package_registry: registryUrl ?? "", package_cache: realPackageCache } })),
      { timeout: 600_000, excludeTestServices: true }
    )((it) => {
      it.effect("returns the patient, its compartment and what they refer to, each once, members as matches", () =>
        Effect.gen(function*() {
          const s = yield* story
          const members = [s.patient, s.encounter, s.in2015, s.in2020, s.undated, s.condition, s.prescription].map(ref)
          const referred = [s.organization, s.provider, s.gp, s.surgeon, s.medication].map(ref)
          const reply = yield* get(`Patient/${s.patient.id}/$everything?_count=100`)
          expect(reply.status).toBe(200)
          expect(reply.json.resourceType).toBe("Bundle")
          expect(reply.json.type).toBe("searchset")
          expect(reply.json.total).toBe(members.length + referred.length)
          expect(sorted(entries(reply.json))).toEqual(sorted([...members, ...referred]))
          const modes = new Map(reply.json.entry.map((e: any) => [`${e.resource.resourceType}/${e.resource.id}`, e.search.mode]))
          for (const member of members) expect([member, modes.get(member)]).toEqual([member, "match"])
          for (const other of referred) expect([other, modes.get(other)]).toEqual([other, "include"])
          const { base } = yield* Server
          expect(reply.json.entry[0].fullUrl).toMatch(new RegExp(`^${base}/`))
        }))

      it.effect("keeps to the clinical dates of start and end, keeping what has no date, and to _type", () =>
        Effect.gen(function*() {
          const s = yield* story
          const everything = (query: string) =>
            Effect.map(get(`Patient/${s.patient.id}/$everything?${query}&_count=100`), (reply) => {
              expect([query, reply.status]).toEqual([query, 200])
              return sorted(entries(reply.json))
            })
          // From 2016: the 2015 observation is out; the 2015 encounter comes back only as what the 2018 condition
          // refers to, and the surgeon and provider, whom only the encounter names, stay out (one level).
          expect(yield* everything("start=2016-01-01")).toEqual(sorted([
            s.patient, s.organization, s.gp, s.in2020, s.undated, s.condition, s.encounter, s.prescription, s.medication
          ].map(ref)))
          const modes = (yield* get(`Patient/${s.patient.id}/$everything?start=2016-01-01&_type=Encounter`)).json.entry.map((e: any) => e.search.mode)
          expect(modes).toEqual(["include"])
          // Up to 2016.
          expect(yield* everything("end=2015")).toEqual(sorted([
            s.patient, s.organization, s.gp, s.encounter, s.surgeon, s.provider, s.in2015, s.undated
          ].map(ref)))
          // Both ends: 2018 to 2019.
          // Both ends, 2018 to 2019: the condition refers to the 2015 encounter, which comes back as a reference only.
          expect(yield* everything("start=2018-01-01&end=2019-12-31")).toEqual(sorted([
            s.patient, s.organization, s.gp, s.undated, s.condition, s.encounter, s.prescription, s.medication
          ].map(ref)))
          expect(yield* everything("_type=Observation,Patient")).toEqual(sorted([s.patient, s.in2015, s.in2020, s.undated].map(ref)))
          expect(yield* everything("_type=Medication&start=2016")).toEqual([ref(s.medication)])
        }))

      it.effect("returns only what changed since _since", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const s = yield* story
          const updated = yield* call("PUT", `${base}/${ref(s.undated)}`, { body: { ...s.undated, status: "amended" } })
          expect(updated.status).toBe(200)
          const since = updated.json.meta.lastUpdated as string
          const reply = yield* get(`Patient/${s.patient.id}/$everything?_since=${encodeURIComponent(since)}`)
          expect([reply.status, entries(reply.json)]).toEqual([200, [ref(s.undated)]])
          const before = yield* get(`Patient/${s.patient.id}/$everything?_since=2000-01-01&_count=100`)
          expect(before.json.total).toBe(12)
        }))

      it.effect("pages with _count and _offset through next links, none twice, the union the whole set", () =>
        Effect.gen(function*() {
          const s = yield* story
          const { base } = yield* Server
          const whole = sorted(entries((yield* get(`Patient/${s.patient.id}/$everything?_count=1000`)).json))
          expect(whole.length).toBe(12)
          const { seen, pages, total } = yield* pagedThrough(`Patient/${s.patient.id}/$everything?_count=5`)
          expect(pages).toBe(3)
          expect(total).toBe(12)
          expect(sorted(seen)).toEqual(whole)
          const second = (yield* get(`Patient/${s.patient.id}/$everything?_count=5&_offset=5`)).json
          const links = new Map(second.link.map((l: any) => [l.relation, l.url]))
          expect(links.get("previous")).toBe(`${base}/Patient/${s.patient.id}/$everything?_count=5&_offset=0`)
          expect(links.get("next")).toBe(`${base}/Patient/${s.patient.id}/$everything?_count=5&_offset=10`)
          expect(entries(second)).toEqual(seen.slice(5, 10))
          // A page past the end, and a page of none, still say how many there are.
          for (const query of ["_count=5&_offset=40", "_count=0"]) {
            const empty = (yield* get(`Patient/${s.patient.id}/$everything?${query}`)).json
            expect(empty.total).toBe(12)
            expect(empty.entry).toBeUndefined()
          }
          // POST with a Parameters body: the same, and the links carry its parameters.
          const posted = yield* call("POST", `${base}/Patient/${s.patient.id}/$everything`, {
            body: { resourceType: "Parameters", parameter: [{ name: "_count", valueInteger: 5 }, { name: "_type", valueString: "Observation" }] }
          })
          expect(posted.status).toBe(200)
          expect(sorted(entries(posted.json))).toEqual(sorted([s.in2015, s.in2020, s.undated].map(ref)))
          expect(posted.json.link[0].url).toContain("_type=Observation")
        }))

      it.effect("answers an encounter's $everything with its compartment and what that refers to", () =>
        Effect.gen(function*() {
          const s = yield* story
          const reply = yield* get(`Encounter/${s.encounter.id}/$everything?_count=100`)
          expect(reply.status).toBe(200)
          expect(sorted(entries(reply.json))).toEqual(sorted([s.encounter, s.in2015, s.condition, s.patient, s.surgeon, s.provider].map(ref)))
          // The focal encounter stays whatever its date.
          const later = yield* get(`Encounter/${s.encounter.id}/$everything?start=2017`)
          expect(sorted(entries(later.json))).toEqual(sorted([s.encounter, s.condition, s.patient, s.surgeon, s.provider].map(ref)))
        }))

      it.effect("refuses what it cannot read with a 400, an unknown patient with a 404, a deleted one with a 410", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const patient = yield* create({ resourceType: "Patient" })
          for (const [query, says] of [
            ["start=yesterday", "'yesterday' of parameter 'start'"],
            ["end=2020-13", "'2020-13' of parameter 'end'"],
            ["_since=soon", "'soon' of parameter '_since'"],
            ["_type=Observation,NoSuchType", "parameter '_type'"],
            ["_count=-1", "parameter '_count'"],
            ["_offset=x", "parameter '_offset'"],
            ["nonsense=1", "Unknown parameter 'nonsense'"],
            ["start=2015&start=2016", "more than once"]
          ] as const) {
            const reply = yield* get(`Patient/${patient.id}/$everything?${query}`)
            expect([query, reply.status, reply.json.resourceType]).toEqual([query, 400, "OperationOutcome"])
            expect(reply.json.issue[0].diagnostics).toContain(says)
          }
          const unknown = yield* get("Patient/no-such-patient/$everything")
          expect(unknown.status).toBe(404)
          expect(unknown.json.issue[0].diagnostics).toContain("Patient/no-such-patient")
          yield* call("DELETE", `${base}/Patient/${patient.id}`)
          expect((yield* get(`Patient/${patient.id}/$everything`)).status).toBe(410)
          const elsewhere = yield* get(`Observation/x/$everything`)
          expect(elsewhere.status).toBe(404)
          expect(elsewhere.json.issue[0].diagnostics).toContain("$everything is defined on Patient and Encounter")
          const put = yield* call("PUT", `${base}/Patient/${patient.id}/$everything`, { body: { resourceType: "Parameters" } })
          expect(put.status).toBe(405)
        }))

      it.effect("is listed in the CapabilityStatement on Patient and Encounter", () =>
        Effect.gen(function*() {
          const statement = (yield* get("metadata")).json
          const operations = (type: string) =>
            statement.rest[0].resource.find((r: any) => r.type === type).operation.map((o: any) => o.name)
          expect(operations("Patient")).toContain("everything")
          expect(operations("Encounter")).toContain("everything")
          expect(operations("Observation")).not.toContain("everything")
          expect(statement.rest[0].interaction.map((i: any) => i.code)).toContain("search-system")
          expect(statement.rest[0].compartment).toContain("http://hl7.org/fhir/CompartmentDefinition/patient")
        }))
    })
  })
}
