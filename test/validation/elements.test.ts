/** Rules on elements and resource metadata: unique element ids, ordered slicing, canonical resources' status and version. */
import { describe, expect } from "vitest"
import { build, type Catalog } from "../../src/catalog/Catalog.ts"
import { validateResource } from "../../src/validation/Validator.ts"
import { catalogTests, errors, loadResources, narrative, problems } from "./support.ts"

const withCatalog = catalogTests()

describe("element ids", () => {
  withCatalog("two elements of a resource with the same id are an error at the second", (c) => {
    const patient = {
      resourceType: "Patient",
      text: narrative,
      name: [{ id: "n1", family: "Chalmers" }, { id: "n1", family: "Windsor" }]
    }
    const found = errors(validateResource(patient, c))
    expect(found).toHaveLength(1)
    expect(found[0]).toMatchObject({ severity: "error", expression: "Patient.name[1]" })
    expect(found[0]!.diagnostics).toContain("Duplicate id value 'n1'")
  })

  withCatalog("the id of a primitive's extension part counts too; distinct ids, and the same id in a contained resource, are fine", (c) => {
    const duplicate = { resourceType: "Patient", text: narrative, birthDate: "1970-01-01", _birthDate: { id: "x" }, name: [{ id: "x", family: "A" }] }
    expect(errors(validateResource(duplicate, c)).map((issue) => issue.expression)).toEqual(["Patient.name[0]"])
    const fine = {
      resourceType: "Patient",
      text: narrative,
      contained: [{ resourceType: "Organization", id: "org", name: "Acme", contact: [{ id: "a", name: { text: "Desk" } }] }],
      managingOrganization: { reference: "#org" },
      name: [{ id: "a", family: "A" }, { id: "b", family: "B" }]
    }
    expect(errors(validateResource(fine, c))).toEqual([])
  })
})

describe("ordered slicing", () => {
  let profiled: Catalog | undefined
  const url = "http://example.org/StructureDefinition/ordered-names"
  const withProfile = async (c: Catalog): Promise<Catalog> => {
    if (profiled !== undefined) return profiled
    const base = c.structureDefinitionForType("Patient")!.resource
    const snapshot: Array<Record<string, unknown>> = []
    for (const element of (base["snapshot"] as { element: ReadonlyArray<Record<string, unknown>> }).element) {
      if (element["id"] !== "Patient.name") {
        snapshot.push(element)
        continue
      }
      snapshot.push({ ...element, slicing: { discriminator: [{ type: "value", path: "use" }], ordered: true, rules: "open" } })
      const humanName = (c.structureDefinitionForType("HumanName")!.resource["snapshot"] as { element: ReadonlyArray<Record<string, unknown>> }).element.slice(1)
      for (const use of ["official", "nickname"]) {
        snapshot.push({ ...element, id: `Patient.name:${use}`, sliceName: use, min: 0, max: "*" })
        for (const child of humanName) {
          const name = String(child["path"]).slice("HumanName.".length)
          snapshot.push({ ...child, id: `Patient.name:${use}.${name}`, path: `Patient.name.${name}`, ...(name === "use" ? { min: 1, fixedCode: use } : {}) })
        }
      }
    }
    const profile = {
      resourceType: "StructureDefinition", url, name: "OrderedNames", status: "draft", kind: "resource", abstract: false,
      type: "Patient", baseDefinition: "http://hl7.org/fhir/StructureDefinition/Patient", derivation: "constraint", snapshot: { element: snapshot }
    }
    profiled = build([...((await loadResources()) ?? []), profile], 2)
    return profiled
  }

  withCatalog("an item of an earlier slice after one of a later slice is an error; in order it is fine", async (c) => {
    const catalog = await withProfile(c)
    const patient = (names: ReadonlyArray<string>) => ({
      resourceType: "Patient", text: narrative, meta: { profile: [url] }, name: names.map((use) => ({ use, family: "X" }))
    })
    expect(errors(validateResource(patient(["official", "official", "nickname"]), catalog))).toEqual([])
    const found = errors(validateResource(patient(["official", "nickname", "official"]), catalog))
    expect(found).toHaveLength(1)
    expect(found[0]).toMatchObject({ expression: "Patient.name[2]" })
    expect(found[0]!.diagnostics).toContain("out of order")
  })
})

