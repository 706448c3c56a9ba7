import { describe, expect } from "vitest"
import { accepted, catalogTests, refused } from "./support.ts"

const withCatalog = catalogTests()

// Spec rule 4: each unreadable value is a 400 naming the parameter, the value and what was expected.
const unreadable: ReadonlyArray<readonly [string, string, string, string, string]> = [
  ["a date that does not parse", "Observation", "date", "2020-13-01", "a date"],
  ["a date with a prefix and garbage", "Observation", "date", "ge2020-01-01Tnoon", "a date"],
  ["a number that does not parse", "RiskAssessment", "probability", "gtabc", "a decimal number"],
  ["a quantity that does not parse", "Observation", "value-quantity", "lt5kg", "[prefix]number"],
  ["a quantity with two parts", "Observation", "value-quantity", "5|mg", "[prefix]number"],
  ["a composite with too few parts", "Observation", "code-value-quantity", "http://loinc.org|1234", "2 parts separated by $"],
  ["a composite with too many parts", "Observation", "code-value-quantity", "a$5$6", "2 parts separated by $"],
  ["a composite whose quantity does not parse", "Observation", "code-value-quantity", "a$five", "part 2"],
  ["a near that is not latitude|longitude", "Location", "near", "42.2", "latitude|longitude"],
  ["a near out of range", "Location", "near", "91|10", "latitude|longitude"],
  [":missing without true or false", "Patient", "name:missing", "yes", "true or false"],
  [":of-type without three parts", "Patient", "identifier:of-type", "http://terminology.hl7.org/CodeSystem/v2-0203|MR", "system|code|value"],
  [":of-type with four parts", "Patient", "identifier:of-type", "s|MR|1|2", "system|code|value"]
]

describe("a value that cannot be read (rule 4)", () => {
  for (const [name, type, key, value, expected] of unreadable) {
    withCatalog(`${name} is a 400 naming the parameter, the value and what was expected`, (c) => {
      const problems = refused(c, type, `${key}=${encodeURIComponent(value)}`)
      expect(problems).toHaveLength(1)
      expect(problems[0]).toMatchObject({ parameter: key, value, status: 400 })
      expect(problems[0]?.expected).toContain(expected)
      expect(problems[0]?.message).toContain(`'${key}'`)
      expect(problems[0]?.message).toContain(`'${value}'`)
    })
    withCatalog(`${name} is set aside with handling=lenient`, (c) => {
      const request = accepted(c, type, `${key}=${encodeURIComponent(value)}&_id=a`, true)
      expect(request.ignored).toMatchObject([{ parameter: key, value }])
      expect(request.clauses.map((clause) => clause.code)).toEqual(["_id"])
    })
  }

  withCatalog("strings, tokens, URIs and references are free text and never fail", (c) => {
    const request = accepted(c, "Observation", "code=%%%|||&subject=not a/valid|ref&identifier=|&_profile=::")
    expect(request.clauses).toHaveLength(4)
    expect(accepted(c, "Patient", "name=2020-13-99&family=$$").clauses).toHaveLength(2)
  })

  withCatalog("each alternative of a comma list is read on its own", (c) => {
    const problems = refused(c, "Observation", "date=2020,nope,2021-02-30")
    expect(problems.map((p) => p.value)).toEqual(["nope", "2021-02-30"])
  })

  withCatalog("each repeated occurrence is read on its own, and lenient sets aside only the bad one", (c) => {
    expect(refused(c, "Observation", "date=2020&date=bad").map((p) => p.value)).toEqual(["bad"])
    const request = accepted(c, "Observation", "date=ge2020&date=bad", true)
    expect(request.clauses).toHaveLength(1)
    expect(request.ignored).toHaveLength(1)
  })

  withCatalog("an unknown parameter is a 400, set aside with handling=lenient", (c) => {
    expect(refused(c, "Patient", "shoe-size=42")[0]).toMatchObject({ parameter: "shoe-size", value: "42", status: 400 })
    expect(accepted(c, "Patient", "shoe-size=42", true).ignored[0]?.message).toBe(
      "Unknown search parameter 'shoe-size' for resource type Patient"
    )
  })

  withCatalog("an unknown or inapplicable modifier is a 400, set aside with handling=lenient", (c) => {
    expect(refused(c, "Patient", "name:fuzzy=x")[0]?.message).toContain("':fuzzy'")
    expect(refused(c, "Observation", "date:exact=2020")[0]?.expected).toBe("one of :missing")
    expect(accepted(c, "Patient", "name:fuzzy=x", true).ignored).toHaveLength(1)
  })

  withCatalog("an unknown resource type is refused", (c) => {
    expect(refused(c, "Nonsense", "")[0]?.message).toBe("Unknown resource type 'Nonsense'")
  })
})

