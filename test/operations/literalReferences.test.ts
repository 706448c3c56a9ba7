/** The literal references of a resource, found through the R4 StructureDefinitions (what `$document` follows). */
import { describe, expect } from "vitest"
import { literalReferences } from "../../src/operations/literalReferences.ts"
import { catalogTests } from "../validation/support.ts"

const withCatalog = catalogTests()

const found = (catalog: Parameters<typeof literalReferences>[0], resource: Record<string, unknown>) =>
  literalReferences(catalog, resource).map(({ expression, reference }) => [expression, reference])

describe("literal references", () => {
  withCatalog("are every Reference.reference in JSON order, in backbone elements, nested sections, contained resources and extensions", (catalog) => {
    const composition = {
      resourceType: "Composition",
      contained: [{ resourceType: "Observation", id: "o1", status: "final", code: { text: "x" }, subject: { reference: "Patient/p2" } }],
      extension: [{ url: "http://example.org/x", valueReference: { reference: "Device/d1" } }],
      status: "final",
      subject: { reference: "Patient/p1", display: "Someone" },
      _date: { extension: [{ url: "http://example.org/y", valueReference: { reference: "Practitioner/pr2" } }] },
      date: "2020-01-01",
      author: [{ reference: "Practitioner/pr1" }, { display: "only a name" }, { identifier: { system: "http://example.org/ids", value: "7", assigner: { reference: "Organization/o9" } } }],
      relatesTo: [{ code: "replaces", targetReference: { reference: "Composition/old" } }, { code: "appends", targetIdentifier: { value: "1" } }],
      section: [{ title: "a", entry: [{ reference: "#o1" }], section: [{ title: "b", focus: { reference: "Condition/c1" }, entry: [{ reference: "Observation/ob1/_history/2" }] }] }]
    }
    expect(found(catalog, composition)).toEqual([
      ["Composition.contained[0].subject", "Patient/p2"],
      ["Composition.extension[0].valueReference", "Device/d1"],
      ["Composition.subject", "Patient/p1"],
      ["Composition._date.extension[0].valueReference", "Practitioner/pr2"],
      ["Composition.author[0]", "Practitioner/pr1"],
      ["Composition.author[2].identifier.assigner", "Organization/o9"],
      ["Composition.relatesTo[0].targetReference", "Composition/old"],
      ["Composition.section[0].entry[0]", "#o1"],
      ["Composition.section[0].section[0].focus", "Condition/c1"],
      ["Composition.section[0].section[0].entry[0]", "Observation/ob1/_history/2"]
    ])
    expect(literalReferences(catalog, composition).map((reference) => reference.element)).toContain("Composition.section.entry")
    expect(literalReferences(catalog, composition).find((reference) => reference.reference === "Composition/old")?.element).toBe("Composition.relatesTo.target")
  })

  withCatalog("leave out elements named reference of other types, and canonicals", (catalog) => {
    expect(found(catalog, {
      resourceType: "DetectedIssue",
      status: "final",
      patient: { reference: "Patient/p1" },
      reference: "http://example.org/literature/1",
      mitigation: [{ action: { text: "x" }, author: { reference: "Practitioner/pr1" } }]
    })).toEqual([["DetectedIssue.patient", "Patient/p1"], ["DetectedIssue.mitigation[0].author", "Practitioner/pr1"]])
    expect(found(catalog, {
      resourceType: "Immunization",
      status: "completed",
      vaccineCode: { text: "x" },
      patient: { reference: "Patient/p1" },
      occurrenceDateTime: "2020",
      education: [{ reference: "http://example.org/leaflet" }]
    })).toEqual([["Immunization.patient", "Patient/p1"]])
    expect(found(catalog, { resourceType: "QuestionnaireResponse", status: "completed", questionnaire: "http://example.org/Questionnaire/q" })).toEqual([])
  })

  withCatalog("go into the resources of a Bundle", (catalog) => {
    expect(found(catalog, {
      resourceType: "Bundle",
      type: "collection",
      entry: [{ fullUrl: "urn:uuid:1", resource: { resourceType: "Observation", status: "final", code: { text: "x" }, subject: { reference: "Patient/p1" } } }]
    })).toEqual([["Bundle.entry[0].resource.subject", "Patient/p1"]])
  })
})
