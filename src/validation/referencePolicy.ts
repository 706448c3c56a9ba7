/**
 * `conformance.reference_policy` (interface spec): what a reference in a written resource may point at.
 * `strict`: a resource the server holds and has not deleted, of a type the element allows, however deep
 * the reference sits. `fhir`: anything, but a reference that names a type must name one the element allows.
 * Both: `#id` must name a contained resource, a reference with only an `identifier` is fine, and an absolute
 * URL under the server's own base is read as the relative `Type/id` it ends with.
 *
 * The references of a command are collected as its resources are written and checked once, at the end of
 * its transaction: a reference to a resource created later in the same transaction counts.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import type { Catalog } from "../catalog/Catalog.ts"
import { isObject } from "../catalog/json.ts"
import type { Issue } from "./Issue.ts"
import { isPostgres } from "../db/unnest.ts"

export type ReferencePolicy = "strict" | "fhir"

/** A `Reference.reference` found in a resource, with the resource types its element allows (empty: any). */
export interface FoundReference {
  readonly expression: string
  readonly reference: string
  readonly targetTypes: ReadonlyArray<string>
  /** The ids of the contained resources of the resource the reference sits in, by id, with their types. */
  readonly contained: ReadonlyMap<string, string>
  /** Resources the reference may name without the server holding them: the entries of a Bundle it sits in, by fullUrl and `Type/id`, and the resources of a Parameters it sits in, by `Type/id`. */
  readonly local?: ReadonlySet<string>
  /** The element's target profiles, when one of them is not a FHIR base type (a Bundle entry it resolves to is checked against them: references.ts). */
  readonly targetProfiles?: ReadonlyArray<string>
  /** The aggregation modes of the element, when its profile gives any (references.ts). */
  readonly aggregation?: ReadonlyArray<string>
}

const relative = /^([A-Z][A-Za-z]+)\/([A-Za-z0-9\-.]{1,64})(?:\/_history\/[A-Za-z0-9\-.]{1,64})?$/
const absoluteTail = /\/([A-Z][A-Za-z]+)\/([A-Za-z0-9\-.]{1,64})(?:\/_history\/[A-Za-z0-9\-.]{1,64})?$/

interface Target {
  readonly type: string
  readonly id: string
}

export interface ReferenceCheck {
  /** Checks what can be told without the database, and notes the `Type/id` targets for `verify`. */
  readonly add: (holder: string, references: ReadonlyArray<FoundReference>) => void
  /**
   * The issues found so far plus, under `strict`, the targets the database does not hold. `written`: the `Type/id`
   * of resources the same transaction holds at its end (created or updated, not deleted), found without a look.
   */
  readonly verify: (sql: SqlClient.SqlClient, written?: ReadonlySet<string>) => Effect.Effect<ReadonlyArray<Issue>, SqlError>
  /** Whether `verify` will read the database (targets were noted, other than `written`). */
  readonly readsDatabase: (written?: ReadonlySet<string>) => boolean
}

const typeAllowed = (type: string, allowed: ReadonlyArray<string>): boolean =>
  allowed.length === 0 || allowed.includes(type) || allowed.includes("Resource")

const allowedText = (allowed: ReadonlyArray<string>): string => allowed.join(", ")