describe("comma is OR, repetition is AND (rules 1 and 2)", () => {
  withCatalog("a comma separates alternatives for every type and for _id", (c) => {
    const request = accepted(c, "Observation", "_id=a,b,c&code=x,y&date=2020,2021&value-quantity=1,2&subject=Patient/1,Group/2")
    expect(request.clauses.map((clause) => clause.values.length)).toEqual([3, 2, 2, 2, 2])
    expect(request.clauses[0]?.values).toEqual([{ kind: "id", id: "a" }, { kind: "id", id: "b" }, { kind: "id", id: "c" }])
  })

  withCatalog("\\, is a literal comma, and \\| \\$ \\\\ are literal too", (c) => {
    const request = accepted(c, "Patient", `name=${encodeURIComponent("Smith\\, John,Doe")}&identifier=${encodeURIComponent("a\\|b|c\\\\d")}`)
    expect(request.clauses[0]?.values).toEqual([{ kind: "string", value: "Smith, John" }, { kind: "string", value: "Doe" }])
    expect(request.clauses[1]?.values).toEqual([{ kind: "token", system: "a|b", code: "c\\d" }])
    const composite = accepted(c, "Observation", `code-value-string=${encodeURIComponent("x$a\\$b")}`)
    expect(composite.clauses[0]?.values[0]).toMatchObject({ parts: [{}, { value: { kind: "string", value: "a$b" } }] })
  })

  withCatalog("a value lists at most 1000 alternatives", (c) => {
    const ids = (n: number) => Array.from({ length: n }, (_, i) => `id${i}`).join(",")
    expect(accepted(c, "Patient", `_id=${ids(1000)}`).clauses[0]?.values).toHaveLength(1000)
    const problem = refused(c, "Patient", `_id=${ids(1001)}`)[0]
    expect(problem?.message).toBe("Search parameter '_id' lists 1001 alternatives; at most 1000 are allowed")
    expect(accepted(c, "Patient", `_id=${ids(1001)}`, true).ignored).toHaveLength(1)
  })

  withCatalog("a repeated parameter is one clause per occurrence", (c) => {
    const request = accepted(c, "Observation", "date=ge2020&date=lt2021&code=a,b&code=c")
    expect(request.clauses.map((clause) => [clause.code, clause.values.length])).toEqual([["date", 1], ["date", 1], ["code", 2], ["code", 1]])
  })

  withCatalog(":not and :not-in with a list exclude every value", (c) => {
    const not = accepted(c, "Observation", "status:not=final,amended").clauses[0]
    expect(not).toMatchObject({ exclude: true, modifier: { kind: "not" } })
    expect(not?.values).toHaveLength(2)
    const notIn = accepted(c, "Observation", "code:not-in=http://hl7.org/fhir/ValueSet/observation-status,http://hl7.org/fhir/ValueSet/administrative-gender").clauses[0]
    expect(notIn).toMatchObject({ exclude: true, values: [{ kind: "codes" }, { kind: "codes" }] })
    expect(accepted(c, "Observation", "status=final").clauses[0]?.exclude).toBe(false)
  })
})

