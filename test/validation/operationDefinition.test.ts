import { beforeAll, describe, expect, it } from "vitest"
import { build, type Catalog } from "../../src/catalog/Catalog.ts"
import { validateResource } from "../../src/validation/Validator.ts"
import { loadResources } from "./support.ts"

const slice = (sliceName: string, name: string | undefined, value: ReadonlyArray<Record<string, unknown>>, cardinality: { min: number; max: string }) => [
  { id: `Parameters.parameter:${sliceName}`, path: "Parameters.parameter", sliceName, ...cardinality },
  { id: `Parameters.parameter:${sliceName}.name`, path: "Parameters.parameter.name", min: 1, max: "1", type: [{ code: "string" }], ...(name === undefined ? {} : { fixedString: name }) },
  { id: `Parameters.parameter:${sliceName}.value[x]`, path: "Parameters.parameter.value[x]", min: 0, max: "1", type: value },
  { id: `Parameters.parameter:${sliceName}.resource`, path: "Parameters.parameter.resource", min: 0, max: "0", type: [{ code: "Resource" }] },
  { id: `Parameters.parameter:${sliceName}.part`, path: "Parameters.parameter.part", min: 0, max: "0" }
]

const profile = (url: string, slices: ReadonlyArray<Record<string, unknown>>) => ({
  resourceType: "StructureDefinition", url, name: "InParameters", status: "active", kind: "resource", abstract: false,
  type: "Parameters", baseDefinition: "http://hl7.org/fhir/StructureDefinition/Parameters", derivation: "constraint",
  snapshot: {
    element: [
      { id: "Parameters", path: "Parameters", min: 0, max: "*" },
      { id: "Parameters.parameter", path: "Parameters.parameter", min: 0, max: "*", slicing: { discriminator: [{ type: "value", path: "name" }], rules: "open" } },
      ...slices
    ]
  }
})

const inProfile = profile("http://example.org/StructureDefinition/in", [
  ...slice("count", "count", [{ code: "integer" }], { min: 1, max: "1" }),
  ...slice("subject", "subject", [{ code: "Reference", targetProfile: ["http://hl7.org/fhir/StructureDefinition/Patient"] }], { min: 0, max: "1" })
])

const operation = (fields: Record<string, unknown>) => ({
  resourceType: "OperationDefinition",
  url: "http://example.org/OperationDefinition/tally",
  name: "Tally", status: "draft", kind: "operation", code: "tally", system: true, type: false, instance: false,
  inputProfile: "http://example.org/StructureDefinition/in",
  parameter: [
    { name: "count", use: "in", min: 1, max: "1", type: "integer" },
    { name: "subject", use: "in", min: 0, max: "1", type: "Reference", targetProfile: ["http://hl7.org/fhir/StructureDefinition/Patient"] },
    { name: "return", use: "out", min: 1, max: "1", type: "integer" }
  ],
  ...fields
})

let catalog: Catalog | undefined
beforeAll(async () => {
  const resources = await loadResources()
  if (resources === undefined) return
  catalog = build([
    ...resources, inProfile,
    profile("http://example.org/StructureDefinition/unfixed", slice("loose", undefined, [{ code: "integer" }], { min: 0, max: "1" })),
    { ...inProfile, url: "http://example.org/StructureDefinition/patient", type: "Patient", baseDefinition: "http://hl7.org/fhir/StructureDefinition/Patient" },
    operation({ url: "http://example.org/OperationDefinition/first", base: "http://example.org/OperationDefinition/second", inputProfile: undefined }),
    operation({ url: "http://example.org/OperationDefinition/second", base: "http://example.org/OperationDefinition/tally", inputProfile: undefined })
  ], 2)
}, 300_000)

const withCatalog = (name: string, body: (c: Catalog) => void) =>
  it(name, (context) => (catalog === undefined ? context.skip() : body(catalog)))

/** The issues of the profile comparison and of the base. */
const about = (c: Catalog, resource: unknown) =>
  validateResource(resource, c).filter((issue) => /profile|circular/.test(issue.diagnostics) && !issue.diagnostics.includes("dom-6"))

