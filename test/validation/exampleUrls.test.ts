/** URLs on the example domains where a resource refers to a FHIR artefact (src/validation/exampleUrls.ts). */
import { expect } from "vitest"
import { validateResource } from "../../src/validation/Validator.ts"
import { catalogTests, errors } from "./support.ts"

const withCatalog = catalogTests()

const narrative = { status: "generated", div: "<div xmlns=\"http://www.w3.org/1999/xhtml\">x</div>" }

const saying = (issues: ReturnType<typeof validateResource>) =>
  errors(issues).filter((issue) => issue.diagnostics.startsWith("Example URLs are not allowed")).map((issue) => issue.expression)

withCatalog("a canonical on an example domain that the server does not hold is an error; examples mode accepts it", (c) => {
  const response = { resourceType: "QuestionnaireResponse", text: narrative, status: "completed", questionnaire: "http://example.org/Questionnaire/intake" }
  expect(saying(validateResource(response, c))).toEqual(["QuestionnaireResponse.questionnaire"])
  expect(saying(validateResource({ ...response, questionnaire: "http://forms.test/Questionnaire/intake" }, c))).toEqual([])
  expect(saying(validateResource(response, c, { examples: true }))).toEqual([])
  // The example OID arc, in a canonical.
  const oid = { resourceType: "Patient", text: narrative, meta: { profile: ["urn:oid:2.999.1.2"] } }
  expect(saying(validateResource(oid, c))).toEqual(["Patient.meta.profile[0]"])
})

withCatalog("a uri on an example domain is an error when it names a resource type in its path, not as a plain name", (c) => {
  const coded = (system: string) => ({
    resourceType: "Observation", text: narrative, status: "final",
    code: { coding: [{ system, code: "a" }] },
    identifier: [{ system: "http://example.org/mrn", value: "1" }]
  })
  expect(saying(validateResource(coded("http://example.org/fhir/CodeSystem/shapes"), c))).toEqual(["Observation.code.coding[0].system"])
  // `http://example.org/mrn` names nothing to resolve: accepted, as the identifier system above is.
  expect(saying(validateResource(coded("http://example.org/codes"), c))).toEqual([])
})

withCatalog("a resource's own url, a Bundle's fullUrls and a text-link's value are not looked at", (c) => {
  const valueSet = { resourceType: "ValueSet", text: narrative, url: "http://example.org/fhir/ValueSet/v", status: "draft" }
  expect(saying(validateResource(valueSet, c))).toEqual([])
  const bundle = {
    resourceType: "Bundle", type: "collection",
    entry: [{ fullUrl: "http://example.org/fhir/Patient/1", resource: { resourceType: "Patient", id: "1", text: narrative } }]
  }
  expect(saying(validateResource(bundle, c))).toEqual([])
})

withCatalog("an extension url on an example domain is refused at its url as well, unless allowed", (c) => {
  const patient = { resourceType: "Patient", text: narrative, extension: [{ url: "http://example.org/fhir/StructureDefinition/colour", valueString: "red" }] }
  expect(saying(validateResource(patient, c))).toEqual(["Patient.extension[0].url"])
  expect(errors(validateResource(patient, c, { allowedExtensionDomains: ["http://example.org/"] }))).toEqual([])
  expect(errors(validateResource(patient, c, { examples: true }))).toEqual([])
})
