import { describe, expect } from "vitest"
import { build, type Catalog } from "../../src/catalog/Catalog.ts"
import { validateResource } from "../../src/validation/Validator.ts"
import { catalogTests, errors, loadResources, narrative, problems } from "./support.ts"

const withCatalog = catalogTests()

type Element = Record<string, unknown>

/** A profile of `type` whose snapshot is the base snapshot with `changes` applied and `added` elements placed after the named ones. */
const profile = (
  c: Catalog,
  type: string,
  url: string,
  changes: Readonly<Record<string, Element>>,
  added: Readonly<Record<string, ReadonlyArray<Element>>>
): Record<string, unknown> => {
  const base = c.structureDefinitionForType(type)!.resource
  const elements = (base["snapshot"] as { element: ReadonlyArray<Element> }).element
  const snapshot: Array<Element> = []
  for (const element of elements) {
    const id = String(element["id"])
    snapshot.push({ ...element, ...changes[id] })
    for (const extra of added[id] ?? []) snapshot.push(extra)
  }
  return {
    resourceType: "StructureDefinition",
    url,
    name: "TestProfile",
    status: "draft",
    kind: "resource",
    abstract: false,
    type,
    baseDefinition: `http://hl7.org/fhir/StructureDefinition/${type}`,
    derivation: "constraint",
    snapshot: { element: snapshot }
  }
}

const slice = (path: string, id: string, fields: Element): Element => ({
  id,
  path,
  base: { path, min: 0, max: fields["max"] === "1" && !id.endsWith(":mrn") && !id.endsWith(":vs") && !id.endsWith(":birthPlace") ? "1" : "*" },
  ...fields
})

const patientProfile = "http://example.org/StructureDefinition/mrn-patient"
const observationProfile = "http://example.org/StructureDefinition/vital-observation"

let profiled: Catalog | undefined
const withProfiles = async (c: Catalog): Promise<Catalog> => {
  if (profiled !== undefined) return profiled
  const patient = profile(c, "Patient", patientProfile, {
    "Patient.identifier": { min: 1, slicing: { discriminator: [{ type: "value", path: "system" }], rules: "closed" } },
    "Patient.extension": { slicing: { discriminator: [{ type: "value", path: "url" }], rules: "open" } }
  }, {
    "Patient.identifier": [
      slice("Patient.identifier", "Patient.identifier:mrn", { sliceName: "mrn", min: 1, max: "1", type: [{ code: "Identifier" }] }),
      ...["id", "extension", "use", "type", "period", "assigner"].map((name) =>
        slice(`Patient.identifier.${name}`, `Patient.identifier:mrn.${name}`, {
          min: 0,
          max: name === "extension" ? "*" : "1",
          type: [{ code: name === "id" ? "string" : name === "extension" ? "Extension" : name === "use" ? "code" : name === "type" ? "CodeableConcept" : name === "period" ? "Period" : "Reference" }]
        })),
      slice("Patient.identifier.system", "Patient.identifier:mrn.system", { min: 1, max: "1", type: [{ code: "uri" }], fixedUri: "http://example.org/mrn" }),
      slice("Patient.identifier.value", "Patient.identifier:mrn.value", { min: 1, max: "1", type: [{ code: "string" }] })
    ],
    "Patient.extension": [
      slice("Patient.extension", "Patient.extension:birthPlace", {
        sliceName: "birthPlace",
        min: 1,
        max: "1",
        type: [{ code: "Extension", profile: ["http://hl7.org/fhir/StructureDefinition/patient-birthPlace"] }]
      })
    ]
  })
  const observation = profile(c, "Observation", observationProfile, {
    "Observation.category": { min: 1, slicing: { discriminator: [{ type: "pattern", path: "$this" }], rules: "open" } },
    "Observation.value[x]": { type: [{ code: "Quantity" }] }
  }, {
    "Observation.category": [
      slice("Observation.category", "Observation.category:vs", {
        sliceName: "vs",
        min: 1,
        max: "1",
        type: [{ code: "CodeableConcept" }],
        patternCodeableConcept: { coding: [{ system: "http://terminology.hl7.org/CodeSystem/observation-category", code: "vital-signs" }] }
      })
    ]
  })
  const resources = await loadResources()
  profiled = build([...(resources ?? []), patient, observation], 2)
  return profiled
}

const mrn = { system: "http://example.org/mrn", value: "12345" }
const birthPlace = { url: "http://hl7.org/fhir/StructureDefinition/patient-birthPlace", valueAddress: { city: "Utrecht" } }
const claiming = (url: string, fields: Record<string, unknown>) => ({ meta: { profile: [url] }, text: narrative, ...fields })

