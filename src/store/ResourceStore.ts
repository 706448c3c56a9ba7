/**
 * The ResourceStore (ARCHITECTURE.md, "Writes and the change feed"): the one way the interactions above
 * write resources. A write is a command of the write model (commands.ts, conditional.ts) run in one Writer
 * transaction with what the commands need (the settings, the reference check, a batch of rows); the
 * references its resources hold are checked against `conformance.reference_policy` before it commits.
 *
 * Storage failures stop here: a failed statement becomes a `StoreError` that says whether it hit one of the
 * database's limits (docs/database.md, "Deadlines"); no `SqlError` of a write goes further up.
 *
 * Validation runs before the command is queued where it can (`prevalidate`): a resource whose id and content
 * are known before the transaction (a create, an update by id) is validated while other commands commit; the
 * command then only checks that it writes that same resource. Bundle entries, whose references are resolved
 * inside the transaction, are validated there.
 */
import { SqlError } from "@effect/sql/SqlError"
import { Clock, Context, Data, Effect, Layer } from "effect"
import type { Access } from "../auth/access/Access.ts"
import type { Catalog } from "../catalog/Catalog.ts"
import { Database } from "../db/Database.ts"
import { causeText, databaseLimit } from "../db/errors.ts"
import { type FhirError, invalidReferences, invalidResource } from "../http/FhirError.ts"
import { referenceCheck, type ReferencePolicy } from "../validation/referencePolicy.ts"
import { isValid, type ValidateOptions, validateForWriteSteps } from "../validation/Validator.ts"
import { bodyMatches, knownType } from "./checks.ts"
import { bundleEntries, type CommandEnv, type Prevalidated, runCommand } from "./commands.ts"
import { Pacer, paced, workPerYield } from "../db/EventLoop.ts"
import { type CommitContext, type Result, Writer } from "../db/Writer.ts"
import type { LeaseLost } from "../db/WriterLease.ts"

/** The settings the write model follows. */
export interface WriteSettings {
  /** `conformance.update_as_create`. */
  readonly updateAsCreate: boolean
  /** `conformance.reference_policy`. */
  readonly referencePolicy: ReferencePolicy
  /** `validation.allowed_extension_domains`: extension urls accepted without their definition. */
  readonly allowedExtensionDomains: ReadonlyArray<string>
  /** `validation.allow_example_urls`: URLs on the example domains accepted (the validator's examples mode). */
  readonly allowExampleUrls?: boolean
  /** `validation.vital_signs`: the implied vital signs profiles' findings as errors (default) or warnings. */
  readonly vitalSigns?: "error" | "warning"
  /** `server.max_index_rows`: search index rows of one resource written (413 beyond). */
  readonly maxIndexRows: number
  /** `server.max_patch_operations`: operations of one JSON Patch or FHIRPath Patch (413 beyond). */
  readonly maxPatchOperations: number
}

/** The write settings, a section of the configuration (tests give their own). */
export class StoreSettings extends Context.Tag("svc/store/StoreSettings")<StoreSettings, WriteSettings>() {}

/** What validation is told besides the catalog, from the `validation.*` settings. */
export const validationOptions = (settings: WriteSettings, now: number): ValidateOptions => ({
  allowedExtensionDomains: settings.allowedExtensionDomains,
  examples: settings.allowExampleUrls === true,
  vitalSigns: settings.vitalSigns ?? "error",
  now
})

/** Where a write happens: the request's base and catalog, and the limits of its request. */
export interface WriteScope {
  /** `[base]` of the request, for the fullUrls of a search inside a Bundle. */
  readonly base: string
  readonly catalog: Catalog
  /** `server.max_page_bytes`, for a search inside a Bundle. */
  readonly maxPageBytes?: number
  /** `server.max_bundle_entries`. */
  readonly maxBundleEntries: number
  /** What the caller may write (src/auth/access/); undefined for the server's own writes. */
  readonly access?: Access | undefined
}

/** A write's statement failed; nothing of it was committed. */
export class StoreError extends Data.TaggedError("StoreError")<{
  /** Plain words, for the log. */
  readonly reason: string
  /** The database limit it hit: its statement deadline, or no pool connection free in time. */
  readonly limit: "deadline" | "pool" | undefined
  /** The driver's error, for the log only. */
  readonly cause: unknown
}> {}

const storeError = (error: SqlError): StoreError =>
  new StoreError({ reason: causeText(error), limit: databaseLimit(error), cause: error.cause })

