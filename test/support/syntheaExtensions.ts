/**
 * What a server loading Synthea's output needs (docs/validation.md, "Loading Synthea"): its extension
 * domains, US Core (which the R4 packages do not include) and Synthea's own, allowed without a definition
 * (`validation.allowed_extension_domains`); and the findings of R4's vital signs profiles as warnings
 * (`validation.vital_signs`), since its blood pressures are coded 55284-4 without the 85354-9 R4's profile
 * requires.
 */
import type { ValidateOptions } from "../../src/validation/Validator.ts"

export const syntheaExtensionDomains: ReadonlyArray<string> = [
  "http://hl7.org/fhir/us/core/StructureDefinition/",
  "http://synthetichealth.github.io/"
]

/** The `[validation]` settings, for a test server. */
export const syntheaValidation = { allowed_extension_domains: [...syntheaExtensionDomains], vital_signs: "warning" as const }

/** The same, as validateResource's options. */
export const syntheaValidateOptions: ValidateOptions = { allowedExtensionDomains: syntheaExtensionDomains, vitalSigns: "warning" }

/** The same, as environment variables of a server process. */
export const syntheaEnv: Readonly<Record<string, string>> = {
  SVC_VALIDATION_ALLOWED_EXTENSION_DOMAINS: syntheaExtensionDomains.join(","),
  SVC_VALIDATION_VITAL_SIGNS: "warning"
}
