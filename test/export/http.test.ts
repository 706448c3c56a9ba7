/**
 * `$export` over HTTP on SQLite and Postgres with the real R4 packages (the Patient compartment and the search
 * parameters are R4 core's), as a Bulk Data client sees it (docs/export.md): the three levels, `_type`, `_since`,
 * `_typeFilter`, a Group's members and `patient`, the manifest, files split by size, cancel, the refusals, and
 * `Prefer: handling=lenient`. Files are at most 4 KiB here, so that every export is split.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { type BackendKind, pgAvailable } from "../support/backends.ts"
import { realPackageCache, registryUrl, skipRealPackages } from "../support/npmRegistry.ts"
import { call, type Reply, startServer, type TestServer } from "../support/server.ts"

class Server extends Context.Tag("test/ExportServer")<Server, TestServer>() {}

const maxFileBytes = 4096
const async = { prefer: "respond-async" }

const create = (resource: Record<string, unknown>) =>
  Effect.gen(function*() {
    const { base } = yield* Server
    const reply = yield* call("POST", `${base}/${String(resource["resourceType"])}`, { body: resource })
    expect([reply.status, reply.text.slice(0, 300)]).toEqual([201, reply.text.slice(0, 300)])
    return reply.json
  })

const ref = (resource: any) => `${resource.resourceType}/${resource.id}`

/** Kicks off `path` (under the base); the 202's status URL. */
const kickOff = (path: string, options: { readonly method?: string; readonly body?: unknown; readonly headers?: Record<string, string> } = {}) =>
  Effect.gen(function*() {
    const { base, url } = yield* Server
    const reply = yield* call(options.method ?? "GET", `${base}/${path}`, { headers: { ...async, ...options.headers }, ...(options.body === undefined ? {} : { body: options.body }) })
    expect([reply.status, reply.text.slice(0, 400)]).toEqual([202, reply.text.slice(0, 400)])
    const location = reply.headers.get("content-location")!
    expect(location).toMatch(new RegExp(`^${url}/export/[0-9a-f-]{36}$`))
    return location
  })

/** Polls the status until the job is done (bounded); its last answer. */
const finished = (location: string) =>
  Effect.gen(function*() {
    // Prefer: wait holds the status request until the job ends (or 20 seconds pass).
    for (let polls = 0; polls < 10; polls++) {
      const reply: Reply = yield* call("GET", location, { headers: { prefer: "wait=20" } })
      if (reply.status !== 202) return reply
      expect(reply.headers.get("x-progress")).toMatch(/^(queued|running: \d+ resources written)/)
      expect(reply.headers.get("retry-after")).toBe("2")
    }
    throw new Error(`${location} did not finish`)
  })

/** The resources of every output file of a manifest, by type, checking each file's count and size. */
const contents = (manifest: any) =>
  Effect.gen(function*() {
    const byType = new Map<string, Array<any>>()
    for (const output of manifest.output) {
      const reply = yield* call("GET", output.url)
      expect(reply.status).toBe(200)
      expect(reply.headers.get("content-type")).toBe("application/fhir+ndjson")
      const lines = reply.text.split("\n")
      expect(lines.pop()).toBe("")
      expect(lines.length).toBe(output.count)
      const resources = lines.map((line) => JSON.parse(line))
      if (lines.length > 1) expect(Buffer.byteLength(reply.text)).toBeLessThanOrEqual(maxFileBytes)
      for (const resource of resources) expect(resource.resourceType).toBe(output.type)
      byType.set(output.type, [...(byType.get(output.type) ?? []), ...resources])
    }
    return byType
  })

/** Kicks off, waits, and reads the files: the manifest and the resources' `Type/id` by type. */
const exported = (path: string, options: Parameters<typeof kickOff>[1] = {}) =>
  Effect.gen(function*() {
    const location = yield* kickOff(path, options)
    const done = yield* finished(location)
    expect([done.status, done.text.slice(0, 400)]).toEqual([200, done.text.slice(0, 400)])
    const byType = yield* contents(done.json)
    const refs = new Map([...byType].map(([type, resources]) => [type, resources.map(ref)]))
    for (const list of refs.values()) expect(new Set(list).size).toBe(list.length)
    return { location, manifest: done.json, byType, refs, all: [...refs.values()].flat() }
  })

