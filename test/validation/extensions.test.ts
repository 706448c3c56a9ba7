/**
 * Extensions as a client meets them: unknown urls, the allowed extension domains, urls and sub-extension
 * urls, modifier placement, simple extensions, contexts (element, extension, fhirpath, context invariants),
 * the status of a definition and cross-version urls. The extension definitions are written for the test.
 */
import { expect } from "vitest"
import { build, type Catalog } from "../../src/catalog/Catalog.ts"
import { type ValidateOptions, validateResource } from "../../src/validation/Validator.ts"
import { catalogTests, errors, loadResources, problems } from "./support.ts"

const withCatalog = catalogTests()

type Element = Record<string, unknown>

const ns = "http://ext.test/StructureDefinition/"

interface Options {
  readonly types?: ReadonlyArray<string>
  readonly parts?: Readonly<Record<string, string>>
  readonly contexts?: ReadonlyArray<{ readonly type: string; readonly expression: string }>
  readonly contextInvariant?: ReadonlyArray<string>
  readonly modifier?: boolean
  readonly status?: string
  readonly extension?: ReadonlyArray<Element>
}

/** An extension definition on R4's Extension snapshot: simple (`types`) or complex (`parts`: name to value type). */
const extension = (c: Catalog, name: string, options: Options): Record<string, unknown> => {
  const url = ns + name
  const base = (c.structureDefinitionForType("Extension")!.resource["snapshot"] as { element: ReadonlyArray<Element> }).element
  const parts = Object.entries(options.parts ?? {})
  const element: Array<Element> = []
  for (const e of base) {
    const id = String(e["id"])
    if (id === "Extension") element.push({ ...e, isModifier: options.modifier === true })
    else if (id === "Extension.extension") {
      if (parts.length === 0) element.push({ ...e, max: "0" })
      else {
        element.push({ ...e, slicing: { discriminator: [{ type: "value", path: "url" }], rules: "open" } })
        for (const [part, type] of parts) {
          const sliced = `Extension.extension:${part}`
          element.push({ ...e, id: sliced, sliceName: part, min: 0, max: "1" })
          element.push({ id: `${sliced}.url`, path: "Extension.extension.url", min: 1, max: "1", base: { path: "Extension.url", min: 1, max: "1" }, type: [{ code: "uri" }], fixedUri: part })
          element.push({ id: `${sliced}.value[x]`, path: "Extension.extension.value[x]", min: 1, max: "1", base: { path: "Extension.value[x]", min: 0, max: "1" }, type: [{ code: type }] })
        }
      }
    } else if (id === "Extension.url") element.push({ ...e, fixedUri: url })
    else if (id === "Extension.value[x]") {
      element.push(parts.length > 0 ? { ...e, max: "0" } : { ...e, min: 1, type: (options.types ?? ["string"]).map((code) => ({ code })) })
    } else element.push(e)
  }
  return {
    resourceType: "StructureDefinition",
    url,
    name,
    status: options.status ?? "draft",
    ...(options.extension === undefined ? {} : { extension: options.extension }),
    kind: "complex-type",
    abstract: false,
    context: options.contexts ?? [{ type: "element", expression: "Element" }],
    ...(options.contextInvariant === undefined ? {} : { contextInvariant: options.contextInvariant }),
    type: "Extension",
    baseDefinition: "http://hl7.org/fhir/StructureDefinition/Extension",
    derivation: "constraint",
    snapshot: { element }
  }
}

const patientProfile = `${ns}odd-patient`

/** A Patient profile whose `extension` element is (wrongly) a modifier, and whose maritalStatus is fixed. */
const oddPatient = (c: Catalog): Record<string, unknown> => {
  const base = (c.structureDefinitionForType("Patient")!.resource["snapshot"] as { element: ReadonlyArray<Element> }).element
  const fixed = { coding: [{ system: "http://terminology.hl7.org/CodeSystem/v3-MaritalStatus", code: "M" }] }
  const element = base.map((e) =>
    e["id"] === "Patient.extension" ? { ...e, isModifier: true } : e["id"] === "Patient.maritalStatus" ? { ...e, fixedCodeableConcept: fixed } : e)
  return {
    resourceType: "StructureDefinition", url: patientProfile, name: "OddPatient", status: "draft", kind: "resource", abstract: false, type: "Patient",
    baseDefinition: "http://hl7.org/fhir/StructureDefinition/Patient", derivation: "constraint", snapshot: { element }
  }
}

