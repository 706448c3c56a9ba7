/**
 * Writes a page of pulled terminology resources through the ResourceStore (docs/terminology-pull.md, "What is
 * written"), so that they are ordinary resources: validated, indexed, in history and on the change feed, which
 * the catalog reload and replicas follow. A pulled resource is known by its type, canonical `url` and `version`;
 * `meta.source` holds the source's URL (without credentials) and marks it as this source's.
 *
 * For each resource: none held with that url and version: created, under the remote id when it is a valid id no
 * resource of the type has, else under a new one; one held from this source: updated when its content differs
 * (id and `meta` aside), left alone when not; one held that did not come from this source (written through the
 * API, by a package or by another source): skipped and counted. Resources are validated before the Writer's
 * queue; a page's writes are one transaction, and when that fails on one resource, each is written alone so that
 * only the one that fails is skipped. The resources refused in an attempt are tried once more at its end, once
 * the catalog holds what the attempt wrote (a ValueSet that lists codes of a CodeSystem pulled with it).
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import { randomUUID } from "node:crypto"
import type { Catalog } from "../../catalog/Catalog.ts"
import type { LeaseLost } from "../../db/WriterLease.ts"
import { FhirError } from "../../http/FhirError.ts"
import { checkBody } from "../../rest/bodyCheck.ts"
import { idPattern } from "../../store/checks.ts"
import { type CommandEnv, createCommand, type Prevalidated, prevalidatedOf, settle, updateCommand } from "../../store/commands.ts"
import { readCondition } from "../../store/conditional.ts"
import { readCurrent } from "../../store/reads.ts"
import type { ResourceStore, StoreError, WriteScope } from "../../store/ResourceStore.ts"
import { findMatches } from "../../search/plan/query.ts"
import { isValid } from "../../validation/Validator.ts"
import { sameJson } from "../../json/sameJson.ts"

/** What one attempt did with what it read; the counts `/healthz?verbose=1` shows. */
export interface Tally {
  /** CodeSystems, ValueSets and ConceptMaps read. */
  read: number
  created: number
  updated: number
  unchanged: number
  skipped: {
    /** Entries or lines of another resource type. */
    other_type: number
    /** NDJSON lines that are not a JSON object. */
    unreadable: number
    /** Resources without a `url`. */
    no_url: number
    /** The same type, url and version read again in the same attempt. */
    repeated: number
    /** A resource with the same url and version is held that did not come from this source. */
    held: number
    /** Refused by validation or by the store (the reason is logged). */
    refused: number
  }
}

export const emptyTally = (): Tally => ({
  read: 0,
  created: 0,
  updated: 0,
  unchanged: 0,
  skipped: { other_type: 0, unreadable: 0, no_url: 0, repeated: 0, held: 0, refused: 0 }
})

/** A resource refused in this attempt, and why. */
export interface Refusal {
  readonly resource: Record<string, unknown>
  readonly reason: string
}

/** Where the writes of a source go, and what it has written. */
export interface WriteContext {
  readonly store: ResourceStore["Type"]
  readonly withReader: <A, E, R>(f: (sql: SqlClient.SqlClient) => Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** Where the writes happen: the catalog is the one current when a page is written. */
  scope: WriteScope
  /** The source's URL without credentials: `meta.source` of what it writes. */
  readonly source: string
  /** `type|url|version` read so far in this attempt. */
  readonly seen: Set<string>
  readonly tally: Tally
  /** The resources refused so far in this attempt (tried again once the catalog holds what it wrote). */
  readonly refused: Array<Refusal>
  /** The commit of the attempt's last write; 0 before one. */
  lastCommitTs: number
}

/** Refused resources kept for the second try; more are refused for this attempt. */
const keptRefusals = 10_000

/** What a pulled resource means for the database now. */
type Plan =
  | { readonly _tag: "create"; readonly id: string }
  | { readonly _tag: "update"; readonly id: string }
  | { readonly _tag: "unchanged" }
  | { readonly _tag: "held"; readonly id: string }

/** A search value with its separators escaped. */
const escaped = (value: string): string => value.replace(/[\\,$|]/g, "\\$&")

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value)

