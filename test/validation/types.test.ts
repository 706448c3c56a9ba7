import { describe, expect, it } from "vitest"
import { build, type Catalog } from "../../src/catalog/Catalog.ts"
import type { Issue } from "../../src/validation/Issue.ts"
import { validateJson, validateResource } from "../../src/validation/Validator.ts"
import { bidiProblem, htmlTagIn, markdownHtmlAt } from "../../src/validation/security.ts"
import { isAbsoluteUri } from "../../src/validation/uris.ts"
import { checkXhtml } from "../../src/validation/xhtml.ts"
import { catalogTests, loadResources, narrative, problems } from "./support.ts"

const withCatalog = catalogTests()

const at = (issues: ReadonlyArray<Issue>, expression: string): ReadonlyArray<Issue> => issues.filter((issue) => issue.expression === expression)

const one = (issues: ReadonlyArray<Issue>, expression: string): Issue => {
  const found = at(issues, expression)
  expect(found, JSON.stringify(issues, null, 1)).toHaveLength(1)
  return found[0]!
}

const patient = (fields: Record<string, unknown>) => ({ resourceType: "Patient", text: narrative, ...fields })

describe("URIs", () => {
  it("judges absolute URIs as the reference validator does", () => {
    expect(isAbsoluteUri("http://example.org/a")).toBe(true)
    expect(isAbsoluteUri("urn:oid:1.2.3.4")).toBe(true)
    expect(isAbsoluteUri("mailto:a@b.c")).toBe(true)
    expect(isAbsoluteUri("Library/x")).toBe(false)
    expect(isAbsoluteUri("HTTP://example.org")).toBe(false)
    expect(isAbsoluteUri("urn:")).toBe(false)
    expect(isAbsoluteUri("2.16.840.1")).toBe(false)
  })

  withCatalog("a urn:uuid: must hold a valid lowercase UUID; a lowercase one is accepted", (c) => {
    const issues = problems(c, patient({
      identifier: [
        { system: "urn:ietf:rfc:3986", value: "urn:uuid:9d3f2d3e-6c56-4f0f-8f4b-1d2c3b4a5e6f" }
      ],
      managingOrganization: { reference: "Organization/1" },
      extension: [{ url: "http://hl7.org/fhir/StructureDefinition/patient-birthPlace", valueAddress: { city: "x" } }],
      photo: [{ url: "urn:uuid:9D3F2D3E-6C56-4F0F-8F4B-1D2C3B4A5E6F" }]
    }))
    const issue = one(issues, "Patient.photo[0].url")
    expect(issue.severity).toBe("error")
    expect(issue.diagnostics).toContain("UUIDs must be valid and lowercase (9D3F2D3E-6C56-4F0F-8F4B-1D2C3B4A5E6F)")
    expect(at(issues, "Patient.identifier[0]")).toEqual([])
  })

  withCatalog("a urn:oid: must hold a valid OID, and oid: or uuid: alone is not a URI scheme", (c) => {
    const issues = problems(c, patient({
      photo: [{ url: "urn:oid:1.2.3.04" }, { url: "oid:2.16.840.1.113883" }, { url: "urn:oid:2.16.840.1.113883.19" }]
    }))
    expect(one(issues, "Patient.photo[0].url").diagnostics).toContain("OIDs must be valid (1.2.3.04)")
    expect(one(issues, "Patient.photo[1].url").diagnostics).toContain("URI values cannot start with oid:")
    expect(at(issues, "Patient.photo[2].url")).toEqual([])
  })

  withCatalog("the url of a canonical resource must be absolute, in a contained resource too", (c) => {
    const issues = problems(c, {
      resourceType: "ValueSet",
      text: narrative,
      url: "ValueSet/mine",
      status: "draft",
      contained: [{ resourceType: "CodeSystem", id: "c1", url: "c1", status: "draft", content: "not-present" }],
      compose: { include: [{ system: "http://example.org/cs", valueSet: ["#c1"] }] }
    })
    const own = one(issues, "ValueSet.url")
    expect(own.severity).toBe("error")
    expect(own.diagnostics).toBe("Canonical URLs must be absolute URLs if they are not fragment references (ValueSet/mine)")
    expect(one(issues, "ValueSet.contained[0].url").diagnostics).toBe("Canonical URLs in contained resources must be absolute URLs if present (c1)")
    // A fragment reference is not held against the canonical's form (that it names a CodeSystem is another check).
    expect(at(issues, "ValueSet.compose.include[0].valueSet[0]").filter((issue) => !issue.diagnostics.includes("value set import"))).toEqual([])
  })

  withCatalog("a relative canonical reference is a warning; an absolute one or a #fragment is not flagged", (c) => {
    const issues = problems(c, {
      resourceType: "Measure",
      text: narrative,
      status: "draft",
      library: ["Library/x", "http://measures.test/Library/x"]
    })
    const issue = one(issues, "Measure.library[0]")
    expect(issue.severity).toBe("warning")
    expect(issue.diagnostics).toContain("Canonical URLs must be absolute URLs if they are not fragment references (Library/x)")
    expect(at(issues, "Measure.library[1]")).toEqual([])
  })
})

