/**
 * `$document` on Composition over HTTP on SQLite and Postgres, with the real R4 packages and the R4 example
 * Composition (`Composition/example`) with the resources it leads to: the document Bundle's order and content,
 * type and instance level, a Parameters body, XML, `persist=true` (a Bundle stored through the ordinary create),
 * the refusals (a reference that cannot be resolved, an unknown or deleted Composition, the parameters), the
 * bound on its size, and the caller's access (callers resolved from a test header, as the scope tests do).
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { PrincipalResolution } from "../../src/http/FrontDoor.ts"
import { anonymous, type Authorized } from "../../src/http/Principal.ts"
import { type BackendKind, pgAvailable } from "../support/backends.ts"
import { realPackageCache, registryUrl, skipRealPackages } from "../support/npmRegistry.ts"
import { call, type Reply, startServer, type TestServer } from "../support/server.ts"

class Server extends Context.Tag("test/DocumentServer")<Server, TestServer>() {}

const authorized = (scopes: string, patient?: string): Authorized => ({
  _tag: "Authorized",
  address: "127.0.0.1",
  clientId: "document-test",
  user: "someone",
  scopes: scopes.split(" "),
  patient
})

/** The callers, by the name the test header carries; without the header a caller is anonymous (no authorization layer). */
const principals = {
  /** Patient xcda's record, read and search. */
  xcda: authorized("patient/*.rs", "xcda"),
  /** Patient example's record. */
  example: authorized("patient/*.rs", "example"),
  /** Only the Compositions of patient xcda. */
  xcdaCompositions: authorized("patient/Composition.rs", "xcda"),
  /** The whole server, read and search. */
  reader: authorized("system/*.rs"),
  /** The whole server, read and search, and creating Bundles. */
  writer: authorized("system/*.rs system/Bundle.c")
}
type Caller = keyof typeof principals

const callerHeader = "x-test-principal"
const resolution = Layer.succeed(PrincipalResolution, (headers, address) => {
  const name = headers[callerHeader]
  return typeof name === "string" && name in principals ? principals[name as Caller] : anonymous(address)
})

const examplesFolder = join(realPackageCache, "hl7.fhir.r4.examples#4.0.1", "package")
/**
 * An R4 example as published, but for its known defect (test/support/r4ExampleDefects.ts): the Organization's
 * identifier of system urn:ietf:rfc:3986 holds a bare OID, written here as the URI it stands for.
 */
const example = (file: string): Record<string, unknown> => {
  const resource = JSON.parse(readFileSync(join(examplesFolder, file), "utf8"))
  if (file === "Organization-2.16.840.1.113883.19.5.json") {
    resource.identifier = resource.identifier.map((identifier: any) =>
      identifier.system === "urn:ietf:rfc:3986" && !identifier.value.includes(":") ? { ...identifier, value: `urn:oid:${identifier.value}` } : identifier)
  }
  return resource
}

/** The R4 examples the example Composition leads to, the Composition last. */
const exampleFiles = [
  "Organization-1.json", "Organization-2.16.840.1.113883.19.5.json", "Practitioner-xcda1.json", "Practitioner-xcda-author.json",
  "Patient-example.json", "Patient-xcda.json", "Encounter-example.json", "Encounter-xcda.json", "Observation-example.json",
  "Condition-stroke.json", "Condition-example.json", "Condition-example2.json", "Composition-example.json"
]

/** `Composition/old-example`, which the example's `relatesTo` names and the R4 examples do not hold. */
const oldExample = {
  resourceType: "Composition",
  id: "old-example",
  status: "final",
  type: { coding: [{ system: "http://loinc.org", code: "11488-4", display: "Consult note" }] },
  subject: { reference: "Patient/xcda" },
  date: "2011-12-01T10:00:00Z",
  author: [{ reference: "Practitioner/xcda-author" }],
  title: "Earlier consultation note"
}

/** The document of Composition/example: the Composition, what it refers to, then what those refer to, breadth first. */
const exampleDocument = [
  "Composition/example",
  // What the Composition refers to: subject, encounter, author (and attester), custodian, relatesTo, event, sections.
  "Patient/xcda", "Encounter/xcda", "Practitioner/xcda-author", "Organization/2.16.840.1.113883.19.5", "Composition/old-example",
  "Observation/example", "Condition/stroke", "Condition/example", "Condition/example2",
  // What those refer to: Encounter/xcda's participant, Observation/example's subject and encounter (the Conditions' subject too).
  "Practitioner/xcda1", "Patient/example", "Encounter/example",
  // Patient/example's managing organization.
  "Organization/1"
]