describe("canonical resources", () => {
  const codeSystem = (fields: Record<string, unknown>) => ({
    resourceType: "CodeSystem", text: narrative, url: "http://example.org/cs", name: "Example", status: "active", content: "complete",
    concept: [{ code: "a" }], ...fields
  })
  const standardsStatus = (code: string) => [{ url: "http://hl7.org/fhir/StructureDefinition/structuredefinition-standards-status", valueCode: code }]

  withCatalog("a status that contradicts the standards status is a warning; an unusual one is information", (c) => {
    const contradicting = problems(c, codeSystem({ status: "active", extension: standardsStatus("deprecated") }))
    expect(contradicting).toEqual([expect.objectContaining({ severity: "warning", code: "business-rule", expression: "CodeSystem" })])
    expect(contradicting[0]!.diagnostics).toContain("'active' and the standards status 'deprecated'")
    const unusual = validateResource(codeSystem({ status: "draft", extension: standardsStatus("trial-use") }), c)
    expect(unusual.filter((issue) => issue.code === "business-rule").map((issue) => issue.severity)).toEqual(["information"])
    expect(validateResource(codeSystem({ status: "active", extension: standardsStatus("normative") }), c).filter((issue) => issue.code === "business-rule")).toEqual([])
  })

  withCatalog("a version with a '#' is a warning", (c) => {
    expect(problems(c, codeSystem({ version: "1.0#draft" }))).toEqual([expect.objectContaining({ severity: "warning", expression: "CodeSystem.version" })])
    expect(problems(c, codeSystem({ version: "1.0.1" }))).toEqual([])
  })
})

describe("profiles that constrain", () => {
  const profileOf = (c: Catalog, url: string, change: (element: Record<string, unknown>) => Record<string, unknown>, withSnapshot = true) => {
    const base = c.structureDefinitionForType("Patient")!.resource
    const elements = (base["snapshot"] as { element: ReadonlyArray<Record<string, unknown>> }).element
    return {
      resourceType: "StructureDefinition", url, name: "Constrained", status: "draft", kind: "resource", abstract: false,
      type: "Patient", baseDefinition: "http://hl7.org/fhir/StructureDefinition/Patient", derivation: "constraint",
      ...(withSnapshot ? { snapshot: { element: elements.map(change) } } : { differential: { element: [{ id: "Patient.photo", path: "Patient.photo", max: "0" }] } })
    }
  }
  const noPhoto = "http://example.org/StructureDefinition/no-photo"
  const differentialOnly = "http://example.org/StructureDefinition/differential-only"
  const throwing = "http://example.org/StructureDefinition/throwing-invariant"
  let catalog: Catalog | undefined
  const withProfiles = async (c: Catalog): Promise<Catalog> => {
    catalog ??= build([
      ...((await loadResources()) ?? []),
      profileOf(c, noPhoto, (element) => (element["id"] === "Patient.photo" ? { ...element, max: "0" } : element)),
      profileOf(c, differentialOnly, (element) => element, false),
      profileOf(c, throwing, (element) => (element["id"] === "Patient"
        ? { ...element, constraint: [...((element["constraint"] as ReadonlyArray<unknown>) ?? []), { key: "tst-1", severity: "error", human: "adds given names", expression: "name.given + 'x' = 'ax'" }] }
        : element))
    ], 3)
    return catalog
  }
  const patient = (url: string, fields: Record<string, unknown> = {}) => ({ resourceType: "Patient", text: narrative, meta: { profile: [url] }, ...fields })

  withCatalog("an element a profile removes is an error", async (c) => {
    const profiled = await withProfiles(c)
    const found = errors(validateResource(patient(noPhoto, { photo: [{ contentType: "image/png", url: "http://example.org/p.png" }] }), profiled))
    expect(found.map((issue) => issue.expression)).toEqual(["Patient.photo"])
    expect(errors(validateResource(patient(noPhoto), profiled))).toEqual([])
  })

  withCatalog("a profile without a snapshot is reported, not applied", async (c) => {
    const profiled = await withProfiles(c)
    const issues = validateResource(patient(differentialOnly, { photo: [{ contentType: "image/png", url: "http://example.org/p.png" }] }), profiled)
    expect(errors(issues)).toEqual([])
    expect(issues.some((issue) => issue.severity === "information" && issue.diagnostics.includes("no snapshot"))).toBe(true)
  })

  withCatalog("an invariant that fails to evaluate is a warning naming it, not an error", async (c) => {
    const profiled = await withProfiles(c)
    const issues = validateResource(patient(throwing, { name: [{ given: ["a", "b"] }] }), profiled)
    expect(errors(issues)).toEqual([])
    expect(issues.filter((issue) => issue.diagnostics.includes("tst-1"))).toEqual([expect.objectContaining({ severity: "warning", code: "invariant" })])
  })
})
