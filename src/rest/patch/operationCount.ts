/**
 * How many operations a patch document asks for, for `server.max_patch_operations`: each one is a
 * path evaluated (and for FHIRPath Patch a FHIRPath expression run) against the whole resource.
 */
import { fail, type FhirError } from "../../http/FhirError.ts"

/** The entries of a JSON Patch array, or the `operation` parameters of a FHIRPath Patch `Parameters`; 0 for anything else (the patch's own checks refuse it). */
export const operationCount = (patch: unknown): number => {
  if (Array.isArray(patch)) return patch.length
  if (typeof patch !== "object" || patch === null) return 0
  const parameters = (patch as Record<string, unknown>)["parameter"]
  if (!Array.isArray(parameters)) return 0
  let count = 0
  for (const parameter of parameters) {
    if (typeof parameter === "object" && parameter !== null && (parameter as Record<string, unknown>)["name"] === "operation") count++
  }
  return count
}

/** 413 when `patch` has more than `limit` operations. */
export const tooManyOperations = (patch: unknown, limit: number): FhirError | undefined => {
  const count = operationCount(patch)
  return count > limit
    ? fail("too-costly", `the patch has ${count} operations; this server applies at most ${limit} in one patch (server.max_patch_operations)`, 413)
    : undefined
}
