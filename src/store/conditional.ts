/**
 * Conditional interactions (https://hl7.org/fhir/R4/http.html#ccreate, #cond-update, #cdelete,
 * #cpatch): a search names the resource instead of an id. The condition is read with the search
 * rules, never leniently, and matched inside the Writer's transaction, so two identical
 * conditional creates cannot both create. docs/rest.md, "Conditional interactions", gives the decisions.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Either } from "effect"
import { randomUUID } from "node:crypto"
import type { Catalog } from "../catalog/Catalog.ts"
import { parseSearch } from "../search/parse/parseSearch.ts"
import { resultCodes } from "../search/parse/result.ts"
import type { SearchRequest } from "../search/parse/SearchRequest.ts"
import { findMatches, type Match, type MatchRestriction } from "../search/plan/query.ts"
import { matchRestriction } from "../auth/access/enforce.ts"
import type { Permission } from "../auth/scopes.ts"
import { readCurrent, type VersionRow } from "./reads.ts"
import { urlTextProblem } from "../validation/fhirText.ts"
import { bodyMatches } from "./checks.ts"
import {
  type CommandEnv,
  createCommand,
  type Deleted,
  deleteCommand,
  type Patcher,
  patchCommand,
  settle,
  updateCommand,
  type Written
} from "./commands.ts"
import { fail, FhirError } from "../http/FhirError.ts"
import { carryLexical } from "../json/lexical.ts"

/** A condition: the search that names the resource of a conditional interaction. */
export interface Condition {
  readonly type: string
  /** Its parameters as `name=value&...`, decoded, for messages and to compare conditions. */
  readonly text: string
  readonly search: SearchRequest
}

/**
 * Reads the condition of `interaction` on `type`: a 400 (code `not-supported` for what search does not support)
 * listing every problem, a 400 for result parameters (`_count`, `_sort`, ...), and a 400 when it
 * has no criteria. A leading `?` or `{type}?` is accepted (`If-None-Exist` is written both ways).
 */
export const readCondition = (
  catalog: Catalog,
  type: string,
  query: string | URLSearchParams,
  interaction: string
): Condition | FhirError => {
  const prefix = typeof query === "string" ? /^([A-Z][A-Za-z]*)?\?/.exec(query) : null
  if (prefix?.[1] !== undefined && prefix[1] !== type) {
    return fail("invalid", `the condition ${String(query)} of the ${interaction} names ${prefix[1]}, but the ${interaction} is on ${type}`)
  }
  const unreadable = typeof query === "string" ? urlTextProblem(query) : undefined
  if (unreadable !== undefined) return fail("invalid", `the condition of the ${interaction} cannot be used: ${unreadable}`)
  const params = typeof query === "string" ? new URLSearchParams(prefix === null ? query : query.slice(prefix[0].length)) : query
  const text = [...params].map(([name, value]) => `${name}=${value}`).join("&")
  const parsed = parseSearch(type, params, catalog, { lenient: false })
  if (Either.isLeft(parsed)) {
    const problems = parsed.left
    const code = problems.some((problem) => problem.status === 400) ? "invalid" : "not-supported"
    const listed = problems.map((problem) => problem.message).join("; ")
    return fail(code, `the condition of the ${interaction} cannot be used: ${listed}`, 400)
  }
  const result = [...new Set([...params.keys()].filter((key) => resultCodes.has(key.split(":")[0]!)))]
  if (result.length > 0) {
    return fail("invalid", `the condition of the ${interaction} holds ${result.join(", ")}: result parameters have no place in a condition`)
  }
  if (parsed.right.clauses.length + parsed.right.links.length + parsed.right.filters.length === 0) {
    return fail("invalid", `a ${interaction} needs search criteria that name the resource, as ${type}?identifier=system|value`)
  }
  return { type, text, search: parsed.right }
}

/**
 * The one current resource the condition matches, or undefined; several are a 412. With a `restriction`, only
 * among the resources the caller may reach: any other is as if it did not exist.
 */
export const matchOne = (
  sql: SqlClient.SqlClient,
  condition: Condition,
  interaction: string,
  restriction?: MatchRestriction
): Effect.Effect<Match | undefined, FhirError | SqlError> =>
  Effect.flatMap(findMatches(sql, condition.search, 2, restriction), (matches) =>
    matches.length > 1
      ? Effect.fail(fail("multiple-matches", `the ${interaction} matches more than one ${condition.type} with ${condition.text}; it needs criteria that select one`))
      : Effect.succeed(matches[0]))

/**
 * `matchOne` for a conditional interaction of the caller of `env`: among the resources its grant of
 * `permission` on the type reaches (src/auth/access/); the 403 when it grants none.
 */