export class ResourceStore extends Context.Tag("svc/store/ResourceStore")<ResourceStore, {
  /**
   * Runs `command` in one Writer transaction: all it writes commits with one commit timestamp, or nothing
   * does. It fails with the command's own errors, a 422 for references the policy refuses, `LeaseLost` when
   * this process may no longer write, or `StoreError`.
   */
  readonly transaction: <A, E, R>(
    scope: WriteScope,
    command: (env: CommandEnv) => Effect.Effect<A, E, R>
  ) => Effect.Effect<Result<A>, Exclude<E, SqlError> | FhirError | StoreError | LeaseLost, R>
  /**
   * Validates `resource` as `type/id` ahead of its transaction, for the command that writes it (`prevalidated`
   * of the CommandEnv). A create whose answer is then certain whatever the database holds (413 for a Bundle
   * over `server.max_bundle_entries`, 422 for a resource with errors) fails here, without waiting for the
   * Writer; an update's checks against the current version come first, and a Bundle entry's answer waits for
   * the entries before it, so their commands answer. Undefined when the command's own first checks refuse the
   * resource (unknown type, a body of another type).
   */
  readonly prevalidate: (
    scope: WriteScope,
    write: { readonly interaction: "create" | "update" | "entry"; readonly type: string; readonly id: string; readonly resource: Record<string, unknown> }
  ) => Effect.Effect<Prevalidated | undefined, FhirError>
}>() {}

export const make = Effect.gen(function*() {
  const { writer: sql } = yield* Database
  const writer = yield* Writer
  const settings = yield* StoreSettings

  const transaction = <A, E, R>(scope: WriteScope, command: (env: CommandEnv) => Effect.Effect<A, E, R>) =>
    writer.commit((given: CommitContext) =>
      Effect.gen(function*() {
        const references = referenceCheck(settings.referencePolicy, scope.base, scope.catalog)
        // What the transaction holds at its end: a reference to one of these needs no look in the database (the
        // resources of a transaction Bundle referring to each other).
        const written = new Set<string>()
        const commit: CommitContext = {
          ...given,
          record: (change) => {
            const key = `${change.type}/${change.id}`
            if (change.op === "delete") written.delete(key)
            else written.add(key)
            given.record(change)
          }
        }
        const now = yield* Clock.currentTimeMillis
        const env = {
          sql,
          catalog: scope.catalog,
          updateAsCreate: settings.updateAsCreate,
          commit,
          base: scope.base,
          references,
          validation: validationOptions(settings, now),
          ...(scope.maxPageBytes === undefined ? {} : { maxPageBytes: scope.maxPageBytes }),
          ...(scope.access === undefined ? {} : { access: scope.access }),
          limits: { maxIndexRows: settings.maxIndexRows, maxBundleEntries: scope.maxBundleEntries, maxPatchOperations: settings.maxPatchOperations }
        }
        const value = yield* runCommand(env, command)
        // The targets are looked up in `resources`: in a group commit, a create's row may still be in the batch.
        if (commit.writes !== undefined && references.readsDatabase(written) && commit.writes.holdsRowsOf("resources")) yield* commit.writes.flush(sql)
        const issues = yield* references.verify(sql, written)
        if (issues.length > 0) return yield* invalidReferences(issues)
        return value
      })
    ).pipe(
      Effect.catchIf((error): error is SqlError => error instanceof SqlError, (error) => Effect.fail(storeError(error)))
    ) as Effect.Effect<Result<A>, Exclude<E, SqlError> | FhirError | StoreError | LeaseLost, R>

  const prevalidate = (
    scope: WriteScope,
    { id, interaction, resource, type }: { readonly interaction: "create" | "update" | "entry"; readonly type: string; readonly id: string; readonly resource: Record<string, unknown> }
  ): Effect.Effect<Prevalidated | undefined, FhirError> =>
    Effect.suspend(() => {
      if (knownType(scope.catalog, type) !== undefined || bodyMatches(resource, type) !== undefined) return Effect.succeed(undefined)
      // A Bundle over server.max_bundle_entries is not validated at all: a create is refused here, another
      // write by its command.
      const tooLarge = bundleEntries(scope.maxBundleEntries, type, resource)
      if (tooLarge !== undefined) return interaction === "create" ? Effect.fail(tooLarge) : Effect.succeed(undefined)
      return Effect.flatMap(Clock.currentTimeMillis, (now) =>
        Effect.flatMap(
          paced(new Pacer(workPerYield), validateForWriteSteps({ ...resource, id }, scope.catalog, validationOptions(settings, now))),
          (validation) =>
            interaction === "create" && !isValid(validation.issues)
              ? invalidResource(`${type}/${id}`, validation.issues)
              : Effect.succeed<Prevalidated>({ resource, id, validation })
        ))
    })

  return ResourceStore.of({ transaction, prevalidate })
})

/** The ResourceStore on the process's Writer and writer connection. */
export const layer = Layer.effect(ResourceStore, make)