describe("Identifier", () => {
  withCatalog("Identifier.system must be absolute (http:, https:, urn:, ldap:)", (c) => {
    const issues = problems(c, patient({
      identifier: [{ system: "hospital-mrn", value: "1" }, { system: "https://example.org/mrn", value: "2" }, { system: "ldap:o=x", value: "3" }]
    }))
    const issue = one(issues, "Patient.identifier[0]")
    expect(issue.severity).toBe("error")
    expect(issue.diagnostics).toContain("Identifier.system must be an absolute reference, not a local reference ('hospital-mrn')")
    expect(at(issues, "Patient.identifier[1]")).toEqual([])
    expect(at(issues, "Patient.identifier[2]")).toEqual([])
  })

  withCatalog("with system urn:ietf:rfc:3986 the value must itself be an absolute URI", (c) => {
    const issues = problems(c, patient({
      identifier: [{ system: "urn:ietf:rfc:3986", value: "2.16.840.1.113883.6.57" }, { system: "urn:ietf:rfc:3986", value: "urn:oid:2.16.840.1.113883.6.57" }]
    }))
    const issue = one(issues, "Patient.identifier[0]")
    expect(issue.severity).toBe("error")
    expect(issue.diagnostics).toBe("if identifier.system is 'urn:ietf:rfc:3986', then the identifier.value must be a full URI (e.g. start with a scheme), not '2.16.840.1.113883.6.57'")
    expect(at(issues, "Patient.identifier[1]")).toEqual([])
  })

  withCatalog("the system https://tools.ietf.org/html/rfc4122 is wrong for UUIDs (a warning) and for anything else (an error)", (c) => {
    const system = "https://tools.ietf.org/html/rfc4122"
    const issues = problems(c, patient({
      identifier: [
        { system, value: "9d3f2d3e-6c56-4f0f-8f4b-1d2c3b4a5e6f" },
        { system, value: "urn:uuid:9d3f2d3e-6c56-4f0f-8f4b-1d2c3b4a5e6f" },
        { system, value: "12345" }
      ]
    }))
    expect(one(issues, "Patient.identifier[0]").severity).toBe("warning")
    expect(one(issues, "Patient.identifier[0]").diagnostics).toContain("urn:uuid:9d3f2d3e")
    expect(one(issues, "Patient.identifier[1]").severity).toBe("warning")
    expect(one(issues, "Patient.identifier[2]").severity).toBe("error")
  })
})