const request = (method: string, path: string, options: { readonly body?: unknown; readonly headers?: Record<string, string>; readonly caller?: Caller } = {}) =>
  Effect.flatMap(Server, ({ base }) =>
    call(method, path.startsWith("http") ? path : `${base}/${path}`, {
      ...(options.body === undefined ? {} : { body: options.body }),
      headers: { ...options.headers, ...(options.caller === undefined ? {} : { [callerHeader]: options.caller }) }
    }))

const get = (path: string, caller?: Caller) => request("GET", path, caller === undefined ? {} : { caller })

const put = (resource: Record<string, unknown>) =>
  Effect.gen(function*() {
    const reply = yield* request("PUT", `${String(resource["resourceType"])}/${String(resource["id"])}`, { body: resource })
    expect(reply.status, reply.text.slice(0, 400)).toBeLessThan(300)
    return reply.json
  })

const remove = (path: string) => Effect.map(request("DELETE", path), (reply) => expect(reply.status).toBe(204))

/** `Type/id` of every entry of a Bundle, in order. */
const entries = (bundle: any): Array<string> => (bundle.entry ?? []).map((entry: any) => `${entry.resource.resourceType}/${entry.resource.id}`)

/** The example resources on the server (PUT: the same ids each time), Composition/old-example with them. */
const loadExamples = Effect.gen(function*() {
  for (const file of exampleFiles) yield* put(example(file))
  yield* put(oldExample)
})

const expectRefused = (reply: Reply, status: number, code: string, ...says: ReadonlyArray<string>) => {
  expect([reply.status, reply.json?.resourceType, reply.json?.issue?.[0]?.code]).toEqual([status, "OperationOutcome", code])
  for (const text of says) expect(reply.json.issue[0].diagnostics).toContain(text)
}

const backendsUnderTest: ReadonlyArray<{ readonly kind: BackendKind; readonly skip: boolean }> = [
  { kind: "sqlite", skip: false },
  { kind: "postgres", skip: !pgAvailable }
]

