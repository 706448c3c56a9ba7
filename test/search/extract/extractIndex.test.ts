import { beforeAll, describe, expect, it } from "vitest"
import type { Catalog } from "../../../src/catalog/Catalog.ts"
import { extractIndex, extractIndexReport, type IndexRow } from "../../../src/search/extract/extractIndex.ts"
import { loadCatalog } from "./catalog.ts"

let catalog: Catalog | undefined

beforeAll(async () => {
  catalog = await loadCatalog()
}, 300_000)

const rowsOf = (rows: ReadonlyArray<IndexRow>, code: string) => rows.filter((row) => row.code === code)

const patient = {
  resourceType: "Patient",
  id: "p1",
  name: [{ family: "Ordóñez", given: ["José  María"] }],
  gender: "male",
  birthDate: "1970-03-04",
  identifier: [{
    system: "http://hospital.example/mrn",
    value: "123",
    type: { coding: [{ system: "http://terminology.hl7.org/CodeSystem/v2-0203", code: "MR" }] }
  }],
  generalPractitioner: [{ reference: "Practitioner/dr1" }, { reference: "https://other.example/fhir/Practitioner/dr2" }]
}

const observation = {
  resourceType: "Observation",
  id: "o1",
  status: "final",
  code: { coding: [{ system: "http://loinc.org", code: "2345-7", display: "Glucose" }, { system: "http://snomed.info/sct", code: "33747003" }], text: "Blood sugar" },
  subject: { reference: "Patient/p1" },
  effectivePeriod: { start: "2020-01-01T10:00:00Z", end: "2020-01-02" },
  valueQuantity: { value: 5, unit: "mg", system: "http://unitsofmeasure.org", code: "mg" },
  component: [{
    code: { coding: [{ system: "http://loinc.org", code: "8480-6" }] },
    valueQuantity: { value: 120, unit: "mmHg", system: "http://unitsofmeasure.org", code: "mm[Hg]" }
  }]
}

