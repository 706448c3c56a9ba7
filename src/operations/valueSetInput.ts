/**
 * The ValueSet `$expand` and `$expandability` work on, and the caller's right to read it (docs/smart.md,
 * "Scopes"; docs/terminology.md, "Access"): at instance level (`[base]/ValueSet/{id}/$op`) the stored
 * resource, read from the database (a ValueSet just written is there before the catalog is rebuilt); at
 * type level the one `url` names (with `valueSetVersion`), from the catalog, or one given inline as the
 * `valueSet` parameter of a Parameters body. Each needs read on ValueSet; a stored one must be one the
 * caller may read (404 otherwise, as for one that does not exist).
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import { Clock, Effect, Either } from "effect"
import { granted, standing, unseen } from "../auth/access/enforce.ts"
import { ruleCondition } from "../auth/access/conditions.ts"
import type { Rule } from "../auth/access/Access.ts"
import type { Catalog } from "../catalog/Catalog.ts"
import { isObject, type Json, str } from "../catalog/json.ts"
import { Database } from "../db/Database.ts"
import { fail } from "../http/FhirError.ts"
import type { FhirRequest } from "../rest/FhirRequest.ts"
import { parseSearch } from "../search/parse/parseSearch.ts"
import { whereCondition } from "../search/plan/query.ts"
import { readCurrent } from "../store/reads.ts"
import { resolveValueSet, type Source } from "../terminology/expansion.ts"
import type { Target } from "../terminology/expansionQuery.ts"
import type { Arguments } from "./arguments.ts"

export interface ValueSetInput {
  readonly target: Target
  /** The ValueSet resource, for the answer's metadata. */
  readonly resource: Json
  /** The stored resource's id (instance level). */
  readonly id: string | undefined
  /** How messages name it. */
  readonly name: string
}

const withoutVersion = (canonical: string): string => {
  const bar = canonical.indexOf("|")
  return bar < 0 ? canonical : canonical.slice(0, bar)
}

const versionOf = (canonical: string): string | undefined => {
  const bar = canonical.indexOf("|")
  return bar < 0 ? undefined : canonical.slice(bar + 1)
}

/** Whether a stored ValueSet with `url` is one `rule` lets the caller read (a restricted grant: a v2 scope's query). */
const visible = (sql: SqlClient.SqlClient, catalog: Catalog, url: string, rule: Rule) =>
  Effect.gen(function*() {
    const byUrl = parseSearch("ValueSet", new URLSearchParams([["url", url]]), catalog, { lenient: false })
    if (Either.isLeft(byUrl)) return false
    const now = yield* Clock.currentTimeMillis
    const rows = yield* sql<{ readonly found: number }>`
      SELECT 1 AS found FROM resources r
      WHERE r.type = ${"ValueSet"} AND NOT r.deleted AND ${whereCondition(sql, byUrl.right, now)} AND ${ruleCondition(sql, catalog, "ValueSet", rule, now)!}
      LIMIT 1`
    return rows.length > 0
  })

const sameDefinition = (a: Json, b: Json): boolean =>
  JSON.stringify(a["compose"] ?? null) === JSON.stringify(b["compose"] ?? null) &&
  JSON.stringify(a["expansion"] ?? null) === JSON.stringify(b["expansion"] ?? null)

/** The stored ValueSet as a target: the catalog's own expansion when the catalog holds the same definition. */
const storedTarget = (catalog: Catalog, resource: Json): Target => {
  const url = str(resource, "url")
  const version = str(resource, "version")
  if (url !== undefined) {
    const canonical = version === undefined ? url : `${url}|${version}`
    const held = catalog.valueSet(canonical)
    if (held !== undefined && held.version === version && sameDefinition(held.resource, resource)) return { kind: "catalog", canonical }
  }
  const source: Source = { url, version, json: resource }
  return { kind: "resource", source }
}

/**
 * The ValueSet of the call; `{ unknown }` when `url` names one the server does not know (or the caller may not
 * read). `operation` names the operation in messages (`$expand`).
 */
