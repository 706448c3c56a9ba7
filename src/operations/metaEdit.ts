/**
 * What `$meta-add` and `$meta-delete` share (https://hl7.org/fhir/R4/resource-operation-meta-add.html,
 * -meta-delete.html): `POST [base]/{type}/{id}/$meta-add` (or `$meta-delete`), also on a version
 * (`[base]/{type}/{id}/_history/{vid}/...`), with the Meta as the parameter `meta` of a Parameters body. The
 * version's meta is changed in place through the ResourceStore (src/store/metaEdit.ts: no new version, the
 * search index and the change feed follow); the answer is a Parameters with the resulting Meta as `return`.
 */
import { Effect, Either } from "effect"
import { fail } from "../http/FhirError.ts"
import { resourceBody } from "../rest/respond.ts"
import { commitHeader } from "../rest/write.ts"
import { editMetaCommand } from "../store/metaEdit.ts"
import { ResourceStore } from "../store/ResourceStore.ts"
import { definedInputs, type InputParameter, readArguments } from "./arguments.ts"
import { versionNumber } from "./meta.ts"
import { addToMeta, metaParameters, readMetaSets, removeFromMeta } from "./metaSets.ts"
import type { OperationCall } from "./Operation.ts"

export const metaEditDefinitions = {
  add: "http://hl7.org/fhir/OperationDefinition/Resource-meta-add",
  delete: "http://hl7.org/fhir/OperationDefinition/Resource-meta-delete"
} as const

/** The parameter of both as R4 defines it, for a catalog that lacks the OperationDefinitions. */
const metaInput: ReadonlyArray<InputParameter> = [{ name: "meta", type: "Meta", min: 1, max: "1" }]

/** `$meta-add` or `$meta-delete` on the instance (or the version) of `call`. */
export const editMeta = (call: OperationCall, edit: keyof typeof metaEditDefinitions) =>
  Effect.gen(function*() {
    const { request } = call
    const type = call.type!
    const id = call.id!
    const operation = `$meta-${edit}`
    const defined = definedInputs(request.catalog, metaEditDefinitions[edit])
    const args = yield* readArguments(request, operation, defined.length > 0 ? defined : metaInput)
    const given = args.complex.get("meta")?.[0]
    if (given === undefined) return yield* fail("required", `${operation} needs the parameter 'meta' (valueMeta) in a Parameters body`)
    const sets = readMetaSets(given.value, operation)
    if (Either.isLeft(sets)) return yield* sets.left
    const version = yield* versionNumber(type, id, call.version)
    const store = yield* ResourceStore
    const change = edit === "add" ? addToMeta : removeFromMeta
    const result = yield* store.transaction(
      { base: request.base, catalog: request.catalog, maxBundleEntries: request.maxBundleEntries, access: request.access },
      (env) => editMetaCommand(env, { type, id, version }, (meta) => change(meta, sets.right))
    )
    return resourceBody(metaParameters(result.value.meta), request.negotiated, request.catalog, {
      ...(result.value.changed ? { headers: commitHeader(result.commitTs) } : {})
    })
  })