describe("extractIndex on the R4 catalog", () => {
  it("indexes a Patient's name, gender, birthdate, identifier and general practitioner", (context) => {
    if (catalog === undefined) return context.skip()
    const rows = extractIndex(patient, catalog)
    expect(rowsOf(rows, "name")).toEqual([
      { kind: "string", code: "name", normalized: "ordonez", exact: "Ordóñez" },
      { kind: "string", code: "name", normalized: "jose maria", exact: "José  María" }
    ])
    expect(rowsOf(rows, "family")).toHaveLength(1)
    expect(rowsOf(rows, "gender")).toEqual([{ kind: "token", code: "gender", system: "http://hl7.org/fhir/administrative-gender", value: "male" }])
    expect(rowsOf(rows, "birthdate")).toEqual([{ kind: "date", code: "birthdate", low: Date.UTC(1970, 2, 4), high: Date.UTC(1970, 2, 5) }])
    expect(rowsOf(rows, "identifier")).toEqual([{
      kind: "token", code: "identifier", system: "http://hospital.example/mrn", value: "123",
      identifierType: { system: "http://terminology.hl7.org/CodeSystem/v2-0203", code: "MR" }
    }])
    expect(rowsOf(rows, "general-practitioner")).toEqual([
      { kind: "reference", code: "general-practitioner", targetType: "Practitioner", targetId: "dr1", url: null },
      { kind: "reference", code: "general-practitioner", targetType: "Practitioner", targetId: null, url: "https://other.example/fhir/Practitioner/dr2" }
    ])
    expect(rowsOf(rows, "_id")).toEqual([{ kind: "token", code: "_id", system: null, value: "p1" }])
  })

  it("indexes an Observation's codes, quantity, date, subject, patient and component composite", (context) => {
    if (catalog === undefined) return context.skip()
    const rows = extractIndex(observation, catalog)
    expect(rowsOf(rows, "code")).toEqual([
      { kind: "token", code: "code", system: "http://loinc.org", value: "2345-7", display: "Glucose" },
      { kind: "token", code: "code", system: "http://snomed.info/sct", value: "33747003" },
      { kind: "token", code: "code", system: null, value: null, display: "Blood sugar" }
    ])
    expect(rowsOf(rows, "value-quantity")).toEqual([{
      kind: "quantity", code: "value-quantity", value: 5, system: "http://unitsofmeasure.org", unit: "mg", canonicalValue: 0.005, canonicalUnit: "g"
    }])
    expect(rowsOf(rows, "date")).toEqual([{ kind: "date", code: "date", low: Date.UTC(2020, 0, 1, 10), high: Date.UTC(2020, 0, 3) }])
    const subject = { kind: "reference", targetType: "Patient", targetId: "p1", url: null }
    expect(rowsOf(rows, "subject")).toEqual([{ ...subject, code: "subject" }])
    expect(rowsOf(rows, "patient")).toEqual([{ ...subject, code: "patient" }])
    expect(rowsOf(rows, "component-code-value-quantity")).toEqual([{
      kind: "composite",
      code: "component-code-value-quantity",
      parts: [
        { kind: "token", code: "component-code", system: "http://loinc.org", value: "8480-6" },
        { kind: "quantity", code: "component-value-quantity", value: 120, system: "http://unitsofmeasure.org", unit: "mm[Hg]", canonicalValue: 133322.387415 * 120, canonicalUnit: "g.m-1.s-2" }
      ]
    }])
    expect(rowsOf(rows, "status")).toEqual([{ kind: "token", code: "status", system: "http://hl7.org/fhir/observation-status", value: "final" }])
  })

  it("does not take a subject that is not a Patient as the patient", (context) => {
    if (catalog === undefined) return context.skip()
    const rows = extractIndex({ ...observation, subject: { reference: "Group/g1" } }, catalog)
    expect(rowsOf(rows, "subject")).toHaveLength(1)
    expect(rowsOf(rows, "patient")).toEqual([])
  })

  it("indexes a Location's position for near", (context) => {
    if (catalog === undefined) return context.skip()
    const rows = extractIndex({ resourceType: "Location", id: "l1", position: { latitude: 42.36, longitude: -71.06 } }, catalog)
    expect(rowsOf(rows, "near")).toEqual([{ kind: "near", code: "near", latitude: 42.36, longitude: -71.06 }])
  })

  it("indexes decimal elements for number parameters, with the range of their digits", (context) => {
    if (catalog === undefined) return context.skip()
    const rows = extractIndex({
      resourceType: "RiskAssessment",
      status: "final",
      subject: { reference: "Patient/p1" },
      prediction: [{ probabilityDecimal: 0.25 }, { probabilityDecimal: 3 }]
    }, catalog)
    expect(rowsOf(rows, "probability").map((row) => row.kind === "number" ? [row.value, row.low, row.high] : [])).toEqual([
      [0.25, 0.245, 0.255],
      [3, 2.5, 3.5]
    ].map(([value, low, high]) => [value, expect.closeTo(low!, 12), expect.closeTo(high!, 12)]))
  })

  it("skips and counts a malformed date instead of throwing", (context) => {
    if (catalog === undefined) return context.skip()
    const report = extractIndexReport({ ...patient, birthDate: "1970-02-30" }, catalog)
    expect(rowsOf(report.rows, "birthdate")).toEqual([])
    expect(report.skipped.map((skip) => skip.code)).toContain("birthdate")
  })

  it("answers no rows for an unknown resource type or garbage", (context) => {
    if (catalog === undefined) return context.skip()
    expect(extractIndex({ resourceType: "NoSuchThing", id: "x" }, catalog)).toEqual([])
    expect(() => extractIndex({ resourceType: "Patient", name: "not a list", birthDate: 12, gender: { a: 1 } }, catalog!)).not.toThrow()
  })
  it("indexes each value of a union once, though several branches reach it, and every code of a large ValueSet", (context) => {
    if (catalog === undefined) return context.skip()
    // path: StructureDefinition.snapshot.element.path | StructureDefinition.differential.element.path
    const element = [{ id: "Patient.name", path: "Patient.name" }, { id: "Patient.gender", path: "Patient.gender" }]
    const profile = { resourceType: "StructureDefinition", id: "p", url: "http://example.org/p", snapshot: { element }, differential: { element: [element[1]] } }
    expect(rowsOf(extractIndex(profile, catalog), "path").map((row) => row.kind === "token" ? row.value : undefined)).toEqual(["Patient.name", "Patient.gender"])
    const concept = Array.from({ length: 5000 }, (_, i) => ({ code: `c${i}` }))
    const valueSet = { resourceType: "ValueSet", id: "big", status: "active", compose: { include: [{ system: "http://example.org/cs", concept }] } }
    expect(rowsOf(extractIndex(valueSet, catalog), "code")).toHaveLength(5000)
  })
})
