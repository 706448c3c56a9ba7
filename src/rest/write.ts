/** create, update and delete over HTTP (https://hl7.org/fhir/R4/http.html#create, #update, #delete). */
import { HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { Database } from "../db/Database.ts"
import { operationOutcome } from "../http/OperationOutcome.ts"
import type { StoredVersion } from "../store/ResourceStore.ts"
import { type CommitContext, Writer } from "../store/Writer.ts"
import { ifMatchVersion } from "./checks.ts"
import { type CommandEnv, createCommand, deleteCommand, updateCommand } from "./commands.ts"
import { FhirError } from "./FhirError.ts"
import { type FhirRequest, header } from "./FhirRequest.ts"
import { returnPreference } from "./prefer.ts"
import { RestSettings } from "./Rest.ts"
import { resourceBody, versionHeaders } from "./respond.ts"

export const commitHeader = (commitTs: number) => ({ "x-svc-commit-ts": String(commitTs) })

/** Runs `command` in one Writer transaction with the environment the commands need. */
export const inTransaction = <A, E, R>(request: FhirRequest, command: (env: CommandEnv) => Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const { writer: sql } = yield* Database
    const writer = yield* Writer
    const settings = yield* RestSettings
    return yield* writer.commit((commit: CommitContext) =>
      command({ sql, catalog: request.catalog, updateAsCreate: settings.updateAsCreate, commit })
    )
  })

/** The answer to a successful create, update or patch, shaped by `Prefer: return=`. */
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

export const create = (request: FhirRequest, type: string, body: Record<string, unknown>) =>
  Effect.map(
    inTransaction(request, (env) => createCommand(env, type, body)),
    ({ commitTs, value }) => written(request, type, value.id, value.stored, commitTs, true)
  )

export const update = (request: FhirRequest, type: string, id: string, body: Record<string, unknown>) =>
  Effect.gen(function*() {
    const expected = ifMatchVersion(header(request, "if-match"))
    if (expected instanceof FhirError) return yield* expected
    const { commitTs, value } = yield* inTransaction(request, (env) => updateCommand(env, type, id, body, expected))
    return written(request, type, id, value.stored, commitTs, value.created)
  })

export const remove = (request: FhirRequest, type: string, id: string) =>
  Effect.map(inTransaction(request, (env) => deleteCommand(env, type, id)), ({ commitTs, value }) =>
    HttpServerResponse.empty({ status: 204, headers: { ...commitHeader(commitTs), etag: `W/"${value.version}"` } }))
