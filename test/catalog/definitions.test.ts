import { describe, expect, it } from "@effect/vitest"
import { build } from "../../src/catalog/Catalog.ts"
import { structure } from "./fixtures.ts"

describe("compiled definitions", () => {
  it("reads snapshot elements with types, bindings, constraints, fixed and pattern values", () => {
    const catalog = build([
      structure("Patient", {
        snapshot: {
          element: [
            { id: "Patient", path: "Patient", min: 0, max: "*", constraint: [{ key: "dom-2", severity: "error", human: "h", expression: "e" }] },
            {
              id: "Patient.gender",
              path: "Patient.gender",
              min: 1,
              max: "1",
              type: [{ code: "code" }],
              binding: { strength: "required", valueSet: "http://hl7.org/fhir/ValueSet/administrative-gender|4.0.1" },
              fixedCode: "female"
            },
            {
              id: "Patient.generalPractitioner",
              path: "Patient.generalPractitioner",
              type: [{ code: "Reference", targetProfile: ["http://hl7.org/fhir/StructureDefinition/Organization"] }],
              patternReference: { type: "Organization" },
              slicing: { discriminator: [{ type: "type", path: "$this" }], rules: "open" }
            },
            { id: "no-path" }
          ]
        }
      })
    ], 1)
    const elements = catalog.structureDefinitionForType("Patient")?.snapshot?.element ?? []
    expect(elements.map((e) => e.path)).toEqual(["Patient", "Patient.gender", "Patient.generalPractitioner"])
    const [root, gender, gp] = elements
    expect(root?.constraint[0]?.key).toBe("dom-2")
    expect(gender?.binding).toEqual({ strength: "required", valueSet: "http://hl7.org/fhir/ValueSet/administrative-gender|4.0.1" })
    expect(gender?.fixed).toBe("female")
    expect(gender?.pattern).toBeUndefined()
    expect(gp?.type[0]?.targetProfile).toEqual(["http://hl7.org/fhir/StructureDefinition/Organization"])
    expect(gp?.pattern).toEqual({ type: "Organization" })
    expect(gp?.slicing?.discriminator).toEqual([{ type: "type", path: "$this" }])
    expect(catalog.structureDefinitionForType("Patient")?.snapshot).toBe(catalog.structureDefinitionForType("Patient")?.snapshot)
  })

  it("flattens a code system's concept hierarchy with parent and child links", () => {
    const url = "http://example.org/CodeSystem/shapes"
    const catalog = build([{
      resourceType: "CodeSystem",
      url,
      content: "complete",
      caseSensitive: false,
      concept: [
        {
          code: "Polygon",
          display: "Polygon",
          concept: [{ code: "Triangle", concept: [{ code: "Equilateral" }] }, { code: "Square" }]
        },
        { code: "Rhombus", property: [{ code: "parent", valueCode: "Polygon" }] }
      ]
    }], 1)
    const shapes = catalog.codeSystem(url)
    expect(shapes?.concepts().map((c) => c.code)).toEqual(["Polygon", "Triangle", "Equilateral", "Square", "Rhombus"])
    expect(shapes?.concept("Equilateral")?.parents).toEqual(["Triangle"])
    expect(shapes?.concept("polygon")?.children).toEqual(["Triangle", "Square", "Rhombus"])
    expect(shapes?.concept("Circle")).toBeUndefined()
  })

  it("treats codes as case-sensitive unless the code system says otherwise", () => {
    const url = "http://example.org/CodeSystem/letters"
    const catalog = build([{ resourceType: "CodeSystem", url, content: "complete", concept: [{ code: "a" }, { code: "A" }] }], 1)
    expect(catalog.codeSystem(url)?.concept("A")?.code).toBe("A")
    expect(catalog.codeSystem(url)?.concepts()).toHaveLength(2)
  })

  it("reads a value set's compose includes and excludes", () => {
    const url = "http://example.org/ValueSet/shapes"
    const catalog = build([{
      resourceType: "ValueSet",
      url,
      compose: {
        include: [
          { system: "http://example.org/CodeSystem/shapes", concept: [{ code: "Square", display: "Square" }] },
          { system: "http://example.org/CodeSystem/shapes", filter: [{ property: "concept", op: "is-a", value: "Triangle" }] }
        ],
        exclude: [{ valueSet: ["http://example.org/ValueSet/round"] }]
      }
    }], 1)
    const compose = catalog.valueSet(url)?.compose
    expect(compose?.include[0]?.concept).toEqual([{ code: "Square", display: "Square" }])
    expect(compose?.include[1]?.filter).toEqual([{ property: "concept", op: "is-a", value: "Triangle" }])
    expect(compose?.exclude[0]?.valueSet).toEqual(["http://example.org/ValueSet/round"])
    expect(catalog.valueSet(url)?.hasExpansion).toBe(false)
  })
})