describe("OperationDefinition", () => {
  withCatalog("an input profile that agrees with the parameters gets no issue", (c) => {
    expect(about(c, operation({}))).toEqual([])
  })

  withCatalog("an input profile that cannot be found, or is not on Parameters, is an error", (c) => {
    expect(about(c, operation({ inputProfile: "http://example.org/StructureDefinition/none" }))).toEqual([expect.objectContaining({
      severity: "error", expression: "OperationDefinition.inputProfile", diagnostics: "The 'in' profile 'http://example.org/StructureDefinition/none' can not be resolved"
    })])
    expect(about(c, operation({ inputProfile: "http://example.org/StructureDefinition/patient" }))).toEqual([expect.objectContaining({
      severity: "error", expression: "OperationDefinition.inputProfile", diagnostics: expect.stringContaining("is not a profile on the Parameters resource")
    })])
  })

  withCatalog("a profile slice whose parameter name is not fixed is an error", (c) => {
    const found = about(c, operation({ inputProfile: "http://example.org/StructureDefinition/unfixed" }))
    expect(found).toContainEqual(expect.objectContaining({
      severity: "error", expression: "OperationDefinition.inputProfile", diagnostics: "The parameter name of the slice 'loose' of the 'in' profile is not fixed"
    }))
  })

  withCatalog("a parameter in the profile and not in the definition, or the other way round, is a warning", (c) => {
    const onlyCount = operation({ parameter: [{ name: "count", use: "in", min: 1, max: "1", type: "integer" }, { name: "extra", use: "in", min: 0, max: "1", type: "string" }] })
    expect(about(c, onlyCount)).toEqual([
      expect.objectContaining({ severity: "warning", expression: "OperationDefinition.inputProfile", diagnostics: expect.stringContaining("defines a parameter 'subject' that is not among the parameters") }),
      expect.objectContaining({ severity: "warning", expression: "OperationDefinition.parameter[1]", diagnostics: expect.stringContaining("has no parameter 'extra'") })
    ])
  })

  withCatalog("cardinality, types and target profiles of a parameter and its profile slice agree", (c) => {
    const changed = (index: number, fields: Record<string, unknown>) => {
      const parameters = operation({}).parameter.map((p, i) => (i === index ? { ...p, ...fields } : p))
      return about(c, operation({ parameter: parameters }))
    }
    expect(changed(0, { min: 0 })).toEqual([expect.objectContaining({
      severity: "error", expression: "OperationDefinition.parameter[0]", diagnostics: expect.stringContaining("has a min of 1 in the 'in' profile")
    })])
    expect(changed(0, { max: "*" })[0]?.diagnostics).toContain("has a max of 1")
    expect(changed(0, { type: "decimal" })).toEqual([
      expect.objectContaining({ severity: "error", diagnostics: expect.stringContaining("The type 'integer' is allowed for the parameter 'count' in the 'in' profile") }),
      expect.objectContaining({ severity: "error", diagnostics: expect.stringContaining("The type 'decimal' is allowed for the parameter 'count' in the operation definition but not in the 'in' profile") })
    ])
    expect(changed(1, { targetProfile: ["http://hl7.org/fhir/StructureDefinition/Group"] })).toEqual([
      expect.objectContaining({ severity: "error", expression: "OperationDefinition.parameter[1]", diagnostics: expect.stringContaining("The target profile 'http://hl7.org/fhir/StructureDefinition/Group' is listed for the parameter 'subject' in the operation definition but not allowed") }),
      expect.objectContaining({ severity: "error", diagnostics: expect.stringContaining("The target profile 'http://hl7.org/fhir/StructureDefinition/Patient' is allowed for the parameter 'subject' in the 'in' profile") })
    ])
  })

  withCatalog("an operation whose base leads back to itself is an error", (c) => {
    expect(about(c, operation({ inputProfile: undefined, base: "http://example.org/OperationDefinition/first" }))).toEqual([expect.objectContaining({
      severity: "error", expression: "OperationDefinition", diagnostics: expect.stringContaining("circular")
    })])
    expect(about(c, operation({ inputProfile: undefined, base: "http://example.org/OperationDefinition/second" }))[0]?.diagnostics).toContain("from 'http://example.org/OperationDefinition/second'")
    expect(about(c, operation({ inputProfile: undefined, url: "http://example.org/OperationDefinition/other", base: "http://example.org/OperationDefinition/first" }))).toEqual([])
  })
})
