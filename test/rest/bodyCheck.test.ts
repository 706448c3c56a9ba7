/** The one walk over a parsed body: nesting depth and the characters FHIR text may not hold, and the size of a FHIRPath expression. */
import { describe, expect, it } from "vitest"
import { checkBody, maxBodyDepth } from "../../src/rest/bodyCheck.ts"
import { expressionTerms, expressionTooLarge, maxExpressionTerms } from "../../src/fhirpath/expressionSize.ts"
import { paramsProblem, urlTextProblem } from "../../src/validation/fhirText.ts"

const nested = (levels: number): unknown => JSON.parse("[".repeat(levels - 1) + "{}" + "]".repeat(levels - 1))

describe("checkBody", () => {
  it("takes 256 levels of objects and arrays and refuses 257, at any depth, without recursion", () => {
    expect(maxBodyDepth).toBe(256)
    expect(checkBody(nested(256), "the body")).toBeUndefined()
    expect(checkBody(nested(257), "the body")).toMatchObject({ code: "structure", status: 400 })
    expect(checkBody(nested(257), "the body")?.diagnostics).toContain("nests deeper than the limit of 256 levels")
    expect(checkBody(nested(100_000), "the body")?.code).toBe("structure")
  })

  it("names where a forbidden character is, in a value or a property name", () => {
    const body = { resourceType: "Bundle", entry: [{ resource: { resourceType: "Patient", name: [{ given: ["ok", "a\u0000"] }] } }] }
    expect(checkBody(body, "the resource")).toMatchObject({ code: "invalid", status: 400, expression: ["Bundle.entry[0].resource.name[0].given[1]"] })
    const key = checkBody({ resourceType: "Patient", name: [{ "fam\u001Fily": "x" }] }, "the resource")
    expect(key).toMatchObject({ expression: ["Patient.name[0]"] })
    expect(key?.diagnostics).toContain("U+001F")
    expect(checkBody([{ op: "add", value: "\uFFFE" }], "the JSON Patch document")?.expression).toEqual(["[0].value"])
    expect(checkBody("\uD800", "the body")?.code).toBe("invalid")
  })

  it("takes TAB, CR, LF, surrogate pairs and every other character", () => {
    expect(checkBody({ resourceType: "Patient", text: "\t\r\n \u007F\u0080\u00A0\uD83D\uDE00\uFFFD\uE000" }, "the resource")).toBeUndefined()
    for (const bad of ["\u0000", "\u0008", "\u000B", "\u000C", "\u000E", "\u001F", "\uFFFE", "\uFFFF", "\uD800", "\uDBFF", "\uDC00", "a\uDC00\uD800b"]) {
      expect([bad, checkBody({ v: bad }, "the body")?.code]).toEqual([bad, "invalid"])
    }
  })
})

describe("text in URLs", () => {
  it("refuses percent-encoded bytes that are not UTF-8, and decoded characters FHIR text may not hold", () => {
    expect(urlTextProblem("name=%C3%A9&x=%41%20")).toBeUndefined()
    expect(urlTextProblem("name=50%")).toBeUndefined()
    expect(urlTextProblem("name=%ED%A0%80")).toContain("not percent-encoded UTF-8")
    expect(urlTextProblem("name=%FF")).toContain("not percent-encoded UTF-8")
    expect(urlTextProblem("name=%C3")).toContain("not percent-encoded UTF-8")
    expect(paramsProblem(new URLSearchParams("a=b&c=%09%0D%0A"))).toBeUndefined()
    expect(paramsProblem(new URLSearchParams("a=%00"))).toContain("U+0000")
    expect(paramsProblem(new URLSearchParams("a%01=b"))).toContain("parameter name")
  })
})

describe("the size of a FHIRPath expression", () => {
  it("counts operators, brackets and parentheses outside strings, and refuses more than 256", () => {
    expect(maxExpressionTerms).toBe(256)
    expect(expressionTerms("Patient.name.where(use = 'a (b) or c').given")).toBe(3)
    expect(expressionTerms("a or b and c implies d")).toBe(3)
    expect(expressionTooLarge("-".repeat(256) + "1")).toBeUndefined()
    expect(expressionTooLarge("-".repeat(257) + "1")).toContain("the limit is 256")
    expect(expressionTooLarge("Patient" + ".where(true".repeat(200) + ")".repeat(200))).toContain("400 operators")
  })
})
