/** patch (https://hl7.org/fhir/R4/http.html#patch): JSON Patch and FHIRPath Patch; wired when the patch engine lands. */
import { Effect } from "effect"
import { fail } from "./FhirError.ts"
import type { FhirRequest } from "./FhirRequest.ts"

export const patch = (_request: FhirRequest, type: string, id: string) =>
  Effect.fail(fail("not-supported", `PATCH of ${type}/${id} is not available in this build yet`, 501))
