import { describe, expect, it } from "vitest"
import type { Catalog } from "../../../src/catalog/Catalog.ts"
import { readDate } from "../../../src/search/parse/dates.ts"
import { prefixes } from "../../../src/search/parse/SearchRequest.ts"
import { accepted, catalogTests, refused } from "./support.ts"

const withCatalog = catalogTests()

const first = (c: Catalog, type: string, query: string) => accepted(c, type, query).clauses[0]?.values[0]

describe("dates as [low, high) in epoch ms", () => {
  const utc = Date.UTC
  it.each([
    ["2020", utc(2020, 0, 1), utc(2021, 0, 1), "year"],
    ["2020-02", utc(2020, 1, 1), utc(2020, 2, 1), "month"],
    ["2020-02-29", utc(2020, 1, 29), utc(2020, 2, 1), "day"],
    ["2020-02-29T10:30", utc(2020, 1, 29, 10, 30), utc(2020, 1, 29, 10, 31), "minute"],
    ["2020-02-29T10:30:15", utc(2020, 1, 29, 10, 30, 15), utc(2020, 1, 29, 10, 30, 16), "second"],
    ["2020-02-29T10:30:15.5", utc(2020, 1, 29, 10, 30, 15, 500), utc(2020, 1, 29, 10, 30, 15, 600), "millisecond"],
    ["2020-02-29T10:30:15.123456", utc(2020, 1, 29, 10, 30, 15, 123), utc(2020, 1, 29, 10, 30, 15, 124), "millisecond"],
    ["2020-02-29T10:30:15Z", utc(2020, 1, 29, 10, 30, 15), utc(2020, 1, 29, 10, 30, 16), "second"],
    ["2020-02-29T10:30:15+02:00", utc(2020, 1, 29, 8, 30, 15), utc(2020, 1, 29, 8, 30, 16), "second"],
    ["2020-02-29T10:30:15 02:00", utc(2020, 1, 29, 8, 30, 15), utc(2020, 1, 29, 8, 30, 16), "second"],
    ["2020-02-29T10:30-05:30", utc(2020, 1, 29, 16, 0), utc(2020, 1, 29, 16, 1), "minute"]
  ] as const)("%s", (text, low, high, precision) => {
    expect(readDate(text)).toEqual({ low, high, precision })
  })

  it("reads years before 100 as themselves", () => {
    expect(readDate("0050")?.low).toBe(Date.UTC(2050, 0, 1) - 5 * 146_097 * 86_400_000)
  })

  it.each(["2020-13", "2021-02-29", "2020-04-31", "2020-01-01T24:00", "2020-01-01T10", "20", "2020-1-1", "2020-01-01T10:00:60", "0000"])(
    "refuses %s",
    (text) => expect(readDate(text)).toBeUndefined()
  )
})

describe("every prefix on date, number and quantity", () => {
  for (const prefix of prefixes) {
    withCatalog(`${prefix} on a date`, (c) => {
      expect(first(c, "Observation", `date=${prefix}2020-01-01`)).toMatchObject({ kind: "date", prefix, precision: "day" })
    })
    withCatalog(`${prefix} on a number`, (c) => {
      expect(first(c, "RiskAssessment", `probability=${prefix}0.5`)).toMatchObject({ kind: "number", prefix, value: 0.5 })
    })
    withCatalog(`${prefix} on a quantity`, (c) => {
      expect(first(c, "Observation", `value-quantity=${prefix}5.4|http://unitsofmeasure.org|mg`)).toMatchObject({
        kind: "quantity", prefix, value: 5.4, system: "http://unitsofmeasure.org", code: "mg"
      })
    })
  }

  withCatalog("no prefix is eq", (c) => {
    expect(first(c, "Observation", "date=2020")).toMatchObject({ prefix: "eq" })
  })

  withCatalog("a number's range follows its significant figures", (c) => {
    expect(first(c, "RiskAssessment", "probability=100")).toEqual({ kind: "number", prefix: "eq", value: 100, low: 99.5, high: 100.5 })
    const precise = first(c, "RiskAssessment", "probability=100.00")
    expect(precise).toMatchObject({ value: 100 })
    if (precise?.kind === "number") expect(precise.high - precise.low).toBeCloseTo(0.01)
    expect(first(c, "RiskAssessment", "probability=1e2")).toMatchObject({ value: 100, low: 50, high: 150 })
  })

  withCatalog("a quantity without system, or with ||code", (c) => {
    expect(first(c, "Observation", "value-quantity=5")).toEqual({ kind: "quantity", prefix: "eq", value: 5, low: 4.5, high: 5.5 })
    expect(first(c, "Observation", "value-quantity=5||mg")).toMatchObject({ code: "mg" })
    expect(first(c, "Observation", "value-quantity=5||mg")).not.toHaveProperty("system")
  })
})

describe("tokens, composites and near", () => {
  withCatalog("token forms: code, system|code, |code, system|", (c) => {
    const values = accepted(c, "Observation", "code=a,http://s|b,|c,http://s|").clauses[0]?.values
    expect(values).toEqual([
      { kind: "token", code: "a" },
      { kind: "token", system: "http://s", code: "b" },
      { kind: "token", system: "", code: "c" },
      { kind: "token", system: "http://s" }
    ])
  })

  withCatalog("a composite is read part by part with the component's type", (c) => {
    expect(first(c, "Observation", "code-value-quantity=http://loinc.org|8480-6$lt60")).toMatchObject({
      kind: "composite",
      parts: [
        { value: { kind: "token", system: "http://loinc.org", code: "8480-6" } },
        { value: { kind: "quantity", prefix: "lt", value: 60 } }
      ]
    })
  })

  withCatalog("near takes latitude|longitude and optionally distance and units", (c) => {
    expect(first(c, "Location", "near=42.25|-83.69")).toEqual({ kind: "near", latitude: 42.25, longitude: -83.69 })
    expect(first(c, "Location", "near=42.25|-83.69|11.2|km")).toMatchObject({ distance: 11.2, units: "km" })
  })
})

