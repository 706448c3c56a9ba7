/**
 * What a reference's target must be: of a profile the element names (target profiles), where its profile
 * says (aggregation), a search a transaction can run (conditional references), and `#x` links that name
 * one thing in the resource (narratives, uris, canonicals, links into document entries).
 */
import { describe, expect } from "vitest"
import { Effect } from "effect"
import { build, type Catalog } from "../../src/catalog/Catalog.ts"
import { referenceCheck } from "../../src/validation/referencePolicy.ts"
import { validateForWrite, validateResource } from "../../src/validation/Validator.ts"
import { catalogTests, loadResources, narrative } from "./support.ts"

const withCatalog = catalogTests()

type Element = Record<string, unknown>

const namedPatient = "http://example.org/StructureDefinition/named-patient"
const genderedPatient = "http://example.org/StructureDefinition/gendered-patient"
const referringObservation = "http://example.org/StructureDefinition/referring-observation"

/** A profile of `type`: the base snapshot with `changes` applied to the elements they name. */
const profile = (c: Catalog, type: string, url: string, changes: Readonly<Record<string, Element>>): Record<string, unknown> => {
  const base = c.structureDefinitionForType(type)!.resource
  const elements = (base["snapshot"] as { element: ReadonlyArray<Element> }).element
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
    snapshot: { element: elements.map((element) => ({ ...element, ...changes[String(element["id"])] })) }
  }
}

let profiled: Catalog | undefined
/** The R4 catalog with two Patient profiles and an Observation profile whose references name them. */
const withProfiles = async (c: Catalog): Promise<Catalog> => {
  if (profiled !== undefined) return profiled
  const reference = (targetProfile: ReadonlyArray<string>, aggregation?: ReadonlyArray<string>) =>
    ({ type: [{ code: "Reference", targetProfile, ...(aggregation === undefined ? {} : { aggregation }) }] })
  profiled = build([
    ...(await loadResources())!,
    profile(c, "Patient", namedPatient, { "Patient.name": { min: 1 } }),
    profile(c, "Patient", genderedPatient, { "Patient.gender": { min: 1 } }),
    profile(c, "Observation", referringObservation, {
      "Observation.subject": reference([namedPatient, "http://hl7.org/fhir/StructureDefinition/Group"], ["contained", "bundled"]),
      "Observation.performer": reference([namedPatient, genderedPatient]),
      "Observation.specimen": reference(["http://hl7.org/fhir/StructureDefinition/Specimen"], ["bundled", "referenced"]),
      "Observation.focus": reference(["http://hl7.org/fhir/StructureDefinition/Resource"], ["contained"])
    })
  ], 1)
  return profiled
}

const observation = (extra: Record<string, unknown>) => ({
  resourceType: "Observation",
  meta: { profile: [referringObservation] },
  text: narrative,
  status: "final",
  code: { text: "weight" },
  ...extra
})

const found = (issues: ReadonlyArray<{ severity: string; expression: string; diagnostics: string }>, text: string) =>
  issues.filter((issue) => issue.diagnostics.includes(text)).map((issue) => [issue.severity, issue.expression])

