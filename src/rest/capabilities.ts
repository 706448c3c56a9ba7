/**
 * `/metadata` (https://hl7.org/fhir/R4/capabilitystatement.html): built from the catalog, once per
 * catalog generation. `rest.documentation` states the search rules and limits (spec: FHIR API).
 */
import type { Catalog } from "../catalog/Catalog.ts"
import { buildVersion } from "../version.ts"
import { searchableCompartment } from "../search/plan/compartment.ts"
import { everythingOperations } from "./everything.ts"
import { maxCount } from "./history.ts"

export const searchDocumentation = [
  "Search: a comma between the values of one parameter means OR, for ids and every parameter type; `\\,` is a literal comma; one value lists at most 1000 alternatives.",
  "A parameter given more than once is AND, in a query string, in a Bundle entry URL and in Subscription criteria.",
  "`_include:iterate` and `_revinclude:iterate` apply to the matches and to the resources already added until none is added; more than 1000 resources added that way to one page is a 400.",
  "A search parameter value that cannot be read is a 400 OperationOutcome naming the parameter, the value and what was expected; `Prefer: handling=lenient` sets it aside with a warning.",
  `Paging: _count defaults to 20 and is at most ${maxCount}. Request bodies are limited to server.max_body_bytes (16 MiB by default).`
].join("\n")

/**
 * `searchInclude` and `searchRevInclude` of `type`: `*` and `type:param` for its own reference parameters,
 * and `Source:param` for each reference parameter that can point at it (one listing `Resource` points at
 * any type, one listing no target at none). Computed once per catalog generation, with the rest.
 */
const includesOf = (catalog: Catalog, type: string) => {
  const references = (source: string) => [...catalog.searchParameters(source).values()].filter((param) => param.type === "reference")
  const own = references(type).map((param) => `${type}:${param.code}`).sort()
  const reverse = catalog.resourceTypes.flatMap((source) =>
    references(source).filter((param) => param.target.includes(type) || param.target.includes("Resource")).map((param) => `${source}:${param.code}`)).sort()
  return { ...(own.length > 0 ? { searchInclude: ["*", ...own] } : {}), ...(reverse.length > 0 ? { searchRevInclude: reverse } : {}) }
}

const interactions = ["read", "vread", "update", "patch", "delete", "history-instance", "history-type", "create"]

/** The CapabilityStatement of this server for `catalog`, as JSON. */
export const capabilityStatement = (catalog: Catalog, options: { readonly base: string; readonly updateAsCreate: boolean; readonly date: string }) => ({
  resourceType: "CapabilityStatement",
  status: "active",
  date: options.date,
  kind: "instance",
  software: { name: "svc", version: buildVersion },
  implementation: { description: "svc FHIR R4 server", url: options.base },
  fhirVersion: catalog.fhirVersion,
  format: ["application/fhir+json", "application/fhir+xml"],
  patchFormat: ["application/json-patch+json", "application/fhir+json"],
  rest: [{
    mode: "server",
    documentation: searchDocumentation,
    interaction: [{ code: "transaction" }, { code: "batch" }, { code: "history-system" }, { code: "search-system" }],
    compartment: catalog.compartments.filter((c) => searchableCompartment(catalog, c.code) !== undefined).map((c) => c.url),
    resource: catalog.resourceTypes.map((type) => ({
      type,
      ...(catalog.structureDefinitionForType(type)?.url ? { profile: catalog.structureDefinitionForType(type)!.url } : {}),
      interaction: interactions.map((code) => ({ code })),
      versioning: "versioned-update",
      readHistory: true,
      updateCreate: options.updateAsCreate,
      conditionalCreate: true,
      conditionalUpdate: true,
      conditionalDelete: "single",
      operation: [
        { name: "validate", definition: "http://hl7.org/fhir/OperationDefinition/Resource-validate" },
        ...(everythingOperations[type] === undefined || catalog.compartment(type) === undefined ? [] : [{ name: "everything", definition: everythingOperations[type] }])
      ],
      ...includesOf(catalog, type)
      // searchParam is listed once the whole search is served.
    }))
  }]
})
