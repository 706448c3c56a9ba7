import { describe, expect } from "vitest"
import { accepted, catalogTests, refused } from "./support.ts"

const withCatalog = catalogTests()

describe("chained parameters", () => {
  withCatalog("a chain through a parameter with one target reads the rest against that type", (c) => {
    const request = accepted(c, "Observation", "patient.name=peter")
    expect(request.clauses).toHaveLength(0)
    expect(request.links).toMatchObject([{
      kind: "chain",
      key: "patient.name",
      param: { code: "patient" },
      targets: [{ type: "Patient", inner: { code: "name", values: [{ kind: "string", value: "peter" }] } }]
    }])
  })

  withCatalog("chains go to any depth, and modifiers apply at the end", (c) => {
    const request = accepted(c, "Observation", "patient.organization.name:exact=Acme")
    expect(request.links).toMatchObject([{
      kind: "chain",
      targets: [{ type: "Patient", inner: { kind: "chain", param: { code: "organization" }, targets: [{ type: "Organization", inner: { code: "name", modifier: { kind: "exact" } } }] } }]
    }])
  })

  withCatalog("the :[type] qualifier picks the target", (c) => {
    const request = accepted(c, "Observation", "subject:Patient.birthdate=ge2000")
    expect(request.links).toMatchObject([{ targets: [{ type: "Patient", inner: { code: "birthdate", values: [{ kind: "date", prefix: "ge" }] } }] }])
  })

  withCatalog("a chain through a parameter with several targets that define the rest is a 400 naming the choices", (c) => {
    const [problem] = refused(c, "Observation", "subject.name=x")
    expect(problem).toMatchObject({ parameter: "subject.name", status: 400 })
    expect(problem?.message).toContain("Patient")
    expect(problem?.message).toContain("Location")
    expect(problem?.message).toContain("subject:")
  })

  withCatalog("a chain with several targets where only one defines the rest reads that one", (c) => {
    // Observation.subject: Patient, Group, Device, Location; only Patient has `birthdate`.
    expect(accepted(c, "Observation", "subject.birthdate=2000").links).toMatchObject([{ targets: [{ type: "Patient" }] }])
  })

  withCatalog("every rule holds behind a chain: an unreadable value is a 400 naming the whole key", (c) => {
    const [problem] = refused(c, "Observation", "patient.birthdate=2000-13-45")
    expect(problem).toMatchObject({ parameter: "patient.birthdate", value: "2000-13-45", status: 400 })
    expect(problem?.message).toContain("'patient.birthdate'")
    expect(refused(c, "Observation", "patient.shoe-size=1")[0]?.status).toBe(400)
    expect(refused(c, "Observation", "patient.name:fuzzy=1")[0]?.message).toContain("':fuzzy'")
  })

  withCatalog("a chain through a parameter that is not a reference, or to a type it cannot point at, is a 400", (c) => {
    expect(refused(c, "Observation", "code.name=x")[0]?.message).toContain("only reference parameters can be chained")
    expect(refused(c, "Observation", "patient:Organization.name=x")[0]?.message).toContain("cannot refer to 'Organization'")
    expect(refused(c, "Observation", "nope.name=x")[0]?.message).toContain("'nope' is not a search parameter of Observation")
  })

  withCatalog("with handling=lenient a bad chain is set aside", (c) => {
    const request = accepted(c, "Observation", "patient.birthdate=nope&code=1", true)
    expect(request.ignored).toMatchObject([{ parameter: "patient.birthdate" }])
    expect(request.clauses).toHaveLength(1)
  })
})

describe("_has", () => {
  withCatalog("_has:Type:param:criterion reads the criterion against Type", (c) => {
    const request = accepted(c, "Patient", "_has:Observation:patient:code=1234-5")
    expect(request.links).toMatchObject([{
      kind: "has",
      key: "_has:Observation:patient:code",
      sourceType: "Observation",
      param: { code: "patient" },
      inner: { code: "code", values: [{ kind: "token", code: "1234-5" }] }
    }])
  })

  withCatalog("_has nests, and holds modifiers and chains", (c) => {
    const nested = accepted(c, "Patient", "_has:Observation:patient:_has:AuditEvent:entity:agent=Practitioner/1")
    expect(nested.links).toMatchObject([{ kind: "has", inner: { kind: "has", sourceType: "AuditEvent", inner: { code: "agent" } } }])
    const chained = accepted(c, "Patient", "_has:Observation:patient:performer:Practitioner.name=x")
    expect(chained.links).toMatchObject([{ kind: "has", inner: { kind: "chain", targets: [{ type: "Practitioner" }] } }])
    expect(accepted(c, "Patient", "_has:Observation:patient:code:not=1").links).toMatchObject([{ inner: { exclude: true } }])
  })

  withCatalog("a _has naming a type, parameter or criterion that does not fit is a 400", (c) => {
    expect(refused(c, "Patient", "_has:Nothing:patient:code=1")[0]?.status).toBe(400)
    expect(refused(c, "Patient", "_has:Observation:code:code=1")[0]?.message).toContain("not a reference parameter of Observation")
    expect(refused(c, "Patient", "_has:Observation:encounter:code=1")[0]?.message).toContain("cannot refer to Patient")
    expect(refused(c, "Patient", "_has:Observation:patient=1")[0]?.status).toBe(400)
    const [problem] = refused(c, "Patient", "_has:Observation:patient:date=soon")
    expect(problem).toMatchObject({ parameter: "_has:Observation:patient:date", value: "soon", status: 400 })
  })
})