describe("reference targets against target profiles", () => {
  withCatalog("a contained or bundled target that meets none of the element's target profiles is an error", async (c) => {
    const p = await withProfiles(c)
    const nameless = observation({ contained: [{ resourceType: "Patient", id: "p", gender: "male" }], subject: { reference: "#p" } })
    expect(found(validateResource(nameless, p), "matches none of the profiles")).toEqual([["error", "Observation.subject"]])
    expect(validateResource(nameless, p).find((issue) => issue.diagnostics.includes("matches none"))!.diagnostics).toContain("Patient.name: minimum required = 1")
    const named = observation({ contained: [{ resourceType: "Patient", id: "p", name: [{ family: "Chalmers" }] }], subject: { reference: "#p" } })
    expect(found(validateResource(named, p), "matches none of the profiles")).toEqual([])
    // In a Bundle, the entry a reference resolves to is checked the same way.
    const bundle = (patient: Record<string, unknown>) => ({
      resourceType: "Bundle",
      type: "collection",
      entry: [
        { fullUrl: "urn:uuid:2b8a0d4e-5b7f-4b7e-9f4a-0c1d2e3f4a5b", resource: observation({ subject: { reference: "urn:uuid:4c7d9e2a-1b3c-4d5e-8f6a-7b8c9d0e1f2a" } }) },
        { fullUrl: "urn:uuid:4c7d9e2a-1b3c-4d5e-8f6a-7b8c9d0e1f2a", resource: { resourceType: "Patient", text: narrative, ...patient } }
      ]
    })
    expect(found(validateResource(bundle({ gender: "male" }), p), "matches none of the profiles")).toEqual([["error", "Bundle.entry[0].resource.subject"]])
    expect(found(validateResource(bundle({ name: [{ family: "Chalmers" }] }), p), "matches none of the profiles")).toEqual([])
  })

  withCatalog("a target that meets several of the element's target profiles is a warning", async (c) => {
    const p = await withProfiles(c)
    const both = observation({
      contained: [{ resourceType: "Patient", id: "p", name: [{ family: "Chalmers" }], gender: "male" }],
      subject: { reference: "#p" },
      performer: [{ reference: "#p" }]
    })
    expect(found(validateResource(both, p), "matches several of the profiles")).toEqual([["warning", "Observation.performer[0]"]])
    const one = observation({ contained: [{ resourceType: "Patient", id: "p", name: [{ family: "Chalmers" }] }], subject: { reference: "#p" }, performer: [{ reference: "#p" }] })
    expect(found(validateResource(one, p), "matches several of the profiles")).toEqual([])
  })

  withCatalog("a written reference to a held resource of a type no target profile is for is an error", (c) => {
    const written = validateForWrite({ resourceType: "Observation", status: "final", code: { text: "x" }, subject: { reference: "Medication/1" } }, c)
    const check = referenceCheck("fhir", "http://server.test/fhir", c)
    check.add("Observation", written.references)
    // Under the `fhir` policy nothing is looked up in the database.
    const issues = Effect.runSync(check.verify(undefined as never))
    expect(found(issues, "refers to a Medication (Medication/1) where only")).toEqual([["error", "Observation.subject"]])
    const fine = referenceCheck("fhir", "http://server.test/fhir", c)
    fine.add("Observation", validateForWrite({ resourceType: "Observation", status: "final", code: { text: "x" }, subject: { reference: "Patient/1" } }, c).references)
    expect(Effect.runSync(fine.verify(undefined as never))).toEqual([])
  })
})

describe("aggregation modes", () => {
  withCatalog("a contained target where the profile's aggregation does not allow one is an error", async (c) => {
    const p = await withProfiles(c)
    const contained = observation({ contained: [{ resourceType: "Specimen", id: "s" }], specimen: { reference: "#s" } })
    expect(found(validateResource(contained, p), "which the aggregation mode(s) of this element (bundled, referenced) do not allow")).toEqual([["error", "Observation.specimen"]])
    expect(found(validateResource(observation({ specimen: { reference: "Specimen/s" } }), p), "aggregation")).toEqual([])
  })

  withCatalog("a reference that must be contained or bundled but is found in neither is an error", async (c) => {
    const p = await withProfiles(c)
    const elsewhere = observation({ focus: [{ reference: "Patient/123" }] })
    expect(found(validateResource(elsewhere, p), "do not allow a reference elsewhere")).toEqual([["error", "Observation.focus[0]"]])
    const contained = observation({ contained: [{ resourceType: "Patient", id: "p" }], focus: [{ reference: "#p" }] })
    expect(found(validateResource(contained, p), "aggregation")).toEqual([])
    // Outside a Bundle a `bundled` mode is not held against a reference: a transaction's entries are
    // validated one by one, their references already rewritten.
    expect(found(validateResource(observation({ subject: { reference: "Patient/123" } }), p), "aggregation")).toEqual([])
    const bundled = {
      resourceType: "Bundle",
      type: "collection",
      entry: [
        { fullUrl: "http://server.test/fhir/Observation/o", resource: { ...observation({ subject: { reference: "Patient/123" } }), id: "o" } },
        { fullUrl: "http://server.test/fhir/Patient/123", resource: { resourceType: "Patient", id: "123", text: narrative, name: [{ family: "Chalmers" }] } }
      ]
    }
    expect(found(validateResource(bundled, p), "aggregation")).toEqual([])
    const missing = { ...bundled, entry: [bundled.entry[0]] }
    expect(found(validateResource(missing, p), "do not allow a reference elsewhere")).toEqual([["error", "Bundle.entry[0].resource.subject"]])
  })
})