describe("content security", () => {
  it("finds HTML tags in text, not comparisons", () => {
    expect(htmlTagIn("Standard <script>somescript</script>")).toBe("<script>")
    expect(htmlTagIn('see <a href="x">here')).toBe('<a href="x">')
    expect(htmlTagIn("dose < 5 mg and > 2 mg")).toBeUndefined()
    expect(htmlTagIn("a<b")).toBeUndefined()
    expect(markdownHtmlAt("<resource type>\\<id>")).toBe("<r")
    expect(markdownHtmlAt("escaped \\<b> and a < b")).toBeUndefined()
    expect(markdownHtmlAt("<!-- hidden -->")).toBe("<!")
  })

  withCatalog("a string holding an HTML tag is a security warning; plain text with '<' is not", (c) => {
    const issues = problems(c, patient({ name: [{ text: "Standard <script>somescript</script>" }, { text: "age < 5" }] }))
    const issue = one(issues, "Patient.name[0].text")
    expect(issue.severity).toBe("warning")
    expect(issue.code).toBe("security")
    expect(issue.diagnostics).toContain("looks like an embedded HTML tag (<script>)")
    expect(at(issues, "Patient.name[1].text")).toEqual([])
  })

  withCatalog("markdown holding raw HTML is a warning; escaped markup is not", (c) => {
    const communication = (text: string) => ({ resourceType: "Communication", text: narrative, status: "completed", note: [{ text }] })
    const issue = one(problems(c, communication("<resource type>\\<id>")), "Communication.note[0].text")
    expect(issue.severity).toBe("warning")
    expect(issue.diagnostics).toContain("embedded HTML tag starting at '<r'")
    expect(at(problems(c, communication("\\<resource type\\> is *fine*")), "Communication.note[0].text")).toEqual([])
  })

  it("finds bidirectional controls left open before the end of a paragraph", () => {
    expect(bidiProblem("abc \u202Edef")).toContain("RLO (U+202E) at character 5 is not closed")
    expect(bidiProblem("abc \u2067def\nghi")).toContain("RLI")
    expect(bidiProblem("abc \u202Edef\u202C ghi")).toBeUndefined()
    expect(bidiProblem("abc \u2067\u202Bdef\u2069")).toBeUndefined()
    expect(bidiProblem("plain")).toBeUndefined()
  })

  withCatalog("a string with an unterminated bidi override is a warning", (c) => {
    const issues = problems(c, patient({ name: [{ text: "admin \u202Eresu" }, { text: "admin \u202Eresu\u202C" }] }))
    const issue = one(issues, "Patient.name[0].text")
    expect(issue.severity).toBe("warning")
    expect(issue.diagnostics).toContain("unterminated bi-di control characters")
    expect(at(issues, "Patient.name[1].text")).toEqual([])
  })
})

