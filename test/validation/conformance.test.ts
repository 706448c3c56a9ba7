import { describe, expect } from "vitest"
import type { Catalog } from "../../src/catalog/Catalog.ts"
import type { Issue } from "../../src/validation/Validator.ts"
import { catalogTests, problems } from "./support.ts"

const withCatalog = catalogTests()

/** The errors and warnings whose text contains `text`. */
const saying = (c: Catalog, resource: unknown, text: string): ReadonlyArray<Issue> =>
  problems(c, resource).filter((issue) => issue.diagnostics.includes(text))

const searchParameter = (fields: Record<string, unknown>) => ({
  resourceType: "SearchParameter",
  url: "http://example.org/SearchParameter/nickname",
  name: "Nickname",
  status: "active",
  description: "A name",
  code: "nickname",
  base: ["Organization"],
  type: "string",
  expression: "Organization.name | Organization.alias",
  ...fields
})

describe("SearchParameter", () => {
  withCatalog("a code with a character that means something in a search url is a warning", (c) => {
    expect(saying(c, searchParameter({ code: "nick.name" }), "contains '.'")).toEqual([expect.objectContaining({
      severity: "warning", expression: "SearchParameter.code"
    })])
    expect(saying(c, searchParameter({ code: "nick$name|x" }), "contains")).toHaveLength(2)
    expect(saying(c, searchParameter({}), "contains")).toEqual([])
  })

  withCatalog("an expression on a resource type that is not a base is an error", (c) => {
    const found = saying(c, searchParameter({ base: ["Patient"] }), "Error in search expression")
    expect(found).toEqual([expect.objectContaining({ severity: "error", code: "invalid", expression: "SearchParameter.expression" })])
    expect(found[0]!.diagnostics).toContain("'Organization' is not one of the bases")
    expect(saying(c, searchParameter({ base: ["Organization", "Patient"], expression: "Organization.name | Patient.name" }), "Error in search expression")).toEqual([])
    expect(saying(c, searchParameter({ base: ["Resource"], expression: "Organization.name" }), "Error in search expression")).toEqual([])
  })

  withCatalog("a derived search parameter of another type than its parent is an error", (c) => {
    const derived = (type: string) => searchParameter({ derivedFrom: "http://hl7.org/fhir/SearchParameter/Organization-name", type })
    expect(saying(c, derived("token"), "differs from the type")).toEqual([expect.objectContaining({
      severity: "error", expression: "SearchParameter",
      diagnostics: "The type token differs from the type string of the search parameter this one is derived from (http://hl7.org/fhir/SearchParameter/Organization-name)"
    })])
    expect(saying(c, derived("string"), "derived from")).toEqual([])
  })

  withCatalog("a derived search parameter on a base its parent does not have is an error", (c) => {
    const found = saying(c, searchParameter({
      derivedFrom: "http://hl7.org/fhir/SearchParameter/Organization-name", base: ["Organization", "Patient"], expression: "Organization.name | Patient.name"
    }), "is not a base")
    expect(found).toEqual([expect.objectContaining({ severity: "error", expression: "SearchParameter" })])
    expect(found[0]!.diagnostics).toContain("base[1]")
    expect(found[0]!.diagnostics).toContain("Patient")
  })

  withCatalog("a derived search parameter whose expression differs from its parent's is a warning", (c) => {
    const derived = (expression: string) => searchParameter({ derivedFrom: "http://hl7.org/fhir/SearchParameter/Organization-name", expression })
    expect(saying(c, derived("Organization.name"), "does not match the expression")).toEqual([expect.objectContaining({
      severity: "warning", expression: "SearchParameter.expression"
    })])
    // The same branches in another order, with other spacing.
    expect(saying(c, derived("Organization.alias|Organization.name"), "does not match the expression")).toEqual([])
  })

  withCatalog("a search parameter derived from an unknown one is a warning", (c) => {
    expect(saying(c, searchParameter({ derivedFrom: "http://example.org/SearchParameter/unknown" }), "is unknown")).toEqual([expect.objectContaining({
      severity: "warning", expression: "SearchParameter.derivedFrom"
    })])
  })

  withCatalog("a composite search parameter with fewer than two components is an error", (c) => {
    const composite = (n: number) => searchParameter({
      type: "composite",
      expression: "Organization",
      component: [
        { definition: "http://hl7.org/fhir/SearchParameter/Organization-name", expression: "name" },
        { definition: "http://hl7.org/fhir/SearchParameter/Organization-type", expression: "type" }
      ].slice(0, n)
    })
    expect(saying(c, composite(1), "two or more components")).toEqual([expect.objectContaining({ severity: "error", expression: "SearchParameter" })])
    expect(saying(c, composite(2), "two or more components")).toEqual([])
  })
})

