/** Compartment rows from extraction, on the R4 catalog, and what they add to the backfill's fingerprints. */
import { beforeAll, describe, expect, it } from "vitest"
import { build, type Catalog } from "../../../src/catalog/Catalog.ts"
import { typeFingerprints } from "../../../src/search/backfill/fingerprint.ts"
import { extractIndex, type IndexRow } from "../../../src/search/extract/extractIndex.ts"
import { loadR4Conformance } from "../../support/r4Examples.ts"

let resources: ReadonlyArray<Record<string, unknown>> | undefined
let catalog: Catalog | undefined

beforeAll(async () => {
  resources = await loadR4Conformance()
  catalog = resources === undefined ? undefined : build(resources, 1)
}, 300_000)

const compartments = (rows: ReadonlyArray<IndexRow>): Array<string> =>
  rows.flatMap((row) => (row.kind === "compartment" ? [`${row.code}/${row.targetId}`] : [])).sort()

describe("compartment rows", () => {
  it("put an Observation in its patient's, performer's, device's and encounter's compartments, each once", (context) => {
    if (catalog === undefined) return context.skip()
    const rows = extractIndex({
      resourceType: "Observation",
      id: "o1",
      status: "final",
      code: { text: "x" },
      // subject and patient both point at Patient/p1: one row.
      subject: { reference: "Patient/p1" },
      encounter: { reference: "Encounter/e1" },
      performer: [{ reference: "Practitioner/d1" }, { reference: "RelatedPerson/rp1" }],
      device: { reference: "Device/dev1" }
    }, catalog)
    expect(compartments(rows)).toEqual(["Device/dev1", "Encounter/e1", "Patient/p1", "Practitioner/d1", "RelatedPerson/rp1"])
  })

  it("make the focal resource a member of its own compartment, and a linked patient a member of the other's", (context) => {
    if (catalog === undefined) return context.skip()
    expect(compartments(extractIndex({ resourceType: "Patient", id: "p1", link: [{ other: { reference: "Patient/p2" }, type: "seealso" }] }, catalog)))
      .toEqual(["Patient/p1", "Patient/p2"])
    expect(compartments(extractIndex({ resourceType: "Encounter", id: "e1", status: "finished", class: { code: "AMB" } }, catalog))).toEqual(["Encounter/e1"])
    expect(compartments(extractIndex({ resourceType: "Organization", id: "org1", name: "x" }, catalog))).toEqual([])
  })

  it("leave out a subject that is no patient, an absolute or contained reference, and an identifier alone", (context) => {
    if (catalog === undefined) return context.skip()
    const observation = { resourceType: "Observation", id: "o1", status: "final", code: { text: "x" } }
    expect(compartments(extractIndex({ ...observation, subject: { reference: "Group/g1" } }, catalog))).toEqual([])
    expect(compartments(extractIndex({ ...observation, subject: { reference: "https://elsewhere.example/fhir/Patient/p1" } }, catalog))).toEqual([])
    expect(compartments(extractIndex({ ...observation, contained: [{ resourceType: "Patient", id: "c" }], subject: { reference: "#c" } }, catalog))).toEqual([])
    expect(compartments(extractIndex({ ...observation, subject: { type: "Patient", identifier: { system: "urn:mrn", value: "1" } } }, catalog))).toEqual([])
  })

  it("are part of a type's fingerprint: a changed CompartmentDefinition asks for the types it touches to be indexed again", (context) => {
    if (catalog === undefined || resources === undefined) return context.skip()
    const changed = build(resources.map((resource) => {
      if (resource["resourceType"] !== "CompartmentDefinition" || resource["code"] !== "Patient") return resource
      const entries = resource["resource"] as ReadonlyArray<Record<string, unknown>>
      return { ...resource, resource: entries.filter((entry) => entry["code"] !== "Observation") }
    }), 2)
    const before = typeFingerprints(catalog)
    const after = typeFingerprints(changed)
    const differ = [...before.keys()].filter((type) => before.get(type) !== after.get(type))
    expect(differ).toEqual(["Observation"])
    expect(compartments(extractIndex({ resourceType: "Observation", id: "o1", status: "final", code: { text: "x" }, subject: { reference: "Patient/p1" } }, changed)))
      .toEqual([])
  })
})