describe("primitive details", () => {
  withCatalog("a string with leading or trailing whitespace, or only whitespace, is a warning", (c) => {
    const issues = problems(c, patient({ name: [{ text: " Peter" }, { text: "Peter" }], address: [{ city: "  " }] }))
    expect(one(issues, "Patient.name[0].text").diagnostics).toContain("should not start or finish with whitespace")
    expect(one(issues, "Patient.name[0].text").severity).toBe("warning")
    expect(one(issues, "Patient.address[0].city").diagnostics).toContain("should not be all whitespace")
    expect(at(issues, "Patient.name[1].text")).toEqual([])
    const long = validateResource(patient({ name: [{ text: "x".repeat(1_048_577) }] }), c)
    expect(one(long, "Patient.name[0].text").diagnostics).toContain("a string is at most 1048576 characters long")
  })

  withCatalog("base64 with whitespace is a warning in R4; without, nothing", (c) => {
    const issues = problems(c, patient({ photo: [{ contentType: "image/png", data: "aGVs\nbG8=" }, { contentType: "image/png", data: "aGVsbG8=" }] }))
    expect(one(issues, "Patient.photo[0].data").severity).toBe("warning")
    expect(one(issues, "Patient.photo[0].data").diagnostics).toContain("Base64 encoded values SHOULD not contain any whitespace")
    expect(at(issues, "Patient.photo[1].data")).toEqual([])
  })

  withCatalog("a date whose year is far from now is a warning (data entry error)", (c) => {
    const issues = problems(c, patient({ birthDate: "1066-10-14", deceasedDateTime: "2020-01-01" }))
    expect(one(issues, "Patient.birthDate").diagnostics).toContain("outside the range of reasonable years")
    expect(at(issues, "Patient.deceased.ofType(dateTime)")).toEqual([])
    // "Far from now" is counted from the time the caller gives (its clock), more than 80 years ahead.
    const planned = { ...patient({}), deceasedDateTime: "2120-01-01" }
    const at2026 = validateResource(planned, c, { now: Date.UTC(2026, 10, 26) })
    expect(one(at2026, "Patient.deceased.ofType(dateTime)").diagnostics).toContain("outside the range of reasonable years")
    expect(at(validateResource(planned, c, { now: Date.UTC(2050, 0, 1) }), "Patient.deceased.ofType(dateTime)")).toEqual([])
  })

  /** A Patient and a RiskAssessment profile stating maxLength, minValue[x] and maxValue[x]. */
  let limited: Catalog | undefined
  const withLimits = async (c: Catalog): Promise<Catalog> => {
    if (limited !== undefined) return limited
    const profile = (type: string, changes: Record<string, Record<string, unknown>>) => {
      const base = c.structureDefinitionForType(type)!.resource
      const elements = (base["snapshot"] as { element: ReadonlyArray<Record<string, unknown>> }).element
      return {
        resourceType: "StructureDefinition",
        url: `http://example.org/StructureDefinition/limited-${type}`,
        name: `Limited${type}`,
        status: "draft",
        kind: "resource",
        abstract: false,
        type,
        baseDefinition: `http://hl7.org/fhir/StructureDefinition/${type}`,
        derivation: "constraint",
        snapshot: { element: elements.map((element) => ({ ...element, ...changes[String(element["id"])] })) }
      }
    }
    const patientProfile = profile("Patient", {
      "Patient.gender": { maxLength: 4 },
      "Patient.birthDate": { minValueDate: "1900-01-01", maxValueDate: "2020-12-31" },
      "Patient.multipleBirth[x]": { minValueInteger: 1, maxValueInteger: 9 }
    })
    const riskProfile = profile("RiskAssessment", { "RiskAssessment.prediction.probability[x]": { minValueDecimal: 0, maxValueDecimal: 1 } })
    limited = build([...(await loadResources())!, patientProfile, riskProfile], 2)
    return limited
  }

  withCatalog("maxLength, minValue and maxValue of a profile are enforced; values within them are not flagged", async (c) => {
    const catalog = await withLimits(c)
    const meta = { profile: ["http://example.org/StructureDefinition/limited-Patient"] }
    const bad = problems(catalog, patient({ meta, gender: "female", birthDate: "2021-03-01", multipleBirthInteger: 12 }))
    expect(one(bad, "Patient.gender").diagnostics).toContain("value is longer than permitted maximum length of 4")
    expect(one(bad, "Patient.birthDate").diagnostics).toContain("date/time value 2021-03-01 is greater than permitted maximum value of 2020-12-31")
    expect(one(bad, "Patient.multipleBirth.ofType(integer)").diagnostics).toContain("integer value 12 is greater than permitted maximum value of 9")
    expect(one(bad, "Patient.multipleBirth.ofType(integer)").severity).toBe("error")
    const low = problems(catalog, patient({ meta, birthDate: "1899-12", multipleBirthInteger: 0 }))
    expect(one(low, "Patient.birthDate").diagnostics).toContain("is less than permitted minimum value of 1900-01-01")
    expect(one(low, "Patient.multipleBirth.ofType(integer)").diagnostics).toContain("less than permitted minimum value of 1")
    const good = problems(catalog, patient({ meta, gender: "male", birthDate: "2020-12", multipleBirthInteger: 2 }))
    expect(good).toEqual([])
    const risk = (probability: number) => ({
      resourceType: "RiskAssessment",
      text: narrative,
      meta: { profile: ["http://example.org/StructureDefinition/limited-RiskAssessment"] },
      status: "final",
      subject: { reference: "Patient/1" },
      prediction: [{ probabilityDecimal: probability }]
    })
    const over = validateResource(risk(1.5), catalog)
    expect(one(over, "RiskAssessment.prediction[0].probability.ofType(decimal)").diagnostics)
      .toContain("decimal value 1.5 is greater than permitted maximum value of 1")
    expect(at(validateResource(risk(0.25), catalog), "RiskAssessment.prediction[0].probability.ofType(decimal)")).toEqual([])
  })
})

describe("narrative hyperlinks", () => {
  const div = (inner: string) => `<div xmlns="http://www.w3.org/1999/xhtml">${inner}</div>`

  it("a hyperlink to a urn: or cid: cannot be followed, and an empty one goes nowhere: errors", () => {
    expect(checkXhtml(div('<a href="urn:uuid:7221aa91-d9e1-44fa-8b90-c5a8c7caeade">x</a>')))
      .toContain("the hyperlink scheme 'urn' in 'urn:uuid:7221aa91-d9e1-44fa-8b90-c5a8c7caeade' is not a scheme a browser can follow")
    expect(checkXhtml(div('<a href="">x</a>'))).toContain('a hyperlink <a href=""> is empty')
    expect(checkXhtml(div('<a href="http://example.org">x</a> <a href="mailto:a@b.c">m</a> <a href="#x">y</a> <a name="x">z</a>'))).toEqual([])
  })

  withCatalog("a narrative hyperlink to a urn: is reported on the div", (c) => {
    const issues = problems(c, patient({ text: { status: "generated", div: div('<a href="urn:uuid:7221aa91-d9e1-44fa-8b90-c5a8c7caeade">x</a>') } }))
    const issue = one(issues, "Patient.text.div")
    expect(issue.severity).toBe("error")
    expect(issue.diagnostics).toContain("hyperlink scheme 'urn'")
  })
})