describe("a bare id given to a reference parameter (rule 3)", () => {
  withCatalog("Observation?patient=123 refers to each target of the parameter", (c) => {
    expect(accepted(c, "Observation", "patient=123").clauses[0]?.values).toEqual([
      { kind: "reference", types: ["Patient", "Group"], id: "123" }
    ])
    expect(accepted(c, "Patient", "general-practitioner=9").clauses[0]?.values[0]).toMatchObject({
      types: expect.arrayContaining(["Practitioner", "Organization", "PractitionerRole"])
    })
  })

  withCatalog("Type/id names one type, an absolute URL keeps the URL and its version", (c) => {
    const values = accepted(c, "Observation", "subject=Patient/1,http://x.org/fhir/Patient/2/_history/3,urn:uuid:abc").clauses[0]?.values
    expect(values).toEqual([
      { kind: "reference", types: ["Patient"], id: "1" },
      { kind: "reference", types: ["Patient"], id: "2", url: "http://x.org/fhir/Patient/2/_history/3", version: "3" },
      { kind: "reference", types: [], url: "urn:uuid:abc" }
    ])
  })

  withCatalog("a parameter that can point at any resource refuses a bare id, even with handling=lenient", (c) => {
    for (const [type, key] of [["Provenance", "target"], ["Task", "focus"], ["List", "item"]] as const) {
      const problem = refused(c, type, `${key}=123`, true)[0]
      expect(problem).toMatchObject({ parameter: key, value: "123", expected: "a reference as Type/id", status: 400 })
      expect(problem?.message).toContain("Type/id")
    }
    expect(accepted(c, "Provenance", "target=Patient/123").clauses).toHaveLength(1)
    expect(accepted(c, "Provenance", "target:Patient=123").clauses[0]?.values[0]).toEqual({ kind: "reference", types: ["Patient"], id: "123" })
  })
})

describe("the result parameters", () => {
  withCatalog("_revinclude=* is a 400 naming the problem, even with handling=lenient", (c) => {
    const problem = refused(c, "Patient", "_revinclude=*", true)[0]
    expect(problem?.message).toBe("_revinclude=* is not supported: name the resource type and its reference parameter, as _revinclude=Type:parameter")
    expect(refused(c, "Patient", "_revinclude:iterate=*")).toHaveLength(1)
  })

  withCatalog("_include and _revinclude are validated and kept", (c) => {
    const request = accepted(c, "Observation", "_include=Observation:subject:Patient&_include:iterate=Patient:organization&_revinclude=Provenance:target")
    expect(request.result.include).toMatchObject([
      { kind: "parameter", sourceType: "Observation", targetType: "Patient", iterate: false },
      { kind: "parameter", sourceType: "Patient", iterate: true }
    ])
    expect(request.result.revinclude).toHaveLength(1)
    for (const bad of ["Observation", "Observation:code", "Observation:subject:Medication", "Nope:subject"]) {
      expect(refused(c, "Observation", `_include=${bad}`)[0]?.parameter).toBe("_include")
    }
    expect(refused(c, "Observation", "_include:recurse=Observation:subject")[0]?.message).toContain("':recurse'")
  })

  withCatalog("_count defaults to 20, is clamped to 1000, and must be a non-negative integer", (c) => {
    expect(accepted(c, "Patient", "").result.count).toBe(20)
    expect(accepted(c, "Patient", "_count=0").result.count).toBe(0)
    expect(accepted(c, "Patient", "_count=5000").result.count).toBe(1000)
    for (const bad of ["-1", "ten", "1.5"]) expect(refused(c, "Patient", `_count=${bad}`)[0]?.expected).toBe("a non-negative integer")
  })

  withCatalog("_sort, _total, _summary, _elements are read", (c) => {
    const request = accepted(c, "Observation", "_sort=-date,_id,code&_total=accurate&_summary=count&_elements=id,status")
    expect(request.result.sort.map((k) => [k.code, k.direction])).toEqual([["date", "desc"], ["_id", "asc"], ["code", "asc"]])
    expect(request.result).toMatchObject({ total: "accurate", summary: "count", elements: ["id", "status"] })
    expect(refused(c, "Observation", "_sort=nope")[0]?.parameter).toBe("_sort")
    expect(refused(c, "Observation", "_total=maybe")).toHaveLength(1)
    expect(refused(c, "Observation", "_summary=yes")).toHaveLength(1)
  })

  withCatalog("empty values and _format are ignored", (c) => {
    expect(accepted(c, "Patient", "name=&_format=json&_pretty=true").clauses).toHaveLength(0)
  })
})