describe("CapabilityStatement", () => {
  const capabilities = (type: string) => ({
    resourceType: "CapabilityStatement",
    status: "active",
    date: "2024-01-01",
    kind: "instance",
    fhirVersion: "4.0.1",
    format: ["json"],
    implementation: { description: "A server" },
    rest: [{
      mode: "server",
      resource: [{
        type: "AllergyIntolerance",
        searchParam: [{ name: "clinical-status", definition: "http://hl7.org/fhir/SearchParameter/AllergyIntolerance-clinical-status", type }]
      }]
    }]
  })

  withCatalog("a search parameter of another type than its definition is an error", (c) => {
    expect(saying(c, capabilities("date"), "Type mismatch")).toEqual([expect.objectContaining({
      severity: "error",
      code: "invalid",
      expression: "CapabilityStatement.rest[0].resource[0].searchParam[0]",
      diagnostics: "Type mismatch: the search parameter http://hl7.org/fhir/SearchParameter/AllergyIntolerance-clinical-status has the type token, but the type here is date"
    })])
    expect(saying(c, capabilities("token"), "Type mismatch")).toEqual([])
  })
})

describe("ImplementationGuide", () => {
  const guide = (fields: Record<string, unknown>) => ({
    resourceType: "ImplementationGuide",
    url: "http://example.org/ImplementationGuide/example",
    name: "Example",
    status: "draft",
    packageId: "example.fhir.guide",
    fhirVersion: ["4.0.1"],
    ...fields
  })

  withCatalog("a guide HL7 publishes states its standards status and work group", (c) => {
    const hl7 = guide({ url: "http://hl7.org/fhir/uv/example/ImplementationGuide/example" })
    expect(saying(c, hl7, "A guide HL7 publishes")).toEqual([
      expect.objectContaining({ severity: "error", expression: "ImplementationGuide", diagnostics: expect.stringContaining("standards status") }),
      expect.objectContaining({ severity: "error", expression: "ImplementationGuide", diagnostics: expect.stringContaining("work group") }),
      expect.objectContaining({ severity: "warning", expression: "ImplementationGuide", diagnostics: expect.stringContaining("maturity") })
    ])
    const stated = guide({
      url: "http://hl7.org/fhir/uv/example/ImplementationGuide/example",
      extension: [
        { url: "http://hl7.org/fhir/StructureDefinition/structuredefinition-standards-status", valueCode: "trial-use" },
        { url: "http://hl7.org/fhir/StructureDefinition/structuredefinition-wg", valueCode: "fhir" },
        { url: "http://hl7.org/fhir/StructureDefinition/structuredefinition-fmm", valueInteger: 1 }
      ]
    })
    expect(saying(c, stated, "A guide HL7 publishes")).toEqual([])
    expect(saying(c, guide({}), "A guide HL7 publishes")).toEqual([])
  })

  withCatalog("a dependency names the guide resource, and its version once", (c) => {
    const dependsOn = (dependency: Record<string, unknown>) => guide({ dependsOn: [dependency] })
    expect(saying(c, dependsOn({ uri: "http://example.org/other", version: "1.0.0" }), "should name the ImplementationGuide resource")).toEqual([
      expect.objectContaining({ severity: "error", expression: "ImplementationGuide.dependsOn[0]" })
    ])
    expect(saying(c, dependsOn({ uri: "http://guides.test/ImplementationGuide/other|1.0.0" }), "states none")).toHaveLength(1)
    expect(saying(c, dependsOn({ uri: "http://guides.test/ImplementationGuide/other|" , version: "1.0.0" }), "cannot end with '|'")).toHaveLength(1)
    expect(saying(c, dependsOn({ uri: "http://guides.test/ImplementationGuide/other", packageId: "example.fhir.other", version: "1.0 beta" }), "not a valid package version")).toHaveLength(1)
    expect(saying(c, dependsOn({ uri: "http://guides.test/ImplementationGuide/other|1.0.0", version: "2.0.0" }), "they must be the same")).toEqual([])
    expect(saying(c, dependsOn({ uri: "http://example.org/other|1.0.0", version: "2.0.0" }), "they must be the same")).toHaveLength(1)
    expect(saying(c, dependsOn({ uri: "http://guides.test/ImplementationGuide/other", packageId: "not a package" }), "not a valid package id")).toEqual([
      expect.objectContaining({ severity: "error", expression: "ImplementationGuide.dependsOn[0].packageId" })
    ])
    const good = dependsOn({ uri: "http://guides.test/ImplementationGuide/other", packageId: "example.fhir.other", version: "1.0.0" })
    expect(problems(c, good).filter((issue) => issue.expression.startsWith("ImplementationGuide.dependsOn"))).toEqual([])
  })

  withCatalog("a guide without a FHIR version is a warning", (c) => {
    expect(saying(c, guide({ fhirVersion: undefined }), "states no FHIR version")).toEqual([expect.objectContaining({ severity: "warning" })])
  })
})