const refused = (path: string, status: number, text: RegExp, options: { readonly method?: string; readonly body?: unknown; readonly headers?: Record<string, string> } = {}) =>
  Effect.gen(function*() {
    const { base } = yield* Server
    const reply = yield* call(options.method ?? "GET", `${base}/${path}`, { headers: { ...async, ...options.headers }, ...(options.body === undefined ? {} : { body: options.body }) })
    expect([path, reply.status]).toEqual([path, status])
    expect(reply.json.resourceType).toBe("OperationOutcome")
    expect(reply.json.issue[0].diagnostics).toMatch(text)
  })

const backendsUnderTest: ReadonlyArray<{ readonly kind: BackendKind; readonly skip: boolean }> = [
  { kind: "sqlite", skip: false },
  { kind: "postgres", skip: !pgAvailable }
]

for (const backend of backendsUnderTest) {
  describe.skipIf(skipRealPackages || backend.skip)(`$export on ${backend.kind}`, () => {
    layer(
      Layer.scoped(Server, startServer(backend.kind, {
        conformance: { package_registry: registryUrl ?? "", package_cache: realPackageCache },
        export: { max_file_bytes: maxFileBytes }
      })),
      { timeout: 600_000, excludeTestServices: true }
    )((it) => {
      it.effect("exports every resource of the types asked at system level, split by size, each as a read returns it, with the Bulk Data manifest", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const organization = yield* create({ resourceType: "Organization", name: "System level" })
          const patients: Array<any> = []
          for (let i = 0; i < 30; i++) patients.push(yield* create({ resourceType: "Patient", name: [{ family: `System${i}` }], managingOrganization: { reference: ref(organization) } }))
          const observation = yield* create({ resourceType: "Observation", status: "final", code: { text: "system" }, subject: { reference: ref(patients[0]) } })
          // The R4 packages' thousands of conformance resources are left out (_type): one file each at this size.
          const { manifest, byType, refs } = yield* exported("$export?_type=Patient,Observation,Organization")
          expect(Object.keys(manifest).sort()).toEqual(["error", "output", "request", "requiresAccessToken", "transactionTime"])
          expect(manifest.request).toBe(`${base}/$export?_type=Patient%2CObservation%2COrganization`)
          expect(manifest.requiresAccessToken).toBe(false)
          expect(manifest.error).toEqual([])
          expect(manifest.transactionTime).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/)
          // Split by size: Patient in several files, named in turn.
          const patientFiles = manifest.output.filter((output: any) => output.type === "Patient")
          expect(patientFiles.length).toBeGreaterThan(1)
          expect(patientFiles.map((output: any) => new URL(output.url).searchParams.get("name"))).toEqual(patientFiles.map((_: any, i: number) => `Patient.${i + 1}.ndjson`))
          for (const patient of patients) expect(refs.get("Patient")).toContain(ref(patient))
          expect(refs.get("Observation")).toContain(ref(observation))
          expect(refs.get("Organization")).toContain(ref(organization))
          // Each resource as a read of it returns it.
          const read = yield* call("GET", `${base}/${ref(patients[3])}`)
          expect(byType.get("Patient")!.find((p) => p.id === patients[3].id)).toEqual(read.json)
          // Every Patient of the server, as many as a search counts.
          const count = yield* call("GET", `${base}/Patient?_summary=count`)
          expect(refs.get("Patient")!.length).toBe(count.json.total)
          expect(manifest.output.filter((output: any) => output.type === "Patient").reduce((sum: number, output: any) => sum + output.count, 0)).toBe(count.json.total)
        }))

      it.effect("_type keeps to the types named, in their order; _since to what changed after it", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const before = yield* create({ resourceType: "Practitioner", name: [{ family: "Before" }] })
          const first = yield* exported("$export?_type=Practitioner,Location")
          expect([...first.refs.keys()]).toEqual(["Practitioner"])
          expect(first.refs.get("Practitioner")).toContain(ref(before))
          expect(first.manifest.request).toBe(`${base}/$export?_type=Practitioner%2CLocation`)
          const since = first.manifest.transactionTime
          const after = yield* create({ resourceType: "Practitioner", name: [{ family: "After" }] })
          const location = yield* create({ resourceType: "Location", name: "After" })
          const second = yield* exported(`$export?_type=Location&_type=Practitioner&_since=${encodeURIComponent(since)}`)
          expect([...second.refs.keys()]).toEqual(["Location", "Practitioner"])
          expect(second.refs.get("Practitioner")).toEqual([ref(after)])
          expect(second.refs.get("Location")).toEqual([ref(location)])
        }))

      it.effect("at Patient level exports the patients and their compartments only; _typeFilter keeps what one of its searches matches", () =>
        Effect.gen(function*() {
          const practitioner = yield* create({ resourceType: "Practitioner", name: [{ family: "Outside" }] })
          const patient = yield* create({ resourceType: "Patient", name: [{ family: "Compartment" }] })
          const subject = { reference: ref(patient) }
          const final = yield* create({ resourceType: "Observation", status: "final", code: { text: "filtered" }, subject, performer: [{ reference: ref(practitioner) }] })
          const preliminary = yield* create({ resourceType: "Observation", status: "preliminary", code: { text: "filtered" }, subject })
          const cancelled = yield* create({ resourceType: "Observation", status: "cancelled", code: { text: "filtered" }, subject })
          const loose = yield* create({ resourceType: "Observation", status: "final", code: { text: "no subject" } })
          const level = yield* exported("Patient/$export")
          expect(level.refs.get("Patient")).toContain(ref(patient))
          expect(level.refs.get("Observation")).toEqual(expect.arrayContaining([final, preliminary, cancelled].map(ref)))
          expect(level.refs.get("Observation")).not.toContain(ref(loose))
          expect(level.refs.has("Practitioner")).toBe(false)
          const filter = (query: string) => `_typeFilter=${encodeURIComponent(query)}`
          const filtered = yield* exported(`Patient/$export?_type=Observation&${filter("Observation?status=final&code:text=filtered")}&${filter("Observation?status=preliminary&code:text=filtered")}`)
          expect([...filtered.refs.keys()]).toEqual(["Observation"])
          expect([...filtered.refs.get("Observation")!].sort()).toEqual([ref(final), ref(preliminary)].sort())
          // A type with no filter is exported whole beside a filtered one.
          const mixed = yield* exported(`$export?_type=Observation,Practitioner&${filter("Observation?status=cancelled&code:text=filtered")}`)
          expect(mixed.refs.get("Observation")).toEqual([ref(cancelled)])
          expect(mixed.refs.get("Practitioner")).toContain(ref(practitioner))
        }))

      it.effect("at Group level exports the active members' data, narrowed by patient (POST)", () =>
        Effect.gen(function*() {
          const [a, b, c] = [yield* create({ resourceType: "Patient", name: [{ family: "MemberA" }] }), yield* create({ resourceType: "Patient", name: [{ family: "MemberB" }] }), yield* create({ resourceType: "Patient", name: [{ family: "Gone" }] })]
          const outsider = yield* create({ resourceType: "Patient", name: [{ family: "Outsider" }] })
          const obs = (patient: any) => create({ resourceType: "Observation", status: "final", code: { text: "group" }, subject: { reference: ref(patient) } })
          const [oa, ob, oc, oo] = [yield* obs(a), yield* obs(b), yield* obs(c), yield* obs(outsider)]
          const group = yield* create({
            resourceType: "Group",
            type: "person",
            actual: true,
            member: [{ entity: { reference: ref(a) } }, { entity: { reference: ref(b) } }, { entity: { reference: ref(c) }, inactive: true }]
          })
          const all = yield* exported(`Group/${group.id}/$export`)
          expect([...all.refs.get("Patient")!].sort()).toEqual([ref(a), ref(b)].sort())
          expect([...all.refs.get("Observation")!].sort()).toEqual([ref(oa), ref(ob)].sort())
          expect(all.all).not.toContain(ref(oc))
          expect(all.all).not.toContain(ref(oo))
          const narrowed = yield* exported(`Group/${group.id}/$export`, {
            method: "POST",
            body: {
              resourceType: "Parameters",
              parameter: [
                { name: "_type", valueString: "Patient,Observation" },
                { name: "patient", valueReference: { reference: ref(b) } },
                { name: "patient", valueReference: { reference: ref(outsider) } }
              ]
            }
          })
          expect(narrowed.all.sort()).toEqual([ref(b), ref(ob)].sort())
          expect(narrowed.manifest.request).toContain(`patient=${encodeURIComponent(ref(b))}`)
          yield* refused("Group/no-such-group/$export", 404, /Group\/no-such-group is not known/)
        }))

      it.effect("DELETE cancels a job: its status and files are gone, and a second DELETE is a 404", () =>
        Effect.gen(function*() {
          yield* create({ resourceType: "Patient", name: [{ family: "Cancelled" }] })
          const location = yield* kickOff("$export?_type=Patient")
          const done = yield* finished(location)
          expect(done.status).toBe(200)
          const file = done.json.output[0].url
          const other = yield* call("GET", `${location}/file?name=${encodeURIComponent("../../../etc/passwd")}`)
          expect(other.status).toBe(404)
          const cancel = yield* call("DELETE", location)
          expect(cancel.status).toBe(202)
          expect(cancel.json.resourceType).toBe("OperationOutcome")
          expect((yield* call("GET", location)).status).toBe(404)
          expect((yield* call("GET", file)).status).toBe(404)
          expect((yield* call("DELETE", location)).status).toBe(404)
          // A running job: cancelled before it is looked at again.
          const second = yield* kickOff("$export")
          expect((yield* call("DELETE", second)).status).toBe(202)
          expect((yield* call("GET", second)).status).toBe(404)
          const { url } = yield* Server
          expect((yield* call("GET", `${url}/export/00000000-0000-4000-8000-000000000000`)).status).toBe(404)
          expect((yield* call("GET", `${url}/export/not-a-job`)).status).toBe(404)
        }))

      it.effect("refuses a kick-off without Prefer: respond-async, an unknown format, type or parameter, and filters it cannot read", () =>
        Effect.gen(function*() {
          yield* refused("$export", 400, /Prefer: respond-async/, { headers: { prefer: "return=minimal" } })
          yield* refused("$export?_outputFormat=text/csv", 400, /_outputFormat "text\/csv" is not supported/)
          yield* refused("$export?_type=Nothing", 400, /not a resource type/)
          yield* refused("Patient/$export?_type=Practitioner", 400, /never in a Patient compartment/)
          yield* refused("$export?_since=yesterday", 400, /_since "yesterday" cannot be read/)
          yield* refused("$export?_elements=id", 400, /_elements is not supported/)
          yield* refused("$export?includeAssociatedData=LatestProvenanceResources", 400, /includeAssociatedData=LatestProvenanceResources is not supported/)
          yield* refused("$export?colour=blue", 400, /the parameter 'colour' is not supported/)
          yield* refused(`$export?_typeFilter=${encodeURIComponent("Observation?colour=blue")}`, 400, /_typeFilter "Observation\?colour=blue" cannot be used/)
          yield* refused(`$export?_typeFilter=${encodeURIComponent("Observation?date=someday")}`, 400, /_typeFilter "Observation\?date=someday" cannot be used/)
          yield* refused(`$export?_typeFilter=${encodeURIComponent("Observation?_count=10")}`, 400, /result parameters/)
          yield* refused(`$export?_type=Patient&_typeFilter=${encodeURIComponent("Observation?status=final")}`, 400, /not in _type/)
          yield* refused(`$export?_typeFilter=status%3Dfinal`, 400, /not a search on a resource type/)
          yield* refused("$export", 400, /'patient' is taken at Patient and Group level/, {
            method: "POST",
            body: { resourceType: "Parameters", parameter: [{ name: "patient", valueReference: { reference: "Patient/x" } }] }
          })
          yield* refused("Practitioner/$export", 404, /\$export is defined on Patient and Group/)
          yield* refused("Patient/x/$export", 404, /\$export is served at/)
          // The aliases of NDJSON are taken.
          for (const format of ["application/fhir+ndjson", "application/ndjson", "ndjson"]) {
            yield* kickOff(`$export?_type=Location&_outputFormat=${encodeURIComponent(format)}`)
          }
        }))

      it.effect("with Prefer: handling=lenient leaves out what it does not support and says so in the manifest's error file", () =>
        Effect.gen(function*() {
          const location = yield* create({ resourceType: "Location", name: "Lenient" })
          const { manifest, refs } = yield* exported("$export?_type=Location&colour=blue&_elements=id", { headers: { prefer: "respond-async, handling=lenient" } })
          expect(refs.get("Location")).toContain(ref(location))
          expect(manifest.error).toHaveLength(1)
          expect(manifest.error[0].type).toBe("OperationOutcome")
          const errors = yield* call("GET", manifest.error[0].url)
          const outcomes = errors.text.trim().split("\n").map((line) => JSON.parse(line))
          expect(outcomes.map((outcome) => outcome.issue[0].diagnostics)).toEqual([
            "the parameter 'colour': not supported by this server, left out (Prefer: handling=lenient)",
            "_elements: not supported by this server, left out (Prefer: handling=lenient)"
          ])
        }))
    })
  })
}
