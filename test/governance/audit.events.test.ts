import { describe, expect, it } from "@effect/vitest"
import { changeEvent, lostEvent, packEvent, requestEvent, sampledEvent, unpackEvent } from "../../src/governance/audit/events.ts"
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