const profile = (fields: Record<string, unknown>, elements: ReadonlyArray<Record<string, unknown>>) => ({
  resourceType: "StructureDefinition",
  url: "http://example.org/StructureDefinition/test",
  name: "Test",
  status: "draft",
  kind: "resource",
  abstract: false,
  type: "Observation",
  baseDefinition: "http://hl7.org/fhir/StructureDefinition/Observation",
  derivation: "constraint",
  differential: { element: [{ id: "Observation", path: "Observation" }, ...elements] },
  ...fields
})

describe("StructureDefinition", () => {
  withCatalog("a type profile for another type than the element's is an error", (c) => {
    const typed = (type: Record<string, unknown>) => profile({}, [{ id: "Observation.value[x]", path: "Observation.value[x]", type: [type] }])
    const found = saying(c, typed({ code: "Quantity", profile: ["http://hl7.org/fhir/StructureDefinition/Count"] }), "is for the type")
    expect(found).toEqual([expect.objectContaining({
      severity: "error",
      expression: "StructureDefinition.differential.element[1].type[0].profile[0]",
      diagnostics: "The profile http://hl7.org/fhir/StructureDefinition/Count is for the type Count, but the element Observation.value[x] has the type Quantity"
    })])
    expect(saying(c, typed({ code: "Quantity", profile: ["http://hl7.org/fhir/StructureDefinition/SimpleQuantity"] }), "is for the type")).toEqual([])
    expect(saying(c, typed({ code: "Quantity", profile: ["http://example.org/StructureDefinition/unknown"] }), "is unknown")).toEqual([
      expect.objectContaining({ severity: "warning", code: "not-found" })
    ])
  })

  withCatalog("a target profile that is not a resource, or on a type without targets, is an error", (c) => {
    const typed = (path: string, type: Record<string, unknown>) => profile({}, [{ id: path, path, type: [type] }])
    expect(saying(c, typed("Observation.subject", { code: "Reference", targetProfile: ["http://hl7.org/fhir/StructureDefinition/Quantity"] }), "which is not a resource")).toEqual([
      expect.objectContaining({ severity: "error", expression: "StructureDefinition.differential.element[1].type[0].targetProfile[0]" })
    ])
    expect(saying(c, typed("Observation.subject", { code: "Reference", targetProfile: ["http://hl7.org/fhir/StructureDefinition/Patient"] }), "is for the type")).toEqual([])
    expect(saying(c, typed("Observation.instantiates", { code: "canonical", targetProfile: ["http://hl7.org/fhir/StructureDefinition/Patient"] }), "not a canonical resource")).toHaveLength(1)
    expect(saying(c, typed("Observation.status", { code: "code", targetProfile: ["http://hl7.org/fhir/StructureDefinition/Patient"] }), "does not allow target profiles")).toEqual([
      expect.objectContaining({ severity: "error", diagnostics: "The type code does not allow target profiles" })
    ])
  })

  withCatalog("an extension profile on an element of the other modifier kind is an error", (c) => {
    const typed = (path: string, url: string) => profile({}, [{ id: path, path, type: [{ code: "Extension", profile: [url] }] }])
    const core = "http://hl7.org/fhir/StructureDefinition/"
    const modifier = `${core}request-doNotPerform`
    expect(saying(c, typed("Observation.extension", modifier), "is for a modifier extension")).toHaveLength(1)
    expect(saying(c, typed("Observation.modifierExtension", modifier), "modifier")).toEqual([])
    expect(saying(c, typed("Observation.modifierExtension", `${core}workflow-episodeOfCare`), "is not for a modifier extension")).toHaveLength(1)
  })

  withCatalog("a logical model's type is a url in the definition's namespace; a FHIR type is not redefined", (c) => {
    const logical = (type: string) => ({
      ...profile({}, []),
      url: "http://models.test/StructureDefinition/Boo", kind: "logical", type, derivation: "specialization",
      baseDefinition: "http://hl7.org/fhir/StructureDefinition/Element",
      differential: { element: [{ id: "Boo", path: "Boo" }] }
    })
    expect(saying(c, logical("Boo"), "is not defined by FHIR")).toEqual([expect.objectContaining({ severity: "error", expression: "StructureDefinition.type" })])
    expect(saying(c, logical("http://other.org/models/Boo"), "should be that of the definition")).toEqual([expect.objectContaining({ severity: "warning" })])
    expect(problems(c, logical("http://models.test/StructureDefinition/Boo")).filter((i) => i.expression === "StructureDefinition.type" && i.code !== "code-invalid")).toEqual([])
    expect(saying(c, { ...logical("http://models.test/StructureDefinition/Boo"), kind: "resource" }, "can only be defined by a logical model")).toEqual([
      expect.objectContaining({ severity: "error", expression: "StructureDefinition.type" })
    ])
    // A specialization of a FHIR type by another url.
    const special = profile({ derivation: "specialization" }, [])
    expect(saying(c, special, "can only be used by a definition that constrains it")).toHaveLength(1)
  })

  withCatalog("a constraint keeps the type and kind of its base; a specialization does not keep its type", (c) => {
    expect(saying(c, profile({ type: "Patient", differential: { element: [{ id: "Patient", path: "Patient" }] } }, []), "of a constraint is the type Observation")).toEqual([
      expect.objectContaining({ severity: "error", expression: "StructureDefinition.type" })
    ])
    expect(saying(c, profile({ kind: "complex-type" }, []), "is not the kind resource")).toEqual([
      expect.objectContaining({ severity: "error", expression: "StructureDefinition.kind" })
    ])
    const model = {
      ...profile({}, []),
      url: "http://example.org/StructureDefinition/Foo", kind: "logical", type: "http://example.org/StructureDefinition/Foo",
      baseDefinition: "http://hl7.org/fhir/StructureDefinition/Element", derivation: "specialization",
      differential: { element: [{ id: "Foo", path: "Foo" }] }
    }
    expect(saying(c, model, "of a specialization")).toEqual([])
    expect(saying(c, { ...model, baseDefinition: "http://hl7.org/fhir/StructureDefinition/MetadataResource", kind: "resource", type: "MetadataResource" }, "of a specialization")).toHaveLength(1)
    expect(saying(c, profile({ derivation: undefined }, []), "so it states its derivation")).toEqual([expect.objectContaining({ severity: "error" })])
    expect(saying(c, profile({}, [{ id: "Observation.status", path: "Observation.status", meaningWhenMissing: "final" }]), "which a profile cannot state")).toEqual([
      expect.objectContaining({ severity: "error", expression: "StructureDefinition.differential.element[1].meaningWhenMissing" })
    ])
    expect(saying(c, profile({}, []), "StructureDefinition")).toEqual([])
  })

  withCatalog("a definition whose base leads back to it is an error", (c) => {
    const circular = profile({
      url: "http://hl7.org/fhir/StructureDefinition/DomainResource", type: "Patient", derivation: "constraint",
      baseDefinition: "http://hl7.org/fhir/StructureDefinition/Patient", differential: { element: [{ id: "Patient", path: "Patient" }] }
    }, [])
    expect(saying(c, circular, "circular")).toEqual([expect.objectContaining({ severity: "error", expression: "StructureDefinition.baseDefinition" })])
  })

  withCatalog("an unknown base definition is a warning", (c) => {
    expect(saying(c, profile({ baseDefinition: "http://example.org/StructureDefinition/unknown" }, []), "base definition")).toEqual([
      expect.objectContaining({ severity: "warning", code: "not-found", expression: "StructureDefinition.baseDefinition" })
    ])
  })

  withCatalog("element paths start with the type, and the root is not sliced", (c) => {
    expect(saying(c, profile({}, [{ id: "Patient.name", path: "Patient.name" }]), "does not start with")).toEqual([
      expect.objectContaining({ severity: "error", expression: "StructureDefinition.differential.element[1]" })
    ])
    const sliced = profile({ differential: { element: [{ id: "Observation", path: "Observation", slicing: { rules: "open", discriminator: [{ type: "value", path: "id" }] } }] } }, [])
    expect(saying(c, sliced, "root of a profile")).toEqual([expect.objectContaining({ severity: "error", expression: "StructureDefinition.differential.element[0].slicing" })])
  })

  withCatalog("a differential path that is not an element of the base is an error", (c) => {
    const paths = (path: string) => profile({}, [{ id: path, path }])
    expect(saying(c, paths("Observation.valueBla"), "is not an element of the base")).toEqual([expect.objectContaining({
      severity: "error", expression: "StructureDefinition.differential.element[1]"
    })])
    expect(saying(c, paths("Observation.code.codingg"), "is not an element of the base")).toHaveLength(1)
    for (const good of ["Observation.valueQuantity", "Observation.valueQuantity.unit", "Observation.code.coding.system", "Observation.component.code", "Observation.status.extension", "Observation.extension.value[x]", "Observation.subject.identifier.value"]) {
      expect(saying(c, paths(good), "is not an element of the base")).toEqual([])
    }
    const questionnaire = profile({ type: "Questionnaire", baseDefinition: "http://hl7.org/fhir/StructureDefinition/Questionnaire", differential: { element: [{ id: "Questionnaire.item.item.linkId", path: "Questionnaire.item.item.linkId" }] } }, [])
    expect(saying(c, questionnaire, "is not an element of the base")).toEqual([])
  })

  withCatalog("a fixed value that differs from the one its base fixes is an error", (c) => {
    const extension = (url: string) => ({
      ...profile({}, []),
      url: "http://example.org/StructureDefinition/derived", type: "Extension", kind: "complex-type",
      baseDefinition: "http://hl7.org/fhir/StructureDefinition/patient-birthPlace",
      differential: { element: [{ id: "Extension", path: "Extension" }, { id: "Extension.url", path: "Extension.url", fixedUri: url }] }
    })
    expect(saying(c, extension("http://example.org/StructureDefinition/derived"), "the base definition")).toEqual([expect.objectContaining({
      severity: "error", expression: "StructureDefinition.differential.element[1].fixedUri"
    })])
    expect(saying(c, extension("http://hl7.org/fhir/StructureDefinition/patient-birthPlace"), "the base definition")).toEqual([])
  })

  withCatalog("a binding, length or range on an element whose types cannot carry it is an error", (c) => {
    const constrained = (element: Record<string, unknown>) => profile({}, [{ id: "Observation.effective[x]", path: "Observation.effective[x]", ...element }])
    expect(saying(c, constrained({ type: [{ code: "dateTime" }], binding: { strength: "required", valueSet: "http://hl7.org/fhir/ValueSet/observation-status" } }), "cannot carry")).toEqual([
      expect.objectContaining({ severity: "error", expression: "StructureDefinition.differential.element[1].binding", diagnostics: "The element has a binding, but its types (dateTime) cannot carry one" })
    ])
    expect(saying(c, constrained({ type: [{ code: "Period" }], maxLength: 5 }), "cannot carry")).toHaveLength(1)
    expect(saying(c, constrained({ type: [{ code: "Period" }], minValueDate: "2020-01-01" }), "cannot carry")).toHaveLength(1)
    expect(saying(c, constrained({ type: [{ code: "dateTime" }], minValueDateTime: "2020-01-01" }), "cannot carry")).toEqual([])
  })

  withCatalog("a fixed, pattern or default value of a type the snapshot element does not have is an error", (c) => {
    const snapshot = (element: Record<string, unknown>) => profile({ snapshot: { element: [{ id: "Observation", path: "Observation", min: 0, max: "*" }, { id: "Observation.status", path: "Observation.status", min: 1, max: "1", type: [{ code: "code" }], ...element }] } }, [])
    expect(saying(c, snapshot({ fixedString: "final" }), "which is not one of its types")).toEqual([expect.objectContaining({
      severity: "error", expression: "StructureDefinition.snapshot.element[1].fixedString"
    })])
    expect(saying(c, snapshot({ patternCode: "final" }), "which is not one of its types")).toEqual([])
  })

  withCatalog("a snapshot element without types or content reference is an error", (c) => {
    const snapshot = profile({ snapshot: { element: [{ id: "Observation", path: "Observation", min: 0, max: "*" }, { id: "Observation.status", path: "Observation.status", min: 1, max: "1" }] } }, [])
    expect(saying(c, snapshot, "has no types and no content reference")).toEqual([expect.objectContaining({
      severity: "error", expression: "StructureDefinition.snapshot.element[1]"
    })])
  })
})