/** The `meta` a pulled resource is written with: the remote's, without its version and time, with our `source`. */
const metaOf = (resource: Record<string, unknown>, source: string): Record<string, unknown> => {
  const given = isObject(resource["meta"]) ? resource["meta"] : {}
  const { versionId: _version, lastUpdated: _updated, source: _source, ...rest } = given
  return { ...rest, source }
}

/** What is compared to tell a change: everything but the id and the server's parts of `meta`. */
const comparable = (resource: Record<string, unknown>): Record<string, unknown> => {
  const { id: _id, meta, ...rest } = resource
  const given = isObject(meta) ? meta : {}
  const { versionId: _version, lastUpdated: _updated, source: _source, ...kept } = given
  return Object.keys(kept).length === 0 ? rest : { ...rest, meta: kept }
}

/**
 * The plan for `resource` (of `type`, with `url` and `version`) against what `sql` holds now. A condition on
 * `url` the catalog cannot read (no such search parameter) is a FhirError: the resource is refused.
 */
const planOf = (
  sql: SqlClient.SqlClient,
  catalog: Catalog,
  source: string,
  resource: Record<string, unknown>
): Effect.Effect<Plan, SqlError | FhirError> =>
  Effect.gen(function*() {
    const type = String(resource["resourceType"])
    const url = String(resource["url"])
    const version = resource["version"]
    const condition = readCondition(catalog, type, new URLSearchParams({ url: escaped(url) }), "terminology pull")
    if (condition instanceof FhirError) return yield* condition
    for (const match of yield* findMatches(sql, condition.search, 1000)) {
      const current = yield* readCurrent(sql, type, match.id)
      if (current === undefined || current.content === null) continue
      const held = JSON.parse(current.content) as Record<string, unknown>
      if (held["url"] !== url || held["version"] !== version) continue
      const meta = isObject(held["meta"]) ? held["meta"] : {}
      if (meta["source"] !== source) return { _tag: "held", id: match.id }
      return sameJson(comparable(held), comparable(resource)) ? { _tag: "unchanged" } : { _tag: "update", id: match.id }
    }
    const remote = resource["id"]
    if (typeof remote === "string" && idPattern.test(remote) && (yield* readCurrent(sql, type, remote)) === undefined) return { _tag: "create", id: remote }
    return { _tag: "create", id: randomUUID() }
  })

/** Notes a refused resource: counted, and kept for the second try and the log. */
const refuse = (context: WriteContext, resource: Record<string, unknown>, reason: string) =>
  Effect.sync(() => {
    context.tally.skipped.refused++
    if (context.refused.length < keptRefusals) context.refused.push({ resource, reason })
  })

/** `CodeSystem http://...|1`, for the log. */
export const describeResource = (resource: Record<string, unknown>): string =>
  `${String(resource["resourceType"])} ${String(resource["url"])}${typeof resource["version"] === "string" ? `|${resource["version"]}` : ""}`

/** A resource to write, with its planned id and what was checked ahead. */
interface Candidate {
  readonly type: string
  readonly body: Record<string, unknown>
  readonly ahead: Prevalidated
}

type Outcome = "created" | "updated" | "unchanged" | "held"

/** Writes one candidate in the transaction of `env`, planned again there (the database may have changed since). */
const writeOne = (env: CommandEnv, source: string, candidate: Candidate): Effect.Effect<Outcome, SqlError | FhirError> =>
  Effect.gen(function*() {
    yield* settle(env)
    const plan = yield* planOf(env.sql, env.catalog, source, candidate.body)
    if (plan._tag === "unchanged" || plan._tag === "held") return plan._tag
    // The same object keeps the validation done ahead when the id is the one planned then.
    const body = plan.id === candidate.body["id"] ? candidate.body : { ...candidate.body, id: plan.id }
    if (plan._tag === "create") {
      yield* createCommand(env, candidate.type, body, plan.id)
      return "created"
    }
    yield* updateCommand(env, candidate.type, plan.id, body, undefined)
    return "updated"
  })

const count = (tally: Tally, outcome: Outcome) => {
  if (outcome === "held") tally.skipped.held++
  else tally[outcome]++
}

/**
 * Writes one page: checked and planned on a reader, validated ahead, then written in one transaction (each
 * alone when that transaction is refused). Fails only when the database cannot be written (StoreError,
 * LeaseLost) or read.
 */
