/**
 * The writes of the REST API as commands that run inside one Writer transaction: the HTTP
 * interactions run one each, a transaction Bundle runs all of its entries in one.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Either } from "effect"
import { randomUUID } from "node:crypto"
import type { Catalog } from "../catalog/Catalog.ts"
import { parseJson } from "../json/Json.ts"
import { readCurrent } from "./reads.ts"
import { deleteResource, putVersion, putVersions, type StoredVersion } from "./versions.ts"
import type { CommitContext } from "../db/Writer.ts"
import { WriteBatch } from "../db/WriteBatch.ts"
import { bodyMatches, knownType, validId } from "./checks.ts"
import { fail, type FhirError, invalidResource } from "../http/FhirError.ts"
import { subscriptionProblem } from "../subscriptions/criteria.ts"
import { recordGrant } from "../subscriptions/grants.ts"
import { isValid, type ValidateOptions, validateForWriteSteps, type WriteValidation } from "../validation/Validator.ts"
import type { ReferenceCheck } from "../validation/referencePolicy.ts"
import type { PatchProblem } from "./PatchProblem.ts"
import { extractIndexPaced } from "../search/extract/extractIndex.ts"
import { Pacer, paced, workPerYield } from "../db/EventLoop.ts"
import { removeIndex, writeIndex } from "../search/IndexWriter.ts"
import type { Access } from "../auth/access/Access.ts"
import { after, before, type WriteRule, writeRule } from "../auth/access/writes.ts"

export interface CommandEnv {
  readonly sql: SqlClient.SqlClient
  readonly catalog: Catalog
  readonly updateAsCreate: boolean
  readonly commit: CommitContext
  /** `[base]` of the request, for the fullUrls of a search inside a Bundle. */
  readonly base: string
  /** The references of what the command writes, checked against the reference policy before it commits. */
  readonly references: ReferenceCheck
  /**
   * Version and index rows written so far and not yet inserted: flushed (`settle`) before the command
   * reads resources or the search index, and at the end of the transaction.
   */
  readonly writes: WriteBatch
  /** `server.max_page_bytes`, for a search inside a Bundle. */
  readonly maxPageBytes?: number
  /** What one resource written may hold (413 beyond); `defaultWriteLimits` when left out. */
  readonly limits?: WriteLimits
  /** Counts the command's work and lets other requests in between pieces of it (see EventLoop.ts). */
  readonly pacer: Pacer
  /** What validation is told besides the catalog (`validation.allowed_extension_domains`, `validation.allow_example_urls`). */
  readonly validation?: ValidateOptions
  /** Resources validated before the command was queued (ResourceStore.prevalidate), by the resource: not validated again. */
  readonly prevalidated?: ReadonlyMap<Record<string, unknown>, Prevalidated> | undefined
  /** What the caller may write (src/auth/access/): every command checks it; undefined for the server's own writes. */
  readonly access?: Access | undefined
}

/** The lookup of `CommandEnv.prevalidated`, from validations done ahead (those left undefined skipped). */
export const prevalidatedOf = (validations: Iterable<Prevalidated | undefined>): ReadonlyMap<Record<string, unknown>, Prevalidated> => {
  const found = new Map<Record<string, unknown>, Prevalidated>()
  for (const validation of validations) if (validation !== undefined) found.set(validation.resource, validation)
  return found
}

/** The validation of a resource done ahead of its transaction, for the command that writes that same resource. */
export interface Prevalidated {
  readonly resource: Record<string, unknown>
  readonly id: string
  readonly validation: WriteValidation
}

export interface WriteLimits {
  /** `server.max_index_rows`: search index rows of one resource. */
  readonly maxIndexRows: number
  /** `server.max_bundle_entries`: entries of a Bundle, sent as a batch or transaction or stored as a resource. */
  readonly maxBundleEntries: number
  /** `server.max_patch_operations`: operations of a patch in a Bundle entry (over HTTP, `patch.ts` checks them). */
  readonly maxPatchOperations: number
}

/** The defaults of the settings. */
export const defaultWriteLimits: WriteLimits = { maxIndexRows: 50_000, maxBundleEntries: 10_000, maxPatchOperations: 1_000 }

