/**
 * The rewrite of a transaction's placeholders: references, placeholder uris and narrative links replaced,
 * the Bundle's own resource left as it was, and what holds no placeholder shared rather than copied.
 */
import { describe, expect, it } from "vitest"
import { rewrite, type Rewrite } from "../../src/rest/bundle/references.ts"
import { parseJson, stringifyJson } from "../../src/json/Json.ts"

const replacements = new Map([["urn:uuid:p1", "Patient/abc"], ["urn:uuid:e1", "Encounter/def"]])

describe("transaction placeholders", () => {
  it("replaces references, placeholder uris and narrative links; copies only what holds one; leaves the input alone", () => {
    const text = JSON.stringify({
      resourceType: "Observation",
      text: { status: "generated", div: '<div xmlns="http://www.w3.org/1999/xhtml"><a href="urn:uuid:p1">p</a></div>' },
      code: { coding: [{ system: "http://loinc.org", code: "8302-2" }] },
      subject: { reference: "urn:uuid:p1" },
      encounter: { reference: "urn:uuid:e1", display: "visit" },
      derivedFrom: [{ reference: "Observation/x" }, { reference: "urn:uuid:p1" }],
      focus: [{ identifier: { system: "urn:uuid:e1" } }],
      valueQuantity: { value: 1.50, unit: "m" }
    }).replace('"value":1.5', '"value":1.50')
    const input = parseJson(text) as Record<string, any>
    const state: Rewrite = { replacements, unresolved: [] }
    const out = rewrite(input, state) as Record<string, any>
    expect(out.subject).toEqual({ reference: "Patient/abc" })
    expect(out.encounter).toEqual({ reference: "Encounter/def", display: "visit" })
    expect(out.derivedFrom).toEqual([{ reference: "Observation/x" }, { reference: "Patient/abc" }])
    expect(out.focus).toEqual([{ identifier: { system: "Encounter/def" } }])
    expect(out.text.div).toContain('href="Patient/abc"')
    // Members keep their order; decimals keep their text.
    expect(Object.keys(out)).toEqual(Object.keys(input))
    expect(stringifyJson(out)).toContain('"value":1.50')
    // Untouched subtrees are shared; the containers on a replaced path are new; the input is unchanged.
    expect(out).not.toBe(input)
    expect(out.code).toBe(input.code)
    expect(out.valueQuantity).toBe(input.valueQuantity)
    expect(out.derivedFrom[0]).toBe(input.derivedFrom[0])
    expect(out.derivedFrom).not.toBe(input.derivedFrom)
    expect(stringifyJson(input)).toBe(text)
    expect(state.unresolved).toEqual([])
  })

  it("returns a resource without placeholders as it is, and collects placeholders no entry defines", () => {
    const plain = { resourceType: "Patient", name: [{ family: "Doe" }], managingOrganization: { reference: "Organization/1" } }
    expect(rewrite(plain, { replacements, unresolved: [] })).toBe(plain)
    const state: Rewrite = { replacements, unresolved: [] }
    rewrite({ resourceType: "Observation", subject: { reference: "urn:uuid:nobody" } }, state)
    expect(state.unresolved).toEqual(["urn:uuid:nobody"])
  })
})
