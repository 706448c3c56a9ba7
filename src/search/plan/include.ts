/**
 * `_include` and `_revinclude` (https://hl7.org/fhir/R4/search.html#include and the spec's Search rules 7-9):
 * the resources a page's matches refer to, and those that refer to them, read from the reference index
 * (`search_reference`), never from the JSON. Each rule is one statement per round (per chunk of row keys);
 * the sizes are read at the end, and the contents once the page knows which of them it has room for.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Statement } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Schema } from "effect"
import type { Include } from "../parse/SearchRequest.ts"

/** At most this many resources may be added by `:iterate` rules (spec Limits); more is a 400. */
export const maxIterated = 1000

/** Row keys and ids per IN list: well under SQLite's and Postgres's limits on bound parameters. */
const chunkSize = 500

export class TooManyIncluded extends Schema.TaggedError<TooManyIncluded>()("TooManyIncluded", { limit: Schema.Number }) {
  override get message(): string {
    return `_include:iterate and _revinclude:iterate would add more than ${this.limit} resources to this page: ` +
      `narrow the search, lower _count or leave out :iterate`
  }
}

/** A current resource, by its row key, type and id. */
export interface ResourceKey {
  readonly rkey: number
  readonly type: string
  readonly id: string
}

/** A resource an include adds, with the size of its current content in bytes. */
export interface IncludedKey extends ResourceKey {
  readonly size: number
}

export interface IncludedResource extends ResourceKey {
  /** The stored JSON text of its current version. */
  readonly content: string
}

export interface IncludeOptions {
  /**
   * A condition on `r` (the resources table) every included resource must also meet, e.g. a patient
   * compartment for a patient-scoped token (Search rule 9). Iteration goes on only from resources that meet it.
   */
  readonly restrict?: Statement.Fragment
}

type Rule = { readonly direction: "include" | "revinclude"; readonly include: Include }

const chunks = <A>(items: ReadonlyArray<A>): Array<ReadonlyArray<A>> => {
  const out: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < items.length; i += chunkSize) out.push(items.slice(i, i + chunkSize))
  return out
}

type KeyRow = { readonly rkey: number | string; readonly type: string; readonly id: string }
const keyOf = (row: KeyRow): ResourceKey => ({ rkey: Number(row.rkey), type: row.type, id: row.id })

/** The current resources that `sources` refer to through the rule's parameter (every reference, for `*`). */
const forward = (sql: SqlClient.SqlClient, include: Include, sources: ReadonlyArray<ResourceKey>, restrict: ReadonlyArray<Statement.Fragment>) => {
  const from = include.kind === "wildcard" ? sources : sources.filter((source) => source.type === include.sourceType)
  const filter = include.kind === "wildcard"
    ? []
    : [sql`i.type = ${include.sourceType}`, sql`i.param = ${include.param.code}`, ...(include.targetType === undefined ? [] : [sql`i.target_type = ${include.targetType}`])]
  return Effect.forEach(chunks(from.map((source) => source.rkey)), (rkeys) =>
    sql<KeyRow>`SELECT DISTINCT r.rkey, r.type, r.id FROM search_reference i JOIN resources r ON r.type = i.target_type AND r.id = i.target_id
      WHERE ${sql.and([sql.in("i.rkey", rkeys), ...filter, sql`NOT r.deleted`, ...restrict])}`)
}

/** The current resources of the rule's type that refer to one of `targets` through its parameter. */
const reverse = (sql: SqlClient.SqlClient, include: Include, targets: ReadonlyArray<ResourceKey>, restrict: ReadonlyArray<Statement.Fragment>) => {
  if (include.kind === "wildcard") return Effect.succeed([])
  const byType = new Map<string, Array<string>>()
  for (const target of targets) {
    if (include.targetType !== undefined && target.type !== include.targetType) continue
    byType.set(target.type, [...(byType.get(target.type) ?? []), target.id])
  }
  const groups = [...byType].flatMap(([type, ids]) => chunks(ids).map((chunk) => ({ type, ids: chunk })))
  return Effect.forEach(groups, ({ ids, type }) =>
    sql<KeyRow>`SELECT DISTINCT r.rkey, r.type, r.id FROM search_reference i JOIN resources r ON r.rkey = i.rkey
      WHERE ${sql.and([
        sql`i.type = ${include.sourceType}`, sql`i.param = ${include.param.code}`, sql`i.target_type = ${type}`, sql.in("i.target_id", ids),
        sql`r.type = ${include.sourceType}`, sql`NOT r.deleted`, ...restrict
      ])}`)
}

/** Every resource the rules reach from `from`, in row-key order, duplicates kept. */
const reach = (sql: SqlClient.SqlClient, rules: ReadonlyArray<Rule>, from: ReadonlyArray<ResourceKey>, restrict: ReadonlyArray<Statement.Fragment>) =>
  from.length === 0 || rules.length === 0
    ? Effect.succeed([])
    : Effect.map(
      Effect.forEach(rules, (rule) => (rule.direction === "include" ? forward : reverse)(sql, rule.include, from, restrict)),
      (results) => results.flat(2).map(keyOf).sort((a, b) => a.rkey - b.rkey)
    )