export const valueSetInput = (request: FhirRequest, id: string | undefined, args: Arguments, operation: string) =>
  Effect.gen(function*() {
    const { catalog } = request
    const rule = yield* granted(request.access, catalog, "ValueSet", "r")
    const url = args.values.get("url") ?? undefined
    const asked = args.values.get("valueSetVersion") ?? undefined
    const inline = args.resources.get("valueSet")?.[0]
    if (args.values.has("context") || args.values.has("contextDirection")) {
      return yield* fail("not-supported", `${operation} does not take 'context': name the ValueSet by url, or give it as valueSet`, 400)
    }
    const db = yield* Database

    if (id !== undefined) {
      if (inline !== undefined) return yield* fail("invalid", `${operation} on ValueSet/${id} expands that ValueSet: it takes no valueSet parameter`)
      const row = yield* db.withReader((sql) =>
        Effect.gen(function*() {
          if (rule._tag !== "All" && (yield* standing(sql, catalog, "ValueSet", id, rule)) !== "allowed") return yield* unseen("ValueSet", id)
          return yield* readCurrent(sql, "ValueSet", id)
        })
      )
      if (row === undefined) return yield* fail("not-found", `ValueSet/${id} is not known`)
      if (row.content === null) return yield* fail("deleted", `ValueSet/${id} was deleted`)
      const resource = JSON.parse(row.content) as Json
      const storedUrl = str(resource, "url")
      if (url !== undefined && withoutVersion(url) !== storedUrl) {
        return yield* fail("invalid", `ValueSet/${id} has the url ${storedUrl ?? "(none)"}, not ${withoutVersion(url)}`)
      }
      const storedVersion = str(resource, "version")
      const wanted = asked ?? (url === undefined ? undefined : versionOf(url))
      if (wanted !== undefined && wanted !== storedVersion) {
        return yield* fail("not-found", `ValueSet/${id} is version ${storedVersion ?? "(none)"}, not ${wanted}`)
      }
      return { target: storedTarget(catalog, resource), resource, id, name: `ValueSet/${id}` } satisfies ValueSetInput
    }

    if (inline !== undefined) {
      if (url !== undefined) return yield* fail("invalid", `${operation} takes either url or valueSet, not both`)
      if (!isObject(inline) || inline["resourceType"] !== "ValueSet") {
        return yield* fail("invalid", `The parameter 'valueSet' of ${operation} must be a ValueSet, not ${String(inline["resourceType"])}`)
      }
      const source: Source = { url: str(inline, "url"), version: str(inline, "version"), json: inline }
      return { target: { kind: "resource", source }, resource: inline, id: undefined, name: "the ValueSet given" } satisfies ValueSetInput
    }

    if (url === undefined) {
      return yield* fail("required", `${operation} needs a ValueSet: the parameter 'url', a ValueSet as the parameter 'valueSet' of a Parameters body, or [base]/ValueSet/{id}/${operation}`)
    }
    const inUrl = versionOf(url)
    if (asked !== undefined && inUrl !== undefined && asked !== inUrl) {
      return yield* fail("invalid", `The url ${url} names version ${inUrl}, the parameter 'valueSetVersion' ${asked}`)
    }
    const version = asked ?? inUrl
    const canonical = version === undefined ? url : `${withoutVersion(url)}|${version}`
    const unknown = { unknown: `the ValueSet ${withoutVersion(url)}${version === undefined ? "" : ` version ${version}`} is not known to this server` }
    const source = resolveValueSet(catalog, canonical)
    if (source === undefined) return unknown
    if (rule._tag !== "All" && !(yield* db.withReader((sql) => visible(sql, catalog, withoutVersion(url), rule)))) return unknown
    return { target: { kind: "catalog", canonical }, resource: source.json, id: undefined, name: `the ValueSet ${withoutVersion(url)}` } satisfies ValueSetInput
  })