describe("primitive forms (the regexes and JSON types of R4)", () => {
  const firstError = (c: Catalog, fields: Record<string, unknown>, expression: string): Issue | undefined =>
    validateResource(patient(fields), c).find((issue) => issue.expression === expression && issue.severity === "error")

  withCatalog("a boolean, integer or decimal given as a JSON string, or a string given as a number, is an error", (c) => {
    expect(firstError(c, { active: "true" }, "Patient.active")?.diagnostics).toContain("a boolean is written as JSON true or false")
    expect(firstError(c, { multipleBirthInteger: "2" }, "Patient.multipleBirth.ofType(integer)")?.diagnostics).toContain("written as a JSON number")
    expect(firstError(c, { gender: 1 }, "Patient.gender")?.diagnostics).toContain("written as a JSON string")
    expect(firstError(c, { active: true, multipleBirthInteger: 2, gender: "male" }, "Patient.active")).toBeUndefined()
  })

  withCatalog("an integer out of range or with a fraction is an error", (c) => {
    expect(firstError(c, { multipleBirthInteger: 2147483648 }, "Patient.multipleBirth.ofType(integer)")?.diagnostics).toContain("must be between")
    expect(firstError(c, { multipleBirthInteger: 1.5 }, "Patient.multipleBirth.ofType(integer)")?.diagnostics).toContain("not a whole number")
  })

  withCatalog("invalid dates and dateTimes are errors: bad form, a day the calendar lacks, a time without a timezone", (c) => {
    expect(firstError(c, { birthDate: "2020-13-01" }, "Patient.birthDate")?.diagnostics).toContain("is not a valid date")
    expect(firstError(c, { birthDate: "2021-02-29" }, "Patient.birthDate")?.diagnostics).toContain("that day does not exist")
    expect(firstError(c, { deceasedDateTime: "2020-01-01T10:00:00" }, "Patient.deceased.ofType(dateTime)")?.diagnostics).toContain("must have a timezone")
    expect(firstError(c, { birthDate: "2020-02-29" }, "Patient.birthDate")).toBeUndefined()
  })

  withCatalog("a code with leading, trailing or doubled whitespace, an invalid id or base64 is an error", (c) => {
    expect(firstError(c, { gender: " male" }, "Patient.gender")?.diagnostics).toContain("is not a valid code")
    expect(firstError(c, { id: "bad id" }, "Patient.id")?.diagnostics).toContain("Invalid resource id")
    expect(firstError(c, { photo: [{ data: "abc" }] }, "Patient.photo[0].data")?.diagnostics).toContain("is not a valid base64Binary")
    expect(firstError(c, { implicitRules: "has space" }, "Patient.implicitRules")?.diagnostics).toContain("is not a valid uri")
  })

  withCatalog("an empty string, null, or a primitive with neither value nor extension is an error", (c) => {
    expect(firstError(c, { gender: "" }, "Patient.gender")?.diagnostics).toContain("cannot be an empty string")
    expect(firstError(c, { gender: null }, "Patient.gender")?.diagnostics).toContain("null is not allowed here")
    expect(firstError(c, { _gender: { id: "x" } }, "Patient.gender")?.diagnostics).toContain("ele-1")
    expect(firstError(c, { name: [] }, "Patient.name")?.diagnostics).toContain("Array cannot be empty")
    expect(firstError(c, { name: [null] }, "Patient.name[0]")?.diagnostics).toContain("null is not allowed here")
  })

  withCatalog("an extension on Resource.id is an error; on another primitive it is not", (c) => {
    const extension = [{ url: "http://hl7.org/fhir/StructureDefinition/data-absent-reason", valueCode: "unknown" }]
    expect(firstError(c, { id: "a", _id: { extension } }, "Patient.id")?.diagnostics).toContain("Extensions are not allowed on Resource.id")
    expect(firstError(c, { birthDate: "2000", _birthDate: { extension } }, "Patient.birthDate")).toBeUndefined()
  })

  withCatalog("an unknown property and an element without content are errors", (c) => {
    expect(firstError(c, { nickname: "x" }, "Patient.nickname")?.diagnostics).toContain("Unrecognized property 'nickname'")
    expect(firstError(c, { maritalStatus: {} }, "Patient.maritalStatus")?.diagnostics).toContain("ele-1")
  })
})

