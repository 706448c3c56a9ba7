/** What the FHIR interactions need besides the database: the base URL rule and the write settings. */
import { Context } from "effect"
import type { ReferencePolicy } from "../validation/referencePolicy.ts"
import type { ValidateOptions } from "../validation/Validator.ts"

export class RestSettings extends Context.Tag("svc/rest/RestSettings")<RestSettings, {
  /** `server.public_url`; without it the base is taken from the request's Host. */
  readonly publicUrl: string | undefined
  /** `conformance.update_as_create`. */
  readonly updateAsCreate: boolean
  /** `conformance.reference_policy`. */
  readonly referencePolicy: ReferencePolicy
  /** `validation.allowed_extension_domains`: extension urls accepted without their definition. */
  readonly allowedExtensionDomains: ReadonlyArray<string>
  /** `validation.allow_example_urls`: URLs on the example domains accepted (the validator's examples mode). */
  readonly allowExampleUrls?: boolean
  /** `validation.vital_signs`: the implied vital signs profiles' findings as errors (default) or warnings. */
  readonly vitalSigns?: "error" | "warning"
  /** `server.max_index_rows`: search index rows of one resource written (413 beyond). */
  readonly maxIndexRows: number
  /** `server.max_patch_operations`: operations of one JSON Patch or FHIRPath Patch (413 beyond). */
  readonly maxPatchOperations: number
}>() {}

export const basePath = "/fhir"

/** What validation is told besides the catalog, from the `validation.*` settings. */
export const validationOptions = (settings: Context.Tag.Service<typeof RestSettings>, now: number): ValidateOptions => ({
  allowedExtensionDomains: settings.allowedExtensionDomains,
  examples: settings.allowExampleUrls === true,
  vitalSigns: settings.vitalSigns ?? "error",
  now
})

/** `[base]` of a request: the public URL, or `http://<Host>/fhir`. */
export const baseUrl = (publicUrl: string | undefined, host: string | undefined): string =>
  publicUrl !== undefined
    ? `${publicUrl.replace(/\/+$/, "")}${basePath}`
    : `http://${host ?? "localhost"}${basePath}`
