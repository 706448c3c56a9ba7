import { describe, expect } from "vitest"
import { validateJson, validateResource } from "../../src/validation/Validator.ts"
import { catalogTests, errors, narrative } from "./support.ts"

const withCatalog = catalogTests()

const nestedExtensions = (depth: number): Record<string, unknown> => {
  let inner: Record<string, unknown> = { url: "leaf", valueString: "x" }
  for (let i = 0; i < depth; i++) inner = { url: "level", extension: [inner] }
  return { url: "http://example.org/deep", extension: [inner] }
}

describe("whatever a client sends is answered with issues", () => {
  withCatalog("10,000 levels of nested extensions", (c) => {
    const issues = validateResource({ resourceType: "Patient", extension: [nestedExtensions(10_000)] }, c)
    expect(errors(issues).map((issue) => issue.code)).toContain("too-costly")
  })

  withCatalog("10,000 levels of nested Questionnaire items, parsed from text", (c) => {
    let item = '{"linkId":"x","type":"display"}'
    for (let i = 0; i < 10_000; i++) item = `{"linkId":"${i}","type":"group","item":[${item}]}`
    const issues = validateJson(`{"resourceType":"Questionnaire","status":"draft","item":[${item}]}`, c)
    expect(errors(issues).map((issue) => issue.diagnostics)).toContain("The content is nested more than 100 levels deep")
  })

  withCatalog("10,000 levels of arrays and objects under an unknown element", (c) => {
    const text = `{"resourceType":"Patient","foo":${"[".repeat(10_000)}${"]".repeat(10_000)}}`
    expect(errors(validateJson(text, c)).map((issue) => issue.expression)).toEqual(["Patient.foo"])
  })

  withCatalog("a huge array of valid items", (c) => {
    const names = Array.from({ length: 100_000 }, (_, i) => ({ family: `F${i}`, given: ["G"] }))
    const started = performance.now()
    expect(validateResource({ resourceType: "Patient", text: narrative, name: names }, c)).toEqual([])
    console.log(`100,000 names validated in ${(performance.now() - started).toFixed(0)} ms`)
  })

  withCatalog("a huge number of errors stops at a bound", (c) => {
    const names = Array.from({ length: 100_000 }, () => ({ family: 1 }))
    const issues = validateResource({ resourceType: "Patient", name: names }, c)
    expect(issues.length).toBeLessThanOrEqual(1_002)
    expect(issues[issues.length - 1]?.code).toBe("too-costly")
  })

  withCatalog("a string of several megabytes", (c) => {
    const issues = validateResource({ resourceType: "Patient", text: narrative, name: [{ family: "x".repeat(3_000_000) }] }, c)
    expect(errors(issues).map((issue) => issue.expression)).toEqual(["Patient.name[0].family"])
  })

  withCatalog("a cyclic object (from code, not JSON)", (c) => {
    const extension: Record<string, unknown> = { url: "http://example.org/cycle" }
    extension["extension"] = [extension]
    const patient: Record<string, unknown> = { resourceType: "Patient", extension: [extension] }
    patient["contained"] = [patient]
    expect(errors(validateResource(patient, c)).length).toBeGreaterThan(0)
  })

  withCatalog("contained resources that refer to each other in a cycle", (c) => {
    const issues = validateResource({
      resourceType: "Patient",
      text: narrative,
      contained: [
        { resourceType: "Organization", id: "a", name: "A", partOf: { reference: "#b" } },
        { resourceType: "Organization", id: "b", name: "B", partOf: { reference: "#a" } }
      ],
      managingOrganization: { reference: "#a" }
    }, c)
    expect(errors(issues)).toEqual([])
  })

  withCatalog("a value that throws when read", (c) => {
    const patient: Record<string, unknown> = { resourceType: "Patient" }
    Object.defineProperty(patient, "gender", { enumerable: true, get: () => { throw new Error("boom") } })
    expect(validateResource(patient, c)).toEqual([expect.objectContaining({ severity: "fatal", code: "exception" })])
  })

  withCatalog("names of JavaScript's object prototype are unknown elements like any other", (c) => {
    const text = '{"resourceType":"Patient","__proto__":{"gender":"x"},"_constructor":{"id":"a"},"toString":"x","_hasOwnProperty":1}'
    expect(errors(validateJson(text, c)).map((issue) => issue.expression)).toEqual([
      "Patient.__proto__",
      "Patient._constructor",
      "Patient.toString",
      "Patient._hasOwnProperty"
    ])
  })

  withCatalog("JSON that does not parse is a fatal issue", (c) => {
    expect(validateJson('{"resourceType": "Patient",', c)).toEqual([expect.objectContaining({ severity: "fatal", code: "structure" })])
  })

  withCatalog("random damage to valid resources never throws", (c) => {
    const samples: ReadonlyArray<unknown> = [null, true, 0, -1.5, "", "x", [], [null], {}, { a: 1 }, [[1]], "2020-13-45", 1e308]
    let seed = 42
    const random = (n: number) => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648
      return seed % n
    }
    const base = {
      resourceType: "Observation",
      status: "final",
      code: { coding: [{ system: "http://loinc.org", code: "1-8" }] },
      subject: { reference: "Patient/1" },
      effectivePeriod: { start: "2020-01-01", end: "2020-02-01" },
      valueQuantity: { value: 1, unit: "kg", system: "http://unitsofmeasure.org", code: "kg" },
      component: [{ code: { text: "a" }, valueString: "b" }],
      contained: [{ resourceType: "Patient", id: "p" }],
      performer: [{ reference: "#p" }]
    }
    const damage = (value: unknown, depth: number): unknown => {
      if (depth > 0 && random(4) === 0) return samples[random(samples.length)]
      if (Array.isArray(value)) return value.map((item) => damage(item, depth + 1))
      if (typeof value === "object" && value !== null) {
        const out: Record<string, unknown> = {}
        for (const [key, item] of Object.entries(value)) out[random(20) === 0 ? `_${key}` : key] = damage(item, depth + 1)
        return out
      }
      return value
    }
    for (let i = 0; i < 2_000; i++) {
      const issues = validateResource(damage(base, 0), c)
      expect(Array.isArray(issues)).toBe(true)
      expect(issues.some((issue) => issue.code === "exception")).toBe(false)
    }
  })
})
