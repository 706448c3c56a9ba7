import { describe, expect, it } from "vitest"
import { sctidProblem } from "../../src/validation/codes.ts"
import { validateResource } from "../../src/validation/Validator.ts"
import { build, type Catalog } from "../../src/catalog/Catalog.ts"
import { catalogTests, errors, loadResources, problems } from "./support.ts"

const withCatalog = catalogTests()

describe("bindings", () => {
  withCatalog("a code outside a required value set is an error (administrative-gender)", (c) => {
    expect(problems(c, { resourceType: "Patient", gender: "bogus" })).toEqual([{
      severity: "error",
      code: "code-invalid",
      expression: "Patient.gender",
      diagnostics: "The value 'bogus' is not in the value set http://hl7.org/fhir/ValueSet/administrative-gender (required binding)"
    }])
  })

  withCatalog("a CodeableConcept outside a required value set is an error", (c) => {
    const allergy = (coding: Record<string, unknown>) => ({
      resourceType: "AllergyIntolerance",
      patient: { reference: "Patient/1" },
      clinicalStatus: { coding: [coding] }
    })
    expect(problems(c, allergy({ system: "http://terminology.hl7.org/CodeSystem/allergyintolerance-clinical", code: "active" }))).toEqual([])
    const found = errors(validateResource(allergy({ system: "http://example.org/codes", code: "active" }), c))
    expect(found).toHaveLength(1)
    expect(found[0]).toMatchObject({ code: "code-invalid", expression: "AllergyIntolerance.clinicalStatus" })
  })

  withCatalog("a required CodeableConcept with text only is an error", (c) => {
    const found = errors(validateResource({ resourceType: "AllergyIntolerance", patient: { reference: "Patient/1" }, clinicalStatus: { text: "active" } }, c))
    expect(found[0]?.diagnostics).toContain("No code provided")
  })

  withCatalog("a code outside an extensible value set is a warning", (c) => {
    const found = problems(c, {
      resourceType: "Patient",
      identifier: [{ type: { coding: [{ system: "http://example.org/types", code: "X" }] }, value: "1" }]
    })
    expect(found).toEqual([expect.objectContaining({ severity: "warning", code: "code-invalid", expression: "Patient.identifier[0].type" })])
  })

  withCatalog("a value set that needs SNOMED CT or LOINC does not judge codes", (c) => {
    // Condition.code is bound (example) to SNOMED; Observation.code likewise: nothing is said either way.
    expect(problems(c, { resourceType: "Condition", subject: { reference: "Patient/1" }, code: { coding: [{ system: "http://snomed.info/sct", code: "44054006" }] } })).toEqual([])
  })
})

describe("a required code given only as extensions", () => {
  const entered = { coding: [{ system: "http://terminology.hl7.org/CodeSystem/allergyintolerance-verification", code: "entered-in-error" }] }
  const allergy = (category: Record<string, unknown>) => ({
    resourceType: "AllergyIntolerance", patient: { reference: "Patient/1" }, verificationStatus: entered, category: [null], _category: [category]
  })

  withCatalog("a required code with only a data-absent-reason extension is an error", (c) => {
    const absent = { extension: [{ url: "http://hl7.org/fhir/StructureDefinition/data-absent-reason", valueCode: "unknown" }] }
    expect(errors(validateResource(allergy(absent), c))).toEqual([expect.objectContaining({
      code: "code-invalid",
      expression: "AllergyIntolerance.category[0]",
      diagnostics: "No code provided, and a code is required from the value set http://hl7.org/fhir/ValueSet/allergy-intolerance-category"
    })])
    expect(errors(validateResource({ resourceType: "AllergyIntolerance", patient: { reference: "Patient/1" }, verificationStatus: entered, category: ["food"] }, c))).toEqual([])
  })

  withCatalog("a required code given only in a cross-version extension is a warning", (c) => {
    const alternative = { extension: [{ url: "http://hl7.org/fhir/5.0/StructureDefinition/extension-AllergyIntolerance.category", valueCode: "food" }] }
    const found = validateResource(allergy(alternative), c).filter((issue) => issue.code === "code-invalid")
    expect(found).toEqual([expect.objectContaining({ severity: "warning", expression: "AllergyIntolerance.category[0]" })])
    expect(found[0]?.diagnostics).toContain("an alternative code 'food' is provided in the cross-version extension")
  })
})

