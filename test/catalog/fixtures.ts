/** Small hand-written conformance resources for the catalog tests. */
type Json = Record<string, unknown>

const sdBase = "http://hl7.org/fhir/StructureDefinition/"

export const structure = (type: string, fields: Json = {}): Json => ({
  resourceType: "StructureDefinition",
  id: type,
  url: `${sdBase}${type}`,
  version: "4.0.1",
  name: type,
  type,
  kind: "resource",
  abstract: false,
  derivation: "specialization",
  baseDefinition: `${sdBase}DomainResource`,
  fhirVersion: "4.0.1",
  ...fields
})

/** Resource and DomainResource (abstract), Patient, Observation, Bundle (not a DomainResource) and a datatype. */
export const structures: ReadonlyArray<Json> = [
  structure("Resource", { abstract: true, derivation: undefined, baseDefinition: undefined }),
  structure("DomainResource", { abstract: true, baseDefinition: `${sdBase}Resource` }),
  structure("Patient"),
  structure("Observation"),
  structure("Bundle", { baseDefinition: `${sdBase}Resource` }),
  structure("HumanName", { kind: "complex-type", baseDefinition: `${sdBase}Element` })
]

export const searchParameter = (id: string, code: string, base: ReadonlyArray<string>, fields: Json = {}): Json => ({
  resourceType: "SearchParameter",
  id,
  url: `http://hl7.org/fhir/SearchParameter/${id}`,
  version: "4.0.1",
  name: code,
  code,
  base,
  type: "token",
  expression: base.map((b) => `${b}.${code}`).join(" | "),
  ...fields
})

export const searchParameters: ReadonlyArray<Json> = [
  searchParameter("Resource-id", "_id", ["Resource"], { expression: "Resource.id" }),
  searchParameter("Resource-lastUpdated", "_lastUpdated", ["Resource"], { type: "date", expression: "Resource.meta.lastUpdated" }),
  searchParameter("Resource-profile", "_profile", ["Resource"], { type: "uri", expression: "Resource.meta.profile" }),
  searchParameter("DomainResource-text", "_text", ["DomainResource"], { type: "string", expression: undefined }),
  searchParameter("Patient-gender", "gender", ["Patient"]),
  searchParameter("clinical-patient", "patient", ["Observation", "Condition"], {
    type: "reference",
    target: ["Patient", "Group"],
    expression: "Observation.subject.where(resolve() is Patient) | Condition.subject.where(resolve() is Patient)"
  }),
  searchParameter("Observation-code", "code", ["Observation"]),
  searchParameter("Observation-code-value-quantity", "code-value-quantity", ["Observation"], {
    type: "composite",
    multipleOr: false,
    component: [
      { definition: "http://hl7.org/fhir/SearchParameter/Observation-code", expression: "code" },
      { definition: "http://hl7.org/fhir/SearchParameter/Observation-value-quantity", expression: "value.as(Quantity)" }
    ]
  })
]

export const compartment = (code: string, resource: ReadonlyArray<Json>, fields: Json = {}): Json => ({
  resourceType: "CompartmentDefinition",
  id: code.toLowerCase(),
  url: `http://hl7.org/fhir/CompartmentDefinition/${code.toLowerCase()}`,
  version: "4.0.1",
  name: `Base FHIR compartment definition for ${code}`,
  status: "draft",
  code,
  search: true,
  resource,
  ...fields
})

export const operation = (id: string, code: string, fields: Json): Json => ({
  resourceType: "OperationDefinition",
  id,
  url: `http://hl7.org/fhir/OperationDefinition/${id}`,
  version: "4.0.1",
  name: code,
  status: "draft",
  kind: "operation",
  code,
  ...fields
})

export const operations: ReadonlyArray<Json> = [
  operation("Patient-everything", "everything", {
    resource: ["Patient"],
    system: false,
    type: true,
    instance: true,
    parameter: [
      { name: "start", use: "in", min: 0, max: "1", type: "date" },
      { name: "return", use: "out", min: 1, max: "1", type: "Bundle" }
    ]
  }),
  operation("Resource-validate", "validate", {
    resource: ["Resource"],
    system: false,
    type: true,
    instance: true,
    parameter: [{ name: "resource", use: "in", min: 0, max: "1", type: "Resource" }]
  }),
  operation("MessageHeader-process-message", "process-message", {
    resource: ["MessageHeader"],
    system: true,
    type: false,
    instance: false,
    parameter: [{ name: "content", use: "in", min: 1, max: "1", type: "Bundle" }]
  })
]
