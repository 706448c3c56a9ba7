/**
 * patch (https://hl7.org/fhir/R4/http.html#patch): JSON Patch (`application/json-patch+json`) or
 * FHIRPath Patch (a `Parameters` body), applied to the current version inside the Writer's
 * transaction, so a concurrent write cannot come between the read and the write.
 */
import { Effect, Either } from "effect"
import { Database } from "../db/Database.ts"
import { readCurrent } from "../store/reads.ts"
import { putVersion } from "../store/ResourceStore.ts"
import { Writer } from "../store/Writer.ts"
import { bodyMatches, ifMatchVersion, knownType } from "./checks.ts"
import { fail, FhirError } from "./FhirError.ts"
import { type FhirRequest, header } from "./FhirRequest.ts"
import { bodyFormat } from "./Format.ts"
import { fhirPathPatch } from "./patch/fhirPathPatch.ts"
import { jsonPatch } from "./patch/jsonPatch.ts"
import type { PatchProblem } from "./patch/PatchProblem.ts"
import { bodyText, parseJson } from "./RequestBody.ts"
import { written } from "./write.ts"
import { parseXml } from "./xmlBridge.ts"

type Patcher = (resource: Record<string, unknown>) => Either.Either<unknown, PatchProblem>

const readPatch = (request: FhirRequest): Effect.Effect<Patcher, FhirError> =>
  Effect.gen(function*() {
    const format = bodyFormat(header(request, "content-type"))
    if (format === undefined) {
      return yield* fail("not-supported", `Content-Type ${header(request, "content-type")} is not a patch format: use application/json-patch+json, or a Parameters resource for FHIRPath Patch`, 415)
    }
    const text = yield* bodyText(request.http, request.maxBodyBytes)
    if (format === "json-patch") {
      const operations = yield* parseJson(text)
      return (resource) => jsonPatch(resource, operations)
    }
    const parameters = format === "xml" ? yield* parseXml(text, request.catalog) : yield* parseJson(text)
    return (resource) => fhirPathPatch(resource, parameters)
  })

const problem = (error: PatchProblem): FhirError =>
  fail(error.code, error.diagnostics, error.code === "invalid" ? 400 : 422)

export const patch = (request: FhirRequest, type: string, id: string) =>
  Effect.gen(function*() {
    const unknownType = knownType(request.catalog, type)
    if (unknownType) return yield* unknownType
    const expected = ifMatchVersion(header(request, "if-match"))
    if (expected instanceof FhirError) return yield* expected
    const apply = yield* readPatch(request)
    const { writer: sql } = yield* Database
    const writer = yield* Writer
    const { commitTs, value } = yield* writer.commit(({ commitTs, record }) =>
      Effect.gen(function*() {
        const current = yield* readCurrent(sql, type, id)
        if (current === undefined) return yield* fail("not-found", `${type}/${id} is not known`)
        if (current.content === null) return yield* fail("deleted", `${type}/${id} was deleted (version ${current.version})`)
        if (expected !== undefined && current.version !== expected) {
          return yield* fail("conflict", `If-Match names version ${expected}, but the current version of ${type}/${id} is ${current.version}`, 409)
        }
        const patched = apply(JSON.parse(current.content) as Record<string, unknown>)
        if (Either.isLeft(patched)) return yield* problem(patched.left)
        const result = patched.right
        if (typeof result !== "object" || result === null || Array.isArray(result)) {
          return yield* fail("processing", "the patch leaves no resource behind", 422)
        }
        const resource = result as Record<string, unknown>
        // The id and meta.versionId/lastUpdated stay the server's; a patch may not move the resource.
        const mismatch = bodyMatches({ ...resource, id: resource["id"] ?? id }, type, id)
        if (mismatch) return yield* fail("processing", `the patched resource is not ${type}/${id}: ${mismatch.diagnostics}`, 422)
        const stored = yield* putVersion(sql, { type, id, resource, commitTs })
        record({ type, id, version: stored.version, op: "update" })
        return stored
      })
    )
    return written(request, type, id, value, commitTs, false)
  })