describe("codes of the systems the server holds", () => {
  const category = (coding: Record<string, unknown>) => ({
    resourceType: "Observation",
    status: "final",
    code: { text: "x" },
    category: [{ coding: [{ system: "http://terminology.hl7.org/CodeSystem/observation-category", ...coding }] }]
  })
  const coded = (c: Catalog, resource: unknown) =>
    validateResource(resource, c).filter((issue) => issue.code === "code-invalid" || issue.code === "not-found" || issue.code === "business-rule")

  withCatalog("a code that its system, held completely, does not have is an error, whatever the binding", (c) => {
    expect(coded(c, category({ code: "vital-sign" }))).toEqual([{
      severity: "error",
      code: "code-invalid",
      expression: "Observation.category[0].coding[0].code",
      diagnostics: "Unknown code 'vital-sign' in the CodeSystem 'http://terminology.hl7.org/CodeSystem/observation-category' version '4.0.1'"
    }])
    expect(coded(c, category({ code: "vital-signs" }))).toEqual([])
    // Contract.legalState is bound with strength example: the code is still held to its system.
    const contract = (code: string) => ({ resourceType: "Contract", legalState: { coding: [{ system: "http://hl7.org/fhir/contract-legalstate", code }] } })
    expect(errors(validateResource(contract("invalid-code-test"), c)).map((issue) => issue.expression)).toEqual(["Contract.legalState.coding[0].code"])
    expect(errors(validateResource(contract("executed"), c))).toEqual([])
  })

  withCatalog("a code of a version of the system the server does not hold is not judged, with a warning", (c) => {
    const found = coded(c, category({ version: "99.0.0", code: "new-category" }))
    expect(found).toEqual([expect.objectContaining({ severity: "warning", code: "not-found", expression: "Observation.category[0].coding[0].system" })])
    expect(found[0]?.diagnostics).toContain("version '99.0.0' could not be found, so the code cannot be validated")
    expect(coded(c, category({ version: "4.0.1", code: "new-category" })).map((issue) => issue.severity)).toEqual(["error"])
  })

  withCatalog("codes of systems the server does not hold are not judged: a warning says they could not be validated", (c) => {
    const notices = (resource: unknown) => validateResource(resource, c).filter((issue) => issue.severity !== "information" && !issue.diagnostics.includes("dom-6"))
    const unknownSystem = notices({ resourceType: "Observation", status: "final", code: { coding: [{ system: "http://example.org/codes", code: "anything" }] } })
    expect(unknownSystem).toEqual([expect.objectContaining({ severity: "warning", code: "not-found", expression: "Observation.code.coding[0].system" })])
    expect(unknownSystem[0]!.diagnostics).toContain("could not be found, so the code cannot be validated")
    const notPresent = notices({ resourceType: "Observation", status: "final", code: { coding: [{ system: "http://loinc.org", code: "2339-0" }] } })
    expect(notPresent).toEqual([expect.objectContaining({ severity: "warning", code: "not-supported", expression: "Observation.code.coding[0].code" })])
    expect(notPresent[0]!.diagnostics).toContain("could not be validated: this server does not hold the content of the code system 'http://loinc.org' (its form was checked)")
  })

  withCatalog("a SNOMED CT code that is not a well-formed identifier or expression is an error", (c) => {
    const condition = (code: string) => ({ resourceType: "Condition", subject: { reference: "Patient/1" }, code: { coding: [{ system: "http://snomed.info/sct", code }] } })
    const invalid = (code: string) => validateResource(condition(code), c).filter((issue) => issue.code === "code-invalid")
    expect(invalid("276885007x")[0]).toMatchObject({ severity: "error", expression: "Condition.code.coding[0].code" })
    expect(invalid("44054007")[0]?.diagnostics).toContain("check digit")
    expect(invalid("44054006")).toEqual([])
    expect(errors(validateResource(condition("128045006:{363698007=56459004}"), c))).toEqual([])
  })

  withCatalog("a LOINC code that is not digits with the right mod-10 check digit is an error", (c) => {
    const observation = (code: string) => ({ resourceType: "Observation", status: "final", code: { coding: [{ system: "http://loinc.org", code }] } })
    const invalid = (code: string) => validateResource(observation(code), c).filter((issue) => issue.code === "code-invalid")
    expect(invalid("8310-5")).toEqual([])
    expect(invalid("LA6576-8")).toEqual([])
    expect(invalid("8310-4")).toEqual([expect.objectContaining({ severity: "error", expression: "Observation.code.coding[0].code" })])
    expect(invalid("8310-4")[0]?.diagnostics).toContain("check digit")
    expect(invalid("body temperature")[0]?.diagnostics).toContain("is not a LOINC code")
  })

  withCatalog("a display that is neither the code's display nor a designation is a warning", (c) => {
    const found = coded(c, category({ code: "vital-signs", display: "vital-signs" }))
    expect(found).toEqual([{
      severity: "warning",
      code: "code-invalid",
      expression: "Observation.category[0].coding[0].display",
      diagnostics: "Wrong Display Name 'vital-signs' for http://terminology.hl7.org/CodeSystem/observation-category#vital-signs. Valid display is 'Vital Signs'"
    }])
    expect(coded(c, category({ code: "vital-signs", display: "Vital Signs" }))).toEqual([])
    expect(coded(c, category({ code: "vital-signs", display: "VITAL SIGNS" }))).toEqual([])
    expect(coded(c, category({ code: "vital-signs", display: "Vital  Signs" }))[0]?.diagnostics).toContain("Wrong whitespace in Display Name")
    // A designation in another language is a display too.
    const dl = (display: string) => coded(c, {
      resourceType: "Patient",
      identifier: [{ type: { coding: [{ system: "http://terminology.hl7.org/CodeSystem/v2-0203", code: "DL", display }] }, value: "1" }]
    })
    expect(dl("Führerscheinnummer")).toEqual([])
    expect(dl("Driver's License")[0]?.diagnostics).toContain("Valid display is one of 3 choices")
  })

  withCatalog("a Coding.system must be absolute, a code system, and not a supplement", (c) => {
    const observation = (system: string) => ({ resourceType: "Observation", status: "final", code: { coding: [{ system, code: "x" }] } })
    expect(errors(validateResource(observation("local-codes"), c))).toEqual([expect.objectContaining({
      code: "code-invalid",
      expression: "Observation.code.coding[0].system",
      diagnostics: "Coding.system must be an absolute reference, not a local reference ('local-codes')"
    })])
    expect(errors(validateResource(observation("urn:oid:1.2.3.4"), c))).toEqual([])
    expect(errors(validateResource(observation("http://hl7.org/fhir/ValueSet/observation-codes"), c))).toEqual([expect.objectContaining({
      expression: "Observation.code.coding[0].system",
      diagnostics: "The Coding references a value set, not a code system ('http://hl7.org/fhir/ValueSet/observation-codes')"
    })])
  })

  withCatalog("a supplement named as Coding.system is an error", async () => {
    const { build } = await import("../../src/catalog/Catalog.ts")
    const supplement = {
      resourceType: "CodeSystem", url: "http://example.org/supplement", status: "active", content: "supplement",
      supplements: "http://terminology.hl7.org/CodeSystem/observation-category", concept: [{ code: "vital-signs", designation: [{ language: "fr", value: "Signes vitaux" }] }]
    }
    const resources = (await loadResources())!
    const extended = build([...resources, supplement], 2)
    const found = errors(validateResource({ resourceType: "Observation", status: "final", code: { coding: [{ system: "http://example.org/supplement", code: "vital-signs" }] } }, extended))
    expect(found).toEqual([expect.objectContaining({ expression: "Observation.code.coding[0].system", diagnostics: "CodeSystem http://example.org/supplement is a supplement, so can't be used as a value in Coding.system" })])
  }, 120_000)

  withCatalog("a code differing by case in a case-insensitive system is information; an unknown code of a fragment a warning", async () => {
    const { build } = await import("../../src/catalog/Catalog.ts")
    const system = (url: string, content: string, caseSensitive: boolean) => ({
      resourceType: "CodeSystem", url, status: "active", content, caseSensitive, concept: [{ code: "Alpha", display: "Alpha" }]
    })
    const extended = build([...(await loadResources())!, system("http://example.org/insensitive", "complete", false), system("http://example.org/fragment", "fragment", true)], 2)
    const observation = (url: string, code: string) => validateResource({ resourceType: "Observation", status: "final", code: { coding: [{ system: url, code }] } }, extended)
      .filter((issue) => issue.expression.startsWith("Observation.code"))
    expect(observation("http://example.org/insensitive", "alpha")).toEqual([expect.objectContaining({
      severity: "information", expression: "Observation.code.coding[0].code", diagnostics: expect.stringContaining("differs from the correct code 'Alpha' by case")
    })])
    expect(observation("http://example.org/insensitive", "Alpha")).toEqual([])
    expect(observation("http://example.org/fragment", "Beta")).toEqual([expect.objectContaining({
      severity: "warning", expression: "Observation.code.coding[0].code", diagnostics: expect.stringContaining("the code system is a fragment")
    })])
    expect(observation("http://example.org/fragment", "Alpha")).toEqual([])
  }, 120_000)

  withCatalog("a code without a system is a warning", (c) => {
    const found = coded(c, { resourceType: "Observation", status: "final", code: { coding: [{ code: "8310-5" }] } })
    expect(found).toEqual([expect.objectContaining({ severity: "warning", expression: "Observation.code.coding[0]" })])
    expect(found[0]?.diagnostics).toContain("A code with no system has no defined meaning")
  })

  withCatalog("a deprecated or inactive code is a warning", (c) => {
    // v2 table 0078 is deprecated in favour of v3 ObservationInterpretation, which has the same codes.
    const interpretation = (code: string, table = "v2-0078") => coded(c, {
      resourceType: "Observation", status: "final", code: { text: "x" },
      interpretation: [{ coding: [{ system: `http://terminology.hl7.org/CodeSystem/${table}`, code }] }]
    }).filter((issue) => issue.code === "business-rule")
    expect(interpretation("L")).toEqual([{
      severity: "warning", code: "business-rule", expression: "Observation.interpretation[0].coding[0]",
      diagnostics: "The concept 'L' is deprecated and its use should be reviewed"
    }])
    expect(interpretation("L", "v3-ObservationInterpretation")).toEqual([])
  })
})