let extended: Catalog | undefined
const withExtensions = async (c: Catalog): Promise<Catalog> => {
  if (extended !== undefined) return extended
  const resources = (await loadResources())!
  extended = build([
    ...resources,
    extension(c, "colour", { types: ["string", "code"] }),
    extension(c, "animal", { parts: { species: "CodeableConcept", breed: "string" }, contexts: [{ type: "element", expression: "Patient" }] }),
    extension(c, "do-not-bill", { types: ["boolean"], modifier: true }),
    extension(c, "placed", {
      types: ["boolean"],
      contexts: [
        { type: "element", expression: "Patient" },
        { type: "element", expression: "Patient.name" },
        { type: "element", expression: "Address" },
        { type: "element", expression: "DomainResource.text" },
        { type: "extension", expression: `${ns}colour` }
      ]
    }),
    oddPatient(c),
    extension(c, "profiled", { types: ["boolean"], contexts: [{ type: "element", expression: `${ns}some-profile#Patient.name` }] }),
    extension(c, "home-only", { types: ["boolean"], contexts: [{ type: "fhirpath", expression: "Patient.address.where(use = 'home')" }] }),
    extension(c, "when-inactive", { types: ["boolean"], contexts: [{ type: "element", expression: "Patient" }], contextInvariant: ["active.exists().not() or active = false"] }),
    extension(c, "old", {
      types: ["string"],
      extension: [{ url: "http://hl7.org/fhir/StructureDefinition/structuredefinition-standards-status", valueCode: "deprecated" }]
    }),
    { resourceType: "StructureDefinition", url: `${ns}no-snapshot`, name: "NoSnapshot", status: "draft", kind: "complex-type", abstract: false,
      context: [{ type: "element", expression: "Patient.name" }], type: "Extension", baseDefinition: "http://hl7.org/fhir/StructureDefinition/Extension",
      derivation: "constraint", differential: { element: [{ id: "Extension.value[x]", path: "Extension.value[x]", type: [{ code: "boolean" }] }] } }
  ], 2)
  return extended
}

const check = async (c: Catalog, resource: Record<string, unknown>, options?: ValidateOptions) => problems(await withExtensions(c), resource, options)
const patient = (extra: Record<string, unknown>) => ({ resourceType: "Patient", ...extra })
const ext = (name: string, value: Record<string, unknown> = { valueBoolean: true }) => ({ url: ns + name, ...value })

withCatalog("an extension the server has no definition for is an error, unless its domain is allowed", async (c) => {
  const unknown = await check(c, patient({ extension: [{ url: "http://unknown.test/colour", valueString: "red" }] }))
  expect(unknown).toHaveLength(1)
  expect(unknown[0]).toMatchObject({ severity: "error", code: "extension", expression: "Patient.extension[0]" })
  expect(unknown[0]!.diagnostics).toContain("Unknown extension http://unknown.test/colour")
  // On a primitive, and as a modifier extension, the same.
  expect(errors(await check(c, patient({ _birthDate: { extension: [{ url: "http://unknown.test/x", valueString: "x" }] }, birthDate: "2000" })))
    .map((issue) => issue.expression)).toEqual(["Patient.birthDate.extension[0]"])
  expect(errors(await check(c, patient({ modifierExtension: [{ url: "http://unknown.test/x", valueString: "x" }] }))).map((issue) => issue.expression))
    .toEqual(["Patient.modifierExtension[0]"])
  // Allowed domains: url prefixes.
  expect(await check(c, patient({ extension: [{ url: "http://unknown.test/colour", valueString: "red" }] }), { allowedExtensionDomains: ["http://unknown.test/"] })).toEqual([])
  expect(errors(await check(c, patient({ extension: [{ url: "http://unknown.testing/colour", valueString: "red" }] }), { allowedExtensionDomains: ["http://unknown.test/"] })))
    .toHaveLength(1)
  // The specification's example domains are accepted when validating examples, DICOM's always, as the reference validator accepts them.
  const example = patient({ extension: [{ url: "http://example.org/fhir/StructureDefinition/x", valueString: "x" }] })
  expect(errors(await check(c, example)).map((issue) => issue.expression)).toEqual(["Patient.extension[0]", "Patient.extension[0].url"])
  expect(await check(c, example, { examples: true })).toEqual([])
  expect(await check(c, patient({ extension: [{ url: "http://nema.org/fhir/extensions#0010:1010", valueString: "x" }] }))).toEqual([])
  // HL7's own namespace holds more extensions than R4 defines (the extensions package): a warning.
  const core = await check(c, patient({ extension: [{ url: "http://hl7.org/fhir/StructureDefinition/patient-not-in-r4", valueString: "x" }] }))
  expect(core).toHaveLength(1)
  expect(core[0]).toMatchObject({ severity: "warning", code: "extension" })
  // A known one is not flagged.
  expect(await check(c, patient({ extension: [ext("colour", { valueString: "red" })] }))).toEqual([])
})