describe("Measure", () => {
  const measure = (fields: Record<string, unknown>) => ({ resourceType: "Measure", status: "draft", ...fields })
  const population = (code: string, extra: Record<string, unknown> = {}) => ({
    code: { coding: [{ system: "http://terminology.hl7.org/CodeSystem/measure-population", code }] },
    criteria: { language: "text/cql", expression: code },
    ...extra
  })

  withCatalog("a Measure without groups, or with groups and populations not told apart by codes, is warned of", (c) => {
    expect(saying(c, measure({}), "at least one group")).toEqual([expect.objectContaining({ severity: "warning", expression: "Measure" })])
    const groups = measure({ library: ["http://example.org/Library/l"], group: [{ population: [population("initial-population"), { criteria: { language: "text/cql", expression: "X" } }] }, {}] })
    const found = problems(c, groups).filter((i) => i.severity === "warning" && i.expression.startsWith("Measure.group"))
    expect(found.map((i) => i.expression)).toEqual(["Measure.group[0]", "Measure.group[0].population[1]", "Measure.group[1]", "Measure.group[1]"])
    expect(problems(c, measure({ library: ["http://example.org/Library/l"], group: [{ population: [population("initial-population")] }] })).filter((i) => i.expression.startsWith("Measure.group"))).toEqual([])
  })

  withCatalog("a CQL stratifier criterion in a Measure without a library is an error", (c) => {
    const stratified = (fields: Record<string, unknown>) => measure({
      ...fields, group: [{ population: [population("initial-population")], stratifier: [{ criteria: { language: "text/cql", expression: "Age" } }] }]
    })
    expect(saying(c, stratified({}), "names no Library")).toEqual([expect.objectContaining({
      severity: "error", expression: "Measure.group[0].stratifier[0].criteria"
    })])
    expect(saying(c, stratified({ library: ["http://example.org/Library/l"] }), "names no Library")).toEqual([])
    const fhirpath = measure({ group: [{ population: [population("initial-population")], stratifier: [{ criteria: { language: "text/fhirpath", expression: "age" } }] }] })
    expect(saying(c, fhirpath, "is not supported")).toEqual([expect.objectContaining({ severity: "warning", expression: "Measure.group[0].stratifier[0].criteria" })])
  })
})