describe("meta.profile", () => {
  withCatalog("an unknown profile is a warning that says so; asked for explicitly, an error", (c) => {
    const resource = { resourceType: "Patient", text: narrative, meta: { profile: ["http://profiles.test/unknown"] } }
    expect(validateResource(resource, c)).toEqual([{
      severity: "warning",
      code: "not-found",
      expression: "Patient",
      diagnostics: "Profile http://profiles.test/unknown is unknown to this server: the resource was not checked against it"
    }])
    expect(errors(validateResource({ resourceType: "Patient", text: narrative }, c, { profiles: ["http://profiles.test/unknown"] }))[0]?.code).toBe("not-found")
  })

  withCatalog("a profile for another type is an error", (c) => {
    const found = errors(validateResource({ resourceType: "Patient", meta: { profile: ["http://hl7.org/fhir/StructureDefinition/Observation"] } }, c))
    expect(found[0]?.diagnostics).toContain("is for Observation")
  })

  withCatalog("slices are counted: a required slice missing, one too many, and an item outside closed slicing", async (c) => {
    const p = await withProfiles(c)
    const patient = (fields: Record<string, unknown>) => ({ resourceType: "Patient", ...claiming(patientProfile, fields) })
    expect(validateResource(patient({ identifier: [mrn], extension: [birthPlace] }), p)).toEqual([])
    const none = errors(validateResource(patient({ extension: [birthPlace] }), p)).map((issue) => issue.diagnostics)
    expect(none).toEqual([
      "Patient.identifier: minimum required = 1, but only found 0",
      "Patient.identifier: slice 'mrn' requires at least 1, but found 0"
    ])
    const two = errors(validateResource(patient({ identifier: [mrn, mrn], extension: [birthPlace] }), p)).map((issue) => issue.diagnostics)
    expect(two).toEqual(["Patient.identifier: slice 'mrn' allows at most 1, but found 2"])
    const other = errors(validateResource(patient({ identifier: [mrn, { system: "http://example.org/other", value: "1" }], extension: [birthPlace] }), p))
    expect(other.map((issue) => issue.expression)).toEqual(["Patient.identifier[1]"])
  })

  withCatalog("a slice's own rules apply to the items in it", async (c) => {
    const p = await withProfiles(c)
    const found = errors(validateResource({ resourceType: "Patient", ...claiming(patientProfile, { identifier: [{ system: mrn.system }], extension: [birthPlace] }) }, p))
    expect(found.map((issue) => [issue.expression, issue.diagnostics])).toEqual([["Patient.identifier[0]", "Patient.identifier.value: minimum required = 1, but only found 0"]])
  })

  withCatalog("an extension slice (by url) is required and checked against its definition", async (c) => {
    const p = await withProfiles(c)
    const missing = errors(validateResource({ resourceType: "Patient", ...claiming(patientProfile, { identifier: [mrn] }) }, p))
    expect(missing.map((issue) => issue.diagnostics)).toEqual(["Patient.extension: slice 'birthPlace' requires at least 1, but found 0"])
    const wrong = errors(validateResource({ resourceType: "Patient", ...claiming(patientProfile, { identifier: [mrn], extension: [{ url: birthPlace.url, valueString: "Utrecht" }] }) }, p))
    expect(wrong.map((issue) => issue.expression)).toContain("Patient.extension[0].valueString")
  })

  withCatalog("a pattern slice and a narrowed choice type", async (c) => {
    const p = await withProfiles(c)
    const observation = (fields: Record<string, unknown>) => ({ resourceType: "Observation", status: "final", code: { text: "weight" }, ...claiming(observationProfile, fields) })
    const vitalSigns = { coding: [{ system: "http://terminology.hl7.org/CodeSystem/observation-category", code: "vital-signs", display: "Vital Signs" }] }
    expect(validateResource(observation({ category: [vitalSigns], valueQuantity: { value: 70 } }), p)).toEqual([])
    const noSlice = errors(validateResource(observation({ category: [{ text: "other" }], valueQuantity: { value: 70 } }), p))
    expect(noSlice.map((issue) => issue.diagnostics)).toEqual(["Observation.category: slice 'vs' requires at least 1, but found 0"])
    const wrongType = errors(validateResource(observation({ category: [vitalSigns], valueString: "70" }), p))
    expect(wrongType.map((issue) => issue.diagnostics)).toEqual(["Unrecognized property 'valueString': Observation.value[x] takes Quantity here"])
  })
})