withCatalog("Extension.url: required, absolute at the top, without a version", async (c) => {
  const missing = errors(await check(c, patient({ extension: [{ valueString: "x" }] })))
  expect(missing.map((issue) => [issue.expression, issue.diagnostics])).toEqual([["Patient.extension[0]", "Extension.url: minimum required = 1, but only found 0"]])
  const relative = errors(await check(c, patient({ extension: [{ url: "colour", valueString: "x" }] })))
  expect(relative).toHaveLength(1)
  expect(relative[0]).toMatchObject({ severity: "error", code: "invalid", expression: "Patient.extension[0]" })
  expect(relative[0]!.diagnostics).toContain("Extension.url must be an absolute URL")
  const versioned = errors(await check(c, patient({ extension: [{ url: `${ns}colour|1.0`, valueString: "x" }] })))
  expect(versioned.map((issue) => issue.diagnostics)).toContainEqual(expect.stringContaining(`An extension url must not name a version: '${ns}colour|1.0'`))
  const nowhere = await check(c, patient({ extension: [{ url: "http://unknown.test/x|2.0", valueString: "x" }] }))
  expect(nowhere.map((issue) => [issue.severity, issue.diagnostics.slice(0, 40)])).toEqual([
    ["warning", "An extension url must not name a version"],
    ["error", "Unknown extension http://unknown.test/x|"]
  ])
})

withCatalog("a sub-extension url a complex extension's definition does not define is an error", async (c) => {
  const animal = (parts: ReadonlyArray<Record<string, unknown>>) => patient({ extension: [{ url: `${ns}animal`, extension: parts }] })
  expect(await check(c, animal([{ url: "species", valueCodeableConcept: { text: "dog" } }, { url: "breed", valueString: "collie" }]))).toEqual([])
  const wrong = errors(await check(c, animal([{ url: "species", valueCodeableConcept: { text: "dog" } }, { url: "colour", valueString: "black" }])))
  expect(wrong).toHaveLength(1)
  expect(wrong[0]).toMatchObject({ code: "invalid", expression: "Patient.extension[0].extension[1]" })
  expect(wrong[0]!.diagnostics).toBe(`The sub-extension url 'colour' is not defined by the extension ${ns}animal`)
  // An absolute url inside a complex extension is an extension of its own, looked up as any other.
  expect(errors(await check(c, animal([{ url: "http://unknown.test/x", valueString: "x" }]))).map((issue) => issue.diagnostics))
    .toEqual([expect.stringContaining("Unknown extension http://unknown.test/x")])
})

withCatalog("a modifier extension belongs in modifierExtension, any other in extension", async (c) => {
  expect(await check(c, patient({ modifierExtension: [ext("do-not-bill")] }))).toEqual([])
  const asExtension = errors(await check(c, patient({ extension: [ext("do-not-bill")] })))
  expect(asExtension).toHaveLength(1)
  expect(asExtension[0]).toMatchObject({ code: "structure", expression: "Patient.extension[0]" })
  expect(asExtension[0]!.diagnostics).toContain("is a modifier extension: it must be used in 'modifierExtension'")
  const asModifier = errors(await check(c, patient({ modifierExtension: [ext("colour", { valueString: "red" })] })))
  expect(asModifier).toHaveLength(1)
  expect(asModifier[0]!.diagnostics).toContain("is not a modifier extension: it must be used in 'extension'")
  // A profile that marks its `extension` element as a modifier contradicts where the extension sits.
  const slot = errors(await check(c, patient({ meta: { profile: [patientProfile] }, extension: [ext("colour", { valueString: "red" })] })))
  expect(slot.map((issue) => issue.diagnostics)).toEqual(["The element Patient.extension holds extensions, but its definition marks it as a modifier"])
})

