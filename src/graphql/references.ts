/**
 * `reference { resource { ... } }` (FHIR GraphQL, "Resource references"): the resources references point at, read
 * in batches: every reference asked for while a query's fields resolve is gathered, and each type's are read in one
 * statement (`currentOf`), with the caller's restriction in it, rather than one read per field.
 *
 * A reference is `Type/id`, or the same under this server's base; anything else (a contained `#id`, another
 * server's URL, a version-specific or conditional reference) is not resolved here: the field is null with an error,
 * or null alone with `optional: true`, as is a resource that does not exist, was deleted or may not be read.
 */
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Effect } from "effect"
import type { Access } from "../auth/access/Access.ts"
import { accessCondition } from "../auth/access/conditions.ts"
import type { Catalog } from "../catalog/Catalog.ts"
import type { Database } from "../db/Database.ts"
import { localReference } from "../rest/localReference.ts"
import { currentOf } from "../store/reads.ts"
import { FieldError } from "./errors.ts"

/** `Type/id` of a reference to a resource of a type this server knows, on this server, or undefined. */
export const serverReference = (catalog: Catalog, reference: string, base: string): { readonly type: string; readonly id: string } | undefined => {
  const local = localReference(reference, base)
  return local === undefined || !catalog.isResourceType(local.type) ? undefined : local
}

interface Waiting {
  readonly resolve: (resource: Record<string, unknown>) => void
  readonly reject: (error: Error) => void
}

/** Reads the resources of `type` among `ids` as `access` may: each by id, or the reason it cannot be given. */
const readBatch = (db: Database["Type"], catalog: Catalog, access: Access, type: string, ids: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const found = new Map<string, Record<string, unknown> | FieldError>()
    if (access.rule(catalog, type, "r")._tag === "None") {
      for (const id of ids) found.set(id, new FieldError(`the token's scopes do not allow reading ${type}`, "forbidden"))
      return found
    }
    const now = yield* Clock.currentTimeMillis
    const rows = yield* db.withReader((sql) => currentOf(sql, type, ids, accessCondition(sql, access, catalog, [type], "r", now)))
    for (const row of rows) {
      found.set(
        row.id,
        row.content === null
          ? new FieldError(`${type}/${row.id} was deleted`, "deleted")
          : row.allowed
          ? JSON.parse(row.content) as Record<string, unknown>
          : new FieldError(`${type}/${row.id} is not known`, "not-found")
      )
    }
    for (const id of ids) if (!found.has(id)) found.set(id, new FieldError(`${type}/${id} is not known`, "not-found"))
    return found
  })

/**
 * A loader of one query's references: `load` gives a promise of the resource; the references asked for in the
 * same turn of the event loop are read together, one statement per type. `run` runs a read (the request's runtime).
 */
export const referenceLoader = (
  db: Database["Type"],
  catalog: Catalog,
  access: Access,
  run: <A>(effect: Effect.Effect<A, SqlError>) => Promise<A>
) => {
  let waiting = new Map<string, Map<string, Array<Waiting>>>()
  let scheduled = false

  const flush = () => {
    scheduled = false
    const batch = waiting
    waiting = new Map()
    for (const [type, byId] of batch) {
      run(readBatch(db, catalog, access, type, [...byId.keys()])).then(
        (found) => {
          for (const [id, waiters] of byId) {
            const resource = found.get(id)
            for (const waiter of waiters) {
              if (resource instanceof FieldError) waiter.reject(resource)
              else if (resource !== undefined) waiter.resolve(resource)
              else waiter.reject(new FieldError(`${type}/${id} is not known`, "not-found"))
            }
          }
        },
        (error: unknown) => {
          const failure = new FieldError(`reading ${type} failed: ${error instanceof Error ? error.message : String(error)}`, "exception")
          for (const waiters of byId.values()) for (const waiter of waiters) waiter.reject(failure)
        }
      )
    }
  }

  return {
    load: (type: string, id: string): Promise<Record<string, unknown>> =>
      new Promise((resolve, reject) => {
        const byId = waiting.get(type) ?? new Map<string, Array<Waiting>>()
        waiting.set(type, byId)
        byId.set(id, [...(byId.get(id) ?? []), { resolve, reject }])
        if (!scheduled) {
          scheduled = true
          setImmediate(flush)
        }
      })
  }
}
