/**
 * URLs on the domains of the specification's examples (example.org, example.com, example.net, acme.com,
 * acme.org, and the example OID arcs 2.999 and 1.3.6.1.4.1.32473) where a real resource refers to
 * something: the HL7 reference validator refuses them when they do not resolve
 * (https://hl7.org/fhir/R4/references.html, https://hl7.org/fhir/R4/resource.html#canonical). As it does:
 * - a `canonical` value on an example domain that the server does not hold is an error;
 * - a `uri` or `url` value on an example domain is an error when it has the form of a FHIR resource's url
 *   (a path segment names a resource type: `http://example.org/fhir/StructureDefinition/x`) and the
 *   server does not hold it; other URIs (`http://example.org/mrn` as an identifier system) are names
 *   that nothing needs to resolve, and are accepted;
 * - a resource's own canonical url, `Bundle.entry.fullUrl`, and the value of an extension that names a
 *   web page are not looked at.
 * In the examples mode (`validation.allow_example_urls`, `ValidateOptions.examples`) example URLs are
 * accepted, as the reference validator's `-allow-example-urls`.
 */
import type { Catalog } from "../catalog/Catalog.ts"

const exampleHosts = ["example.org", "example.com", "example.net", "acme.com", "acme.org"] as const

/** Whether a URL is on one of the example domains. Cheap for the URLs that are not. */
export const isExampleUrl = (url: string): boolean => {
  if (url.startsWith("urn:oid:")) return url.startsWith("urn:oid:2.999.") || url.startsWith("urn:oid:1.3.6.1.4.1.32473.")
  if (!url.includes("example.") && !url.includes("acme.")) return false
  return exampleHosts.some((host) => url.includes(`${host}/`) || url.endsWith(host))
}

/** Elements whose URI values are not references to anything (as the reference validator has them). */
const notReferences: ReadonlySet<string> = new Set([
  "Bundle.entry.fullUrl", "Bundle.entry.request.url",
  // An extension's url is judged with the extension (extensions.ts), where the allowed domains apply.
  "Extension.url"
])

/** Extensions whose value names a web page, not a FHIR artefact. */
const pageExtensions: ReadonlySet<string> = new Set([
  "http://hl7.org/fhir/StructureDefinition/textLink",
  "http://hl7.org/fhir/StructureDefinition/text-link",
  "http://hl7.org/fhir/tools/StructureDefinition/ig-page-name",
  "http://hl7.org/fhir/tools/StructureDefinition/web-source",
  "http://hl7.org/fhir/StructureDefinition/web-source"
])

const held = (catalog: Catalog, url: string): boolean => {
  const bare = url.includes("|") ? url.slice(0, url.lastIndexOf("|")) : url
  return catalog.structureDefinition(bare) !== undefined || catalog.valueSet(bare) !== undefined ||
    catalog.codeSystem(bare) !== undefined || catalog.searchParameterByUrl(bare) !== undefined
}

const namesResourceType = (catalog: Catalog, url: string): boolean =>
  url.split("/").slice(1).some((segment) => catalog.isResourceType(segment))

/**
 * The error for an example URL in a `uri`, `url` or `canonical` value, or undefined. `elementPath` is the
 * element's path in its definition; `extensionUrl` the url of the extension the value is the value of.
 */
export const exampleUrlProblem = (
  catalog: Catalog,
  code: string,
  value: string,
  elementPath: string,
  defining: boolean,
  extensionUrl: string | undefined
): string | undefined => {
  if (defining || notReferences.has(elementPath)) return undefined
  if (extensionUrl !== undefined && pageExtensions.has(extensionUrl)) return undefined
  if (code !== "canonical" && !namesResourceType(catalog, value)) return undefined
  if (held(catalog, value)) return undefined
  return `Example URLs are not allowed in this context (${value}): it names a resource on an example domain that the server does not hold (validation.allow_example_urls accepts them)`
}