export const matchFor = (
  env: CommandEnv,
  condition: Condition,
  interaction: string,
  permission: Permission
): Effect.Effect<Match | undefined, FhirError | SqlError> =>
  Effect.flatMap(
    env.access === undefined ? Effect.succeed(undefined) : matchRestriction(env.sql, env.access, env.catalog, condition.type, permission),
    (restriction) => matchOne(env.sql, condition, interaction, restriction)
  )

/** What a conditional create did: created the resource, or found the one that exists. */
export type CreateOutcome =
  | { readonly _tag: "created"; readonly written: Written }
  | { readonly _tag: "found"; readonly row: VersionRow & { readonly content: string } }

/** The current version of a match, read in the same transaction. */
export const currentOf = (sql: SqlClient.SqlClient, type: string, match: Match) =>
  Effect.flatMap(readCurrent(sql, type, match.id), (row) =>
    row === undefined || row.content === null
      ? Effect.die(new Error(`${type}/${match.id} matched a search but has no current version`))
      : Effect.succeed({ ...row, content: row.content }))

/** Conditional create with the match already looked up: nothing is written when a resource matched. */
export const createUnlessFound = (
  env: CommandEnv,
  type: string,
  match: Match | undefined,
  body: Record<string, unknown>,
  id?: string
): Effect.Effect<CreateOutcome, FhirError | SqlError> =>
  match === undefined
    ? Effect.map(createCommand(env, type, body, id), (written) => ({ _tag: "created" as const, written }))
    : Effect.zipRight(settle(env), Effect.map(currentOf(env.sql, type, match), (row) => ({ _tag: "found" as const, row })))

/**
 * The id a conditional update writes: the match's (a body id must equal it: else a 400); without a
 * match, the body's id (update as create) or a new server id.
 */
export const updateTarget = (
  type: string,
  match: Match | undefined,
  body: Record<string, unknown>,
  newId: string = randomUUID()
): { readonly id: string; readonly clientId: boolean } | FhirError => {
  const bodyId = body["id"]
  if (bodyId !== undefined && typeof bodyId !== "string") return fail("invalid", "the body's id is not a string")
  if (match !== undefined) {
    if (bodyId !== undefined && bodyId !== match.id) {
      return fail("invalid", `the condition matches ${type}/${match.id}, but the body's id is ${JSON.stringify(bodyId)}`)
    }
    return { id: match.id, clientId: false }
  }
  return bodyId === undefined ? { id: newId, clientId: false } : { id: bodyId, clientId: true }
}

/**
 * Conditional update with the match already looked up. One match: an update of it. No match and no
 * id in the body: a create under a server id. No match and an id in the body: an update as create
 * (405 unless `conformance.update_as_create`), and a 409 when that id names a resource the condition
 * did not match. `If-Match` applies to the resource that is updated.
 */
export const updateMatch = (
  env: CommandEnv,
  type: string,
  match: Match | undefined,
  body: Record<string, unknown>,
  ifMatch: number | undefined,
  newId?: string
): Effect.Effect<Written, FhirError | SqlError> =>
  Effect.gen(function*() {
    const wrongBody = bodyMatches(body, type)
    if (wrongBody) return yield* wrongBody
    const target = updateTarget(type, match, body, newId)
    if (target instanceof FhirError) return yield* target
    if (match !== undefined) return yield* updateCommand(env, type, target.id, carryLexical(body, { ...body, id: target.id }), ifMatch)
    if (ifMatch !== undefined) {
      return yield* fail("conflict", `If-Match names version ${ifMatch}, but the condition matches no ${type}`, 409)
    }
    if (!target.clientId) return yield* createCommand(env, type, body, target.id)
    yield* settle(env)
    const current = yield* readCurrent(env.sql, type, target.id)
    if (current !== undefined && current.content !== null) {
      return yield* fail("conflict", `${type}/${target.id} exists but does not match the condition; a conditional update changes only a resource its condition matches`, 409)
    }
    return yield* updateCommand(env, type, target.id, body, undefined)
  })

/** Conditional patch with the match already looked up: no match is a 404. */
export const patchMatch = (
  env: CommandEnv,
  condition: Condition,
  match: Match | undefined,
  apply: Patcher,
  ifMatch: number | undefined
): Effect.Effect<Written, FhirError | SqlError> =>
  match === undefined
    ? Effect.fail(fail("not-found", `the conditional patch matches no ${condition.type} with ${condition.text}`))
    : patchCommand(env, condition.type, match.id, apply, ifMatch)

/** Conditional delete with the match already looked up: no match deletes nothing. */
export const deleteMatch = (
  env: CommandEnv,
  type: string,
  match: Match | undefined
): Effect.Effect<Deleted | undefined, FhirError | SqlError> =>
  match === undefined ? Effect.succeed(undefined) : deleteCommand(env, type, match.id)
