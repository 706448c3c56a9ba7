/**
 * `$meta`, `$meta-add` and `$meta-delete` over HTTP on SQLite and Postgres, with the real R4 packages (the
 * OperationDefinitions are R4 core's): the R4 example, no new version (versionId, lastUpdated, ETag and
 * history stay), `_tag`/`_security`/`_profile` searches following at once, the three levels of `$meta` and
 * a version, the change feed and its log, `/sync` live queries and a Subscription following the change, XML,
 * the refusals, and tokens without the permission under --smart.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer, Queue, Stream } from "effect"
import { SmartSecrets } from "../../src/auth/SmartSecrets.ts"
import { ChangeFeed, type Committed } from "../../src/db/ChangeFeed.ts"
import type { SyncConnection } from "../../src/sync/LiveQueries.ts"
import type { ServerMessage } from "../../src/sync/protocol.ts"
import { type BackendKind, pgAvailable } from "../support/backends.ts"
import { following } from "../support/feed.ts"
import { startReceiver } from "../support/receiver.ts"
import { realPackageCache, registryUrl, skipRealPackages } from "../support/npmRegistry.ts"
import { call, type Reply, startServer, type TestServer } from "../support/server.ts"
import { launchToken, secrets, systemToken } from "../support/smartTokens.ts"
import { createSubscription } from "../subscriptions/support.ts"

class Server extends Context.Tag("test/MetaServer")<Server, TestServer>() {}

const realPackages = { package_registry: registryUrl ?? "", package_cache: realPackageCache }

const tags = "http://example.org/codes/tags"
const labels = "http://terminology.hl7.org/CodeSystem/v3-ActCode"
const lostProfile = "http://example.org/fhir/StructureDefinition/lost-record"

const get = (path: string, headers: Record<string, string> = {}) => Effect.flatMap(Server, ({ base }) => call("GET", `${base}/${path}`, { headers }))
const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  Effect.flatMap(Server, ({ base }) => call("POST", `${base}/${path}`, { body, headers }))

const create = (resource: Record<string, unknown>) =>
  Effect.gen(function*() {
    const reply = yield* post(String(resource["resourceType"]), resource)
    expect([reply.status, reply.text.slice(0, 300)]).toEqual([201, reply.text.slice(0, 300)])
    return reply.json
  })

/** The Parameters of `$meta-add`/`$meta-delete`. */
const metaParameters = (meta: Record<string, unknown>) => ({ resourceType: "Parameters", parameter: [{ name: "meta", valueMeta: meta }] })

/** The Meta a Parameters answer returns. */
const returned = (reply: Reply) => {
  expect([reply.status, reply.text.slice(0, 400)]).toEqual([200, reply.text.slice(0, 400)])
  expect(reply.json.resourceType).toBe("Parameters")
  expect(reply.json.parameter.map((parameter: any) => parameter.name)).toEqual(["return"])
  return reply.json.parameter[0].valueMeta
}

const codes = (codings: ReadonlyArray<any> | undefined) => (codings ?? []).map((coding) => `${coding.system ?? ""}|${coding.code}`)

const ids = (bundle: any) => (bundle.entry ?? []).map((entry: any) => entry.resource.id).sort()

const refused = (reply: Reply, status: number, says: string) => {
  expect([reply.status, reply.json?.resourceType]).toEqual([status, "OperationOutcome"])
  expect(reply.json.issue[0].diagnostics).toContain(says)
}

const backendsUnderTest: ReadonlyArray<{ readonly kind: BackendKind; readonly skip: boolean }> = [
  { kind: "sqlite", skip: false },
  { kind: "postgres", skip: !pgAvailable }
]