withCatalog("a simple extension has a value of a type its definition allows, not sub-extensions", async (c) => {
  const absent = errors(await check(c, patient({ extension: [{ url: `${ns}colour`, id: "x" }] })))
  expect(absent.map((issue) => issue.diagnostics)).toContainEqual(`The extension ${ns}colour is a simple extension: it must have a value (string, code)`)
  const nested = errors(await check(c, patient({ extension: [{ url: `${ns}colour`, extension: [{ url: "part", valueString: "x" }] }] })))
  expect(nested.map((issue) => issue.diagnostics)).toContainEqual(`The extension ${ns}colour is a simple extension: it must have a value (string, code), not extensions`)
  const wrongType = errors(await check(c, patient({ extension: [{ url: `${ns}colour`, valueInteger: 3 }] })))
  expect(wrongType[0]).toMatchObject({ severity: "error", expression: "Patient.extension[0].valueInteger" })
  expect(wrongType[0]!.diagnostics).toContain("Extension.value[x] takes string, code here")
  expect(await check(c, patient({ extension: [{ url: `${ns}colour`, valueCode: "red" }] }))).toEqual([])
})

withCatalog("an extension used outside the contexts its definition states is an error", async (c) => {
  // Allowed: the resource, an element by path, an element by its type, a base type's element, another extension.
  expect(await check(c, patient({ extension: [ext("placed")] }))).toEqual([])
  expect(await check(c, patient({ name: [{ family: "X", extension: [ext("placed")] }] }))).toEqual([])
  expect(await check(c, patient({ address: [{ city: "X", extension: [ext("placed")] }] }))).toEqual([])
  expect(await check(c, patient({ text: { status: "generated", div: '<div xmlns="http://www.w3.org/1999/xhtml">x</div>', extension: [ext("placed")] } }))).toEqual([])
  // On the value of the extension an `extension` context names.
  expect(await check(c, patient({ extension: [{ url: `${ns}colour`, valueString: "red", _valueString: { extension: [ext("placed")] } }] }))).toEqual([])
  // Not allowed: another element, another resource type.
  const onActive = errors(await check(c, patient({ active: true, _active: { extension: [ext("placed")] } })))
  expect(onActive).toHaveLength(1)
  expect(onActive[0]).toMatchObject({ severity: "error", code: "extension", expression: "Patient.active" })
  expect(onActive[0]!.diagnostics).toContain(`The extension ${ns}placed is not allowed on Patient.active (boolean): its definition allows it on Patient, Patient.name, Address, DomainResource.text, extension ${ns}colour`)
  const onOrganization = errors(await check(c, { resourceType: "Organization", name: "X", extension: [ext("placed")] }))
  expect(onOrganization.map((issue) => issue.expression)).toEqual(["Organization"])
  // A context naming a profile is matched on its path.
  expect(errors(await check(c, patient({ name: [{ family: "X", extension: [ext("profiled")] }] })))).toEqual([])
  expect(errors(await check(c, patient({ extension: [ext("profiled")] }))).map((issue) => issue.expression)).toEqual(["Patient"])
  // A definition without a snapshot still states its contexts.
  expect(errors(await check(c, patient({ name: [{ family: "X", extension: [ext("no-snapshot")] }] })))).toEqual([])
  expect(errors(await check(c, patient({ extension: [ext("no-snapshot")] }))).map((issue) => issue.expression)).toEqual(["Patient"])
})

withCatalog("R4's own extensions are judged where R4 uses them (the reference validator's reading of their contexts)", async (c) => {
  // structuredefinition-fhir-type is stated for ElementDefinition.type.code but used on ElementDefinition.type.
  const fhirType = { url: "http://hl7.org/fhir/StructureDefinition/structuredefinition-fhir-type", valueUrl: "string" }
  const definition = {
    resourceType: "StructureDefinition", url: "http://ext.test/StructureDefinition/T", name: "T", status: "draft", kind: "logical", abstract: false,
    type: "T", baseDefinition: "http://hl7.org/fhir/StructureDefinition/Element", derivation: "specialization",
    differential: { element: [{ id: "T", path: "T" }, { id: "T.a", path: "T.a", min: 0, max: "1", type: [{ code: "http://hl7.org/fhirpath/System.String", extension: [fhirType] }] }] }
  }
  // (its type, T, is not a namespaced url: an error of its own, not about extensions)
  expect(errors(await check(c, definition)).filter((issue) => issue.expression !== "StructureDefinition.type")).toEqual([])
  // normative-version is used on every kind of resource.
  const normative = { url: "http://hl7.org/fhir/StructureDefinition/structuredefinition-normative-version", valueCode: "4.0.0" }
  expect(errors(await check(c, { resourceType: "ValueSet", status: "draft", extension: [normative] }))).toEqual([])
  // translation belongs on a string, not on the backbone element holding it.
  const translation = { url: "http://hl7.org/fhir/StructureDefinition/translation", extension: [{ url: "lang", valueCode: "nl" }, { url: "content", valueString: "x" }] }
  expect(errors(await check(c, patient({ name: [{ family: "X", _family: { extension: [translation] } }] })))).toEqual([])
  expect(errors(await check(c, patient({ name: [{ family: "X", extension: [translation] }] }))).map((issue) => issue.expression)).toEqual(["Patient.name[0]"])
})

