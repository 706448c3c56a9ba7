/**
 * create, update and delete over HTTP (https://hl7.org/fhir/R4/http.html#create, #update, #delete),
 * and their conditional forms (#ccreate, #cond-update, #cdelete): `If-None-Exist` on a create, a
 * search in place of the id on an update or delete.
 */
import { HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { randomUUID } from "node:crypto"
import { operationOutcome } from "../http/OperationOutcome.ts"
import { ifMatchVersion } from "../store/checks.ts"
import { type CommandEnv, createCommand, deleteCommand, type Prevalidated, prevalidatedOf, updateCommand } from "../store/commands.ts"
import { createUnlessFound, deleteMatch, matchFor, readCondition, updateMatch } from "../store/conditional.ts"
import { ResourceStore, type WriteScope } from "../store/ResourceStore.ts"
import { FhirError } from "../http/FhirError.ts"
import { type FhirRequest, header } from "./FhirRequest.ts"
import { returnPreference } from "./prefer.ts"
import { resourceBody, versionHeaders } from "./respond.ts"

export const commitHeader = (commitTs: number) => ({ "x-svc-commit-ts": String(commitTs) })

/** Where the writes of `request` happen. */
const scopeOf = (request: FhirRequest): WriteScope => ({
  base: request.base,
  catalog: request.catalog,
  maxBundleEntries: request.maxBundleEntries,
  maxPageBytes: request.maxPageBytes,
  access: request.access
})

/** Runs `command` in one transaction of the ResourceStore, for `request`. */
export const inTransaction = <A, E, R>(request: FhirRequest, command: (env: CommandEnv) => Effect.Effect<A, E, R>) =>
  Effect.flatMap(ResourceStore, (store) => store.transaction(scopeOf(request), command))

/** Validates the resource a create or an update by id writes before its command is queued. */
export const prevalidate = (request: FhirRequest, interaction: "create" | "update" | "entry", type: string, id: string, resource: Record<string, unknown>) =>
  Effect.flatMap(ResourceStore, (store) => store.prevalidate(scopeOf(request), { interaction, type, id, resource }))

const withPrevalidated = (env: CommandEnv, prevalidated: Prevalidated | undefined): CommandEnv =>
  prevalidated === undefined ? env : { ...env, prevalidated: prevalidatedOf([prevalidated]) }

/** What a write answers about: a version it created or updated, or the one a conditional create found. */
export type WriteOutcome = "created" | "updated" | "found"

/**
 * The answer to a successful create, update or patch, shaped by `Prefer: return=`. `versionTs` is the
 * commit of the version shown (that of the transaction, except for a resource a conditional create found).
 */
export const written = (
  request: FhirRequest,
  type: string,
  id: string,
  stored: { readonly version: number; readonly content: string },
  commitTs: number,
  outcome: WriteOutcome,
  versionTs: number = commitTs
) => {
  const headers = {
    ...versionHeaders({ version: stored.version, commitTs: versionTs }),
    ...commitHeader(commitTs),
    location: `${request.base}/${type}/${id}/_history/${stored.version}`
  }
  const status = outcome === "created" ? 201 : 200
  switch (returnPreference(header(request, "prefer"))) {
    case "minimal":
      return HttpServerResponse.empty({ status, headers })
    case "OperationOutcome":
      return resourceBody(
        operationOutcome([{ severity: "information", code: "informational", diagnostics: `${outcome} ${type}/${id} version ${stored.version}` }]),
        request.negotiated,
        request.catalog,
        { status, headers }
      )
    case "representation":
      return resourceBody(stored.content, request.negotiated, request.catalog, { status, headers })
  }
}

const ifMatchOf = (request: FhirRequest) => {
  const expected = ifMatchVersion(header(request, "if-match"))
  return expected instanceof FhirError ? Effect.fail(expected) : Effect.succeed(expected)
}

/**
 * A plain create of `body` under `id` (validated before the Writer's queue), in `scope`: the version written and
 * its commit. The one create by id of the REST API, `$document` and GraphQL's `TypeCreate`.
 */
export const createIn = (scope: WriteScope, type: string, body: Record<string, unknown>, id: string = randomUUID()) =>
  Effect.flatMap(ResourceStore, (store) =>
    Effect.gen(function*() {
      const ahead = yield* store.prevalidate(scope, { interaction: "create", type, id, resource: body })
      // Every id given here is a random UUID the server chose (the callers below): no resource has it yet.
      return yield* store.transaction(scope, (env) => createCommand(withPrevalidated(env, ahead), type, body, id, true))
    }))

/** `createIn` for `request`. */
export const createResource = (request: FhirRequest, type: string, body: Record<string, unknown>, id: string = randomUUID()) =>
  createIn(scopeOf(request), type, body, id)

/** An update by id in `scope` (`expected`: the version If-Match names): the version written and its commit. */
export const updateIn = (scope: WriteScope, type: string, id: string, body: Record<string, unknown>, expected: number | undefined) =>
  Effect.flatMap(ResourceStore, (store) =>
    Effect.gen(function*() {
      const ahead = body["id"] === id ? yield* store.prevalidate(scope, { interaction: "update", type, id, resource: body }) : undefined
      return yield* store.transaction(scope, (env) => updateCommand(withPrevalidated(env, ahead), type, id, body, expected))
    }))

/** A delete by id in `scope`: the version it leaves and its commit. */
export const removeIn = (scope: WriteScope, type: string, id: string) =>
  Effect.flatMap(ResourceStore, (store) => store.transaction(scope, (env) => deleteCommand(env, type, id)))

/** A create; with `If-None-Exist`, a conditional create that writes nothing when a resource matches. */
export const create = (request: FhirRequest, type: string, body: Record<string, unknown>) =>
  Effect.gen(function*() {
    const ifNoneExist = header(request, "if-none-exist")
    if (ifNoneExist === undefined) {
      const { commitTs, value } = yield* createResource(request, type, body)
      return written(request, type, value.id, value.stored, commitTs, "created")
    }
    const condition = readCondition(request.catalog, type, ifNoneExist, "conditional create")
    if (condition instanceof FhirError) return yield* condition
    const { commitTs, value } = yield* inTransaction(request, (env) =>
      Effect.flatMap(matchFor(env, condition, "conditional create", "c"), (match) => createUnlessFound(env, type, match, body)))
    return value._tag === "created"
      ? written(request, type, value.written.id, value.written.stored, commitTs, "created")
      : written(request, type, value.row.id, value.row, commitTs, "found", value.row.commitTs)
  })

export const update = (request: FhirRequest, type: string, id: string, body: Record<string, unknown>) =>
  Effect.gen(function*() {
    const expected = yield* ifMatchOf(request)
    const { commitTs, value } = yield* updateIn(scopeOf(request), type, id, body, expected)
    return written(request, type, id, value.stored, commitTs, value.created ? "created" : "updated")
  })

/** `PUT [base]/{type}?<search>`. */
export const updateWhere = (request: FhirRequest, type: string, body: Record<string, unknown>) =>
  Effect.gen(function*() {
    const condition = readCondition(request.catalog, type, request.params, "conditional update")
    if (condition instanceof FhirError) return yield* condition
    const expected = yield* ifMatchOf(request)
    const { commitTs, value } = yield* inTransaction(request, (env) =>
      Effect.flatMap(matchFor(env, condition, "conditional update", "u"), (match) => updateMatch(env, type, match, body, expected)))
    return written(request, type, value.id, value.stored, commitTs, value.created ? "created" : "updated")
  })

const deletedResponse = (commitTs: number, version: number | undefined) =>
  HttpServerResponse.empty({
    status: 204,
    headers: { ...commitHeader(commitTs), ...(version === undefined ? {} : { etag: `W/"${version}"` }) }
  })

export const remove = (request: FhirRequest, type: string, id: string) =>
  Effect.map(removeIn(scopeOf(request), type, id), ({ commitTs, value }) => deletedResponse(commitTs, value.version))

/** `DELETE [base]/{type}?<search>`: 204 whether one resource matched and was deleted or none matched. */
export const removeWhere = (request: FhirRequest, type: string) =>
  Effect.gen(function*() {
    const condition = readCondition(request.catalog, type, request.params, "conditional delete")
    if (condition instanceof FhirError) return yield* condition
    const { commitTs, value } = yield* inTransaction(request, (env) =>
      Effect.flatMap(matchFor(env, condition, "conditional delete", "d"), (match) => deleteMatch(env, type, match)))
    return deletedResponse(commitTs, value?.version)
  })
