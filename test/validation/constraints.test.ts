/** The constraints a StructureDefinition states: keys, expressions that parse, one expression per key, sources. */
import { describe, expect } from "vitest"
import type { Catalog } from "../../src/catalog/Catalog.ts"
import { validateResource } from "../../src/validation/Validator.ts"
import { catalogTests, narrative } from "./support.ts"

const withCatalog = catalogTests()

const url = "http://example.org/StructureDefinition/constrained-patient"

/** A Patient profile whose root element in `part` carries `constraints`. */
const profile = (c: Catalog, part: "snapshot" | "differential", constraints: ReadonlyArray<Record<string, unknown>>, extra: Record<string, unknown> = {}) => {
  const base = c.structureDefinitionForType("Patient")!.resource
  const elements = (base["snapshot"] as { element: ReadonlyArray<Record<string, unknown>> }).element
  const root = elements[0]!
  const element = part === "snapshot"
    ? [{ ...root, constraint: [...((root["constraint"] as ReadonlyArray<unknown>) ?? []), ...constraints] }, ...elements.slice(1)]
    : [{ id: "Patient", path: "Patient", constraint: constraints }]
  return {
    resourceType: "StructureDefinition", text: narrative, url, name: "ConstrainedPatient", status: "draft", kind: "resource", abstract: false,
    type: "Patient", baseDefinition: "http://hl7.org/fhir/StructureDefinition/Patient", derivation: "constraint", [part]: { element }, ...extra
  }
}

const constraint = (key: string, expression: string, fields: Record<string, unknown> = {}) => ({ key, severity: "error", human: "test", expression, ...fields })

const issuesAbout = (c: Catalog, resource: unknown, text: string) =>
  validateResource(resource, c).filter((issue) => issue.diagnostics.includes(text))

describe("StructureDefinition constraints", () => {
  withCatalog("an expression that does not parse is an error; one that parses is fine", (c) => {
    const bad = issuesAbout(c, profile(c, "snapshot", [constraint("tst-1", "name.where(")]), "tst-1")
    expect(bad).toEqual([expect.objectContaining({ severity: "error", expression: "StructureDefinition.snapshot.element[0].constraint[5].expression" })])
    expect(issuesAbout(c, profile(c, "snapshot", [constraint("tst-1", "name.exists()")]), "tst-1")).toEqual([])
  })

  withCatalog("one key with two expressions in the snapshot is an error", (c) => {
    const found = issuesAbout(c, profile(c, "snapshot", [constraint("tst-1", "name.exists()"), constraint("tst-1", "gender.exists()")]), "tst-1")
    expect(found.map((issue) => issue.severity)).toEqual(["error"])
    expect(found[0]!.diagnostics).toContain("differs from its earlier expression")
  })

  withCatalog("in the differential, a key of the base with another expression, and a foreign source, are errors", (c) => {
    const reused = issuesAbout(c, profile(c, "differential", [constraint("dom-2", "name.exists()")]), "dom-2")
    expect(reused).toEqual([expect.objectContaining({ severity: "error" })])
    expect(reused[0]!.diagnostics).toContain("already used by the base definition")
    const foreign = issuesAbout(c, profile(c, "differential", [constraint("tst-2", "name.exists()", { source: "http://example.org/other" })]), "tst-2")
    expect(foreign).toEqual([expect.objectContaining({ severity: "error", expression: "StructureDefinition.differential.element[0].constraint[0].source" })])
    expect(issuesAbout(c, profile(c, "differential", [constraint("tst-2", "name.exists()", { source: url })]), "tst-2")).toEqual([])
  })

  withCatalog("a constraint without an expression is information; a context invariant that does not parse is an error", (c) => {
    const noExpression = issuesAbout(c, profile(c, "differential", [{ key: "tst-3", severity: "error", human: "test" }]), "tst-3")
    expect(noExpression.map((issue) => issue.severity)).toEqual(["information"])
    const context = issuesAbout(c, profile(c, "differential", [], { contextInvariant: ["%extension.value.exists(", "true"] }), "context invariant")
    expect(context).toEqual([expect.objectContaining({ severity: "error", expression: "StructureDefinition.contextInvariant[0]" })])
  })
})