describe("extensions", () => {
  const patient = (fields: Record<string, unknown>) => ({ resourceType: "Patient", text: narrative, ...fields })

  withCatalog("an unknown extension is an error (test/validation/extensions.test.ts has the rest)", (c) => {
    expect(validateResource(patient({ extension: [{ url: "http://unknown.test/x", valueString: "x" }] }), c)).toEqual([{
      severity: "error",
      code: "extension",
      expression: "Patient.extension[0]",
      diagnostics: "Unknown extension http://unknown.test/x: the server has no definition for it, so it is not allowed here (validation.allowed_extension_domains lists the domains accepted without one)"
    }])
  })

  withCatalog("a known extension is checked against its definition", (c) => {
    expect(validateResource(patient({ extension: [birthPlace] }), c)).toEqual([])
    expect(errors(validateResource(patient({ extension: [{ url: birthPlace.url, valueString: "Utrecht" }] }), c)).map((issue) => issue.expression))
      .toContain("Patient.extension[0].valueString")
    expect(errors(validateResource(patient({ extension: [{ url: birthPlace.url }] }), c)).length).toBeGreaterThan(0)
  })

  withCatalog("an extension used outside the contexts its definition states is an error", (c) => {
    const observation = { resourceType: "Observation", text: narrative, status: "final", code: { text: "x" }, extension: [birthPlace] }
    expect(validateResource(observation, c)).toEqual([{
      severity: "error",
      code: "extension",
      expression: "Observation",
      diagnostics: "The extension http://hl7.org/fhir/StructureDefinition/patient-birthPlace is not allowed on Observation: its definition allows it on Patient"
    }])
    // geolocation is for Address, wherever an Address is
    const geolocation = {
      url: "http://hl7.org/fhir/StructureDefinition/geolocation",
      extension: [{ url: "latitude", valueDecimal: 52.1 }, { url: "longitude", valueDecimal: 5.1 }]
    }
    expect(validateResource(patient({ address: [{ city: "Utrecht", extension: [geolocation] }] }), c)).toEqual([])
    expect(problems(c, patient({ extension: [geolocation] })).map((issue) => issue.severity)).toEqual(["error"])
  })

  withCatalog("a complex extension's parts are checked against their slices", (c) => {
    const nationality = (part: Record<string, unknown>) => patient({ extension: [{ url: "http://hl7.org/fhir/StructureDefinition/patient-nationality", extension: [part] }] })
    expect(validateResource(nationality({ url: "code", valueCodeableConcept: { text: "Dutch" } }), c)).toEqual([])
    expect(errors(validateResource(nationality({ url: "code", valueString: "Dutch" }), c)).map((issue) => issue.expression))
      .toContain("Patient.extension[0].extension[0].valueString")
  })

  withCatalog("extensions of primitives are checked too", (c) => {
    const found = problems(c, patient({ birthDate: "1970", _birthDate: { extension: [{ url: "http://unknown.test/something", valueAge: { value: 45, unit: "a", system: "http://unitsofmeasure.org", code: "a" } }] } }))
    expect(found.map((issue) => [issue.severity, issue.expression])).toEqual([["error", "Patient.birthDate.extension[0]"]])
  })
})

describe("nested resources", () => {
  withCatalog("contained resources are validated", (c) => {
    const found = errors(validateResource({
      resourceType: "Patient",
      contained: [{ resourceType: "Practitioner", id: "gp", gender: "bogus" }],
      generalPractitioner: [{ reference: "#gp" }]
    }, c))
    expect(found.map((issue) => [issue.code, issue.expression])).toEqual([["code-invalid", "Patient.contained[0].gender"]])
  })

  withCatalog("Bundle entries are validated, each as a resource of its own", (c) => {
    const found = errors(validateResource({
      resourceType: "Bundle",
      type: "collection",
      entry: [
        { fullUrl: "urn:uuid:9d3f2d3e-6c56-4f0f-8f4b-1d2c3b4a5e6f", resource: { resourceType: "Patient", birthDate: "2020-13-01" } },
        { fullUrl: "Patient/2", resource: { resourceType: "Nonsense" } }
      ]
    }, c))
    expect(found.map((issue) => issue.expression)).toEqual([
      "Bundle.entry[0].resource.birthDate",
      "Bundle.entry[1].resource",
      "Bundle.entry[1].fullUrl"
    ])
  })
})