describe("what the reference validator checks while parsing", () => {
  withCatalog("JSON that does not parse (comments, a missing or extra comma, unquoted names) is one fatal issue", (c) => {
    for (const text of ['{"resourceType": "Patient", // c\n}', '{"resourceType": "Patient" "active": true}', '{"resourceType": "Patient",}', "{resourceType: 'Patient'}"]) {
      const issues = validateJson(text, c)
      expect(issues).toHaveLength(1)
      expect(issues[0]).toMatchObject({ severity: "fatal", code: "structure" })
      expect(issues[0]!.diagnostics).toContain("The content is not valid JSON")
    }
    expect(validateJson('{"resourceType": "Patient", "active": true}', c).filter((issue) => issue.severity === "fatal")).toEqual([])
  })

  withCatalog("fhir_comments is an unknown property: an error", (c) => {
    const issues = validateResource(patient({ fhir_comments: ["a comment"], active: true }), c)
    expect(one(issues, "Patient.fhir_comments").severity).toBe("error")
  })

  withCatalog("an Attachment whose size does not match its data is an error", (c) => {
    const issues = problems(c, patient({ photo: [{ contentType: "text/plain", data: "aGVsbG8=", size: 100 }, { contentType: "text/plain", data: "aGVsbG8=", size: 5 }] }))
    expect(one(issues, "Patient.photo[0].size").diagnostics).toContain("The stated size 100 does not match the size of the data (5 bytes)")
    expect(at(issues, "Patient.photo[1].size")).toEqual([])
  })

  withCatalog("the same security label twice in meta.security is an error", (c) => {
    const label = { system: "http://terminology.hl7.org/CodeSystem/v3-Confidentiality", code: "R" }
    const issues = problems(c, patient({ meta: { security: [label, { ...label, code: "N" }, label] } }))
    expect(one(issues, "Patient.meta.security[2]").diagnostics).toContain("Duplicate security label http://terminology.hl7.org/CodeSystem/v3-Confidentiality#R")
    expect(at(issues, "Patient.meta.security[1]")).toEqual([])
  })
})

describe("the narrative's XHTML", () => {
  const div = (inner: string) => `<div xmlns="http://www.w3.org/1999/xhtml">${inner}</div>`

  it("elements, attributes, entities, namespaces and declarations outside what a narrative allows are errors", () => {
    expect(checkXhtml(div("<script>x</script>"))).toContain("the element <script> is not allowed in a narrative")
    expect(checkXhtml(div('<p onclick="x">y</p>'))).toContain("the event attribute onclick on <p> is not allowed in a narrative")
    expect(checkXhtml(div('<p data-x="1">y</p>'))).toContain("the attribute data-x on <p> is not allowed in a narrative")
    expect(checkXhtml(div("&nbsp;"))[0]).toContain("the entity &nbsp; is not one of XML's")
    expect(checkXhtml('<div xmlns="http://example.org">x</div>')).toContain('the root div must be in the XHTML namespace (xmlns="http://www.w3.org/1999/xhtml")')
    expect(checkXhtml('<p xmlns="http://www.w3.org/1999/xhtml">x</p>')[0]).toContain("the root element is <p>, not <div>")
    expect(checkXhtml('<!DOCTYPE div><div xmlns="http://www.w3.org/1999/xhtml">x</div>')[0]).toContain("processing instructions and declarations are not allowed")
    expect(checkXhtml(div('<a href="javascript:alert(1)">x</a>'))).toContain("a javascript: link on <a> is not allowed in a narrative")
    expect(checkXhtml(div('<img src="javascript:alert(1)"/>'))).toContain("a javascript: link on <img> is not allowed in a narrative")
    expect(checkXhtml(div("<p>plain <b>bold</b> &amp; &#169;</p><![CDATA[ text ]]>"))).toEqual([])
  })
})