/**
 * The resources `include` and `revinclude` add to a page whose matches are `matches`, each once and none of
 * them a match, in the order found. A rule without `:iterate` applies to the matches; one with it applies to
 * the matches and to whatever was added, round after round, until a round adds nothing (reference cycles end
 * there, since nothing is added twice). More than `maxIterated` resources added by `:iterate` rules (those the
 * plain rules also add do not count) fail with `TooManyIncluded`.
 */
export const includedResources = (
  sql: SqlClient.SqlClient,
  matches: ReadonlyArray<ResourceKey>,
  include: ReadonlyArray<Include>,
  revinclude: ReadonlyArray<Include>,
  options: IncludeOptions = {}
): Effect.Effect<ReadonlyArray<IncludedResource>, TooManyIncluded | SqlError> =>
  Effect.flatMap(includedKeys(sql, matches, include, revinclude, options), (keys) => includedContents(sql, keys))

/** What `includedResources` adds, without the contents: each resource's key and size. */
export const includedKeys = (
  sql: SqlClient.SqlClient,
  matches: ReadonlyArray<ResourceKey>,
  include: ReadonlyArray<Include>,
  revinclude: ReadonlyArray<Include>,
  options: IncludeOptions = {}
): Effect.Effect<ReadonlyArray<IncludedKey>, TooManyIncluded | SqlError> =>
  Effect.gen(function*() {
    const rules: Array<Rule> = [
      ...include.map((rule) => ({ direction: "include" as const, include: rule })),
      ...revinclude.map((rule) => ({ direction: "revinclude" as const, include: rule }))
    ]
    if (matches.length === 0 || rules.length === 0) return []
    const restrict = options.restrict === undefined ? [] : [options.restrict]
    const once = rules.filter((rule) => !rule.include.iterate)
    const iterate = rules.filter((rule) => rule.include.iterate)
    const seen = new Set(matches.map((match) => match.rkey))
    const added: Array<ResourceKey> = []
    let iterated = 0
    const keep = (found: ReadonlyArray<ResourceKey>): Array<ResourceKey> => {
      const fresh: Array<ResourceKey> = []
      for (const key of found) {
        if (seen.has(key.rkey)) continue
        seen.add(key.rkey)
        fresh.push(key)
      }
      added.push(...fresh)
      return fresh
    }
    const keepIterated = (found: ReadonlyArray<ResourceKey>) => {
      const fresh = keep(found)
      iterated += fresh.length
      return iterated > maxIterated ? Effect.fail(new TooManyIncluded({ limit: maxIterated })) : Effect.succeed(fresh)
    }

    let frontier = keep(yield* reach(sql, once, matches, restrict))
    frontier = [...frontier, ...yield* keepIterated(yield* reach(sql, iterate, matches, restrict))]
    while (iterate.length > 0 && frontier.length > 0) {
      frontier = yield* keepIterated(yield* reach(sql, iterate, frontier, restrict))
    }
    return yield* sizes(sql, added)
  })

/** `keys` with the sizes of their current contents (`octet_length` reads no text), in their order; one deleted meanwhile is left out. */
const sizes = (sql: SqlClient.SqlClient, keys: ReadonlyArray<ResourceKey>) =>
  Effect.map(
    Effect.forEach(chunks(keys.map((key) => key.rkey)), (rkeys) =>
      sql<{ readonly rkey: number | string; readonly size: number | string }>`
        SELECT r.rkey, octet_length(v.content) AS size FROM resources r JOIN resource_versions v ON v.rkey = r.rkey AND v.version = r.version
        WHERE ${sql.in("r.rkey", rkeys)} AND NOT r.deleted`),
    (results) => {
      const byKey = new Map(results.flat().map((row) => [Number(row.rkey), row.size]))
      return keys.flatMap((key): Array<IncludedKey> => {
        const size = byKey.get(key.rkey)
        return size === undefined || size === null ? [] : [{ ...key, size: Number(size) }]
      })
    }
  )

/** The current contents of `keys`, in their order; one deleted meanwhile is left out. */
export const includedContents = (sql: SqlClient.SqlClient, keys: ReadonlyArray<ResourceKey>) =>
  Effect.map(
    Effect.forEach(chunks(keys.map((key) => key.rkey)), (rkeys) =>
      sql<{ readonly rkey: number | string; readonly content: string | null }>`
        SELECT r.rkey, v.content FROM resources r JOIN resource_versions v ON v.rkey = r.rkey AND v.version = r.version
        WHERE ${sql.in("r.rkey", rkeys)} AND NOT r.deleted`),
    (results) => {
      const byKey = new Map(results.flat().map((row) => [Number(row.rkey), row.content]))
      return keys.flatMap((key): Array<IncludedResource> => {
        const content = byKey.get(key.rkey)
        return content === undefined || content === null ? [] : [{ rkey: key.rkey, type: key.type, id: key.id, content }]
      })
    }
  )
