import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import fhirpath from "fhirpath"
import r4 from "fhirpath/fhir-context/r4"
import { fhirPathPatch } from "../../../src/rest/patch/fhirPathPatch.ts"
import { quoteDivMembers } from "../../../src/rest/patch/fhirSelect.ts"

type Part = Record<string, unknown>

const operation = (type: string, path: string, ...parts: ReadonlyArray<Part>) => ({
  name: "operation",
  part: [{ name: "type", valueCode: type }, { name: "path", valueString: path }, ...parts]
})
const patch = (...parameter: ReadonlyArray<unknown>) => ({ resourceType: "Parameters", parameter })
const named = (name: string, value: Part): Part => ({ name, ...value })

const patient = {
  resourceType: "Patient",
  id: "p1",
  name: [{ family: "Lee", given: ["Ann", "Bea"], _given: [null, { id: "g2" }] }],
  identifier: [{ system: "s", value: "1" }, { system: "s", value: "2" }],
  deceasedBoolean: false
}

const problemOf = (result: Either.Either<unknown, { readonly code: string; readonly diagnostics: string }>) => {
  if (Either.isRight(result)) throw new Error(`expected a failure, got ${JSON.stringify(result.right)}`)
  return result.left
}

describe("FHIRPath Patch: malformed documents are invalid", () => {
  const cases: ReadonlyArray<readonly [string, unknown, string]> = [
    ["not a Parameters resource", { resourceType: "Patient" }, "must be a Parameters resource"],
    ["parameter not an array", { resourceType: "Parameters", parameter: {} }, "Parameters.parameter must be an array"],
    ["a parameter not named operation", patch({ name: "op", part: [] }), "operation 0: must be a parameter named \"operation\""],
    ["no parts", patch({ name: "operation" }), "operation 0: \"part\" must be an array"],
    ["an unknown type", patch(operation("merge", "Patient")), "operation 0: needs a \"type\" part"],
    ["no path", patch({ name: "operation", part: [{ name: "type", valueCode: "delete" }] }), "needs a \"path\" part"],
    ["an unknown part", patch(operation("delete", "Patient.id", named("where", { valueString: "x" }))), "unknown part \"where\""],
    ["a part given twice", patch(operation("delete", "Patient.id", named("path", { valueString: "x" }))), "part \"path\" is given twice"],
    ["add without name", patch(operation("add", "Patient", named("value", { valueCode: "male" }))), "needs a \"name\" part"],
    ["add without value", patch(operation("add", "Patient", named("name", { valueString: "gender" }))), "add needs a \"value\" part"],
    ["insert without index", patch(operation("insert", "Patient.identifier", named("value", { valueIdentifier: {} }))), "needs a \"index\" part"],
    ["a negative index", patch(operation("insert", "Patient.identifier", named("index", { valueInteger: -1 }), named("value", { valueIdentifier: {} }))), "an integer of 0 or more"],
    ["move without destination", patch(operation("move", "Patient.identifier", named("source", { valueInteger: 0 }))), "needs a \"destination\" part"],
    ["a value with two value[x]", patch(operation("replace", "Patient.gender", named("value", { valueCode: "male", valueString: "x" }))), "exactly one of value[x], resource or part (found 2)"],
    ["a value part without a name", patch(operation("add", "Patient", named("name", { valueString: "contact" }), named("value", { part: [{ valueCode: "male" }] }))), "part[0] must be an object with a name"],
    ["a path the engine cannot parse", patch(operation("delete", "Patient.(")), "operation 0 (delete Patient.(): the path cannot be evaluated"],
    ["a path to a computed value", patch(operation("delete", "'abc'")), "selects values that are not elements"]
  ]
  for (const [name, parameters, message] of cases) {
    it(name, () => {
      const problem = problemOf(fhirPathPatch(patient, parameters))
      expect(problem.code).toBe("invalid")
      expect(problem.diagnostics).toContain(message)
    })
  }
})

