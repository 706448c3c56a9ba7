/**
 * The conditions of Bundle entries (https://hl7.org/fhir/R4/http.html#trules): `ifNoneExist` on a
 * POST, a `Type?search` URL on a PUT, PATCH or DELETE, and conditional references
 * (https://hl7.org/fhir/R4/bundle.html#references): a `reference` written `Type?search` becomes the
 * `Type/id` of the one resource the search matches.
 */
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import type { Catalog } from "../../catalog/Catalog.ts"
import { matchRestriction } from "../../auth/access/enforce.ts"
import type { Permission } from "../../auth/scopes.ts"
import { findMatches } from "../../search/plan/query.ts"
import type { CommandEnv } from "../../store/commands.ts"
import { type Condition, readCondition } from "../../store/conditional.ts"
import { fail, FhirError } from "../../http/FhirError.ts"
import type { Entry } from "./entries.ts"
import { conditionalReference } from "./references.ts"

const interactionOf: Record<Entry["method"], string> = {
  POST: "conditional create",
  PUT: "conditional update",
  PATCH: "conditional patch",
  DELETE: "conditional delete",
  GET: "search",
  HEAD: "search"
}

export const interactionName = (entry: Entry): string => interactionOf[entry.method]

const permissions: Record<Entry["method"], Permission> = { POST: "c", PUT: "u", PATCH: "u", DELETE: "d", GET: "s", HEAD: "s" }

/** The SMART permission an entry's condition is looked up under (docs/smart.md, "Scopes"). */
export const permissionOf = (entry: Entry): Permission => permissions[entry.method]

/** The condition of a conditional entry, read with the search rules; undefined for other entries. */
export const conditionOf = (entry: Entry, catalog: Catalog): Condition | FhirError | undefined => {
  if (entry.target._tag !== "type") return undefined
  if (entry.method === "POST") {
    return entry.ifNoneExist === undefined ? undefined : readCondition(catalog, entry.target.type, entry.ifNoneExist, interactionName(entry))
  }
  if (entry.method === "GET" || entry.method === "HEAD" || entry.query === undefined) return undefined
  return readCondition(catalog, entry.target.type, entry.query, interactionName(entry))
}

/** The key under which a condition is known: `Type?name=value&...`, decoded. */
export const conditionKey = (condition: Condition): string => `${condition.type}?${condition.text}`


/** Every `reference` written as `Type?search` in `value`, once each. */
export const conditionalReferences = (value: unknown, found: Set<string> = new Set(), key = ""): Set<string> => {
  if (typeof value === "string") {
    if (key === "reference" && conditionalReference.test(value)) found.add(value)
  } else if (Array.isArray(value)) {
    for (const item of value) conditionalReferences(item, found, key)
  } else if (typeof value === "object" && value !== null) {
    const object = value as Record<string, unknown>
    for (const name in object) conditionalReferences(object[name], found, name)
  }
  return found
}

/**
 * `Type/id` for each conditional reference of an entry's resource. `known` maps the conditions of the
 * Bundle's conditional creates (`conditionKey`) to the resource each created or found, so that a
 * reference written with the same search names it even when it is created in this transaction.
 * A reference that matches nothing is a 404, several a 412, both naming the entry and the reference.
 */
export const resolveReferences = (
  env: CommandEnv,
  entry: Entry,
  resource: Record<string, unknown>,
  known: ReadonlyMap<string, string>
): Effect.Effect<Map<string, string>, FhirError | SqlError> =>
  Effect.gen(function*() {
    const resolved = new Map<string, string>()
    const where = entry.fullUrl === undefined ? "" : ` in the resource of ${entry.fullUrl}`
    for (const reference of conditionalReferences(resource)) {
      const type = conditionalReference.exec(reference)![1]!
      const condition = readCondition(env.catalog, type, reference, "conditional reference")
      if (condition instanceof FhirError) {
        return yield* fail(condition.code, `the conditional reference ${reference}${where}: ${condition.diagnostics}`, condition.status)
      }
      const same = known.get(conditionKey(condition))
      if (same !== undefined) {
        resolved.set(reference, same)
        continue
      }
      // A conditional reference is a search: it finds only what the caller may search.
      const restriction = env.access === undefined ? undefined : yield* matchRestriction(env.sql, env.access, env.catalog, type, "s")
      const matches = yield* findMatches(env.sql, condition.search, 2, restriction)
      if (matches.length === 0) return yield* fail("not-found", `the conditional reference ${reference}${where} matches no ${type}`)
      if (matches.length > 1) {
        return yield* fail("multiple-matches", `the conditional reference ${reference}${where} matches more than one ${type}; it needs criteria that select one`)
      }
      resolved.set(reference, `${type}/${matches[0]!.id}`)
    }
    return resolved
  })