// Every modifier where R4 applies it, and refused on a parameter type it does not apply to.
const modifierCases: ReadonlyArray<readonly [string, string, string, string, object]> = [
  ["missing", "Patient", "birthdate", "true", { kind: "missing", missing: true }],
  ["exact", "Patient", "family", "Smith", { kind: "string", value: "Smith" }],
  ["contains", "Patient", "family", "mit", { kind: "string", value: "mit" }],
  ["text", "Observation", "code", "blood pressure", { kind: "string", value: "blood pressure" }],
  ["not", "Observation", "status", "final", { kind: "token", code: "final" }],
  ["above", "Observation", "code", "http://hl7.org/fhir/observation-status|corrected", { kind: "codes", codes: expect.arrayContaining([{ system: "http://hl7.org/fhir/observation-status", code: "amended" }]) }],
  ["below", "Observation", "code", "http://hl7.org/fhir/observation-status|amended", { kind: "codes", codes: expect.arrayContaining([{ system: "http://hl7.org/fhir/observation-status", code: "corrected" }]) }],
  ["in", "Observation", "code", "http://hl7.org/fhir/ValueSet/observation-status", { kind: "codes", codes: expect.arrayContaining([{ system: "http://hl7.org/fhir/observation-status", code: "final" }]) }],
  ["not-in", "Observation", "code", "http://hl7.org/fhir/ValueSet/observation-status", { kind: "codes" }],
  ["of-type", "Patient", "identifier", "http://terminology.hl7.org/CodeSystem/v2-0203|MR|446053", { kind: "of-type", code: "MR", value: "446053" }],
  ["identifier", "Observation", "subject", "http://ns|123", { kind: "token", system: "http://ns", code: "123" }],
  ["above", "ValueSet", "url", "http://x/ValueSet/a", { kind: "uri", value: "http://x/ValueSet/a" }],
  ["below", "ValueSet", "url", "http://x/ValueSet/a", { kind: "uri", value: "http://x/ValueSet/a" }],
  ["Patient", "Observation", "subject", "123", { kind: "reference", types: ["Patient"], id: "123" }]
]

const refusedModifiers: ReadonlyArray<readonly [string, string, string, string]> = [
  ["exact", "Observation", "date", "2020"],
  ["contains", "Observation", "code", "x"],
  ["text", "Patient", "family", "x"],
  ["not", "Patient", "family", "x"],
  ["in", "Observation", "subject", "Patient/1"],
  ["of-type", "Patient", "family", "a|b|c"],
  ["identifier", "Observation", "code", "a|b"],
  ["above", "Observation", "value-quantity", "5"],
  ["missing", "Observation", "code-value-quantity", "true"],
  ["Medication", "Observation", "patient", "1"],
  ["Nope", "Observation", "subject", "1"],
  ["not", "RiskAssessment", "probability", "1"]
]

describe("modifiers", () => {
  withCatalog(":above and :below follow the code system's hierarchy, both ways", (c) => {
    const codes = (query: string) => {
      const value = accepted(c, "Observation", query).clauses[0]?.values[0]
      return value?.kind === "codes" ? value.codes.map((code) => code.code).sort() : []
    }
    expect(codes("code:below=http://hl7.org/fhir/observation-status|amended")).toEqual(["amended", "corrected"])
    expect(codes("code:above=http://hl7.org/fhir/observation-status|corrected")).toEqual(["amended", "corrected"])
    expect(codes("code:in=http://hl7.org/fhir/ValueSet/observation-status")).toContain("entered-in-error")
  })

  withCatalog(":in, :not-in, :above and :below that cannot be expanded are a 400 saying why", (c) => {
    const [unknownSet] = refused(c, "Observation", "code:in=http://x/ValueSet/a")
    expect(unknownSet).toMatchObject({ status: 400, parameter: "code:in", canSetAside: true })
    expect(unknownSet?.message).toBe("The value 'http://x/ValueSet/a' of search parameter 'code:in' cannot be used: the ValueSet http://x/ValueSet/a is not known to this server")
    const [snomed] = refused(c, "Observation", "code:below=http://snomed.info/sct|123")
    expect(snomed?.message).toContain("http://snomed.info/sct")
    const [noSystem] = refused(c, "Observation", "code:below=123")
    expect(noSystem?.message).toContain("expected system|code")
  })

  for (const [modifier, type, code, value, expected] of modifierCases) {
    withCatalog(`:${modifier} applies to ${type}.${code}`, (c) => {
      const clause = accepted(c, type, `${code}:${modifier}=${encodeURIComponent(value)}`).clauses[0]
      expect(clause?.values[0]).toMatchObject(expected)
    })
  }
  for (const [modifier, type, code, value] of refusedModifiers) {
    withCatalog(`:${modifier} is refused on ${type}.${code}`, (c) => {
      const problem = refused(c, type, `${code}:${modifier}=${encodeURIComponent(value)}`)[0]
      expect(problem).toMatchObject({ parameter: `${code}:${modifier}`, value, status: 400 })
      expect(problem?.message).toContain(`':${modifier}'`)
    })
  }
})