export const writePage = (
  context: WriteContext,
  resources: ReadonlyArray<Record<string, unknown>>
): Effect.Effect<void, StoreError | LeaseLost | SqlError> =>
  Effect.suspend(() => {
    const { tally } = context
    const fresh: Array<Record<string, unknown>> = []
    for (const resource of resources) {
      tally.read++
      const type = String(resource["resourceType"])
      const url = resource["url"]
      if (typeof url !== "string" || url === "") {
        tally.skipped.no_url++
        continue
      }
      const version = resource["version"]
      const key = `${type}|${url}|${typeof version === "string" ? version : ""}`
      if (context.seen.has(key)) {
        tally.skipped.repeated++
        continue
      }
      context.seen.add(key)
      fresh.push(resource)
    }
    return write(context, fresh)
  })

/**
 * Tries the resources refused so far once more (a ValueSet refused for codes of a CodeSystem the same attempt
 * wrote, which the catalog now holds); those refused again stay counted.
 */
export const retryRefused = (context: WriteContext): Effect.Effect<void, StoreError | LeaseLost | SqlError> =>
  Effect.suspend(() => {
    const again = context.refused.splice(0).map((refusal) => refusal.resource)
    context.tally.skipped.refused -= again.length
    return write(context, again)
  })

/** Plans, validates ahead and writes resources already counted as read. */
const write = (
  context: WriteContext,
  resources: ReadonlyArray<Record<string, unknown>>
): Effect.Effect<void, StoreError | LeaseLost | SqlError> =>
  Effect.gen(function*() {
    const { scope, source, tally } = context
    const candidates: Array<Candidate> = []
    for (const resource of resources) {
      const type = String(resource["resourceType"])
      const problem = checkBody(resource, "the resource")
      if (problem !== undefined) {
        yield* refuse(context, resource, problem.diagnostics)
        continue
      }
      const planned = yield* context.withReader((sql) => planOf(sql, scope.catalog, source, resource)).pipe(Effect.either)
      if (planned._tag === "Left") {
        if (planned.left instanceof FhirError) yield* refuse(context, resource, planned.left.diagnostics)
        else return yield* planned.left
        continue
      }
      const plan = planned.right
      if (plan._tag === "unchanged" || plan._tag === "held") {
        count(tally, plan._tag)
        continue
      }
      const body = { ...resource, id: plan.id, meta: metaOf(resource, source) }
      const ahead = yield* context.store.prevalidate(scope, { interaction: "update", type, id: plan.id, resource: body }).pipe(Effect.either)
      if (ahead._tag === "Left") {
        yield* refuse(context, resource, ahead.left.diagnostics)
        continue
      }
      if (ahead.right === undefined) {
        yield* refuse(context, resource, `${type} is not a resource type this server knows`)
        continue
      }
      if (!isValid(ahead.right.validation.issues)) {
        const first = ahead.right.validation.issues.find((issue) => issue.severity === "error" || issue.severity === "fatal")
        yield* refuse(context, resource, `not valid: ${first?.expression ?? ""} ${first?.diagnostics ?? ""}`.trim())
        continue
      }
      candidates.push({ type, body, ahead: ahead.right })
    }
    if (candidates.length === 0) return
    const prevalidated = prevalidatedOf(candidates.map((candidate) => candidate.ahead))
    const together = yield* context.store.transaction(scope, (env) =>
      Effect.forEach(candidates, (candidate) => writeOne({ ...env, prevalidated }, source, candidate))
    ).pipe(Effect.either)
    if (together._tag === "Right") {
      for (const outcome of together.right.value) count(tally, outcome)
      context.lastCommitTs = Math.max(context.lastCommitTs, together.right.commitTs)
      return
    }
    if (!(together.left instanceof FhirError)) return yield* together.left
    // One of them was refused in the transaction (too many index values, a reference the policy refuses): each alone.
    for (const candidate of candidates) {
      const alone = yield* context.store.transaction(scope, (env) => writeOne({ ...env, prevalidated }, source, candidate)).pipe(Effect.either)
      if (alone._tag === "Right") {
        count(tally, alone.right.value)
        context.lastCommitTs = Math.max(context.lastCommitTs, alone.right.commitTs)
      } else if (alone.left instanceof FhirError) yield* refuse(context, candidate.body, alone.left.diagnostics)
      else return yield* alone.left
    }
  })