/** Creates whose versions `writeCreates` stores at a time. */
const createsPerPiece = 512

/** Work units a resource's validation counts for in the command's pacer (an index row counts one). */
const validationUnits = 50

/** Inserts what the command has batched, so that its reads see its own writes. */
export const settle = (env: CommandEnv): Effect.Effect<void, SqlError> => env.writes.flush(env.sql)

/**
 * `settle` before a command reads or replaces the rows of `type/id` alone: only when the batch may hold some
 * (in a group commit the batch holds the other commands' rows, which such a read need not wait for). A
 * restricted grant's check may read other resources' rows (a chained criterion): a command under one settles.
 */
export const settleFor = (env: CommandEnv, type: string, id: string): Effect.Effect<void, SqlError> =>
  env.writes.holds(type, id) ? settle(env) : Effect.void

/**
 * Runs `command` with a batch of writes of its own, inserted when it succeeds (inside the Writer's transaction);
 * in a group commit, with the group's batch, which the Writer inserts before COMMIT.
 */
export const runCommand = <A, E, R>(
  env: Omit<CommandEnv, "writes" | "pacer">,
  command: (env: CommandEnv) => Effect.Effect<A, E, R>
): Effect.Effect<A, E | SqlError, R> => {
  const shared = env.commit.writes
  const full: CommandEnv = { ...env, writes: shared ?? new WriteBatch(), pacer: new Pacer(workPerYield) }
  return shared === undefined ? Effect.tap(command(full), () => settle(full)) : command(full)
}

export interface Written {
  readonly type: string
  readonly id: string
  readonly stored: StoredVersion
  readonly created: boolean
}

const check = (error: FhirError | undefined) => (error === undefined ? Effect.void : Effect.fail(error))

/** A Bundle stored as a resource holds at most `server.max_bundle_entries` entries, as one sent to be run does. */
export const bundleEntries = (limit: number, type: string, resource: Record<string, unknown>): FhirError | undefined => {
  if (type !== "Bundle") return undefined
  const entries = resource["entry"]
  const count = Array.isArray(entries) ? entries.length : 0
  return count > limit
    ? fail("too-costly", `the Bundle has ${count} entries; this server stores at most ${limit} (server.max_bundle_entries)`, 413)
    : undefined
}

/** A 422 with every issue of a validation that found errors; otherwise its references are noted for the policy check. */
const outcome = (env: CommandEnv, type: string, id: string, validation: WriteValidation, counted: boolean) => {
  if (!isValid(validation.issues)) return invalidResource(`${type}/${id}`, validation.issues)
  env.references.add(`${type}/${id}`, validation.references)
  return counted ? Effect.as(env.pacer.step(validationUnits), validation) : Effect.succeed(validation)
}

/** Validates a resource to be written (or takes the validation done before the command was queued): 413 for a Bundle over the entry limit, 422 with every issue when it has errors. */
const validated = (env: CommandEnv, type: string, id: string, resource: Record<string, unknown>) =>
  Effect.suspend(() => {
    const tooLarge = bundleEntries((env.limits ?? defaultWriteLimits).maxBundleEntries, type, resource)
    if (tooLarge) return Effect.fail(tooLarge)
    // A Subscription the server could never act on is refused, not stored to be silently never matched.
    const unusable = type === "Subscription" ? subscriptionProblem(env.catalog, resource) : undefined
    if (unusable) return Effect.fail(unusable)
    const ahead = env.prevalidated?.get(resource)
    if (ahead !== undefined && ahead.id === id) return outcome(env, type, id, ahead.validation, false)
    return Effect.flatMap(paced(env.pacer, validateForWriteSteps({ ...resource, id }, env.catalog, env.validation)), (validation) =>
      outcome(env, type, id, validation, true))
  })

/** The search index rows of a version; 413 beyond `server.max_index_rows`. */
export const indexRows = (env: CommandEnv, type: string, id: string, resource: Record<string, unknown>) =>
  Effect.mapError(
    extractIndexPaced(resource, env.catalog, (env.limits ?? defaultWriteLimits).maxIndexRows, env.pacer),
    (too) =>
      fail(
        "too-costly",
        `${type}/${id} has more than ${too.limit} search index values (its repeated elements and the search parameters that read them); this server takes at most ${too.limit} per resource (server.max_index_rows)`,
        413
      )
  )

