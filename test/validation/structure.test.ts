import { describe, expect } from "vitest"
import { validateResource } from "../../src/validation/Validator.ts"
import { catalogTests, errors, problems } from "./support.ts"

const withCatalog = catalogTests()

const patient = (fields: Record<string, unknown>) => ({ resourceType: "Patient", ...fields })
const observation = (fields: Record<string, unknown>) => ({
  resourceType: "Observation",
  status: "final",
  code: { text: "weight" },
  ...fields
})

describe("elements", () => {
  withCatalog("a valid Patient has no error or warning", (c) => {
    expect(problems(c, patient({ id: "p1", name: [{ family: "Chalmers", given: ["Peter", "James"] }], gender: "male", birthDate: "1974-12-25" }))).toEqual([])
  })

  withCatalog("an unknown element is an error at its path", (c) => {
    expect(problems(c, patient({ foo: "bar" }))).toEqual([
      { severity: "error", code: "structure", expression: "Patient.foo", diagnostics: "Unrecognized property 'foo'" }
    ])
  })

  withCatalog("unknown elements are found at any depth", (c) => {
    const found = errors(validateResource(patient({ name: [{ family: "x", nickname: "y" }] }), c))
    expect(found.map((issue) => issue.expression)).toEqual(["Patient.name[0].nickname"])
  })

  withCatalog("_element is allowed only beside a primitive", (c) => {
    expect(errors(validateResource(patient({ _name: [{ id: "a" }] }), c))[0]?.expression).toBe("Patient._name")
    expect(problems(c, patient({ _birthDate: { extension: [{ url: "http://hl7.org/fhir/StructureDefinition/data-absent-reason", valueCode: "unknown" }] } }))).toEqual([])
  })

  withCatalog("a missing required element is an error (Observation.status)", (c) => {
    const { status: _status, ...rest } = observation({})
    const found = errors(validateResource(rest, c))
    expect(found).toHaveLength(1)
    expect(found[0]).toMatchObject({ code: "required", expression: "Observation" })
    expect(found[0]?.diagnostics).toContain("Observation.status: minimum required = 1")
  })

  withCatalog("two types of a choice element is an error", (c) => {
    const found = errors(validateResource(observation({ valueQuantity: { value: 1 }, valueString: "one" }), c))
    expect(found.map((issue) => issue.diagnostics).join("\n")).toContain("only one of")
  })

  withCatalog("a choice element's values are checked as their type", (c) => {
    expect(problems(c, observation({ valueQuantity: { value: 70, unit: "kg", system: "http://unitsofmeasure.org", code: "kg" } }))).toEqual([])
    const found = errors(validateResource(observation({ valueDateTime: "yesterday" }), c))
    expect(found[0]).toMatchObject({ code: "value", expression: "Observation.value.ofType(dateTime)" })
    expect(errors(validateResource(observation({ valueFoo: 1 }), c))[0]?.diagnostics).toMatch(
      /^Unrecognized property 'valueFoo': Observation.value\[x\] takes Quantity, CodeableConcept, string, boolean, integer, Range/
    )
  })

  withCatalog("more values than max is an error", (c) => {
    const found = errors(validateResource({ resourceType: "Patient", maritalStatus: [{ text: "a" }, { text: "b" }] }, c))
    expect(found[0]?.diagnostics).toContain("cannot be a JSON array")
  })

  withCatalog("backbone elements, contentReference and nested items are checked", (c) => {
    const questionnaire = {
      resourceType: "Questionnaire",
      status: "draft",
      item: [{ linkId: "1", type: "group", item: [{ linkId: "1.1", type: "string", item: [{ type: "string" }] }] }]
    }
    const found = errors(validateResource(questionnaire, c))
    expect(found.map((issue) => [issue.expression, issue.code])).toEqual([["Questionnaire.item[0].item[0].item[0]", "required"]])
  })
})