describe("FHIRPath Patch: operations that cannot be applied are processing problems naming operation and path", () => {
  const cases: ReadonlyArray<readonly [string, unknown, string]> = [
    ["replace of nothing", patch(operation("replace", "Patient.gender", named("value", { valueCode: "male" }))), "operation 0 (replace Patient.gender): no element found at the path"],
    ["replace of several", patch(operation("replace", "Patient.identifier.value", named("value", { valueString: "3" }))), "the path selects 2 elements; replace needs exactly one"],
    ["delete of several", patch(operation("delete", "Patient.identifier")), "the path selects 2 elements; delete removes only one"],
    ["add of a present single element", patch(operation("add", "Patient", named("name", { valueString: "deceased" }), named("value", { valueDateTime: "2020" }))), "deceased is already present and does not repeat; use replace"],
    ["add of an unknown element", patch(operation("add", "Patient", named("name", { valueString: "colour" }), named("value", { valueString: "blue" }))), "Patient has no element colour"],
    ["add into a primitive", patch(operation("add", "Patient.id", named("name", { valueString: "x" }), named("value", { valueString: "y" }))), "cannot hold elements"],
    ["a value of the wrong type", patch(operation("replace", "Patient.name[0]", named("value", { valueIdentifier: { value: "x" } }))), "name needs a value of type HumanName, not Identifier"],
    ["a primitive of the wrong kind", patch(operation("replace", "Patient.deceased", named("value", { valueBoolean: "yes" }))), "deceasedBoolean needs a boolean value"],
    ["a choice type not allowed", patch(operation("replace", "Patient.deceased", named("value", { valueString: "x" }))), "Patient.deceased[x] cannot hold a value of type string"],
    ["insert past the end", patch(operation("insert", "Patient.identifier", named("index", { valueInteger: 3 }), named("value", { valueIdentifier: { value: "3" } }))), "index 3 is out of range (the list has 2 items)"],
    ["insert into part of a list", patch(operation("insert", "Patient.identifier.where(value = '2')", named("index", { valueInteger: 0 }), named("value", { valueIdentifier: { value: "3" } }))), "must select a whole list"],
    ["insert into a single element", patch(operation("insert", "Patient.name[0].family", named("index", { valueInteger: 0 }), named("value", { valueString: "x" }))), "must select a whole list"],
    ["move from past the end", patch(operation("move", "Patient.identifier", named("source", { valueInteger: 2 }), named("destination", { valueInteger: 0 }))), "source 2 is out of range (the list has 2 items)"],
    ["move to past the end", patch(operation("move", "Patient.identifier", named("source", { valueInteger: 0 }), named("destination", { valueInteger: 5 }))), "destination 5 is out of range"],
    ["replace of the resource itself", patch(operation("replace", "Patient", named("value", { valueString: "x" }))), "the path selects the resource itself"],
    ["the second operation", patch(operation("delete", "Patient.id"), operation("delete", "Patient.name.given")), "operation 1 (delete Patient.name.given)"]
  ]
  for (const [name, parameters, message] of cases) {
    it(name, () => {
      const problem = problemOf(fhirPathPatch(patient, parameters))
      expect(problem.code).toBe("processing")
      expect(problem.diagnostics).toContain(message)
    })
  }

  it("delete of nothing changes nothing", () => {
    expect(fhirPathPatch(patient, patch(operation("delete", "Patient.gender")))).toEqual(Either.right(patient))
  })
})

