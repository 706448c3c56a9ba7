/**
 * The writes of the REST API as commands that run inside one Writer transaction: the HTTP
 * interactions run one each, a transaction Bundle runs all of its entries in one.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Either } from "effect"
import { randomUUID } from "node:crypto"
import type { Catalog } from "../catalog/Catalog.ts"
import { readCurrent } from "../store/reads.ts"
import { deleteResource, putVersion, type StoredVersion } from "../store/ResourceStore.ts"
import type { CommitContext } from "../store/Writer.ts"
import { bodyMatches, knownType, validId } from "./checks.ts"
import { fail, type FhirError, invalidResource } from "./FhirError.ts"
import { isValid, validateForWrite } from "../validation/Validator.ts"
import type { ReferenceCheck } from "../validation/referencePolicy.ts"
import type { PatchProblem } from "./patch/PatchProblem.ts"
import { extractIndex } from "../search/extract/extractIndex.ts"
import { removeIndex, writeIndex } from "../search/IndexWriter.ts"

export interface CommandEnv {
  readonly sql: SqlClient.SqlClient
  readonly catalog: Catalog
  readonly updateAsCreate: boolean
  readonly commit: CommitContext
  /** `[base]` of the request, for the fullUrls of a search inside a Bundle. */
  readonly base: string
  /** The references of what the command writes, checked against the reference policy before it commits. */
  readonly references: ReferenceCheck
}

export interface Written {
  readonly type: string
  readonly id: string
  readonly stored: StoredVersion
  readonly created: boolean
}

const check = (error: FhirError | undefined) => (error === undefined ? Effect.void : Effect.fail(error))

/**
 * Validates a resource (422 with every issue when it has errors), then writes its version and search index
 * in the same transaction; its references are noted for the policy check at the end of the transaction.
 */
const store = (env: CommandEnv, type: string, id: string, resource: Record<string, unknown>) =>
  Effect.gen(function*() {
    const validation = validateForWrite({ ...resource, id }, env.catalog)
    if (!isValid(validation.issues)) return yield* invalidResource(`${type}/${id}`, validation.issues)
    env.references.add(`${type}/${id}`, validation.references)
    const stored = yield* putVersion(env.sql, { type, id, resource, commitTs: env.commit.commitTs })
    yield* writeIndex(env.sql, stored.rkey, type, stored.version, extractIndex(stored.resource, env.catalog))
    return stored
  })

export const createCommand = (
  env: CommandEnv,
  type: string,
  body: Record<string, unknown>,
  id: string = randomUUID()
): Effect.Effect<Written, FhirError | SqlError> =>
  Effect.gen(function*() {
    yield* check(knownType(env.catalog, type))
    yield* check(bodyMatches(body, type))
    const stored = yield* store(env, type, id, body)
    env.commit.record({ type, id, version: stored.version, op: "create" })
    return { type, id, stored, created: true }
  })

const conflict = (type: string, id: string, expected: number, current: number | undefined) =>
  fail("conflict", `If-Match names version ${expected}, but the current version of ${type}/${id} is ${current ?? "none"}`, 409)

export const updateCommand = (
  env: CommandEnv,
  type: string,
  id: string,
  body: Record<string, unknown>,
  ifMatch: number | undefined
): Effect.Effect<Written, FhirError | SqlError> =>
  Effect.gen(function*() {
    yield* check(knownType(env.catalog, type))
    yield* check(validId(id))
    yield* check(bodyMatches(body, type, id))
    const current = yield* readCurrent(env.sql, type, id)
    if (current === undefined && !env.updateAsCreate) {
      return yield* fail("not-supported", `${type}/${id} does not exist, and this server does not create resources with client ids on update (conformance.update_as_create)`, 405)
    }
    if (ifMatch !== undefined && current?.version !== ifMatch) return yield* conflict(type, id, ifMatch, current?.version)
    const stored = yield* store(env, type, id, body)
    env.commit.record({ type, id, version: stored.version, op: current === undefined ? "create" : "update" })
    return { type, id, stored, created: current === undefined }
  })

export type Patcher = (resource: Record<string, unknown>) => Either.Either<unknown, PatchProblem>

export const patchCommand = (
  env: CommandEnv,
  type: string,
  id: string,
  apply: Patcher,
  ifMatch: number | undefined
): Effect.Effect<Written, FhirError | SqlError> =>
  Effect.gen(function*() {
    yield* check(knownType(env.catalog, type))
    const current = yield* readCurrent(env.sql, type, id)
    if (current === undefined) return yield* fail("not-found", `${type}/${id} is not known`)
    if (current.content === null) return yield* fail("deleted", `${type}/${id} was deleted (version ${current.version})`)
    if (ifMatch !== undefined && current.version !== ifMatch) return yield* conflict(type, id, ifMatch, current.version)
    const patched = apply(JSON.parse(current.content) as Record<string, unknown>)
    if (Either.isLeft(patched)) {
      const problem = patched.left
      return yield* fail(problem.code, problem.diagnostics, problem.code === "invalid" ? 400 : 422)
    }
    const result = patched.right
    if (typeof result !== "object" || result === null || Array.isArray(result)) {
      return yield* fail("processing", "the patch leaves no resource behind", 422)
    }
    const resource = result as Record<string, unknown>
    // The id and meta.versionId/lastUpdated stay the server's; a patch may not move the resource.
    const mismatch = bodyMatches({ ...resource, id: resource["id"] ?? id }, type, id)
    if (mismatch) return yield* fail("processing", `the patched resource is not ${type}/${id}: ${mismatch.diagnostics}`, 422)
    const stored = yield* store(env, type, id, resource)
    env.commit.record({ type, id, version: stored.version, op: "update" })
    return { type, id, stored, created: false }
  })

export interface Deleted {
  readonly type: string
  readonly id: string
  readonly version: number
}

export const deleteCommand = (env: CommandEnv, type: string, id: string): Effect.Effect<Deleted, FhirError | SqlError> =>
  Effect.gen(function*() {
    yield* check(knownType(env.catalog, type))
    const deleted = yield* deleteResource(env.sql, { type, id, commitTs: env.commit.commitTs })
    if (deleted === undefined) return yield* fail("not-found", `${type}/${id} is not known`)
    if (deleted.changed) {
      yield* removeIndex(env.sql, deleted.rkey)
      env.commit.record({ type, id, version: deleted.version, op: "delete" })
    }
    return { type, id, version: deleted.version }
  })