/**
 * Validates a resource (422 with every issue when it has errors), then writes its version and search index
 * in the same transaction; its references are noted for the policy check at the end of the transaction.
 */
const store = (env: CommandEnv, type: string, id: string, resource: Record<string, unknown>, patched = false, fresh = false) =>
  Effect.gen(function*() {
    yield* validated(env, type, id, resource)
    const stored = yield* putVersion(env.sql, { type, id, resource, commitTs: env.commit.commitTs, patched, fresh }, env.writes)
    yield* writeIndex(env.sql, stored.rkey, type, stored.version, yield* indexRows(env, type, id, stored.resource), env.writes)
    if (type === "Subscription") yield* recordGrant(env.sql, id, env.access?.principal)
    return stored
  })

/** A create that passed its checks and validation, ready for `writeCreates`. */
export interface CheckedCreate {
  readonly type: string
  readonly id: string
  readonly resource: Record<string, unknown>
  /** The id is a random UUID the server chose for this create (see `putVersion`). */
  readonly fresh?: boolean
}

/** The checks and the validation of `createCommand`, with the same errors; the references are noted. */
export const checkCreate = (
  env: CommandEnv,
  type: string,
  body: Record<string, unknown>,
  id: string
): Effect.Effect<CheckedCreate, FhirError> =>
  Effect.suspend(() => {
    const problem = knownType(env.catalog, type) ?? bodyMatches(body, type)
    if (problem) return Effect.fail(problem)
    return Effect.zipRight(writeRule(env.access, env.catalog, type, "c"), Effect.as(validated(env, type, id, body), { type, id, resource: body }))
  })

/**
 * Writes checked creates (distinct resources) as `createCommand` would one by one, with one upsert of
 * `resources` for all of them; their versions and index rows join the command's batch.
 */
export const writeCreates = (
  env: CommandEnv,
  creates: ReadonlyArray<CheckedCreate>,
  named: (n: number, error: FhirError) => FhirError = (_, error) => error
): Effect.Effect<ReadonlyArray<Written>, FhirError | SqlError> =>
  Effect.gen(function*() {
    const written: Array<Written> = []
    // In pieces, so that the versions' JSON of a large Bundle is not written in one go (other requests get in between).
    for (let start = 0; start < creates.length; start += createsPerPiece) {
      const piece = creates.slice(start, start + createsPerPiece)
      const stored = yield* putVersions(env.sql, piece, env.commit.commitTs, env.writes, piece.every((create) => create.fresh === true))
      for (const [k, create] of piece.entries()) {
        const version = stored[k]!
        const rows = yield* Effect.mapError(indexRows(env, create.type, create.id, version.resource), (error) => named(start + k, error))
        yield* writeIndex(env.sql, version.rkey, create.type, version.version, rows, env.writes)
        env.commit.record({ type: create.type, id: create.id, version: version.version, op: "create", resource: version.content })
        written.push({ type: create.type, id: create.id, stored: version, created: true })
      }
      // Under a restricted grant each resource must land inside it, read back once the piece is inserted.
      for (const [k, create] of piece.entries()) {
        const rule = yield* writeRule(env.access, env.catalog, create.type, "c")
        if (rule === undefined) continue
        yield* settle(env)
        yield* Effect.catchTag(after(env.sql, env.catalog, create.type, create.id, stored[k]!.rkey, [rule]), "FhirError", (error) =>
          Effect.fail(named(start + k, error)))
      }
    }
    return written
  })

/** Under restricted grants (`rules`), the 403 when the resource just written is outside one of them (see src/auth/access/writes.ts). */
const within = (env: CommandEnv, type: string, id: string, rkey: number, rules: ReadonlyArray<WriteRule | undefined>) =>
  rules.every((rule) => rule === undefined) ? Effect.void : Effect.zipRight(settle(env), after(env.sql, env.catalog, type, id, rkey, rules))

