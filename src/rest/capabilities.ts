/**
 * `/metadata` (https://hl7.org/fhir/R4/capabilitystatement.html): built from the catalog, once per
 * catalog generation. `rest.documentation` states the search rules and limits (spec: FHIR API).
 */
import type { Catalog } from "../catalog/Catalog.ts"
import { buildVersion } from "../version.ts"
import { searchableCompartment } from "../search/plan/compartment.ts"
import { referencedTypes, searchParamsOf, systemSearchParams } from "./capabilityParams.ts"
import { maxCount, maxOffset } from "../search/parse/result.ts"
import { maxParameters, maxSearchAlternatives } from "../search/parse/problems.ts"
import { maxBodyDepth } from "./bodyCheck.ts"

export const searchDocumentation = [
  "Search: a comma between the values of one parameter means OR, for ids and every parameter type; `\\,` is a literal comma; one value lists at most 1000 alternatives.",
  "A parameter given more than once is AND, in a query string, in a Bundle entry URL and in Subscription criteria.",
  "`_include:iterate` and `_revinclude:iterate` apply to the matches and to the resources already added until none is added; more than 1000 resources added that way to one page is a 400.",
  "A search parameter value that cannot be read is a 400 OperationOutcome naming the parameter, the value and what was expected; `Prefer: handling=lenient` sets it aside with a warning.",
  `Paging: _count defaults to 20 and is at most ${maxCount}; _offset is at most ${maxOffset}; next and previous links carry a _cursor, refused with a 400 when changed; ` +
    "a page holds at most server.max_page_bytes of resources (4 MiB by default; a larger resource alone). " +
    `One search takes at most ${maxParameters} parameters and ${maxSearchAlternatives} comma-separated alternatives in all. ` +
    "Request bodies are limited to server.max_body_bytes (16 MiB by default).",
  `A body nests at most ${maxBodyDepth} levels (JSON objects and arrays, XML elements). Text holding a control character other than TAB, CR and LF, U+FFFE, U+FFFF or an unpaired surrogate is refused with a 400, in a body, a URL or a query parameter, as are percent-encoded bytes that are not UTF-8.`,
  "Writes: a resource written has at most server.max_index_rows search index values (50,000 by default), a patch at most server.max_patch_operations operations (1,000), " +
    "a Bundle, run or stored, at most server.max_bundle_entries entries (10,000); more is a 413."
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
  return { searchInclude: own.length > 0 ? ["*", ...own] : [], searchRevInclude: reverse }
}

/** The operations served on a type, or (undefined) at system level (the Operations service's `on`). */
type OperationsOn = (type: string | undefined) => ReadonlyArray<{ readonly name: string; readonly definition: string }>

const interactions = ["read", "vread", "update", "patch", "delete", "history-instance", "history-type", "create", "search-type"]

/** The operations invocable on `type` (operations/registry.ts); `$everything` where its compartment exists. */
const operationsOf = (catalog: Catalog, type: string, operationsOn: OperationsOn) =>
  operationsOn(type).filter((operation) => operation.name !== "everything" || catalog.compartment(type) !== undefined)

/** The operations served at system level (`[base]/$op`), when there are any. */
const systemOperations = (operationsOn: OperationsOn) => {
  const served = operationsOn(undefined)
  return served.length > 0 ? { operation: served } : {}
}

const compartmentsOf = (catalog: Catalog) => {
  const urls = catalog.compartments.filter((c) => searchableCompartment(catalog, c.code) !== undefined).map((c) => c.url)
  return urls.length > 0 ? { compartment: urls } : {}
}

const narrative = {
  status: "generated",
  div: "<div xmlns=\"http://www.w3.org/1999/xhtml\"><p>svc FHIR R4 server: the resource types, interactions, search parameters and operations it serves.</p></div>"
}

/** R4's extension naming the websocket URL of Subscriptions (https://hl7.org/fhir/R4/extension-capabilitystatement-websocket.html). */
export const websocketExtension = "http://hl7.org/fhir/StructureDefinition/capabilitystatement-websocket"

/** The `/ws` URL of a server whose FHIR base is `base` (`https://host/fhir` → `wss://host/ws`). */
export const websocketUrl = (base: string): string => {
  const url = new URL(base)
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:"
  url.pathname = url.pathname.replace(/\/fhir\/?$/, "").replace(/\/+$/, "") + "/ws"
  url.search = ""
  url.hash = ""
  return url.toString()
}

/** The CapabilityStatement of this server for `catalog`, as JSON. */
export const capabilityStatement = (catalog: Catalog, options: {
  readonly base: string | undefined
  readonly updateAsCreate: boolean
  readonly date: string
  readonly operationsOn: OperationsOn
  /** The operations served at system level (`[base]/$op`). */
}) => {
  const hasTargets = referencedTypes(catalog)
  return {
    resourceType: "CapabilityStatement",
    text: narrative,
    name: "Svc",
    title: "svc FHIR R4 server",
    status: "active",
    date: options.date,
    kind: "instance",
    // Bulk Data Access 2.0's server capabilities (docs/export.md).
    instantiates: ["http://hl7.org/fhir/uv/bulkdata/CapabilityStatement/bulk-data"],
    software: { name: "svc", version: buildVersion },
    // The base is known only from server.public_url: a Host header must not decide a statement shared by every client.
    implementation: { description: "svc FHIR R4 server", ...(options.base === undefined ? {} : { url: options.base }) },
    fhirVersion: catalog.fhirVersion,
    format: ["application/fhir+json", "application/fhir+xml"],
    patchFormat: ["application/json-patch+json", "application/fhir+json"],
    rest: [{
      mode: "server",
      // Where the websocket channel of Subscriptions is served (docs/subscriptions.md), known from the public URL too.
      ...(options.base === undefined ? {} : { extension: [{ url: websocketExtension, valueUri: websocketUrl(options.base) }] }),
      documentation: searchDocumentation,
      resource: catalog.resourceTypes.map((type) => {
        const referenced = hasTargets.has(type)
        const { searchInclude, searchRevInclude } = includesOf(catalog, type)
        return {
          type,
          ...(catalog.structureDefinitionForType(type)?.url ? { profile: catalog.structureDefinitionForType(type)!.url } : {}),
          interaction: interactions.map((code) => ({ code })),
          versioning: "versioned-update",
          readHistory: true,
          updateCreate: options.updateAsCreate,
          conditionalCreate: true,
          conditionalRead: "full-support",
          conditionalUpdate: true,
          conditionalDelete: "single",
          ...(searchInclude.length > 0 ? { searchInclude } : {}),
          ...(searchRevInclude.length > 0 ? { searchRevInclude } : {}),
          searchParam: searchParamsOf(catalog, type, referenced),
          operation: operationsOf(catalog, type, options.operationsOn)
        }
      }),
      interaction: [{ code: "transaction" }, { code: "batch" }, { code: "search-system" }, { code: "history-system" }],
      searchParam: systemSearchParams(catalog),
      ...systemOperations(options.operationsOn),
      ...compartmentsOf(catalog)
    }]
  }
}