describe("SNOMED CT identifiers", () => {
  it.each(["36989005", "44054006", "276885007", "900000000000003001", "731000124108"])("%s is well-formed", (code) => {
    expect(sctidProblem(code)).toBeUndefined()
  })
  it.each(["1", "2", "12345", "276885007x", "36989006", "034552", "234234"])("%s is not", (code) => {
    expect(sctidProblem(code)).toBeDefined()
  })
})

describe("the terminology resources", () => {
  const findings = (c: Catalog, resource: unknown) => problems(c, resource).filter((issue) => !issue.diagnostics.includes("-0:") && issue.code !== "extension")

  withCatalog("a CodeSystem may not define a code twice, and its count agrees with a complete content", (c) => {
    const codeSystem = (extra: Record<string, unknown>) => ({
      resourceType: "CodeSystem", url: "http://example.org/cs", name: "Cs", status: "draft", content: "complete",
      concept: [{ code: "a", display: "A" }, { code: "b", display: "B", concept: [{ code: "c", display: "C" }] }], ...extra
    })
    expect(errors(validateResource(codeSystem({ count: 3 }), c))).toEqual([])
    expect(errors(validateResource(codeSystem({ count: 2 }), c))).toEqual([expect.objectContaining({
      expression: "CodeSystem.count",
      diagnostics: "The code system is complete, but the number of concepts (3) does not match the stated total number (2)"
    })])
    const twice = codeSystem({ concept: [{ code: "a", display: "A" }, { code: "b", display: "B", concept: [{ code: "a", display: "A" }] }] })
    expect(errors(validateResource(twice, c))).toContainEqual(expect.objectContaining({
      expression: "CodeSystem.concept[1].concept[0]",
      diagnostics: "The code 'a' has already been defined"
    }))
    expect(errors(validateResource(codeSystem({ content: "not-present" }), c))).toEqual([expect.objectContaining({
      expression: "CodeSystem.concept[0]", diagnostics: "The code system says it has no content present, but concepts are found"
    })])
    expect(findings(c, codeSystem({ concept: undefined }))[0]?.diagnostics).toContain("it doesn't make sense for there to be no concepts defined")
  })

  withCatalog("a CodeSystem concept's property value has the declared type; an undeclared property is a warning", (c) => {
    const codeSystem = (property: Record<string, unknown>) => ({
      resourceType: "CodeSystem", url: "http://example.org/cs", name: "Cs", status: "draft", content: "complete",
      property: [{ code: "weight", type: "integer" }], concept: [{ code: "a", display: "A", property: [property] }]
    })
    expect(errors(validateResource(codeSystem({ code: "weight", valueInteger: 3 }), c))).toEqual([])
    expect(errors(validateResource(codeSystem({ code: "weight", valueString: "3" }), c))).toEqual([expect.objectContaining({
      expression: "CodeSystem.concept[0].property[0]",
      diagnostics: "The property 'weight' has the invalid type 'string', when it is defined to have the type 'integer'"
    })])
    const declaredTwice = { ...codeSystem({ code: "weight", valueInteger: 3 }), property: [{ code: "weight", type: "integer" }, { code: "weight", type: "integer" }] }
    expect(errors(validateResource(declaredTwice, c))).toEqual([expect.objectContaining({
      expression: "CodeSystem.property[1]", diagnostics: "A property is already defined with the code 'weight'"
    })])
    const undeclared = findings(c, codeSystem({ code: "colour", valueString: "red" }))
    expect(undeclared).toEqual([expect.objectContaining({ severity: "warning", expression: "CodeSystem.concept[0].property[0]" })])
  })

  withCatalog("a supplement names the system it supplements and only adds to its codes", (c) => {
    const supplement = (concept: ReadonlyArray<Record<string, unknown>>, supplements?: string) => ({
      resourceType: "CodeSystem", url: "http://example.org/supplement", name: "Supplement", status: "draft", content: "supplement",
      ...(supplements === undefined ? {} : { supplements }), concept
    })
    const base = "http://terminology.hl7.org/CodeSystem/observation-category"
    expect(errors(validateResource(supplement([{ code: "vital-signs", designation: [{ language: "fr", value: "Signes vitaux" }] }], base), c))).toEqual([])
    expect(errors(validateResource(supplement([{ code: "vital-sign" }], base), c))).toEqual([expect.objectContaining({
      expression: "CodeSystem.concept[0]",
      diagnostics: `The code 'vital-sign' is not declared in the base CodeSystem ${base}|4.0.1 so is not valid in the supplement`
    })])
    const notSupplement = { ...supplement([{ code: "vital-signs" }], base), content: "complete" }
    expect(errors(validateResource(notSupplement, c)).map((issue) => issue.diagnostics)).toContain(
      "A CodeSystem that supplements another SHALL have the content 'supplement'")
    expect(errors(validateResource(supplement([{ code: "x" }]), c)).map((issue) => issue.diagnostics)).toContain(
      "The code system is marked as a supplement, but it does not define what code system it supplements")
  })

  const valueSet = (include: Record<string, unknown>) => ({ resourceType: "ValueSet", url: "http://example.org/vs", name: "Vs", status: "draft", compose: { include: [include] } })

  withCatalog("a ValueSet includes code systems by absolute URI, not value sets", (c) => {
    expect(errors(validateResource(valueSet({ system: "http://hl7.org/fhir/administrative-gender" }), c))).toEqual([])
    const listed = (code: string) => errors(validateResource(valueSet({ system: "http://hl7.org/fhir/administrative-gender", concept: [{ code }] }), c))
    expect(listed("female")).toEqual([])
    expect(listed("woman")).toEqual([expect.objectContaining({ expression: "ValueSet.compose.include[0].concept[0]" })])
    expect(errors(validateResource(valueSet({ system: "#local" }), c))).toEqual(expect.arrayContaining([expect.objectContaining({
      expression: "ValueSet.compose.include[0]",
      diagnostics: expect.stringContaining("URI values in ValueSet.compose.include.system must be absolute. To reference a contained code system")
    })]))
    expect(errors(validateResource(valueSet({ system: "http://hl7.org/fhir/ValueSet/administrative-gender" }), c))).toEqual([expect.objectContaining({
      expression: "ValueSet.compose.include[0]", diagnostics: expect.stringContaining("The system 'http://hl7.org/fhir/ValueSet/administrative-gender' is actually a value set")
    })])
  })

  withCatalog("a ValueSet filter uses a property its system knows, with a value of the property's type", (c) => {
    // v3-ActCode declares the property 'notSelectable' (boolean); 'concept' is known for every system.
    const filter = (property: string, op: string, value: string) =>
      valueSet({ system: "http://terminology.hl7.org/CodeSystem/v3-ActCode", filter: [{ property, op, value }] })
    expect(findings(c, filter("concept", "is-a", "_ActAccountCode"))).toEqual([])
    expect(findings(c, filter("notSelectable", "=", "true"))).toEqual([])
    expect(errors(validateResource(filter("notSelectable", "=", "yes"), c))).toEqual([expect.objectContaining({
      expression: "ValueSet.compose.include[0].filter[0]",
      diagnostics: "The value for a filter based on property 'notSelectable' must be either 'true' or 'false', not 'yes'"
    })])
    const unknown = findings(c, filter("colour", "=", "red"))
    expect(unknown).toEqual([expect.objectContaining({ severity: "warning", expression: "ValueSet.compose.include[0].filter[0]" })])
    expect(unknown[0]?.diagnostics).toContain("The property 'colour' is not known for the system")
  })

  it("a ValueSet filter value has the type of the property its held system declares: integer, decimal, dateTime, code, Coding", async (context) => {
    const resources = await loadResources()
    if (resources === undefined) return context.skip()
    const typed = {
      resourceType: "CodeSystem", url: "http://filters.test/cs", name: "Typed", status: "draft", content: "complete",
      property: [
        { code: "rank", type: "integer" }, { code: "weight", type: "decimal" }, { code: "since", type: "dateTime" },
        { code: "group", type: "code" }, { code: "sex", type: "Coding" }
      ],
      concept: [{ code: "a", display: "A" }]
    }
    const held = build([...resources, typed], 3)
    const filtered = (property: string, op: string, value: string) =>
      errors(validateResource(valueSet({ system: "http://filters.test/cs", filter: [{ property, op, value }] }), held)).map((issue) => issue.diagnostics)
    // Good values: numbers and dates may carry a comparison prefix; `in` lists several.
    for (const [property, op, value] of [
      ["rank", "=", "3"], ["rank", "=", "gt2"], ["rank", "in", "1,2"], ["weight", "=", "1.5"], ["weight", "=", "-2e3"],
      ["since", "=", "2020-01"], ["since", "=", "ge2020-01-01T10:00:00Z"], ["group", "=", "x"],
      ["sex", "=", "http://hl7.org/fhir/administrative-gender#male"], ["sex", "=", "http://loinc.org#1-8"]
    ] as const) expect(filtered(property, op, value), `${property} ${value}`).toEqual([])
    expect(filtered("rank", "=", "3.5")).toEqual(["The value for a filter based on property 'rank' must be integer value, not '3.5'"])
    expect(filtered("rank", "in", "1,two")).toEqual(["The value for a filter based on property 'rank' must be integer value, not 'two'"])
    expect(filtered("weight", "=", "heavy")).toEqual(["The value for a filter based on property 'weight' must be a decimal value, not 'heavy'"])
    expect(filtered("since", "=", "last year")).toEqual(["The value for a filter based on property 'since' must be a valid date(/time), not 'last year'"])
    expect(filtered("group", "=", " x")).toEqual(["The value for a filter based on property 'group' must be a valid code, not ' x'"])
    expect(filtered("sex", "=", "male")).toEqual(["The value for a filter based on property 'sex' must be in the format system(|version)#code, not 'male'"])
    expect(filtered("sex", "=", "http://hl7.org/fhir/administrative-gender#man")).toEqual([
      "The value for a filter based on property 'sex' is 'http://hl7.org/fhir/administrative-gender#man' which is not a valid code (Unknown code 'man' in the CodeSystem 'http://hl7.org/fhir/administrative-gender' version '4.0.1')"
    ])
    // regex and exists take other values.
    expect(filtered("rank", "regex", "[0-9]+")).toEqual([])
    expect(filtered("rank", "exists", "true")).toEqual([])
  })

  withCatalog("a ConceptMap's source and target codes are codes of the systems it maps (warnings)", (c) => {
    const conceptMap = (source: string, target: string, display?: string) => ({
      resourceType: "ConceptMap", url: "http://example.org/cm", name: "Cm", status: "draft",
      group: [{
        source: "http://hl7.org/fhir/administrative-gender", target: "http://terminology.hl7.org/CodeSystem/v3-AdministrativeGender",
        element: [{ code: source, ...(display === undefined ? {} : { display }), target: [{ code: target, equivalence: "equivalent" }] }]
      }]
    })
    expect(findings(c, conceptMap("male", "M"))).toEqual([])
    expect(findings(c, conceptMap("male", "M", "Male"))).toEqual([])
    expect(findings(c, conceptMap("man", "X"))).toEqual([
      expect.objectContaining({ severity: "warning", expression: "ConceptMap.group[0].element[0].code", diagnostics: expect.stringContaining("The source code 'man' is not valid in the code system http://hl7.org/fhir/administrative-gender") }),
      expect.objectContaining({ severity: "warning", expression: "ConceptMap.group[0].element[0].target[0].code", diagnostics: expect.stringContaining("The target code 'X' is not valid") })
    ])
    expect(findings(c, conceptMap("male", "M", "Man"))[0]?.diagnostics).toContain("The source display 'Man' for the code")
  })
})