export const createCommand = (
  env: CommandEnv,
  type: string,
  body: Record<string, unknown>,
  id: string = randomUUID(),
  /** The id is a random UUID the server chose for this create (no resource can have it): see `putVersion`. */
  fresh = false
): Effect.Effect<Written, FhirError | SqlError> =>
  Effect.gen(function*() {
    yield* check(knownType(env.catalog, type))
    const rule = yield* writeRule(env.access, env.catalog, type, "c")
    yield* check(bodyMatches(body, type))
    const stored = yield* store(env, type, id, body, false, fresh)
    yield* within(env, type, id, stored.rkey, [rule])
    env.commit.record({ type, id, version: stored.version, op: "create", resource: stored.content })
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
    const rule = yield* writeRule(env.access, env.catalog, type, "u")
    yield* check(validId(id))
    yield* check(bodyMatches(body, type, id))
    yield* (rule === undefined ? settleFor(env, type, id) : settle(env))
    const current = yield* readCurrent(env.sql, type, id)
    if (current === undefined && !env.updateAsCreate) {
      return yield* fail("not-supported", `${type}/${id} does not exist, and this server does not create resources with client ids on update (conformance.update_as_create)`, 405)
    }
    yield* before(env.sql, env.catalog, type, id, rule)
    // An update that creates the resource (conformance.update_as_create) needs the permission to create it too.
    const createRule = current === undefined ? yield* writeRule(env.access, env.catalog, type, "c") : undefined
    if (ifMatch !== undefined && current?.version !== ifMatch) return yield* conflict(type, id, ifMatch, current?.version)
    const stored = yield* store(env, type, id, body)
    yield* within(env, type, id, stored.rkey, [rule, createRule])
    env.commit.record({ type, id, version: stored.version, op: current === undefined ? "create" : "update", resource: stored.content })
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
    const rule = yield* writeRule(env.access, env.catalog, type, "u")
    yield* (rule === undefined ? settleFor(env, type, id) : settle(env))
    yield* before(env.sql, env.catalog, type, id, rule)
    const current = yield* readCurrent(env.sql, type, id)
    if (current === undefined) return yield* fail("not-found", `${type}/${id} is not known`)
    if (current.content === null) return yield* fail("deleted", `${type}/${id} was deleted (version ${current.version})`)
    if (ifMatch !== undefined && current.version !== ifMatch) return yield* conflict(type, id, ifMatch, current.version)
    const patched = apply(parseJson(current.content) as Record<string, unknown>)
    if (Either.isLeft(patched)) {
      const problem = patched.left
      return yield* fail(problem.code, problem.diagnostics, problem.code === "invalid" ? 400 : problem.code === "too-costly" ? 413 : 422)
    }
    const result = patched.right
    if (typeof result !== "object" || result === null || Array.isArray(result)) {
      return yield* fail("processing", "the patch leaves no resource behind", 422)
    }
    const resource = result as Record<string, unknown>
    // The id and meta.versionId/lastUpdated stay the server's; a patch may not move the resource.
    const mismatch = bodyMatches({ ...resource, id: resource["id"] ?? id }, type, id)
    if (mismatch) return yield* fail("processing", `the patched resource is not ${type}/${id}: ${mismatch.diagnostics}`, 422)
    const stored = yield* store(env, type, id, resource, true)
    yield* within(env, type, id, stored.rkey, [rule])
    env.commit.record({ type, id, version: stored.version, op: "patch", resource: stored.content })
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
    const rule = yield* writeRule(env.access, env.catalog, type, "d")
    yield* (rule === undefined ? settleFor(env, type, id) : settle(env))
    yield* before(env.sql, env.catalog, type, id, rule)
    const deleted = yield* deleteResource(env.sql, { type, id, commitTs: env.commit.commitTs })
    if (deleted === undefined) return yield* fail("not-found", `${type}/${id} is not known`)
    if (deleted.changed) {
      yield* removeIndex(env.sql, deleted.rkey)
      env.commit.record({ type, id, version: deleted.version, op: "delete", resource: null })
    }
    return { type, id, version: deleted.version }
  })