describe("conditional references", () => {
  withCatalog("the query of a conditional reference must be a search: name=value pairs", (c) => {
    const transaction = (reference: string) => ({
      resourceType: "Bundle",
      type: "transaction",
      entry: [{
        fullUrl: "urn:uuid:0f6d5c3b-2a19-4e8f-b7a6-5d4c3b2a1908",
        resource: { resourceType: "Observation", text: narrative, status: "final", code: { text: "x" }, subject: { reference } },
        request: { method: "POST", url: "Observation" }
      }]
    })
    for (const bad of ["Patient?identifier", "Patient?", "Patient?identifier=a=b", "Patient?na me=x"]) {
      expect(found(validateResource(transaction(bad), c), "is not a valid search"), bad).toEqual([["error", "Bundle.entry[0].resource.subject"]])
    }
    for (const good of ["Patient?identifier=http://example.org/mrn|123", "Patient?name=peter&birthdate=2000-01-01", "Patient?_id=a", "Patient?identifier:of-type=x"]) {
      expect(found(validateResource(transaction(good), c), "is not a valid search"), good).toEqual([])
    }
  })
})

describe("#x links", () => {
  withCatalog("a narrative link or image that names several things is ambiguous: a warning for a link, an error for an image", (c) => {
    const patient = (div: string) => ({
      resourceType: "Patient",
      text: { status: "generated", div: `<div xmlns="http://www.w3.org/1999/xhtml">${div}</div>` },
      contained: [{ resourceType: "Binary", id: "photo", contentType: "image/png" }],
      photo: [{ id: "photo", contentType: "image/png", url: "#photo" }]
    })
    expect(found(validateResource(patient('<a href="#photo">photo</a>'), c), "points at 2 things")).toEqual([["warning", "Patient.text.div"]])
    expect(found(validateResource(patient('<img src="#photo"/>'), c), "points at 2 things")).toEqual([["error", "Patient.text.div"]])
    const once = { ...patient('<a href="#photo">photo</a><img src="#photo"/>'), photo: [{ contentType: "image/png", url: "#photo" }] }
    expect(validateResource(once, c).filter((issue) => issue.expression === "Patient.text.div")).toEqual([])
    expect(found(validateResource(patient('<img src="#nothing"/>'), c), "The narrative's image '#nothing' points at nothing")).toEqual([["error", "Patient.text.div"]])
  })

  withCatalog("a uri, url or canonical #x must name something in the resource", (c) => {
    const questionnaire = (extra: Record<string, unknown>) => ({
      resourceType: "Questionnaire",
      text: narrative,
      status: "draft",
      item: [{ linkId: "1", text: "colour", type: "choice", answerValueSet: "#colours" }],
      ...extra
    })
    expect(found(validateResource(questionnaire({}), c), "The URL '#colours' is not valid")).toEqual([["error", "Questionnaire.item[0].answerValueSet"]])
    const colours = { resourceType: "ValueSet", id: "colours", status: "draft", compose: { include: [{ system: "http://example.org/colours" }] } }
    expect(found(validateResource(questionnaire({ contained: [colours] }), c), "The URL '#colours'")).toEqual([])
    const patient = { resourceType: "Patient", text: narrative, implicitRules: "#rules", meta: { source: "#node-7" } }
    expect(found(validateResource(patient, c), "looks like a link inside the resource")).toEqual([["warning", "Patient.implicitRules"], ["information", "Patient.meta.source"]])
  })

  withCatalog("a link to fullUrl#id in a document names exactly one thing of that entry", (c) => {
    const document = (subject: string, patient: Record<string, unknown>) => ({
      resourceType: "Bundle",
      identifier: { system: "http://example.org/documents", value: "1" },
      type: "document",
      timestamp: "2024-01-01T00:00:00Z",
      entry: [
        {
          fullUrl: "urn:uuid:8e1f6c2a-3b4d-4e5f-9a6b-7c8d9e0f1a2b",
          resource: {
            resourceType: "Composition",
            text: narrative,
            status: "final",
            type: { text: "note" },
            date: "2024-01-01",
            author: [{ display: "Dr. A" }],
            title: "Note",
            subject: { reference: subject }
          }
        },
        { fullUrl: "urn:uuid:1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d", resource: { resourceType: "Patient", text: narrative, ...patient } }
      ]
    })
    const name = { id: "n1", family: "Chalmers" }
    const twice = { text: { status: "generated", div: '<div xmlns="http://www.w3.org/1999/xhtml"><span id="n1">Chalmers</span></div>' }, name: [name] }
    expect(found(validateResource(document("urn:uuid:1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d#n1", twice), c), "Found 2 matches for the fragment 'n1'"))
      .toEqual([["error", "Bundle.entry[0].resource.subject.reference"]])
    expect(found(validateResource(document("urn:uuid:1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d#n2", { name: [name] }), c), "Can't find '#n2'"))
      .toEqual([["information", "Bundle.entry[0].resource.subject.reference"]])
    const once = validateResource(document("urn:uuid:1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d#n1", { name: [name] }), c)
    expect(found(once, "the fragment").concat(found(once, "Can't find"))).toEqual([])
  })
})