describe("JSON types", () => {
  const cases: ReadonlyArray<readonly [string, Record<string, unknown>, string]> = [
    ["a string where an array is expected", { name: "Peter" }, "Patient.name"],
    ["an object where an array is expected", { name: { family: "x" } }, "Patient.name"],
    ["an array where a single value is expected", { gender: ["male"] }, "Patient.gender"],
    ["a string where an object is expected", { name: ["Peter"] }, "Patient.name[0]"],
    ["a number where a string is expected", { gender: 1 }, "Patient.gender"],
    ["a string where a boolean is expected", { active: "true" }, "Patient.active"],
    ["an object where a date is expected", { birthDate: { value: "2020-01-01" } }, "Patient.birthDate"],
    ["null as a value", { gender: null }, "Patient.gender"],
    ["null in an array", { name: [null] }, "Patient.name[0]"],
    ["an empty array", { name: [] }, "Patient.name"],
    ["an empty object", { maritalStatus: {} }, "Patient.maritalStatus"],
    ["an element with only an id", { maritalStatus: { id: "a" } }, "Patient.maritalStatus"],
    ["an empty string", { gender: "" }, "Patient.gender"],
    ["an array of arrays", { name: [[{ family: "x" }]] }, "Patient.name[0]"],
    ["a decimal where an integer is expected", { multipleBirthInteger: 1.5 }, "Patient.multipleBirth.ofType(integer)"],
    ["a string where a number is expected", { multipleBirthInteger: "2" }, "Patient.multipleBirth.ofType(integer)"]
  ]
  for (const [name, fields, expression] of cases) {
    withCatalog(`${name} is an error at ${expression}`, (c) => {
      const found = errors(validateResource(patient(fields), c))
      expect(found.length).toBeGreaterThan(0)
      expect(found.map((issue) => issue.expression)).toContain(expression)
    })
  }

  withCatalog("what is not a resource is answered with an issue", (c) => {
    for (const value of [null, undefined, 1, "Patient", [], [{ resourceType: "Patient" }], {}, { resourceType: 1 }]) {
      const found = errors(validateResource(value, c))
      expect(found.length).toBeGreaterThan(0)
    }
    expect(errors(validateResource({ resourceType: "Nonsense" }, c))[0]?.diagnostics).toBe("Unknown resource type 'Nonsense'")
    expect(errors(validateResource({ resourceType: "DomainResource" }, c))[0]?.diagnostics).toBe("Unknown resource type 'DomainResource'")
  })
})

describe("primitive formats", () => {
  const bad: ReadonlyArray<readonly [string, unknown]> = [
    ["birthDate", "2020-13-01"],
    ["birthDate", "2021-02-29"],
    ["birthDate", "2020-1-1"],
    ["birthDate", "not a date"],
    ["deceasedDateTime", "2020-01-01T10:00:00"],
    ["deceasedDateTime", "2020-01-01T25:00:00Z"],
    ["id", "bad id"],
    ["id", "x".repeat(65)],
    ["gender", " male"],
    ["implicitRules", "has space"],
    ["multipleBirthInteger", 2147483648]
  ]
  for (const [element, value] of bad) {
    withCatalog(`${element} ${JSON.stringify(value).slice(0, 30)} is refused`, (c) => {
      const found = errors(validateResource(patient({ [element]: value }), c))
      expect(found.length).toBeGreaterThan(0)
      expect(found[0]?.code).toBe("value")
    })
  }

  const good: ReadonlyArray<readonly [string, unknown]> = [
    ["birthDate", "2020"],
    ["birthDate", "2020-02"],
    ["birthDate", "2020-02-29"],
    ["deceasedDateTime", "2020-01-01T10:00:00.123+05:30"],
    ["deceasedDateTime", "2020-01-01T23:59:60Z"],
    ["id", "a-B.1"],
    ["multipleBirthInteger", -2147483648]
  ]
  for (const [element, value] of good) {
    withCatalog(`${element} ${JSON.stringify(value)} is accepted`, (c) => {
      expect(errors(validateResource(patient({ [element]: value }), c))).toEqual([])
    })
  }

  withCatalog("element ids are strings, resource ids are ids", (c) => {
    expect(errors(validateResource(patient({ name: [{ id: "/any thing==", family: "x" }] }), c))).toEqual([])
    expect(errors(validateResource(patient({ id: "/foobar==" }), c))[0]).toMatchObject({ code: "value", expression: "Patient.id" })
  })
})