for (const backend of backendsUnderTest) {
  describe.skipIf(skipRealPackages || backend.skip)(`$meta, $meta-add and $meta-delete on ${backend.kind}`, () => {
    layer(Layer.scoped(Server, startServer(backend.kind, { conformance: realPackages })), { timeout: 600_000, excludeTestServices: true })((it) => {
      it.effect("add a tag and a profile as the R4 example does, in place: no new version, the same lastUpdated and ETag", () =>
        Effect.gen(function*() {
          const patient = yield* create({
            resourceType: "Patient",
            meta: { tag: [{ system: tags, code: "current", display: "Current Inpatient" }] },
            name: [{ family: "Lost" }]
          })
          const before = yield* get(`Patient/${patient.id}`)
          const added = yield* post(`Patient/${patient.id}/$meta-add`, metaParameters({
            profile: [lostProfile],
            tag: [{ system: tags, code: "record-lost", display: "Patient File Lost" }]
          }))
          const meta = returned(added)
          expect(codes(meta.tag)).toEqual([`${tags}|current`, `${tags}|record-lost`])
          expect(meta.profile).toEqual([lostProfile])
          expect([meta.versionId, meta.lastUpdated]).toEqual(["1", patient.meta.lastUpdated])
          expect(added.headers.get("x-svc-commit-ts")).toMatch(/^\d+$/)

          const read = yield* get(`Patient/${patient.id}`)
          expect(read.json.meta).toEqual(meta)
          expect(read.json.name).toEqual(patient.name)
          expect([read.headers.get("etag"), read.headers.get("last-modified")]).toEqual([before.headers.get("etag"), before.headers.get("last-modified")])
          expect(read.headers.get("etag")).toBe('W/"1"')
          expect((yield* get(`Patient/${patient.id}/_history/1`)).json.meta).toEqual(meta)
          const history = yield* get(`Patient/${patient.id}/_history`)
          expect([history.json.total, history.json.entry.length]).toEqual([1, 1])
          expect(history.json.entry[0].resource.meta).toEqual(meta)

          // Sets: a tag known by its system and code is not added again, whatever its display; nothing is written.
          const again = yield* post(`Patient/${patient.id}/$meta-add`, metaParameters({ tag: [{ system: tags, code: "record-lost", display: "Another" }] }))
          expect(returned(again)).toEqual(meta)
          expect(again.headers.get("x-svc-commit-ts")).toBeNull()
        }))

      it.effect("_tag, _security and _profile searches find the resource after $meta-add and not after $meta-delete", () =>
        Effect.gen(function*() {
          const observation = yield* create({ resourceType: "Observation", status: "final", code: { text: "flagged" } })
          const search = (query: string) => Effect.map(get(`Observation?${query}`), (reply) => ids(reply.json))
          const byTag = `_tag=${encodeURIComponent(`${tags}|flagged`)}`
          const bySecurity = `_security=${encodeURIComponent(`${labels}|PSY`)}`
          const byProfile = `_profile=${encodeURIComponent(lostProfile)}`
          expect(yield* search(byTag)).toEqual([])
          returned(yield* post(`Observation/${observation.id}/$meta-add`, metaParameters({
            tag: [{ system: tags, code: "flagged" }],
            security: [{ system: labels, code: "PSY" }],
            profile: [lostProfile]
          })))
          expect(yield* search(byTag)).toEqual([observation.id])
          expect(yield* search(bySecurity)).toEqual([observation.id])
          expect(yield* search(byProfile)).toEqual([observation.id])
          // Its other index rows are still there.
          expect(yield* search(`code:text=flagged&_id=${observation.id}`)).toEqual([observation.id])

          const deleted = returned(yield* post(`Observation/${observation.id}/$meta-delete`, metaParameters({
            tag: [{ system: tags, code: "flagged", display: "not compared" }],
            profile: [lostProfile]
          })))
          expect(deleted.tag).toBeUndefined()
          expect(deleted.profile).toBeUndefined()
          expect(codes(deleted.security)).toEqual([`${labels}|PSY`])
          expect(yield* search(byTag)).toEqual([])
          expect(yield* search(byProfile)).toEqual([])
          expect(yield* search(bySecurity)).toEqual([observation.id])
          // Deleting what is not there is no error, and changes nothing.
          const absent = yield* post(`Observation/${observation.id}/$meta-delete`, metaParameters({ tag: [{ system: tags, code: "never-there" }] }))
          expect(returned(absent)).toEqual(deleted)
          expect(absent.headers.get("x-svc-commit-ts")).toBeNull()
          const read = yield* get(`Observation/${observation.id}`)
          expect([read.json.meta.versionId, read.json.meta.lastUpdated]).toEqual(["1", observation.meta.lastUpdated])
        }))

      it.effect("$meta answers an instance, a version, a type and the whole system", () =>
        Effect.gen(function*() {
          const tagged = (code: string) => ({ system: tags, code })
          const first = yield* create({
            resourceType: "Substance",
            meta: { tag: [tagged("s-a")], security: [{ system: labels, code: "PSY" }], profile: [lostProfile] },
            code: { text: "one" }
          })
          yield* create({ resourceType: "Substance", meta: { tag: [tagged("s-a"), tagged("s-b")] }, code: { text: "two" } })
          const gone = yield* create({ resourceType: "Substance", meta: { tag: [tagged("s-deleted")] }, code: { text: "three" } })
          expect((yield* call("DELETE", `${(yield* Server).base}/Substance/${gone.id}`)).status).toBeLessThan(300)

          const typeLevel = returned(yield* get("Substance/$meta"))
          expect(typeLevel).toEqual({
            profile: [lostProfile],
            security: [{ system: labels, code: "PSY" }],
            tag: [tagged("s-a"), tagged("s-b")]
          })
          // POST with no body asks the same.
          expect(returned(yield* post("Substance/$meta", undefined))).toEqual(typeLevel)

          // An update makes version 2; the instance answers its current version, a version path the one named.
          const updated = yield* call("PUT", `${(yield* Server).base}/Substance/${first.id}`, {
            body: { resourceType: "Substance", id: first.id, meta: { tag: [tagged("s-c")] }, code: { text: "one" } }
          })
          expect(updated.status).toBe(200)
          const current = returned(yield* get(`Substance/${first.id}/$meta`))
          expect([codes(current.tag), current.versionId, current.profile]).toEqual([[`${tags}|s-c`], "2", undefined])
          const old = returned(yield* get(`Substance/${first.id}/_history/1/$meta`))
          expect([codes(old.tag), old.versionId, old.profile]).toEqual([[`${tags}|s-a`], "1", [lostProfile]])

          // $meta-add on version 1 changes that version alone: vread shows it, the current version and the index do not.
          const edited = returned(yield* post(`Substance/${first.id}/_history/1/$meta-add`, metaParameters({ tag: [tagged("s-old")] })))
          expect([codes(edited.tag), edited.versionId]).toEqual([[`${tags}|s-a`, `${tags}|s-old`], "1"])
          expect(codes((yield* get(`Substance/${first.id}/_history/1`)).json.meta.tag)).toEqual([`${tags}|s-a`, `${tags}|s-old`])
          expect(codes((yield* get(`Substance/${first.id}`)).json.meta.tag)).toEqual([`${tags}|s-c`])
          expect(ids((yield* get(`Substance?_tag=${encodeURIComponent(`${tags}|s-old`)}`)).json)).toEqual([])
          expect((yield* get(`Substance/${first.id}/_history`)).json.total).toBe(2)

          const typeNow = returned(yield* get("Substance/$meta"))
          expect(codes(typeNow.tag)).toEqual([`${tags}|s-a`, `${tags}|s-b`, `${tags}|s-c`])
          expect(typeNow.profile).toBeUndefined()
          const system = returned(yield* get("$meta"))
          expect(codes(system.tag)).toEqual(expect.arrayContaining([`${tags}|s-a`, `${tags}|s-b`, `${tags}|s-c`]))
          expect(codes(system.tag)).not.toContain(`${tags}|s-deleted`)
          expect(codes(system.tag)).not.toContain(`${tags}|s-old`)
          // A type nothing is stored of has nothing in use.
          expect(returned(yield* get("BiologicallyDerivedProduct/$meta"))).toEqual({})
        }))

      it.scoped("publish the change as an update of the same version, live and in the change log", () =>
        Effect.gen(function*() {
          const server = yield* Server
          const patient = yield* create({ resourceType: "Patient", name: [{ family: "Followed" }] })
          const { take } = yield* following().pipe(Effect.provideService(ChangeFeed, server.changeFeed))
          returned(yield* post(`Patient/${patient.id}/$meta-add`, metaParameters({ tag: [{ system: tags, code: "followed" }] }), { "x-request-id": "meta-add-1" }))
          const [event] = (yield* take(1)) as Array<Committed>
          expect(event).toMatchObject({ _tag: "Committed", requestId: "meta-add-1" })
          expect(event!.changes).toHaveLength(1)
          expect(event!.changes[0]).toMatchObject({ type: "Patient", id: patient.id, version: 1, op: "update", inPlace: true })
          expect(codes(JSON.parse(event!.changes[0]!.resource!).meta.tag)).toEqual([`${tags}|followed`])
          // What a follower reading the database's log (a replica) sees.
          const logged = [...(yield* Stream.runCollect(server.changeFeed.stream(event!.commitTs - 1)))]
          expect(logged.map((commit) => commit.commitTs)).toEqual([event!.commitTs])
          expect(logged[0]!.changes).toEqual(event!.changes)
          expect(logged[0]!.requestId).toBe("meta-add-1")
        }))

      it.scoped("reach /sync live queries: a tag query sees the resource enter and leave, one holding it sees it change", () =>
        Effect.gen(function*() {
          const server = yield* Server
          const patient = yield* create({ resourceType: "Patient", name: [{ family: "Livemeta" }] })
          const messages = yield* Queue.unbounded<ServerMessage>()
          const conn: SyncConnection = { principal: { _tag: "Anonymous", address: "127.0.0.1" }, send: (message) => messages.unsafeOffer(message) }
          const tagQuery = `Patient?_tag=${encodeURIComponent(`${tags}|live`)}`
          yield* server.liveQueries.subscribe(conn, "tagged", tagQuery)
          yield* server.liveQueries.subscribe(conn, "family", "Patient?family=Livemeta")
          const results = [yield* Queue.take(messages), yield* Queue.take(messages)]
          expect(results.map((message) => message.type === "result" ? [message.id, message.total] : message.type)).toEqual([["tagged", 0], ["family", 1]])
          const resumeFrom = results[0]!.type === "result" ? results[0]!.commitTs : 0

          const added = yield* post(`Patient/${patient.id}/$meta-add`, metaParameters({ tag: [{ system: tags, code: "live" }] }))
          returned(added)
          const entered = yield* Queue.take(messages)
          expect(entered).toMatchObject({ type: "changes", commitTs: Number(added.headers.get("x-svc-commit-ts")) })
          const addedChanges = entered.type === "changes" ? entered.queries : {}
          expect(addedChanges["tagged"]).toMatchObject({ changed: [], left: [] })
          expect(codes((addedChanges["tagged"]!.entered[0] as any).meta.tag)).toEqual([`${tags}|live`])
          expect(addedChanges["family"]).toMatchObject({ entered: [], left: [] })
          expect((addedChanges["family"]!.changed as Array<any>).map((resource) => [resource.id, resource.meta.versionId])).toEqual([[patient.id, "1"]])

          // A query resumed from before the change is told of it from the change log.
          yield* server.liveQueries.subscribe(conn, "resumed", tagQuery, resumeFrom)
          const resumed = yield* Queue.take(messages)
          expect(resumed.type === "changes" && (resumed.queries["resumed"]!.entered as Array<any>).map((resource) => resource.id)).toEqual([patient.id])
          expect(yield* Queue.take(messages)).toMatchObject({ type: "caughtUp", id: "resumed" })

          returned(yield* post(`Patient/${patient.id}/$meta-delete`, metaParameters({ tag: [{ system: tags, code: "live" }] })))
          const left = yield* Queue.take(messages)
          const leftChanges = left.type === "changes" ? left.queries : {}
          expect(leftChanges["tagged"]).toEqual({ entered: [], changed: [], left: [`Patient/${patient.id}`] })
          expect(leftChanges["resumed"]).toEqual({ entered: [], changed: [], left: [`Patient/${patient.id}`] })
          expect((leftChanges["family"]!.changed as Array<any>).map((resource) => resource.meta.tag)).toEqual([undefined])
        }))

      it.scoped("notify a Subscription whose criteria the resource matches after the change, as an update of that version", () =>
        Effect.gen(function*() {
          const server = yield* Server
          const receiver = yield* startReceiver()
          const criteria = `Observation?_tag=${encodeURIComponent(`${tags}|notify`)}`
          yield* createSubscription(server, criteria, { endpoint: `${receiver.url}/hook` })
          const observation = yield* create({ resourceType: "Observation", status: "final", code: { text: "notify" } })
          returned(yield* post(`Observation/${observation.id}/$meta-add`, metaParameters({ tag: [{ system: tags, code: "notify" }] })))
          const hit = JSON.parse((yield* receiver.next).body)
          expect(hit.entry).toHaveLength(1)
          expect(hit.entry[0]).toMatchObject({ request: { method: "PUT", url: `Observation/${observation.id}` }, response: { etag: 'W/"1"' } })
          expect(codes(hit.entry[0].resource.meta.tag)).toEqual([`${tags}|notify`])
          // Removing the tag makes it stop matching: nothing is sent; the next notification is the next match.
          returned(yield* post(`Observation/${observation.id}/$meta-delete`, metaParameters({ tag: [{ system: tags, code: "notify" }] })))
          const next = yield* create({ resourceType: "Observation", status: "final", code: { text: "next" }, meta: { tag: [{ system: tags, code: "notify" }] } })
          expect(JSON.parse((yield* receiver.next).body).entry.map((entry: any) => entry.resource.id)).toEqual([next.id])
          expect(receiver.received).toHaveLength(2)
        }))

      it.effect("answer in XML, and read a Parameters body in XML", () =>
        Effect.gen(function*() {
          const patient = yield* create({ resourceType: "Patient", name: [{ family: "Xml" }] })
          const body = `<Parameters xmlns="http://hl7.org/fhir"><parameter><name value="meta"/><valueMeta>` +
            `<tag><system value="${tags}"/><code value="record-lost"/><display value="Patient File Lost"/></tag>` +
            `</valueMeta></parameter></Parameters>`
          const added = yield* post(`Patient/${patient.id}/$meta-add`, body, { "content-type": "application/fhir+xml", accept: "application/fhir+xml" })
          expect(added.status).toBe(200)
          expect(added.headers.get("content-type")).toContain("application/fhir+xml")
          expect(added.text).toContain(`<Parameters xmlns="http://hl7.org/fhir">`)
          expect(added.text).toContain(`<name value="return"/><valueMeta><versionId value="1"/>`)
          expect(added.text).toContain(`<tag><system value="${tags}"/><code value="record-lost"/><display value="Patient File Lost"/></tag>`)
          const asked = yield* get(`Patient/${patient.id}/$meta?_format=xml`)
          expect([asked.status, asked.headers.get("content-type")]).toEqual([200, expect.stringContaining("application/fhir+xml")])
          expect(asked.text).toContain(`<code value="record-lost"/>`)
        }))

      it.effect("refuse what they cannot read, and answer 404, 405 and 410 as reads do", () =>
        Effect.gen(function*() {
          const { base } = yield* Server
          const patient = yield* create({ resourceType: "Patient", name: [{ family: "Refusals" }] })
          const add = (body: unknown, path = `Patient/${patient.id}/$meta-add`) => post(path, body)
          refused(yield* add({ resourceType: "Parameters" }), 400, "needs the parameter 'meta'")
          refused(yield* add(undefined), 400, "needs the parameter 'meta'")
          refused(yield* add({ resourceType: "Patient" }), 400, "takes a Parameters body")
          refused(yield* add({ resourceType: "Parameters", parameter: [{ name: "meta", valueMeta: { tag: [{ code: "x" }] } }, { name: "other", valueString: "x" }] }), 400, "Unknown parameter 'other'")
          refused(yield* add(metaParameters({ tag: [{ system: tags, display: "no code" }] })), 400, "meta.tag[0] has no code")
          refused(yield* add(metaParameters({ security: [{ system: tags, code: "a", colour: "red" }] })), 400, "'colour', which is not an element of Coding")
          refused(yield* add(metaParameters({ profile: [42] })), 400, "meta.profile[0] is not a canonical URL")
          refused(yield* add(metaParameters({ tag: { code: "x" } })), 400, "meta.tag is not a list")
          refused(yield* add(metaParameters({ label: [] })), 400, "'label' is not an element of Meta")
          refused(yield* add({ resourceType: "Parameters", parameter: [{ name: "meta", valueCoding: { code: "x" } }] }), 400, "is a Meta (valueMeta), not a Coding")
          refused(yield* add({ resourceType: "Parameters", parameter: [{ name: "meta", valueMeta: {} }, { name: "meta", valueMeta: {} }] }), 400, "more than once")
          refused(yield* post(`Patient/${patient.id}/$meta-delete`, metaParameters({ tag: [{ system: tags }] })), 400, "has no code")
          // The meta written is checked as a write checks it: a code the server's copy of its code system lacks.
          const unknownLabel = yield* add(metaParameters({ security: [{ system: labels, code: "NOT-A-LABEL" }] }))
          refused(unknownLabel, 422, "NOT-A-LABEL")
          expect(unknownLabel.json.issue[0].expression[0]).toMatch(/^Patient\.meta\.security\[0\]/)
          refused(yield* get(`Patient/${patient.id}/$meta?colour=red`), 400, "Unknown parameter 'colour' for $meta; it takes no parameters")
          refused(yield* get(`Patient/${patient.id}/$meta-add`), 405, "GET is not allowed")
          refused(yield* add(metaParameters({ tag: [{ code: "x" }] }), "Patient/$meta-add"), 404, "not served at type level")
          refused(yield* add(metaParameters({ tag: [{ code: "x" }] }), "Patient/no-such-patient/$meta-add"), 404, "Patient/no-such-patient is not known")
          refused(yield* add(metaParameters({ tag: [{ code: "x" }] }), `Patient/${patient.id}/_history/7/$meta-add`), 404, "has no version 7")
          refused(yield* get(`Patient/${patient.id}/_history/x/$meta`), 404, "has no version")
          refused(yield* get(`Patient/${patient.id}/_history/99999999999/$meta`), 404, "has no version")
          refused(yield* get("Patient/no-such-patient/$meta"), 404, "Patient/no-such-patient is not known")
          refused(yield* post(`Patient/${patient.id}/_history/1/$validate`, { resourceType: "Patient" }), 404, "not served on a version")
          refused(yield* get("NoSuchType/$meta"), 404, "NoSuchType is not a resource type")
          // Nothing was written by any of them.
          expect((yield* get(`Patient/${patient.id}`)).json.meta.tag).toBeUndefined()

          expect((yield* call("DELETE", `${base}/Patient/${patient.id}`)).status).toBeLessThan(300)
          refused(yield* add(metaParameters({ tag: [{ code: "x" }] })), 410, "was deleted")
          refused(yield* get(`Patient/${patient.id}/$meta`), 410, "was deleted")
          refused(yield* add(metaParameters({ tag: [{ code: "x" }] }), `Patient/${patient.id}/_history/2/$meta-add`), 410, "was deleted")
          // The version before the delete is history, and keeps its meta as it can be changed.
          expect(returned(yield* get(`Patient/${patient.id}/_history/1/$meta`)).versionId).toBe("1")
        }))

      it.effect("are listed in the CapabilityStatement: $meta at system level, all three on every type", () =>
        Effect.gen(function*() {
          const statement = (yield* get("metadata")).json
          expect(statement.rest[0].operation).toContainEqual({ name: "meta", definition: "http://hl7.org/fhir/OperationDefinition/Resource-meta" })
          const observation = statement.rest[0].resource.find((resource: any) => resource.type === "Observation")
          expect(observation.operation.map((operation: any) => operation.name)).toEqual(["validate", "meta", "meta-add", "meta-delete", "graphql"])
        }))
    })
  })
}