/** A collector for one transaction. `base` is the server's `[base]` URL. */
export const referenceCheck = (policy: ReferencePolicy, base: string, catalog: Catalog): ReferenceCheck => {
  const issues: Array<Issue> = []
  const wanted = new Map<string, Array<{ readonly holder: string; readonly found: FoundReference }>>()
  const ownBase = `${base.replace(/\/+$/, "")}/`

  const error = (holder: string, found: FoundReference, code: string, text: string) =>
    issues.push({ severity: "error", code, expression: found.expression, diagnostics: `${holder}: ${found.expression} ${text}` })

  const add = (holder: string, references: ReadonlyArray<FoundReference>) => {
    for (const found of references) {
      const reference = found.reference
      if (reference.startsWith("#")) {
        const id = reference.slice(1)
        // `#` alone refers to the resource that contains this one.
        if (id === "") continue
        const type = found.contained.get(id)
        if (type === undefined) error(holder, found, "not-found", `refers to ${reference}, but the resource contains no resource with id '${id}'`)
        else if (!typeAllowed(type, found.targetTypes)) error(holder, found, "invalid", `refers to ${reference}, a ${type}, where only ${allowedText(found.targetTypes)} is allowed`)
        continue
      }
      if (found.local?.has(reference) === true) continue
      const local = reference.startsWith(ownBase) ? reference.slice(ownBase.length) : reference
      const match = relative.exec(local)
      if (match !== null) {
        const target: Target = { type: match[1]!, id: match[2]! }
        if (!catalog.isResourceType(target.type)) {
          error(holder, found, "invalid", `refers to ${reference}, but ${target.type} is not a resource type`)
          continue
        }
        if (!typeAllowed(target.type, found.targetTypes)) {
          error(holder, found, "invalid", `refers to a ${target.type} (${reference}) where only ${allowedText(found.targetTypes)} is allowed`)
          continue
        }
        if (found.local?.has(`${target.type}/${target.id}`) === true || policy !== "strict") continue
        const key = `${target.type}/${target.id}`
        const list = wanted.get(key)
        if (list) list.push({ holder, found })
        else wanted.set(key, [{ holder, found }])
        continue
      }
      // Elsewhere: an absolute URL of another server, a urn, or text that is no reference.
      const tail = absoluteTail.exec(reference)
      if (tail !== null && catalog.isResourceType(tail[1]!) && !typeAllowed(tail[1]!, found.targetTypes)) {
        error(holder, found, "invalid", `refers to a ${tail[1]} (${reference}) where only ${allowedText(found.targetTypes)} is allowed`)
        continue
      }
      if (policy === "strict") {
        error(holder, found, "not-found", `refers to ${reference}, which is not a resource on this server (conformance.reference_policy is strict)`)
      }
    }
  }

  /** The targets to look up: those noted, less the transaction's own. */
  const toLookUp = (written: ReadonlySet<string> | undefined): Array<string> =>
    written === undefined || written.size === 0 ? [...wanted.keys()] : [...wanted.keys()].filter((key) => !written.has(key))

  const verify = (sql: SqlClient.SqlClient, written?: ReadonlySet<string>) =>
    Effect.gen(function*() {
      const keys = toLookUp(written)
      const held = new Set<string>()
      // No statement when nothing is to be looked up (nor a client needed).
      const pg = keys.length > 0 && isPostgres(sql)
      // Postgres: the targets as two arrays, one statement however many (its text the same each time); SQLite: 200
      // pairs a statement, ORed.
      const perStatement = pg ? keys.length : 200
      for (let i = 0; i < keys.length; i += perStatement) {
        const chunk = keys.slice(i, i + perStatement).map((key) => {
          const slash = key.indexOf("/")
          return { type: key.slice(0, slash), id: key.slice(slash + 1) }
        })
        const rows = yield* (pg
          ? sql<{ readonly type: string; readonly id: string }>`
              SELECT r.type, r.id FROM unnest(${chunk.map((t) => t.type)}::text[], ${chunk.map((t) => t.id)}::text[]) AS t(type, id)
              JOIN resources r ON r.type = t.type AND r.id = t.id WHERE NOT r.deleted`
          : sql<{ readonly type: string; readonly id: string }>`
              SELECT type, id FROM resources WHERE NOT deleted AND (${sql.or(chunk.map((t) => sql`(type = ${t.type} AND id = ${t.id})`))})`)
        for (const row of rows) held.add(`${row.type}/${row.id}`)
      }
      const missing: Array<Issue> = []
      for (const [key, uses] of wanted) {
        if (held.has(key) || written?.has(key) === true) continue
        for (const { holder, found } of uses) {
          missing.push({
            severity: "error",
            code: "not-found",
            expression: found.expression,
            diagnostics: `${holder}: ${found.expression} refers to ${key}, which this server does not hold (conformance.reference_policy is strict)`
          })
        }
      }
      return [...issues, ...missing]
    })

  return { add, verify, readsDatabase: (written) => wanted.size > 0 && toLookUp(written).length > 0 }
}

/**
 * The resources a reference inside a Bundle or Parameters may name without the server holding them, added to
 * those of the Bundles and Parameters around it: the fullUrls and `Type/id` of a Bundle's entries, the
 * `Type/id` of a Parameters' resources (in parameters and their parts).
 */
export const entryTargets = (container: Record<string, unknown>, outer: ReadonlySet<string> | undefined): ReadonlySet<string> => {
  const targets = new Set(outer)
  const addResource = (resource: unknown) => {
    if (isObject(resource) && typeof resource["resourceType"] === "string" && typeof resource["id"] === "string") {
      targets.add(`${resource["resourceType"]}/${resource["id"]}`)
    }
  }
  if (container["resourceType"] === "Parameters") {
    const parameters = (list: unknown, depth: number): void => {
      if (!Array.isArray(list) || depth > 32) return
      for (const parameter of list) {
        if (!isObject(parameter)) continue
        addResource(parameter["resource"])
        parameters(parameter["part"], depth + 1)
      }
    }
    parameters(container["parameter"], 0)
    return targets
  }
  const entries = container["entry"]
  if (!Array.isArray(entries)) return targets
  for (const entry of entries) {
    if (!isObject(entry)) continue
    if (typeof entry["fullUrl"] === "string") targets.add(entry["fullUrl"])
    addResource(entry["resource"])
  }
  return targets
}

/** The contained resources of a resource: their ids and types. */
export const containedTypes = (resource: unknown): ReadonlyMap<string, string> => {
  const contained = new Map<string, string>()
  if (isObject(resource) && Array.isArray(resource["contained"])) {
    for (const item of resource["contained"]) {
      if (isObject(item) && typeof item["id"] === "string" && typeof item["resourceType"] === "string") contained.set(item["id"], item["resourceType"])
    }
  }
  return contained
}
