import { describe, expect } from "vitest"
import { build, type Catalog } from "../../src/catalog/Catalog.ts"
import { validateResource, type Issue } from "../../src/validation/Validator.ts"
import { catalogTests, errors, loadResources, narrative } from "./support.ts"

const withCatalog = catalogTests()

type Element = Record<string, unknown>

/** Every issue (information included) whose text contains `text`. */
const saying = (c: Catalog, resource: unknown, text: string): ReadonlyArray<Issue> =>
  validateResource(resource, c).filter((issue) => issue.diagnostics.includes(text))

const profile = (fields: Record<string, unknown>, elements: ReadonlyArray<Element>) => ({
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

const extensionUrl = "http://example.org/StructureDefinition/colour"
const extension = (fields: Record<string, unknown>, elements?: ReadonlyArray<Element>) => ({
  resourceType: "StructureDefinition",
  url: extensionUrl,
  name: "Colour",
  status: "draft",
  kind: "complex-type",
  abstract: false,
  context: [{ type: "element", expression: "Patient" }],
  type: "Extension",
  baseDefinition: "http://hl7.org/fhir/StructureDefinition/Extension",
  derivation: "constraint",
  differential: {
    element: elements ?? [
      { id: "Extension", path: "Extension" },
      { id: "Extension.url", path: "Extension.url", fixedUri: extensionUrl },
      { id: "Extension.value[x]", path: "Extension.value[x]", type: [{ code: "string" }] }
    ]
  },
  ...fields
})

/** A snapshot profile of Observation: the given elements after the root. */
const snapshotProfile = (elements: ReadonlyArray<Element>) => ({
  ...profile({}, []),
  differential: undefined,
  snapshot: { element: [{ id: "Observation", path: "Observation", min: 0, max: "*" }, ...elements] }
})

describe("extension contexts", () => {
  withCatalog("only an extension definition states contexts and context invariants", (c) => {
    const found = saying(c, profile({ context: [{ type: "element", expression: "Patient" }], contextInvariant: ["true"] }, []), "only an extension definition has one")
    expect(found).toEqual([
      expect.objectContaining({ severity: "error", expression: "StructureDefinition.context[0]", diagnostics: "The type is Observation, so the definition states no context: only an extension definition has one" }),
      expect.objectContaining({ severity: "error", expression: "StructureDefinition.contextInvariant[0]", diagnostics: "The type is Observation, so the definition states no contextInvariant: only an extension definition has one" })
    ])
    // A type with a JSON name can be used as an extension.
    const named = profile({ context: [{ type: "element", expression: "Patient" }] }, [])
    named.differential.element[0] = { id: "Observation", path: "Observation", extension: [{ url: "http://hl7.org/fhir/tools/StructureDefinition/json-name", valueString: "obs" }] } as never
    expect(saying(c, named, "only an extension definition has one")).toEqual([])
    expect(saying(c, extension({ contextInvariant: ["true"] }), "only an extension definition has one")).toEqual([])
  })

  withCatalog("an element context names an element that exists", (c) => {
    const withContext = (expression: string) => extension({ context: [{ type: "element", expression }] })
    expect(saying(c, withContext("Observation.nonsense"), "is not valid")).toEqual([expect.objectContaining({
      severity: "error", expression: "StructureDefinition.context[0]", diagnostics: "The element Observation.nonsense is not valid"
    })])
    expect(saying(c, withContext("Unknown"), "is not valid")).toHaveLength(1)
    for (const valid of ["Observation.component.code", "Observation.code.coding.system", "Observation.value", "Observation.value[x]",
      "Questionnaire.item.item.text", "CanonicalResource.url", "http://hl7.org/fhir/StructureDefinition/patient-birthPlace#Extension.value[x]"]) {
      expect(saying(c, withContext(valid), "is not valid")).toEqual([])
    }
  })

  withCatalog("a context of Element, or a fhirpath context that is an element path, is review advice", (c) => {
    expect(saying(c, extension({ id: "colour", context: [{ type: "element", expression: "Element" }] }), "Review the extension")).toEqual([expect.objectContaining({
      severity: "warning", expression: "StructureDefinition.context[0]",
      diagnostics: "Review the extension type for colour: extensions should not have a context of Element unless it's really intended that they can be used anywhere"
    })])
    const fhirpath = saying(c, extension({ id: "colour", context: [{ type: "fhirpath", expression: "Patient.contact.name" }] }), "Review the extension")
    expect(fhirpath).toEqual([expect.objectContaining({ severity: "warning", expression: "StructureDefinition.context[0]" })])
    expect(fhirpath[0]!.diagnostics).toContain("the context type should be 'element' not 'fhirpath'")
    expect(saying(c, extension({ context: [{ type: "fhirpath", expression: "Patient.name.where(use = 'official')" }] }), "Review the extension")).toEqual([])
  })

  withCatalog("an extension definition fixes Extension.url to its own url", (c) => {
    const missing = extension({}, [{ id: "Extension", path: "Extension" }, { id: "Extension.value[x]", path: "Extension.value[x]", type: [{ code: "string" }] }])
    expect(saying(c, missing, "Extension.url is not fixed")).toEqual([expect.objectContaining({
      severity: "error", expression: "StructureDefinition", diagnostics: `The value of Extension.url is not fixed to the extension URL ${extensionUrl}`
    })])
    const other = extension({}, [{ id: "Extension", path: "Extension" }, { id: "Extension.url", path: "Extension.url", fixedUri: "http://example.org/other" }])
    expect(saying(c, other, "doesn't match the canonical URL")).toEqual([expect.objectContaining({
      severity: "error", diagnostics: `The fixed value for the extension URL is http://example.org/other which doesn't match the canonical URL ${extensionUrl}`
    })])
    expect(saying(c, extension({}), "Extension.url")).toEqual([])
    expect(saying(c, extension({}), "extension URL")).toEqual([])
  })
})

describe("slicing in definitions", () => {
  withCatalog("slicing is only allowed on an element that repeats or is a choice", (c) => {
    const sliced = (path: string) => profile({}, [{ id: path, path, slicing: { discriminator: [{ type: "value", path: "$this" }], rules: "open" } }])
    expect(saying(c, sliced("Observation.status"), "Slicing is not allowed")).toEqual([expect.objectContaining({
      severity: "error", expression: "StructureDefinition.differential.element[1].slicing", diagnostics: "Slicing is not allowed at 'Observation.status': the element does not repeat"
    })])
    expect(saying(c, sliced("Observation.component"), "Slicing is not allowed")).toEqual([])
    expect(saying(c, sliced("Observation.value[x]"), "Slicing is not allowed")).toEqual([])
  })

  withCatalog("a discriminator path names something of the sliced element's types", (c) => {
    const sliced = (path: string, type: string, discriminator: string) =>
      profile({}, [{ id: path, path, type: [{ code: type }], slicing: { discriminator: [{ type: "value", path: discriminator }], rules: "open" } }])
    const invalid = saying(c, sliced("Observation.component", "BackboneElement", "cod"), "discriminator path")
    expect(invalid).toEqual([expect.objectContaining({
      severity: "error", expression: "StructureDefinition.differential.element[1].slicing.discriminator[0]",
      diagnostics: "The discriminator path 'cod' does not appear to be valid for the element that is being sliced 'Observation.component'"
    })])
    expect(saying(c, sliced("Observation.category", "CodeableConcept", "system"), "discriminator path")).toHaveLength(1)
    expect(saying(c, sliced("Observation.category", "CodeableConcept", "coding.version.coding"), "discriminator path")).toHaveLength(1)
    const broken = saying(c, sliced("Observation.component", "BackboneElement", "code..coding"), "discriminator path")
    expect(broken).toEqual([expect.objectContaining({ severity: "error" })])
    expect(broken[0]!.diagnostics).toContain("does not appear to be valid for the element that is being sliced 'Observation.component': ")
    for (const [path, type, discriminator] of [
      ["Observation.component", "BackboneElement", "code.coding.code"],
      ["Observation.component", "BackboneElement", "value.ofType(Quantity).unit"],
      ["Observation.component", "BackboneElement", "valueQuantity.code"],
      ["Observation.category", "CodeableConcept", "coding.system"],
      ["Observation.category", "CodeableConcept", "extension('http://example.org/x').value"],
      ["Observation.value[x]", "Quantity", "$this"],
      ["Observation.hasMember", "Reference", "resolve().code"],
      ["Observation.hasMember", "Reference", "reference.where(true)"],
      ["Observation.extension", "Extension", "url"]
    ] as const) {
      expect(saying(c, sliced(path, type, discriminator), "discriminator path")).toEqual([])
    }
    // Without types in the differential, the element's types are not known: not checked.
    expect(saying(c, profile({}, [{ id: "Observation.component", path: "Observation.component", slicing: { discriminator: [{ type: "value", path: "cod" }] } }]), "discriminator path")).toEqual([])
  })

  withCatalog("in a snapshot, the slices of a must-support element are must-support and of its types", (c) => {
    const definition = snapshotProfile([
      { id: "Observation.category", path: "Observation.category", min: 0, max: "*", type: [{ code: "CodeableConcept" }], mustSupport: true, slicing: { discriminator: [{ type: "pattern", path: "$this" }], rules: "open" } },
      { id: "Observation.category:a", path: "Observation.category", sliceName: "a", min: 0, max: "1", type: [{ code: "CodeableConcept" }], mustSupport: true },
      { id: "Observation.category:b", path: "Observation.category", sliceName: "b", min: 0, max: "1", type: [{ code: "Coding" }] }
    ])
    const found = saying(c, definition, "not consistent with the element that defines the slicing")
    expect(found.map((issue) => [issue.severity, issue.expression])).toEqual([
      ["warning", "StructureDefinition.snapshot.element[3]"], ["warning", "StructureDefinition.snapshot.element[3]"]
    ])
    expect(found[0]!.diagnostics).toBe("The slice 'b' on path 'Observation.category' is not marked as 'must-support' which is not consistent with the element that defines the slicing, where 'must-support' is true")
    expect(found[1]!.diagnostics).toContain("has type 'Coding' which is not consistent")
  })
})

describe("bindings in definitions", () => {
  withCatalog("a snapshot binding on an element without a bindable type is an error; several bindable types are information", (c) => {
    const bound = (type: ReadonlyArray<string>) => snapshotProfile([
      { id: "Observation.value[x]", path: "Observation.value[x]", min: 0, max: "1", type: type.map((code) => ({ code })), binding: { strength: "example", valueSet: "http://hl7.org/fhir/ValueSet/observation-codes" } }
    ])
    expect(saying(c, bound(["boolean", "Period"]), "no bindable types")).toEqual([expect.objectContaining({
      severity: "error", expression: "StructureDefinition.snapshot.element[1].binding",
      diagnostics: "The element Observation.value[x] has a binding, but no bindable types are present [boolean, Period]"
    })])
    for (const ok of [["Quantity"], ["string"], ["markdown"], ["Age"], ["CodeableConcept", "boolean"]]) expect(saying(c, bound(ok), "no bindable types")).toEqual([])
    const several = profile({}, [{ id: "Observation.value[x]", path: "Observation.value[x]", type: [{ code: "CodeableConcept" }, { code: "string" }], binding: { strength: "example", valueSet: "http://hl7.org/fhir/ValueSet/observation-codes" } }])
    expect(saying(c, several, "multiple types subject to bindings")).toEqual([expect.objectContaining({
      severity: "information", expression: "StructureDefinition.differential.element[1].binding"
    })])
  })

  withCatalog("a binding names a value set the server knows: an unknown one is a warning, a code system an error", (c) => {
    const bound = (valueSet: string) => profile({}, [{ id: "Observation.code", path: "Observation.code", binding: { strength: "extensible", valueSet } }])
    expect(saying(c, bound("http://example.org/ValueSet/unknown"), "could not be resolved")).toEqual([expect.objectContaining({
      severity: "warning", expression: "StructureDefinition.differential.element[1].binding.valueSet",
      diagnostics: "The valueSet reference http://example.org/ValueSet/unknown on element Observation.code could not be resolved"
    })])
    expect(saying(c, bound("http://terminology.hl7.org/CodeSystem/observation-category"), "not a value set")).toEqual([expect.objectContaining({
      severity: "error", diagnostics: "The valueSet reference http://terminology.hl7.org/CodeSystem/observation-category on element Observation.code points to something that is not a value set (CodeSystem)"
    })])
    const ok = bound("http://hl7.org/fhir/ValueSet/observation-codes|4.0.1")
    expect(saying(c, ok, "value set")).toEqual([])
    expect(saying(c, ok, "could not be resolved")).toEqual([])
  })

  withCatalog("a binding to all of LOINC, SNOMED CT or CPT is a warning to review", (c) => {
    const bound = (valueSet: string) => profile({}, [{ id: "Observation.code", path: "Observation.code", binding: { strength: "extensible", valueSet } }])
    expect(saying(c, bound("http://loinc.org/vs"), "ALL LOINC")).toEqual([expect.objectContaining({ severity: "warning", expression: "StructureDefinition.differential.element[1].binding.valueSet" })])
    expect(saying(c, bound("http://snomed.info/sct?fhir_vs"), "ALL SNOMED CT")).toHaveLength(1)
    expect(saying(c, bound("http://hl7.org/fhir/ValueSet/cpt-all"), "ALL CPT")).toHaveLength(1)
    expect(saying(c, bound("http://snomed.info/sct?fhir_vs=isa/404684003"), "ALL SNOMED CT")).toEqual([])
  })
})

describe("values in definitions", () => {
  withCatalog("a differential pattern where the base element has a pattern is an error", (c) => {
    const onTriglyceride = (element: Element) => profile({ baseDefinition: "http://hl7.org/fhir/StructureDefinition/triglyceride" }, [{ id: "Observation.code", path: "Observation.code", ...element }])
    const code = { coding: [{ system: "http://loinc.org", code: "35217-9" }] }
    expect(saying(c, onTriglyceride({ patternCodeableConcept: code }), "pattern type")).toEqual([expect.objectContaining({
      severity: "error", expression: "StructureDefinition.differential.element[1].patternCodeableConcept",
      diagnostics: "The base element has a pattern type of 'CodeableConcept', so this element must have a fixed value but it doesn't"
    })])
    expect(saying(c, onTriglyceride({ fixedCodeableConcept: code }), "pattern type")).toEqual([])
    expect(saying(c, profile({}, [{ id: "Observation.code", path: "Observation.code", patternCodeableConcept: code }]), "pattern type")).toEqual([])
  })

  withCatalog("fixed and pattern values in a snapshot: repeats and complex fixed values are reported", (c) => {
    const definition = snapshotProfile([
      { id: "Observation.identifier", path: "Observation.identifier", min: 0, max: "*", type: [{ code: "Identifier" }], patternIdentifier: { system: "http://example.org" } },
      { id: "Observation.status", path: "Observation.status", min: 1, max: "1", type: [{ code: "code" }], fixedCode: "final" },
      { id: "Observation.code", path: "Observation.code", min: 1, max: "1", type: [{ code: "CodeableConcept" }], fixedCodeableConcept: { text: "x" } },
      { id: "Observation.category", path: "Observation.category", min: 0, max: "*", type: [{ code: "code" }], fixedCode: "x" }
    ])
    const found = validateResource(definition, c).filter((issue) => /repeat|complex type/.test(issue.diagnostics))
    expect(found.map((issue) => [issue.severity, issue.expression])).toEqual([
      ["information", "StructureDefinition.snapshot.element[1].patternIdentifier"],
      ["warning", "StructureDefinition.snapshot.element[3].fixedCodeableConcept"],
      ["information", "StructureDefinition.snapshot.element[4].fixedCode"],
      ["warning", "StructureDefinition.snapshot.element[4].fixedCode"]
    ])
    expect(found[1]!.diagnostics).toBe("For the complex type CodeableConcept, consider using a pattern rather than a fixed value to avoid over-constraining the instance")
    expect(found[3]!.diagnostics).toContain("The DotNet validator will not apply this to all the repeats")
  })

  withCatalog("a type whose code has only extensions is an error", (c) => {
    const definition = profile({ id: "test" }, [{ id: "Observation.status", path: "Observation.status", type: [{ _code: { extension: [{ url: "http://example.org/x", valueString: "y" }] } }] }])
    expect(saying(c, definition, "type.code without a value")).toEqual([expect.objectContaining({
      severity: "error", expression: "StructureDefinition.differential.element[1]", diagnostics: "Snapshot for test element Observation.status has type.code without a value"
    })])
    expect(saying(c, profile({}, [{ id: "Observation.status", path: "Observation.status", type: [{ code: "code" }] }]), "type.code without a value")).toEqual([])
  })

  withCatalog("a type FHIR does not define: the registry of approved additional resources cannot be read", (c) => {
    const found = saying(c, profile({ type: "Widget", derivation: "specialization", baseDefinition: "http://hl7.org/fhir/StructureDefinition/DomainResource" }, []), "approved additional resources")
    expect(found).toEqual([expect.objectContaining({ severity: "warning", expression: "StructureDefinition.type" })])
    expect(saying(c, profile({}, []), "approved additional resources")).toEqual([])
  })
})

describe("on instances", () => {
  const ns = "http://example.org/StructureDefinition/"
  let extended: Catalog | undefined
  const withDefinitions = async (c: Catalog): Promise<Catalog> => {
    if (extended !== undefined) return extended
    const patient = c.structureDefinitionForType("Patient")!.resource
    const elements: Array<Element> = []
    for (const element of (patient["snapshot"] as { element: ReadonlyArray<Element> }).element) {
      elements.push(element["id"] === "Patient.identifier"
        ? { ...element, slicing: { discriminator: [{ type: "value", path: "system..value" }], rules: "open" } }
        : element)
      if (element["id"] === "Patient.identifier") elements.push({ id: "Patient.identifier:a", path: "Patient.identifier", sliceName: "a", min: 0, max: "1", type: [{ code: "Identifier" }] })
    }
    const versioned = (url: string, bound: string, value: string) => ({
      resourceType: "StructureDefinition", url, name: "Versioned", status: "draft", kind: "complex-type", abstract: false,
      extension: [{ url: "http://hl7.org/fhir/StructureDefinition/version-specific-use", extension: [{ url: bound, valueCode: value }] }],
      context: [{ type: "element", expression: "Element" }], type: "Extension",
      baseDefinition: "http://hl7.org/fhir/StructureDefinition/Extension", derivation: "constraint",
      differential: { element: [{ id: "Extension", path: "Extension" }, { id: "Extension.url", path: "Extension.url", fixedUri: url }] }
    })
    extended = build([
      ...((await loadResources()) ?? []),
      { resourceType: "StructureDefinition", url: `${ns}bad-slicing`, name: "BadSlicing", status: "draft", kind: "resource", abstract: false, type: "Patient",
        baseDefinition: "http://hl7.org/fhir/StructureDefinition/Patient", derivation: "constraint", snapshot: { element: elements } },
      versioned(`${ns}from-r5`, "startFhirVersion", "5.0"),
      versioned(`${ns}until-r3`, "endFhirVersion", "3.0"),
      versioned(`${ns}from-r4`, "startFhirVersion", "4.0")
    ], 2)
    return extended
  }

  withCatalog("a discriminator path that is not FHIRPath: the slicing cannot be evaluated", async (c) => {
    const d = await withDefinitions(c)
    const found = errors(validateResource({ resourceType: "Patient", text: narrative, meta: { profile: [`${ns}bad-slicing`] }, identifier: [{ system: "http://example.org", value: "1" }] }, d))
      .filter((issue) => issue.diagnostics.includes("Slicing cannot be evaluated"))
    expect(found).toEqual([expect.objectContaining({ severity: "error", expression: "Patient.identifier[0]" })])
    expect(found[0]!.diagnostics).toContain("Error processing path expression for discriminator: ")
    expect(found[0]!.diagnostics).toContain("(src = 'system..value')")
    expect(errors(validateResource({ resourceType: "Patient", text: narrative, identifier: [{ system: "http://example.org", value: "1" }] }, d))).toEqual([])
  })

  withCatalog("an extension whose definition is for other FHIR versions is an error", async (c) => {
    const d = await withDefinitions(c)
    const patient = (url: string) => ({ resourceType: "Patient", text: narrative, extension: [{ url, valueString: "x" }] })
    const early = errors(validateResource(patient(`${ns}from-r5`), d)).filter((issue) => issue.diagnostics.includes("version"))
    expect(early).toEqual([expect.objectContaining({
      severity: "error", expression: "Patient.extension[0]",
      diagnostics: `The definition of the extension '${ns}from-r5' specifies that the earliest version it can be used with is R5 (v5.0), but this context of use is version R4 (v4.0.1)`
    })])
    const late = errors(validateResource(patient(`${ns}until-r3`), d)).filter((issue) => issue.diagnostics.includes("version"))
    expect(late.map((issue) => issue.diagnostics)).toEqual([`The definition of the extension '${ns}until-r3' specifies that the latest version it can be used with is STU3 (v3.0), but this context of use is version R4 (v4.0.1)`])
    expect(errors(validateResource(patient(`${ns}from-r4`), d)).filter((issue) => issue.diagnostics.includes("version"))).toEqual([])
  })
})
