import { describe, expect, it } from "@effect/vitest"
import { changeEvent, columnsOf, lostEvent, packChange, packEvent, packRequest, requestEvent, sampledEvent, unpackEvent } from "../../src/governance/audit/events.ts"
import type { Pending } from "../../src/governance/audit/events.ts"
import { anonymous } from "../../src/http/Principal.ts"
import { classify } from "../../src/http/Route.ts"
import type { Completion } from "../../src/http/FrontDoor.ts"

const completion = (method: string, url: string, status: number): Completion => ({
  principal: anonymous("10.0.0.9"),
  route: classify(method, url),
  requestId: "req-1",
  client: "10.0.0.9",
  method,
  path: url.split("?")[0]!,
  url,
  status,
  bytesIn: undefined,
  bytesOut: 10,
  durationMs: 1,
  aborted: false
})

describe("the text a row keeps of an AuditEvent", () => {
  const events = [
    changeEvent(1_700_000_000_000_000, { actor: "client:app/user:Practitioner/1", requestId: "r-9", client: "192.0.2.4" }, { type: "Patient", id: "p1", version: 3, op: "update", resource: "{}" }),
    changeEvent(1_700_000_000_000_000, { actor: "system", requestId: null }, { type: "Basic", id: "b", version: 1, op: "create", resource: "{}" }),
    requestEvent({ completion: completion("GET", "/fhir/Patient/p1/_history/2", 200), timeMillis: 1_700_000_000_000, admin: false }, true),
    requestEvent({ completion: completion("GET", "/fhir/Patient?family=x&_count=5", 200), timeMillis: 1_700_000_000_000, admin: false }, true),
    requestEvent({ completion: completion("GET", "/_usage?client=app", 200), timeMillis: 1_700_000_000_000, admin: true }, true),
    requestEvent({ completion: completion("POST", "/fhir/Patient", 429), timeMillis: 1_700_000_000_000, admin: false }, false),
    sampledEvent(1_700_000_000_000, 7),
    lostEvent(1_700_000_000_000, 2)
  ]

  it("gives back the very event, in the AuditEvent's element order", () => {
    for (const event of events) {
      const back = unpackEvent(packEvent(event))
      expect(back).toEqual(event)
      expect(JSON.stringify(back)).toBe(JSON.stringify(event))
    }
  })

  it("leaves the shared parts out: a read is well under half its JSON", () => {
    const read = events[2]!
    expect(packEvent(read).length).toBeLessThan(JSON.stringify(read).length / 2)
    expect(packEvent(read)).not.toContain("terminology.hl7.org")
  })

  it("reads a row that kept the whole event", () => {
    expect(unpackEvent(JSON.stringify(events[0]))).toEqual(events[0])
  })
})

describe("the rows of reads and changes, packed without building the event", () => {
  it("keeps a read in a few hundred bytes at most", () => {
    const packed = packRequest({ completion: completion("GET", "/fhir/Patient/0c6e1f0a-5d6e-4c34-9e0b-1c2d3e4f5a6b", 200), timeMillis: 1_700_000_000_000, admin: false }, true)
    expect(packed.text.length).toBeLessThan(160)
  })

  const at = 1_700_000_123_456
  const user = { ...completion("GET", "/fhir/Observation/o-1", 200), principal: { _tag: "Authorized" as const, address: "2001:db8::1", clientId: "app", user: "Practitioner/7", scopes: [], patient: undefined }, client: "2001:db8::1" }
  const pendings: ReadonlyArray<Pending> = [
    { completion: completion("GET", "/fhir/Patient/p1", 200), timeMillis: at, admin: false },
    { completion: completion("GET", "/fhir/Patient/p1/_history/2", 200), timeMillis: at, admin: false },
    { completion: completion("GET", "/fhir/Patient?family=O%27Brien&name=\"x\"", 200), timeMillis: at, admin: false },
    { completion: completion("GET", "/fhir?_type=Patient", 200), timeMillis: at, admin: false },
    { completion: completion("GET", "/fhir/Patient/missing", 404), timeMillis: at, admin: false },
    { completion: { ...completion("GET", "/fhir/Patient/p1", 500), requestId: "r\"2", client: "proxy.example" }, timeMillis: at, admin: false },
    { completion: completion("GET", "/fhir/Patient/p1/_history", 200), timeMillis: at, admin: false },
    { completion: completion("POST", "/fhir/Patient/$validate", 200), timeMillis: at, admin: false },
    { completion: completion("GET", "/_audit?agent=x", 200), timeMillis: at, admin: true },
    { completion: user, timeMillis: at + 0.5, admin: false }
  ]

  it("packs a read, search or refusal as packEvent packs requestEvent's event, with its columns", () => {
    for (const includeQuery of [true, false]) {
      for (const pending of pendings) {
        const event = requestEvent(pending, includeQuery)
        const packed = packRequest(pending, includeQuery)
        expect(unpackEvent(packed.text)).toEqual(event)
        expect(JSON.stringify(unpackEvent(packed.text))).toBe(JSON.stringify(event))
        expect(packed.columns).toEqual(columnsOf(event))
      }
    }
  })

  it("packs a change as packEvent packs changeEvent's event, with its columns", () => {
    const origins = [
      { actor: "client:app/user:Practitioner/1", requestId: "r-9", client: "192.0.2.4" },
      { actor: "system", requestId: null },
      { actor: "anonymous@10.0.0.1", requestId: "a\"b", client: "host.example" }
    ]
    for (const origin of origins) {
      for (const op of ["create", "update", "patch", "delete"] as const) {
        const change = { type: "Patient", id: "p-1.x", version: 4, op, resource: "{}" }
        const event = changeEvent(1_700_000_000_123_999, origin, change)
        const packed = packChange(1_700_000_000_123_999, origin, change)
        expect(JSON.stringify(unpackEvent(packed.text))).toBe(JSON.stringify(event))
        expect(packed.columns).toEqual(columnsOf(event))
      }
    }
  })
})