for (const backend of backendsUnderTest) {
  describe.skipIf(skipRealPackages || backend.skip)(`$document on ${backend.kind}`, () => {
    layer(
      Layer.scoped(
        Server,
        startServer(backend.kind, {
          // References are checked as FHIR checks them, so that a Composition may name what the server does not hold.
          conformance: { package_registry: registryUrl ?? "", package_cache: realPackageCache, update_as_create: true, reference_policy: "fhir" }
        }).pipe(Effect.provide(resolution))
      ),
      { timeout: 600_000, excludeTestServices: true }
    )((it) => {
      it.effect("assembles the example Composition's document: the Composition first, what it refers to, then what those refer to, each once", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          yield* loadExamples
          const before = Date.now()
          const reply = yield* get("Composition/example/$document")
          expect([reply.status, reply.status === 200 ? "" : reply.text.slice(0, 400)]).toEqual([200, ""])
          expect(reply.headers.get("content-type")).toContain("application/fhir+json")
          const document = reply.json
          expect(document.resourceType).toBe("Bundle")
          expect(document.type).toBe("document")
          expect(document.identifier.system).toBe("urn:ietf:rfc:3986")
          expect(document.identifier.value).toMatch(/^urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/)
          expect(Date.parse(document.timestamp)).toBeGreaterThanOrEqual(before - 1000)
          expect(Date.parse(document.timestamp)).toBeLessThanOrEqual(Date.now() + 1000)
          expect(document.id).toBeUndefined()
          expect(entries(document)).toEqual(exampleDocument)
          // Each entry: its absolute URL, and the resource as a read gives it now.
          for (const entry of document.entry) {
            const path = `${entry.resource.resourceType}/${entry.resource.id}`
            expect(entry.fullUrl).toBe(`${base}/${path}`)
            expect([path, entry.resource]).toEqual([path, (yield* get(path)).json])
          }
          // A new document each time: a new identifier.
          const again = (yield* get("Composition/example/$document")).json
          expect(entries(again)).toEqual(exampleDocument)
          expect(again.identifier.value).not.toBe(document.identifier.value)
        }))

      it.effect("is the same at type level with id (an id or this server's URL of the Composition) and with a Parameters body", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          yield* loadExamples
          for (const id of ["example", `${base}/Composition/example`, "Composition/example"]) {
            const reply = yield* get(`Composition/$document?id=${encodeURIComponent(id)}`)
            expect([id, reply.status, entries(reply.json)]).toEqual([id, 200, exampleDocument])
          }
          const posted = yield* request("POST", "Composition/$document", {
            body: { resourceType: "Parameters", parameter: [{ name: "id", valueUri: "example" }, { name: "persist", valueBoolean: false }] }
          })
          expect([posted.status, entries(posted.json)]).toEqual([200, exampleDocument])
          const instance = yield* request("POST", "Composition/example/$document", { body: { resourceType: "Parameters" } })
          expect([instance.status, entries(instance.json)]).toEqual([200, exampleDocument])
        }))

      it.effect("answers in XML", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          yield* loadExamples
          const reply = yield* get("Composition/example/$document?_format=xml")
          expect(reply.status).toBe(200)
          expect(reply.headers.get("content-type")).toContain("application/fhir+xml")
          expect(reply.text).toMatch(/^(<\?xml[^>]*>\s*)?<Bundle xmlns="http:\/\/hl7.org\/fhir">/)
          expect(reply.text).toContain(`<type value="document"/>`)
          const fullUrls = [...reply.text.matchAll(/<fullUrl value="([^"]+)"\/>/g)].map((match) => match[1])
          expect(fullUrls).toEqual(exampleDocument.map((path) => `${base}/${path}`))
          expect(reply.text).toContain(`<resource><Composition><id value="example"/>`)
        }))

      it.effect("refuses a reference it cannot resolve with a 422 naming the reference and where it is", () =>
        Effect.gen(function*() {
          yield* loadExamples
          // The example's relatesTo names Composition/old-example: without it there is no document.
          yield* remove("Composition/old-example")
          const gone = yield* get("Composition/example/$document")
          expectRefused(gone, 422, "processing", "Composition/example refers to 'Composition/old-example' at Composition.relatesTo[0].targetReference", "deleted")
          expect(gone.json.issue[0].expression).toEqual(["Composition.relatesTo[0].targetReference"])
          yield* put(oldExample)
          expect((yield* get("Composition/example/$document")).status).toBe(200)

          // Every reference that cannot be resolved is listed: one never written, one on another server.
          yield* put({
            ...oldExample,
            id: "dangling",
            relatesTo: [{ code: "replaces", targetReference: { reference: "Composition/never-written" } }],
            section: [{ title: "Results", entry: [{ reference: "http://elsewhere.example.org/fhir/Observation/1" }] }]
          })
          const dangling = yield* get("Composition/dangling/$document")
          expectRefused(dangling, 422, "processing", "'Composition/never-written' at Composition.relatesTo[0].targetReference", "not known")
          expect(dangling.json.issue.map((issue: any) => issue.expression[0])).toEqual([
            "Composition.relatesTo[0].targetReference",
            "Composition.section[0].entry[0]"
          ])
          expect(dangling.json.issue[1].diagnostics).toContain("'http://elsewhere.example.org/fhir/Observation/1'")
          expect(dangling.json.issue[1].diagnostics).toContain("not on this server")

          // A resource of the document that refers to what is not there, however deep.
          yield* put({ resourceType: "Observation", id: "orphan", status: "final", code: { text: "x" }, subject: { reference: "Patient/never-written" } })
          yield* put({ ...oldExample, id: "deep", section: [{ title: "Results", entry: [{ reference: "Observation/orphan" }] }] })
          expectRefused(yield* get("Composition/deep/$document"), 422, "processing", "Observation/orphan refers to 'Patient/never-written' at Observation.subject")
        }))

      it.effect("answers 404 for a Composition not known, 410 for a deleted one, and refuses parameters it cannot take", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          yield* loadExamples
          expectRefused(yield* get("Composition/no-such-composition/$document"), 404, "not-found", "Composition/no-such-composition")
          expectRefused(yield* get("Composition/$document?id=no-such-composition"), 404, "not-found", "Composition/no-such-composition")
          yield* put({ ...oldExample, id: "short-lived" })
          yield* remove("Composition/short-lived")
          expectRefused(yield* get("Composition/short-lived/$document"), 410, "deleted")
          expectRefused(yield* get("Composition/$document"), 400, "required", "'id'")
          expectRefused(yield* get("Composition/example/$document?id=example"), 400, "invalid", "'id'")
          expectRefused(yield* get("Composition/$document?id=http%3A%2F%2Felsewhere.example.org%2Ffhir%2FComposition%2F1"), 422, "processing", "not on this server")
          expectRefused(yield* get(`Composition/$document?id=${encodeURIComponent(`${base}/Composition/example/_history/1`)}`), 400, "invalid", "names no Composition")
          expectRefused(yield* get("Composition/example/$document?graph=http%3A%2F%2Fexample.org%2FGraphDefinition%2Fg"), 501, "not-supported", "'graph'")
          expectRefused(yield* get("Composition/example/$document?persist=perhaps"), 400, "invalid", "'persist'")
          expectRefused(yield* get("Composition/example/$document?other=1"), 400, "invalid", "Unknown parameter 'other'")
          expectRefused(yield* get("Patient/xcda/$document"), 404, "not-found", "defined on Composition")
          expect((yield* call("PUT", `${base}/Composition/example/$document`, { body: { resourceType: "Parameters" } })).status).toBe(405)
        }))

      it.effect("persist=true stores the document as a Bundle through the ordinary create: read back, found by search, in history", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          yield* loadExamples
          const stored = yield* request("POST", "Composition/example/$document", {
            body: { resourceType: "Parameters", parameter: [{ name: "persist", valueBoolean: true }] }
          })
          expect([stored.status, stored.status === 201 ? "" : stored.text.slice(0, 600)]).toEqual([201, ""])
          const id = stored.json.id as string
          expect(stored.json.resourceType).toBe("Bundle")
          expect(stored.json.meta.versionId).toBe("1")
          expect(stored.json.identifier).toEqual({ system: "urn:ietf:rfc:3986", value: `urn:uuid:${id}` })
          expect(stored.headers.get("location")).toBe(`${base}/Bundle/${id}/_history/1`)
          expect(stored.headers.get("x-svc-commit-ts")).toMatch(/^[0-9]+$/)
          expect(entries(stored.json)).toEqual(exampleDocument)
          const read = yield* get(`Bundle/${id}`)
          expect(read.status).toBe(200)
          expect(read.json).toEqual(stored.json)
          const found = yield* get(`Bundle?identifier=${encodeURIComponent(`urn:ietf:rfc:3986|urn:uuid:${id}`)}`)
          expect(found.json.entry.map((entry: any) => entry.resource.id)).toEqual([id])
          const history = yield* get(`Bundle/${id}/_history`)
          expect(history.json.entry.map((entry: any) => entry.resource.meta.versionId)).toEqual(["1"])
          // On GET too.
          const viaGet = yield* get("Composition/$document?id=example&persist=true")
          expect(viaGet.status).toBe(201)
          expect(viaGet.json.id).not.toBe(id)
          expect((yield* get(`Bundle/${viaGet.json.id}`)).status).toBe(200)
        }))

      it.effect("follows a versioned reference to that version, beside the current one", () =>
        Effect.gen(function*() {
          yield* loadExamples
          yield* put({ resourceType: "Observation", id: "changing", status: "preliminary", code: { text: "x" }, subject: { reference: "Patient/xcda" } })
          const first = (yield* get("Observation/changing")).json.meta.versionId as string
          yield* put({ resourceType: "Observation", id: "changing", status: "final", code: { text: "x" }, subject: { reference: "Patient/xcda" } })
          yield* put({
            ...oldExample,
            id: "versioned",
            section: [{ title: "Results", entry: [{ reference: `Observation/changing/_history/${first}` }, { reference: "Observation/changing" }] }]
          })
          const reply = yield* get("Composition/versioned/$document")
          expect(reply.status).toBe(200)
          const observations = reply.json.entry.filter((entry: any) => entry.resource.resourceType === "Observation")
          expect(observations.map((entry: any) => [entry.resource.status, entry.resource.meta.versionId === first])).toEqual([["preliminary", true], ["final", false]])
          // A version that does not exist cannot be resolved.
          yield* put({ ...oldExample, id: "versioned", section: [{ title: "Results", entry: [{ reference: "Observation/changing/_history/99" }] }] })
          expectRefused(yield* get("Composition/versioned/$document"), 422, "processing", "no version 99")
        }))

      it.effect("refuses a document of more than 1000 resources with a 413", () =>
        Effect.gen(function*() {
          yield* loadExamples
          const observations = Array.from({ length: 1000 }, (_, i) => ({
            fullUrl: `urn:uuid:00000000-0000-4000-8000-${String(i).padStart(12, "0")}`,
            resource: { resourceType: "Observation", status: "final", code: { text: `item ${i}` } },
            request: { method: "POST", url: "Observation" }
          }))
          const composition = {
            fullUrl: "urn:uuid:00000000-0000-4000-9000-000000000000",
            resource: { ...oldExample, id: undefined, section: [{ title: "Everything", entry: observations.map((entry) => ({ reference: entry.fullUrl })) }] },
            request: { method: "POST", url: "Composition" }
          }
          const { base } = yield* Server
          const committed = yield* request("POST", base, { body: { resourceType: "Bundle", type: "transaction", entry: [...observations, composition] } })
          expect([committed.status, committed.status === 200 ? "" : committed.text.slice(0, 400)]).toEqual([200, ""])
          const location = committed.json.entry[1000].response.location as string
          const id = location.split("/")[1]
          expectRefused(yield* get(`Composition/${id}/$document`), 413, "too-costly", "more than 1000 resources")
        }))

      it.effect("under a token: the Composition and everything in the document must be readable, and storing it needs create on Bundle", () =>
        Effect.gen(function*() {
          yield* loadExamples
          yield* put({ resourceType: "Observation", id: "xcda-bp", status: "final", code: { text: "blood pressure" }, subject: { reference: "Patient/xcda" } })
          yield* put({
            ...oldExample,
            id: "xcda-note",
            encounter: { reference: "Encounter/xcda" },
            custodian: { reference: "Organization/2.16.840.1.113883.19.5" },
            section: [{ title: "Results", entry: [{ reference: "Observation/xcda-bp" }] }]
          })
          const own = yield* get("Composition/xcda-note/$document", "xcda")
          expect([own.status, entries(own.json)]).toEqual([200, [
            "Composition/xcda-note", "Patient/xcda", "Encounter/xcda", "Practitioner/xcda-author", "Organization/2.16.840.1.113883.19.5",
            "Observation/xcda-bp", "Practitioner/xcda1"
          ]])
          // Patient xcda's example Composition holds patient example's Observation: refused, not cut short.
          expectRefused(yield* get("Composition/example/$document", "xcda"), 403, "forbidden", "'Observation/example' at Composition.event[0].detail[0]", "may not read")
          // Another patient's token does not see the Composition at all.
          expectRefused(yield* get("Composition/xcda-note/$document", "example"), 404, "not-found", "Composition/xcda-note")
          // A token that may read Compositions only may not read the Patient the document needs.
          expectRefused(yield* get("Composition/xcda-note/$document", "xcdaCompositions"), 403, "forbidden", "'Patient/xcda' at Composition.subject", "patient/Patient.r")
          // A deleted resource of the document: 422 for a caller who may read every resource, the same 403 as
          // for a resource of another patient for a patient's token (it cannot tell which).
          yield* put({ resourceType: "Observation", id: "xcda-gone", status: "final", code: { text: "x" }, subject: { reference: "Patient/xcda" } })
          yield* put({ ...oldExample, id: "xcda-gone-note", section: [{ title: "Results", entry: [{ reference: "Observation/xcda-gone" }] }] })
          yield* remove("Observation/xcda-gone")
          expectRefused(yield* get("Composition/xcda-gone-note/$document", "reader"), 422, "processing", "'Observation/xcda-gone'", "deleted")
          expectRefused(yield* get("Composition/xcda-gone-note/$document", "xcda"), 403, "forbidden", "'Observation/xcda-gone'", "may not read")
          // Storing needs create on Bundle.
          expectRefused(yield* get("Composition/xcda-note/$document?persist=true", "reader"), 403, "forbidden", "Bundle")
          const stored = yield* get("Composition/xcda-note/$document?persist=true", "writer")
          expect(stored.status).toBe(201)
          expect((yield* get(`Bundle/${stored.json.id}`, "reader")).status).toBe(200)
        }))

      it.effect("is listed on Composition in the CapabilityStatement", () =>
        Effect.gen(function*() {
          const statement = (yield* get("metadata")).json
          const operations = (type: string) => statement.rest[0].resource.find((r: any) => r.type === type).operation?.map((o: any) => o) ?? []
          expect(operations("Composition")).toContainEqual({ name: "document", definition: "http://hl7.org/fhir/OperationDefinition/Composition-document" })
          expect(operations("Patient").map((o: any) => o.name)).not.toContain("document")
        }))
    })
  })
}