describe("the vital signs profiles", () => {
  const temperature = (extra: Record<string, unknown>) => ({
    resourceType: "Observation", status: "final",
    category: [{ coding: [{ system: "http://terminology.hl7.org/CodeSystem/observation-category", code: "vital-signs" }] }],
    subject: { reference: "Patient/1" }, effectiveDateTime: "2020-01-01",
    valueQuantity: { value: 37, unit: "Cel", system: "http://unitsofmeasure.org", code: "Cel" }, ...extra
  })

  withCatalog("an Observation with a vital sign's code is checked against its profile: errors, or warnings when so set", (c) => {
    expect(problems(c, temperature({ code: { coding: [{ system: "http://loinc.org", code: "2339-0" }] } }))).toEqual([])
    const { effectiveDateTime: _, ...undated } = temperature({ code: { coding: [{ system: "http://loinc.org", code: "8331-1" }] } })
    const oral = errors(problems(c, undated))
    expect(oral.length).toBeGreaterThan(0)
    expect(oral.map((issue) => issue.diagnostics)).toContainEqual(expect.stringContaining("slice 'BodyTempCode' requires at least 1"))
    expect(oral.map((issue) => issue.diagnostics)).toContainEqual(expect.stringContaining("Observation.effective[x]: minimum required = 1"))
    expect(oral.every((issue) => issue.diagnostics.includes("vital signs profile http://hl7.org/fhir/StructureDefinition/bodytemp"))).toBe(true)
    // validation.vital_signs = "warning": the same findings, none of them refusing the Observation.
    const warned = validateResource(undated, c, { vitalSigns: "warning" })
    expect(errors(warned)).toEqual([])
    expect(oral.every((error) => warned.some((issue) => issue.severity === "warning" && issue.diagnostics === error.diagnostics))).toBe(true)
  })

  withCatalog("an Observation with another code is not held to a vital signs profile", (c) => {
    expect(problems(c, { resourceType: "Observation", status: "final", code: { coding: [{ system: "http://loinc.org", code: "2339-0" }] } })).toEqual([])
  })
})

