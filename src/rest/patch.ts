/**
 * patch (https://hl7.org/fhir/R4/http.html#patch): JSON Patch (`application/json-patch+json`) or
 * FHIRPath Patch (a `Parameters` body), applied to the current version inside the Writer's
 * transaction, so a concurrent write cannot come between the read and the write. Conditional patch
 * (#cpatch) names the resource by a search: none is a 404, several a 412.
 */
import { Effect } from "effect"
import { ifMatchVersion, knownType } from "../store/checks.ts"
import { type Patcher, patchCommand } from "../store/commands.ts"
import { matchFor, patchMatch, readCondition } from "../store/conditional.ts"
import { checkBody } from "./bodyCheck.ts"
import { fail, FhirError } from "../http/FhirError.ts"
import { type FhirRequest, header } from "./FhirRequest.ts"
import { bodyFormat } from "./Format.ts"
import { fhirPathPatch } from "./patch/fhirPathPatch.ts"
import { jsonPatch } from "./patch/jsonPatch.ts"
import { tooManyOperations } from "./patch/operationCount.ts"
import { StoreSettings } from "../store/ResourceStore.ts"
import { bodyText, parseJson } from "./RequestBody.ts"
import { inTransaction, written } from "./write.ts"
import { parseXml } from "./xmlBridge.ts"

const readPatch = (request: FhirRequest): Effect.Effect<Patcher, FhirError, StoreSettings> =>
  Effect.gen(function*() {
    const format = bodyFormat(header(request, "content-type"))
    if (format === undefined) {
      return yield* fail("not-supported", `Content-Type ${header(request, "content-type")} is not a patch format: use application/json-patch+json, or a Parameters resource for FHIRPath Patch`, 415)
    }
    const text = yield* bodyText(request.http, request.maxBodyBytes)
    const { maxPatchOperations } = yield* StoreSettings
    if (format === "json-patch") {
      const operations = yield* parseJson(text)
      const refused = checkBody(operations, "the JSON Patch document")
      if (refused !== undefined) return yield* refused
      const tooMany = tooManyOperations(operations, maxPatchOperations)
      if (tooMany) return yield* tooMany
      return (resource) => jsonPatch(resource, operations)
    }
    const parameters = format === "xml" ? yield* parseXml(text, request.catalog) : yield* parseJson(text)
    const refused = checkBody(parameters, "the FHIRPath Patch")
    if (refused !== undefined) return yield* refused
    const tooMany = tooManyOperations(parameters, maxPatchOperations)
    if (tooMany) return yield* tooMany
    return (resource) => fhirPathPatch(resource, parameters)
  })

export const patch = (request: FhirRequest, type: string, id: string) =>
  Effect.gen(function*() {
    const unknownType = knownType(request.catalog, type)
    if (unknownType) return yield* unknownType
    const expected = ifMatchVersion(header(request, "if-match"))
    if (expected instanceof FhirError) return yield* expected
    const apply = yield* readPatch(request)
    const { commitTs, value } = yield* inTransaction(request, (env) => patchCommand(env, type, id, apply, expected))
    return written(request, type, id, value.stored, commitTs, "updated")
  })

/** `PATCH [base]/{type}?<search>`. */
export const patchWhere = (request: FhirRequest, type: string) =>
  Effect.gen(function*() {
    const condition = readCondition(request.catalog, type, request.params, "conditional patch")
    if (condition instanceof FhirError) return yield* condition
    const expected = ifMatchVersion(header(request, "if-match"))
    if (expected instanceof FhirError) return yield* expected
    const apply = yield* readPatch(request)
    const { commitTs, value } = yield* inTransaction(request, (env) =>
      Effect.flatMap(matchFor(env, condition, "conditional patch", "u"), (match) => patchMatch(env, condition, match, apply, expected)))
    return written(request, type, value.id, value.stored, commitTs, "updated")
  })
