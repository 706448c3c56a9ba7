/**
 * The extension domains of Synthea's output: US Core (which the R4 packages do not include) and Synthea's
 * own. A server loading Synthea without US Core installed allows them (`validation.allowed_extension_domains`,
 * docs/validation.md).
 */
export const syntheaExtensionDomains: ReadonlyArray<string> = [
  "http://hl7.org/fhir/us/core/StructureDefinition/",
  "http://synthetichealth.github.io/"
]
