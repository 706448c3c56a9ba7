/** create, update and delete (https://hl7.org/fhir/R4/http.html#create, #update, #delete). */
import { HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { randomUUID } from "node:crypto"
import { Database } from "../db/Database.ts"
import { operationOutcome } from "../http/OperationOutcome.ts"
import { readCurrent } from "../store/reads.ts"
import { deleteResource, putVersion, type StoredVersion } from "../store/ResourceStore.ts"
import { Writer } from "../store/Writer.ts"
import { bodyMatches, ifMatchVersion, knownType, validId } from "./checks.ts"
import { fail, FhirError } from "./FhirError.ts"
import { type FhirRequest, header } from "./FhirRequest.ts"
import { returnPreference } from "./prefer.ts"
import { RestSettings } from "./Rest.ts"
import { resourceBody, versionHeaders } from "./respond.ts"

const commitHeader = (commitTs: number) => ({ "x-svc-commit-ts": String(commitTs) })

/** The answer to a successful create or update, shaped by `Prefer: return=`. */
export const written = (request: FhirRequest, type: string, id: string, stored: StoredVersion, commitTs: number, created: boolean) => {
  const headers = {
    ...versionHeaders({ version: stored.version, commitTs }),
    ...commitHeader(commitTs),
    location: `${request.base}/${type}/${id}/_history/${stored.version}`
  }
  const status = created ? 201 : 200
  switch (returnPreference(header(request, "prefer"))) {
    case "minimal":
      return HttpServerResponse.empty({ status, headers })
    case "OperationOutcome":
      return resourceBody(
        operationOutcome([{ severity: "information", code: "informational", diagnostics: `${created ? "created" : "updated"} ${type}/${id} version ${stored.version}` }]),
        request.negotiated,
        request.catalog,
        { status, headers }
      )
    case "representation":
      return resourceBody(stored.content, request.negotiated, request.catalog, { status, headers })
  }
}

const check = (error: FhirError | undefined) => (error === undefined ? Effect.void : Effect.fail(error))

export const create = (request: FhirRequest, type: string, body: Record<string, unknown>) =>
  Effect.gen(function*() {
    yield* check(knownType(request.catalog, type))
    yield* check(bodyMatches(body, type))
    const { writer: sql } = yield* Database
    const writer = yield* Writer
    const id = randomUUID()
    const { commitTs, value } = yield* writer.commit(({ commitTs, record }) =>
      Effect.tap(putVersion(sql, { type, id, resource: body, commitTs }), (stored) =>
        record({ type, id, version: stored.version, op: "create" }))
    )
    return written(request, type, id, value, commitTs, true)
  })

export const update = (request: FhirRequest, type: string, id: string, body: Record<string, unknown>) =>
  Effect.gen(function*() {
    yield* check(knownType(request.catalog, type))
    yield* check(validId(id))
    yield* check(bodyMatches(body, type, id))
    const expected = ifMatchVersion(header(request, "if-match"))
    if (expected instanceof FhirError) return yield* expected
    const settings = yield* RestSettings
    const { writer: sql } = yield* Database
    const writer = yield* Writer
    const { commitTs, value } = yield* writer.commit(({ commitTs, record }) =>
      Effect.gen(function*() {
        // Read inside the Writer's transaction: no other write can come between the check and the write.
        const current = yield* readCurrent(sql, type, id)
        if (current === undefined && !settings.updateAsCreate) {
          return yield* fail("not-supported", `${type}/${id} does not exist, and this server does not create resources with client ids on update (conformance.update_as_create)`, 405)
        }
        if (expected !== undefined && current?.version !== expected) {
          return yield* fail("conflict", `If-Match names version ${expected}, but the current version of ${type}/${id} is ${current?.version ?? "none"}`, 409)
        }
        const stored = yield* putVersion(sql, { type, id, resource: body, commitTs })
        record({ type, id, version: stored.version, op: current === undefined ? "create" : "update" })
        return { stored, created: current === undefined }
      })
    )
    return written(request, type, id, value.stored, commitTs, value.created)
  })

export const remove = (request: FhirRequest, type: string, id: string) =>
  Effect.gen(function*() {
    yield* check(knownType(request.catalog, type))
    const { writer: sql } = yield* Database
    const writer = yield* Writer
    const { commitTs, value } = yield* writer.commit(({ commitTs, record }) =>
      Effect.tap(deleteResource(sql, { type, id, commitTs }), (deleted) => {
        if (deleted?.changed) record({ type, id, version: deleted.version, op: "delete" })
      })
    )
    if (value === undefined) return yield* fail("not-found", `${type}/${id} is not known`)
    return HttpServerResponse.empty({
      status: 204,
      headers: { ...commitHeader(commitTs), etag: `W/"${value.version}"` }
    })
  })