describe("MeasureReport", () => {
  const code = (value: string) => ({ coding: [{ system: "http://terminology.hl7.org/CodeSystem/measure-population", code: value }] })
  const report = (fields: Record<string, unknown>, group: Record<string, unknown>) => ({
    resourceType: "MeasureReport",
    status: "complete",
    type: "summary",
    measure: "http://example.org/Measure/m",
    period: { start: "2024-01-01", end: "2024-12-31" },
    group: [group],
    ...fields
  })

  withCatalog("only a subject-list report lists subjects, and its count agrees with the list", (c) => {
    const listed = report({ type: "summary" }, { population: [{ code: code("initial-population"), count: 2, subjectResults: { reference: "List/1" } }] })
    expect(saying(c, listed, "does not list subjects")).toEqual([expect.objectContaining({
      severity: "error", expression: "MeasureReport.group[0].population[0]"
    })])
    expect(saying(c, report({}, { population: [{ code: code("initial-population") }] }), "A count should be given")).toEqual([expect.objectContaining({ severity: "warning" })])
    const subjects = (count: number) => report({
      type: "subject-list",
      contained: [{ resourceType: "List", id: "s", status: "current", mode: "snapshot", entry: [{ item: { reference: "Patient/1" } }, { item: { reference: "Patient/2" } }] }]
    }, { population: [{ code: code("initial-population"), count, subjectResults: { reference: "#s" } }] })
    expect(saying(c, subjects(500), "does not match the number of subjects")).toEqual([expect.objectContaining({
      severity: "error", expression: "MeasureReport.group[0].population[0]",
      diagnostics: "The count 500 does not match the number of subjects listed (2)"
    })])
    expect(saying(c, subjects(2), "number of subjects")).toEqual([])
  })

  withCatalog("a data-collection report has no score", (c) => {
    expect(saying(c, report({ type: "data-collection" }, { measureScore: { value: 0.5 } }), "has no measureScore")).toEqual([expect.objectContaining({
      severity: "error", expression: "MeasureReport.group[0].measureScore"
    })])
  })

  withCatalog("the groups, populations, stratifiers and score of a report match its contained Measure", (c) => {
    const theMeasure = (scoring: string) => ({
      resourceType: "Measure", id: "m", status: "active",
      scoring: { coding: [{ system: "http://terminology.hl7.org/CodeSystem/measure-scoring", code: scoring }] },
      group: [
        { code: { coding: [{ system: "http://example.org/groups", code: "a" }] }, population: [{ code: code("initial-population"), criteria: { language: "text/fhirpath", expression: "true" } }, { code: code("numerator"), criteria: { language: "text/fhirpath", expression: "true" } }], stratifier: [{ id: "age", code: { text: "age" } }] },
        { code: { coding: [{ system: "http://example.org/groups", code: "b" }] }, population: [{ code: code("initial-population"), criteria: { language: "text/fhirpath", expression: "true" } }] }
      ]
    })
    const groupA = (extra: Record<string, unknown>) => ({
      code: { coding: [{ system: "http://example.org/groups", code: "a" }] },
      population: [{ code: code("initial-population"), count: 1 }, { code: code("numerator"), count: 1 }],
      stratifier: [{ code: [{ text: "age" }] }],
      ...extra
    })
    const groupB = { code: { coding: [{ system: "http://example.org/groups", code: "b" }] }, population: [{ code: code("initial-population"), count: 1 }], measureScore: { value: 1 } }
    const full = (scoring: string, groups: ReadonlyArray<unknown>) => ({ ...report({ measure: "#m", contained: [theMeasure(scoring)] }, {}), group: groups })
    const issues = (resource: unknown) => problems(c, resource).filter((i) => (i.expression.startsWith("MeasureReport.group") && !i.expression.includes(".coding[")) || i.expression === "MeasureReport")
    expect(issues(full("proportion", [groupA({ measureScore: { value: 0.5 } }), groupB]))).toEqual([])
    // A group whose code the Measure does not have, and the Measure's group b unreported.
    const unknown = issues(full("proportion", [groupA({ measureScore: { value: 0.5 } }), { ...groupB, code: { coding: [{ system: "http://example.org/groups", code: "c" }] } }]))
    expect(unknown).toEqual([
      expect.objectContaining({ severity: "error", expression: "MeasureReport.group[1]", diagnostics: expect.stringContaining("matches no group of the Measure") }),
      expect.objectContaining({ severity: "error", expression: "MeasureReport", diagnostics: expect.stringContaining("http://example.org/groups#b") })
    ])
    // A report of one group for a Measure of one group: the codes, when both have one, agree.
    const single = (groupCode: unknown) => ({
      ...report({ measure: "#m", contained: [{ ...theMeasure("cohort"), group: [theMeasure("cohort").group[0]] }] }, {}),
      group: [{ ...groupA({}), code: groupCode }]
    })
    expect(issues(single({ coding: [{ system: "http://example.org/groups", code: "b" }] }))).toEqual([
      expect.objectContaining({ severity: "error", expression: "MeasureReport.group[0]", diagnostics: expect.stringContaining("does not match the code of the Measure's group") })
    ])
    expect(issues(single({ coding: [{ code: "a" }] }))).toEqual([
      expect.objectContaining({ severity: "error", expression: "MeasureReport.group[0]", diagnostics: expect.stringContaining("needs both a system and a code") })
    ])
    expect(issues(single({ coding: [{ system: "http://example.org/groups", code: "a" }] }))).toEqual([])
    // The same group twice.
    expect(issues(full("proportion", [groupA({ measureScore: { value: 0.5 } }), groupA({ measureScore: { value: 0.5 } }), groupB])).map((i) => i.diagnostics)).toContain("The code of the group is the code of another group of the report")
    // A population the Measure's group does not have, and one of its populations missing.
    const populations = issues(full("proportion", [groupA({ measureScore: { value: 0.5 }, population: [{ code: code("initial-population"), count: 1 }, { code: code("denominator"), count: 1 }] }), groupB]))
    expect(populations.map((i) => i.expression)).toEqual(["MeasureReport.group[0].population[1]", "MeasureReport.group[0]"])
    // A stratifier missing.
    const { stratifier: _, ...unstratified } = groupA({ measureScore: { value: 0.5 } })
    expect(issues(full("proportion", [unstratified, groupB]))).toEqual([
      expect.objectContaining({ severity: "error", expression: "MeasureReport.group[0]", diagnostics: expect.stringContaining("no stratifier for the Measure's stratifier with code ''age'' (id age)") })
    ])
    // Scores: out of range for a proportion, absent, or given for a cohort.
    expect(issues(full("proportion", [groupA({ measureScore: { value: 1.5 } }), groupB]))).toEqual([
      expect.objectContaining({ severity: "error", expression: "MeasureReport.group[0].measureScore.value", diagnostics: "The score of a proportion is between 0 and 1" })
    ])
    expect(issues(full("proportion", [groupA({}), groupB]))).toEqual([
      expect.objectContaining({ severity: "error", expression: "MeasureReport.group[0]", diagnostics: "A measureScore is required when the Measure's scoring is proportion" })
    ])
    expect(issues(full("cohort", [groupA({}), groupB]))).toEqual([
      expect.objectContaining({ severity: "error", expression: "MeasureReport.group[1].measureScore", diagnostics: "A measure whose scoring is 'cohort' has no measureScore" })
    ])
  })
})