describe("properties and filters by their common meaning", () => {
  const codeSystem = (property: ReadonlyArray<Record<string, unknown>>, extra: Record<string, unknown> = {}) => ({
    resourceType: "CodeSystem", url: "http://example.org/cs/props", name: "Props", status: "draft", content: "complete",
    property, concept: [{ code: "a" }], ...extra
  })
  const uri = (code: string) => `http://hl7.org/fhir/concept-properties#${code}`

  withCatalog("a property with a concept-properties URI has that URI's code and type, and a URI is declared once", (c) => {
    const found = errors(validateResource(codeSystem([
      { uri: uri("notSelectable"), code: "notSelectable", type: "dateTime" },
      { uri: uri("notSelectable"), code: "not-selectable", type: "boolean" },
      { uri: uri("deprecationDate"), code: "inactive", type: "dateTime" }
    ]), c)).map((issue) => [issue.expression, issue.diagnostics.slice(0, 30)])
    expect(found).toEqual([
      ["CodeSystem.property[0]", "Wrong type 'dateTime': The URI"],
      ["CodeSystem.property[1]", "A property is already defined "],
      ["CodeSystem.property[1]", "The URI 'http://hl7.org/fhir/c"],
      ["CodeSystem.property[2]", "The URI 'http://hl7.org/fhir/c"]
    ])
    expect(errors(validateResource(codeSystem([{ uri: uri("notSelectable"), code: "notSelectable", type: "boolean" }]), c))).toEqual([])
  })

  withCatalog("a SNOMED CT attribute is filtered by = and in; notSelectable by true or false", (c) => {
    const valueSet = (include: ReadonlyArray<Record<string, unknown>>) => ({ resourceType: "ValueSet", url: "http://example.org/vs/f", status: "draft", compose: { include } })
    const snomedFilter = (op: string) => valueSet([{ system: "http://snomed.info/sct", filter: [{ property: "1142143009", op, value: "734137005" }] }])
    const refused = errors(validateResource(snomedFilter("not-in"), c))
    expect(refused).toEqual([expect.objectContaining({ expression: "ValueSet.compose.include[0].filter[0]" })])
    expect(refused[0]!.diagnostics).toContain("Allowed ops: =,in")
    expect(errors(validateResource(snomedFilter("="), c))).toEqual([])
    const tooth = (value: string) => valueSet([{ system: "http://terminology.hl7.org/CodeSystem/ex-tooth", filter: [{ property: "notSelectable", op: "=", value }] }])
    expect(errors(validateResource(tooth("1"), c)).map((issue) => issue.diagnostics)).toEqual([expect.stringContaining("must be either 'true' or 'false', not '1'")])
    expect(errors(validateResource(tooth("true"), c))).toEqual([])
  })

  withCatalog("a supplement of LOINC or SNOMED CT cannot add a code of another form", (c) => {
    const supplement = (code: string) => ({
      resourceType: "CodeSystem", url: "http://example.org/cs/loinc-supplement", name: "S", status: "draft", content: "supplement",
      supplements: "http://loinc.org", concept: [{ code, display: "x" }]
    })
    expect(errors(validateResource(supplement("test"), c)).map((issue) => issue.expression)).toEqual(["CodeSystem.concept[0]"])
    expect(errors(validateResource(supplement("2339-0"), c))).toEqual([])
  })
})