withCatalog("fhirpath contexts are evaluated on the resource", async (c) => {
  const address = (use: string) => patient({ address: [{ use, city: "X", extension: [ext("home-only")] }] })
  expect(await check(c, address("home"))).toEqual([])
  const work = errors(await check(c, address("work")))
  expect(work.map((issue) => issue.expression)).toEqual(["Patient.address[0]"])
  expect(work[0]!.diagnostics).toContain("fhirpath Patient.address.where(use = 'home')")
})

withCatalog("context invariants are evaluated on the element the extension is used on", async (c) => {
  expect(await check(c, patient({ active: false, extension: [ext("when-inactive")] }))).toEqual([])
  const active = errors(await check(c, patient({ active: true, extension: [ext("when-inactive")] })))
  expect(active).toHaveLength(1)
  expect(active[0]).toMatchObject({ code: "extension", expression: "Patient" })
  expect(active[0]!.diagnostics).toContain("its context invariant 'active.exists().not() or active = false' does not hold there")
})

withCatalog("an extension whose definition is deprecated is reported as information", async (c) => {
  const issues = validateResource(patient({ extension: [ext("old", { valueString: "x" })] }), await withExtensions(c))
  const status = issues.filter((issue) => issue.code === "business-rule")
  expect(status).toEqual([{ severity: "information", code: "business-rule", expression: "Patient.extension[0]", diagnostics: `The extension ${ns}old is deprecated` }])
  expect(issues.filter((issue) => issue.code === "business-rule" && issue.expression !== "Patient.extension[0]")).toEqual([])
})

withCatalog("cross-version extension urls: a warning, as they cannot be interpreted here; an unknown version is an error", async (c) => {
  const xver = await check(c, patient({ extension: [{ url: "http://hl7.org/fhir/5.0/StructureDefinition/extension-Patient.link.type", valueCode: "seealso" }] }))
  expect(xver).toEqual([expect.objectContaining({ severity: "warning", code: "extension", expression: "Patient.extension[0]" })])
  expect(xver[0]!.diagnostics).toContain("element Patient.link.type of FHIR 5.0")
  const bad = errors(await check(c, patient({ extension: [{ url: "http://hl7.org/fhir/2.7/StructureDefinition/extension-Patient.link.type", valueCode: "x" }] })))
  expect(bad.map((issue) => issue.diagnostics)).toEqual([expect.stringContaining("names an unknown FHIR version '2.7'")])
})

withCatalog("a fixed complex value is matched exactly, extensions included", async (c) => {
  const married = { coding: [{ system: "http://terminology.hl7.org/CodeSystem/v3-MaritalStatus", code: "M" }] }
  const odd = (maritalStatus: Record<string, unknown>) => ({ resourceType: "Patient", meta: { profile: [patientProfile] }, maritalStatus })
  expect(errors(await check(c, odd(married)))).toEqual([])
  const extra = errors(await check(c, odd({ ...married, extension: [{ url: "http://example.org/note", valueString: "x" }] }), { examples: true }))
  expect(extra).toEqual([expect.objectContaining({ code: "value", expression: "Patient.maritalStatus" })])
})

withCatalog("a primitive with a fixed value takes no extensions", async (c) => {
  const withUrl = (extra: Record<string, unknown>) => patient({ extension: [{ url: `${ns}colour`, valueString: "red", ...extra }] })
  expect(await check(c, withUrl({ _url: { id: "u" } }))).toEqual([])
  const extended = errors(await check(c, withUrl({ _url: { extension: [{ url: "http://example.org/note", valueString: "x" }] } }), { examples: true }))
  expect(extended).toEqual([expect.objectContaining({ code: "value", expression: "Patient.extension[0].url" })])
  expect(extended[0]!.diagnostics).toContain("fixed value has no extensions")
})
