/**
 * What GraphQL's mutations (mutations.ts) write with: the REST API's own create, update and delete by id
 * (rest/write.ts `createIn`, `updateIn`, `removeIn`), so a mutation goes through the same ResourceStore
 * transaction, validation before the Writer's queue, reference policy and access rules (a token's scopes and a
 * `patient/` token's compartment, checked by the commands) as `POST [base]/Type`, `PUT [base]/Type/id` and
 * `DELETE [base]/Type/id`, and its commit is published for the caller as theirs are. Each mutation field is its own
 * transaction: one that fails writes nothing and leaves the others of the request standing.
 *
 * A failure is a `MutationFailure`: the REST API's OperationOutcome and its message, for the field's error.
 */
import { Effect } from "effect"
import { operationOutcome } from "../http/OperationOutcome.ts"
import { fail, type FhirError } from "../http/FhirError.ts"
import { createIn, removeIn, updateIn } from "../rest/write.ts"
import type { ResourceStore, StoreError, WriteScope } from "../store/ResourceStore.ts"
import type { LeaseLost } from "../db/WriterLease.ts"
import { withOrigin } from "../db/Writer.ts"
import type { WriteOrigin } from "../db/ChangeFeed.ts"
import { type MutationContext, MutationFailure } from "./mutations.ts"

/** A write's failure as the field error of its mutation, with the REST API's words for a failed storage. */
const failure = (error: FhirError | StoreError | LeaseLost): Effect.Effect<never, MutationFailure> => {
  switch (error._tag) {
    case "FhirError":
      return Effect.fail(new MutationFailure(error))
    case "LeaseLost":
      return Effect.logWarning(`a write was refused: this process no longer holds the writer lease (${error.reason})`).pipe(
        Effect.zipRight(Effect.fail(new MutationFailure(fail("transient", "this server can no longer write (it lost the writer lease); nothing was written: try again", 503))))
      )
    case "StoreError":
      switch (error.limit) {
        case "deadline":
          return Effect.fail(new MutationFailure(fail("too-costly", "the database did not answer within the statement deadline (database.statement_timeout_ms): nothing was written; try again later", 503)))
        case "pool":
          return Effect.fail(new MutationFailure(fail("transient", "the server is busy: no database connection was free in time; nothing was written, try again shortly")))
        case undefined:
          return Effect.logError("database error", error.cause).pipe(
            Effect.zipRight(Effect.fail(new MutationFailure(fail("exception", "the database failed to write; see the server log"))))
          )
      }
  }
}

/** The resource a write stored, as the mutation answers it. */
const storedResource = (content: string): Record<string, unknown> => JSON.parse(content) as Record<string, unknown>

/**
 * The writes of one request's mutations: in `scope` (its base, catalog and the caller's access), made for `origin`;
 * `run` runs each (the request's runtime), `committed` hears each commit.
 */
export const writeContext = (options: {
  readonly scope: WriteScope
  readonly origin: WriteOrigin
  readonly run: <A>(effect: Effect.Effect<A, MutationFailure, ResourceStore>) => Promise<A>
  readonly committed: (commitTs: number) => void
}): MutationContext => {
  const write = <A>(effect: Effect.Effect<{ readonly commitTs: number; readonly value: A }, FhirError | StoreError | LeaseLost, ResourceStore>) =>
    options.run(effect.pipe(
      withOrigin(options.origin),
      Effect.tap(({ commitTs }) => options.committed(commitTs)),
      Effect.map(({ value }) => value),
      Effect.catchAll(failure)
    ))
  return {
    create: (type, resource) => write(createIn(options.scope, type, resource)).then((created) => storedResource(created.stored.content)),
    update: (type, id, resource) => write(updateIn(options.scope, type, id, resource, undefined)).then((updated) => storedResource(updated.stored.content)),
    delete: (type, id) =>
      write(removeIn(options.scope, type, id)).then((deleted) =>
        operationOutcome([{ severity: "information", code: "informational", diagnostics: `deleted ${type}/${id} (version ${deleted.version})` }])
      )
  }
}