class SmartServer extends Context.Tag("test/MetaSmartServer")<SmartServer, { readonly server: TestServer; readonly system: string }>() {}

describe.skipIf(skipRealPackages)("$meta, $meta-add and $meta-delete under --smart", () => {
  layer(
    Layer.scoped(SmartServer, Effect.gen(function*() {
      const server = yield* startServer("sqlite", { smart: { enabled: true, demo_login: true }, conformance: realPackages }).pipe(
        Effect.provideService(SmartSecrets, secrets)
      )
      return { server, system: yield* systemToken(server, "system/*.cruds") }
    })),
    { timeout: 600_000, excludeTestServices: true }
  )((it) => {
    it.effect("need read for $meta and update for $meta-add; a patient token reaches its own patient only", () =>
      Effect.gen(function*() {
        const { server, system } = yield* SmartServer
        const as = (token: string) => ({ authorization: `Bearer ${token}` })
        const write = (resource: Record<string, unknown>) =>
          Effect.map(call("POST", `${server.base}/${String(resource["resourceType"])}`, { body: resource, headers: as(system) }), (reply) => {
            expect(reply.status).toBe(201)
            return reply.json
          })
        const own = yield* write({ resourceType: "Patient", meta: { tag: [{ system: tags, code: "own" }] } })
        const other = yield* write({ resourceType: "Patient", meta: { tag: [{ system: tags, code: "other" }] } })
        yield* write({ resourceType: "Observation", status: "final", code: { text: "x" }, meta: { tag: [{ system: tags, code: "observed" }] } })
        const body = metaParameters({ tag: [{ system: tags, code: "added" }] })

        const reader = yield* systemToken(server, "system/Patient.rs")
        refused(yield* call("POST", `${server.base}/Patient/${own.id}/$meta-add`, { body, headers: as(reader) }), 403, "updating Patient")
        expect(codes(returned(yield* call("GET", `${server.base}/Patient/${own.id}/$meta`, { headers: as(reader) })).tag)).toEqual([`${tags}|own`])
        refused(yield* call("GET", `${server.base}/Observation/$meta`, { headers: as(reader) }), 403, "reading Observation")
        // At system level the answer keeps to the types the token may read.
        const systemMeta = returned(yield* call("GET", `${server.base}/$meta`, { headers: as(reader) }))
        expect(codes(systemMeta.tag)).toEqual(expect.arrayContaining([`${tags}|own`, `${tags}|other`]))
        expect(codes(systemMeta.tag)).not.toContain(`${tags}|observed`)

        const patientToken = yield* launchToken(server, own.id, "launch openid fhirUser patient/Patient.rus")
        refused(yield* call("POST", `${server.base}/Patient/${other.id}/$meta-add`, { body, headers: as(patientToken) }), 404, `Patient/${other.id} is not known`)
        refused(yield* call("GET", `${server.base}/Patient/${other.id}/$meta`, { headers: as(patientToken) }), 404, `Patient/${other.id} is not known`)
        expect(codes(returned(yield* call("GET", `${server.base}/Patient/$meta`, { headers: as(patientToken) })).tag)).toEqual([`${tags}|own`])
        const added = returned(yield* call("POST", `${server.base}/Patient/${own.id}/$meta-add`, { body, headers: as(patientToken) }))
        expect(codes(added.tag)).toEqual([`${tags}|own`, `${tags}|added`])
        expect(codes((yield* call("GET", `${server.base}/Patient/${other.id}`, { headers: as(system) })).json.meta.tag)).toEqual([`${tags}|other`])
      }))
  })
})