describe("FHIRPath Patch: semantics beyond the shared cases", () => {
  const apply = (...parameter: ReadonlyArray<unknown>) => Either.getOrThrow(fhirPathPatch(patient, patch(...parameter)))

  it("replaces a choice element with another of its types", () => {
    const patched = apply(operation("replace", "Patient.deceased", named("value", { valueDateTime: "2020-01-01" })))
    expect(patched["deceasedDateTime"]).toBe("2020-01-01")
    expect(patched).not.toHaveProperty("deceasedBoolean")
  })

  it("adds a choice element under its plain name", () => {
    const patched = apply(operation("add", "Patient", named("name", { valueString: "multipleBirth" }), named("value", { valueInteger: 2 })))
    expect(patched["multipleBirthInteger"]).toBe(2)
  })

  it("keeps the extensions of a primitive list in step", () => {
    const patched = apply(
      operation("insert", "Patient.name[0].given", named("index", { valueInteger: 0 }), named("value", { valueString: "Cy", _valueString: { id: "g0" } })),
      operation("delete", "Patient.name[0].given[1]")
    )
    expect(patched["name"]).toEqual([{ family: "Lee", given: ["Cy", "Bea"], _given: [{ id: "g0" }, { id: "g2" }] }])
  })

  it("drops the extension list of a primitive list once it holds nothing", () => {
    const patched = apply(operation("delete", "Patient.name[0].given[1]"))
    expect(patched["name"]).toEqual([{ family: "Lee", given: ["Ann"] }])
  })

  it("inserts into an empty list through the parent of the path", () => {
    const patched = apply(operation("insert", "Patient.telecom", named("index", { valueInteger: 0 }), named("value", { valueContactPoint: { value: "1" } })))
    expect(patched["telecom"]).toEqual([{ value: "1" }])
  })

  it("assembles nested parts, making repeating elements lists", () => {
    const patched = apply(operation("add", "Patient", named("name", { valueString: "contact" }), named("value", {
      part: [
        named("telecom", { valueContactPoint: { value: "1" } }),
        named("telecom", { valueContactPoint: { value: "2" } }),
        named("name", { part: [named("family", { valueString: "Kim" }), named("given", { valueString: "Jo" })] })
      ]
    })))
    expect(patched["contact"]).toEqual([{ telecom: [{ value: "1" }, { value: "2" }], name: { family: "Kim", given: ["Jo"] } }])
  })

  it("adds a contained resource", () => {
    const observation = { resourceType: "Observation", status: "final", code: { text: "x" } }
    const patched = apply(operation("add", "Patient", named("name", { valueString: "contained" }), named("value", { resource: observation })))
    expect(patched["contained"]).toEqual([observation])
  })

  it("deletes an extension of a primitive, keeping its value", () => {
    const withExtension = { resourceType: "Patient", birthDate: "2000", _birthDate: { extension: [{ url: "u", valueString: "v" }] } }
    const result = fhirPathPatch(withExtension, patch(operation("delete", "Patient.birthDate.extension[0]")))
    expect(result).toEqual(Either.right({ resourceType: "Patient", birthDate: "2000" }))
  })

  it("evaluates %resource", () => {
    expect(apply(operation("delete", "%resource.identifier[0]"))["identifier"]).toEqual([{ system: "s", value: "2" }])
  })

  it("refuses a backbone element given as a datatype", () => {
    const problem = problemOf(fhirPathPatch(patient, patch(operation("add", "Patient", named("name", { valueString: "contact" }), named("value", { valueHumanName: { text: "x" } })))))
    expect(problem.diagnostics).toContain("contact needs a value made of parts, not HumanName")
  })

  it("reads a path with a string that mentions .div unchanged", () => {
    expect(quoteDivMembers("Patient.text.div")).toBe("Patient.text.`div`")
    expect(quoteDivMembers("Patient.name.where(text = 'a.div').family")).toBe("Patient.name.where(text = 'a.div').family")
    expect(quoteDivMembers("Patient.divider")).toBe("Patient.divider")
  })
})

describe("FHIRPath Patch: the input is never changed", () => {
  it("leaves the resource and the Parameters as they were, and shares nothing with them", () => {
    const resource = structuredClone(patient)
    const value = { system: "s", value: "3" }
    const parameters = patch(
      operation("add", "Patient", named("name", { valueString: "identifier" }), named("value", { valueIdentifier: value })),
      operation("move", "Patient.identifier", named("source", { valueInteger: 2 }), named("destination", { valueInteger: 0 })),
      operation("delete", "Patient.name[0].given[0]"),
      operation("replace", "Patient.deceased", named("value", { valueDateTime: "2020" }))
    )
    const parametersBefore = structuredClone(parameters)
    const patched = Either.getOrThrow(fhirPathPatch(resource, parameters)) as { identifier: Array<Record<string, unknown>> }
    expect(resource).toEqual(patient)
    expect(parameters).toEqual(parametersBefore)
    patched.identifier[0]!["value"] = "changed"
    expect(value.value).toBe("3")
  })

  it("leaves the resource unchanged when a later operation fails", () => {
    const resource = structuredClone(patient)
    const result = fhirPathPatch(resource, patch(operation("delete", "Patient.id"), operation("delete", "Patient.identifier")))
    expect(Either.isLeft(result)).toBe(true)
    expect(resource).toEqual(patient)
  })

  it("relies on the engine giving back the very objects of the tree it evaluated, with parent and key", () => {
    const tree = structuredClone(patient)
    const options = { resolveInternalTypes: false } as const
    const evaluate = fhirpath.evaluate as unknown as (data: unknown, path: string, env: object, model: unknown, o: typeof options) => ReadonlyArray<{ data: unknown; propName: string; index: number; parentResNode: { data: unknown } }>
    const [second] = evaluate(tree, "Patient.identifier[1]", {}, r4, options)
    expect(second?.data).toBe(tree.identifier[1])
    expect(second?.parentResNode.data).toBe(tree)
    expect([second?.propName, second?.index]).toEqual(["identifier", 1])
    const [given] = evaluate(tree, "Patient.name[0].given[1]", {}, r4, options)
    expect(given?.parentResNode.data).toBe(tree.name[0])
    expect([given?.propName, given?.index]).toEqual(["given", 1])
  })
})
