/** One Bundle entry as an interaction, inside the Writer transaction (transaction) or its own (batch). */
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Effect } from "effect"
import { fhirPathPatch } from "../patch/fhirPathPatch.ts"
import { jsonPatch } from "../patch/jsonPatch.ts"
import { tooManyOperations } from "../patch/operationCount.ts"
import { readCurrent, readVersion, type VersionRow } from "../../store/reads.ts"
import { instantOf } from "../../store/versions.ts"
import { ifMatchVersion, knownType } from "../../store/checks.ts"
import {
  type CheckedCreate,
  checkCreate,
  type CommandEnv,
  createCommand,
  defaultWriteLimits,
  deleteCommand,
  type Patcher,
  patchCommand,
  updateCommand,
  type Written
} from "../../store/commands.ts"
import { type Condition, createUnlessFound, deleteMatch, patchMatch, updateMatch } from "../../store/conditional.ts"
import type { Match } from "../../search/plan/query.ts"
import { searchset } from "../search.ts"
import { resolveCompartment, searchedTypes } from "../compartment.ts"
import { unrestricted } from "../../auth/access/Access.ts"
import { searchRestriction } from "../../auth/access/conditions.ts"
import { compartmentGranted, granted, searchGranted, seen } from "../../auth/access/enforce.ts"
import { checkBody } from "../bodyCheck.ts"
import { fail, FhirError } from "../../http/FhirError.ts"
import type { Entry } from "./entries.ts"
import { parseJson } from "../../json/Json.ts"

/** What goes into `entry.response` (and `entry.resource`) of the response Bundle. */
export interface EntryResult {
  readonly status: number
  readonly location?: string | undefined
  readonly etag?: string | undefined
  readonly lastModified?: string | undefined
  /** The resource's JSON text, as stored. */
  readonly resource?: string | undefined
}

const statusTexts: Record<number, string> = {
  200: "OK", 201: "Created", 204: "No Content", 304: "Not Modified", 400: "Bad Request", 401: "Unauthorized",
  403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed", 406: "Not Acceptable", 409: "Conflict", 410: "Gone",
  412: "Precondition Failed", 413: "Payload Too Large", 415: "Unsupported Media Type", 422: "Unprocessable Entity",
  429: "Too Many Requests", 500: "Internal Server Error", 501: "Not Implemented", 503: "Service Unavailable"
}

export const statusLine = (status: number): string => `${status} ${statusTexts[status] ?? ""}`.trim()

/** The page bound of a search inside a Bundle, as the Bundle's request has it. */
const pageBytes = (env: CommandEnv) => (env.maxPageBytes === undefined ? {} : { maxPageBytes: env.maxPageBytes })

const notAvailable = (what: string) => fail("not-supported", `${what} is not available in this build yet`, 501)

/** Whether an entry names its resource by a search: a conditional create, update, patch or delete. */
export const isConditional = (entry: Entry): boolean =>
  entry.method === "POST" ? entry.ifNoneExist !== undefined : entry.method !== "GET" && entry.method !== "HEAD" && entry.target._tag === "type"

/** What this build cannot run in a Bundle, and URLs that do not fit their method. */
export const unsupported = (entry: Entry): FhirError | undefined => {
  if (entry.method === "GET" || entry.method === "HEAD") {
    if (entry.target._tag === "history" || entry.target._tag === "metadata") return notAvailable(`${entry.url} inside a Bundle`)
    return undefined
  }
  if (entry.method === "POST") {
    return entry.target._tag === "type" && entry.query === undefined ? undefined : fail("invalid", `POST needs a URL of the form Type, not ${entry.url}`)
  }
  const instance = entry.target._tag === "instance" && entry.query === undefined
  const conditional = entry.target._tag === "type" && entry.query !== undefined
  return instance || conditional ? undefined : fail("invalid", `${entry.method} needs a URL of the form Type/id or Type?search, not ${entry.url}`)
}

const decodeBase64Json = (data: unknown): unknown => {
  if (typeof data !== "string") return undefined
  try {
    return parseJson(Buffer.from(data, "base64").toString("utf8"))
  } catch {
    return undefined
  }
}

/** The patch an entry carries: a Parameters resource (FHIRPath Patch) or a Binary holding a JSON Patch. */
const patcherOf = (resource: Record<string, unknown>, maxOperations: number): Patcher | FhirError => {
  if (resource["resourceType"] === "Parameters") return tooManyOperations(resource, maxOperations) ?? ((target) => fhirPathPatch(target, resource))
  if (resource["resourceType"] === "Binary" && resource["contentType"] === "application/json-patch+json") {
    const operations = decodeBase64Json(resource["data"])
    if (operations === undefined) return fail("structure", "the Binary's data is not base64 of a JSON Patch document")
    const refused = checkBody(operations, "the JSON Patch document in the Binary's data")
    if (refused !== undefined) return refused
    return tooManyOperations(operations, maxOperations) ?? ((target) => jsonPatch(target, operations))
  }
  return fail("invalid", "a PATCH entry carries a Parameters resource (FHIRPath Patch) or a Binary with contentType application/json-patch+json")
}

export const fromWritten = (written: Written, commitTs: number): EntryResult => ({
  status: written.created ? 201 : 200,
  location: `${written.type}/${written.id}/_history/${written.stored.version}`,
  etag: `W/"${written.stored.version}"`,
  lastModified: instantOf(commitTs),
  resource: written.stored.content
})

const fromRead = (entry: Entry, row: VersionRow | undefined, what: string): Effect.Effect<EntryResult, FhirError> => {
  if (row === undefined) return Effect.fail(fail("not-found", `${what} is not known`))
  if (row.content === null) return Effect.fail(fail("deleted", `${what} was deleted`))
  const etag = `W/"${row.version}"`
  if (entry.ifNoneMatch !== undefined && entry.ifNoneMatch.split(",").some((tag) => tag.trim() === etag)) {
    return Effect.succeed({ status: 304, etag })
  }
  const since = entry.ifModifiedSince === undefined ? Number.NaN : Date.parse(entry.ifModifiedSince)
  if (!Number.isNaN(since) && Math.floor(row.commitTs / 1000) <= since) return Effect.succeed({ status: 304, etag })
  return Effect.succeed({ status: 200, etag, lastModified: instantOf(row.commitTs), resource: row.content })
}

/** An entry made ready to run: its resource with references replaced, and what its condition matched. */
export interface Plan {
  readonly resource: Record<string, unknown> | undefined
  /** The id a POST creates under, or a conditional PUT when nothing matched and the body has no id. */
  readonly id?: string | undefined
  /** The condition of a conditional entry, and its match (undefined: nothing matched). */
  readonly condition?: { readonly condition: Condition; readonly match: Match | undefined } | undefined
}

const fromFound = (row: VersionRow): EntryResult => ({
  status: 200,
  location: `${row.type}/${row.id}/_history/${row.version}`,
  etag: `W/"${row.version}"`,
  lastModified: instantOf(row.commitTs),
  resource: row.content ?? undefined
})

/**
 * A POST without a condition, checked as `runEntry` checks it (the same errors, in the same order) but not
 * written: consecutive ones are written together (`writeCreates`). Undefined for other entries.
 */
export const checkedCreate = (env: CommandEnv, entry: Entry, plan: Plan): Effect.Effect<CheckedCreate, FhirError> | undefined => {
  if (entry.method !== "POST" || plan.condition !== undefined || plan.id === undefined) return undefined
  const id = plan.id
  return Effect.suspend(() => {
    const problem = unsupported(entry)
    if (problem) return Effect.fail(problem)
    const expected = ifMatchVersion(entry.ifMatch)
    if (expected instanceof FhirError) return Effect.fail(expected)
    if (entry.target._tag !== "type") return Effect.fail(fail("invalid", `POST needs a URL of the form Type`))
    // The id of a POST without a condition is a random UUID chosen for it (Bundles.ts).
    return Effect.map(checkCreate(env, entry.target.type, plan.resource!, id), (create) => ({ ...create, fresh: true }))
  })
}

/** Runs one entry as planned. */
export const runEntry = (env: CommandEnv, entry: Entry, plan: Plan): Effect.Effect<EntryResult, FhirError | SqlError> =>
  Effect.gen(function*() {
    const unsupportedEntry = unsupported(entry)
    if (unsupportedEntry) return yield* unsupportedEntry
    const target = entry.target
    const resource = plan.resource
    const expected = ifMatchVersion(entry.ifMatch)
    if (expected instanceof FhirError) return yield* expected
    const conditional = plan.condition
    switch (entry.method) {
      case "POST": {
        if (target._tag !== "type") return yield* fail("invalid", `POST needs a URL of the form Type`)
        if (conditional === undefined) return fromWritten(yield* createCommand(env, target.type, resource!, plan.id), env.commit.commitTs)
        const outcome = yield* createUnlessFound(env, target.type, conditional.match, resource!, plan.id)
        return outcome._tag === "created" ? fromWritten(outcome.written, env.commit.commitTs) : fromFound(outcome.row)
      }
      case "PUT": {
        if (target._tag === "instance") return fromWritten(yield* updateCommand(env, target.type, target.id, resource!, expected), env.commit.commitTs)
        if (conditional === undefined || target._tag !== "type") return yield* fail("invalid", `PUT needs a URL of the form Type/id or Type?search`)
        return fromWritten(yield* updateMatch(env, target.type, conditional.match, resource!, expected, plan.id), env.commit.commitTs)
      }
      case "PATCH": {
        const patcher = patcherOf(resource!, (env.limits ?? defaultWriteLimits).maxPatchOperations)
        if (patcher instanceof FhirError) return yield* patcher
        if (target._tag === "instance") return fromWritten(yield* patchCommand(env, target.type, target.id, patcher, expected), env.commit.commitTs)
        if (conditional === undefined) return yield* fail("invalid", `PATCH needs a URL of the form Type/id or Type?search`)
        return fromWritten(yield* patchMatch(env, conditional.condition, conditional.match, patcher, expected), env.commit.commitTs)
      }
      case "DELETE": {
        if (target._tag === "instance") {
          const deleted = yield* deleteCommand(env, target.type, target.id)
          return { status: 204, etag: `W/"${deleted.version}"` }
        }
        if (conditional === undefined || target._tag !== "type") return yield* fail("invalid", `DELETE needs a URL of the form Type/id or Type?search`)
        const deleted = yield* deleteMatch(env, target.type, conditional.match)
        return deleted === undefined ? { status: 204 } : { status: 204, etag: `W/"${deleted.version}"` }
      }
      case "GET":
      case "HEAD": {
        // Read and searched as the same request on its own would be, under the caller's access (docs/smart.md, "Scopes").
        const access = env.access ?? unrestricted
        if (target._tag === "instance" || target._tag === "version") {
          const unknownType = knownType(env.catalog, target.type)
          if (unknownType) return yield* unknownType
          yield* seen(env.sql, env.catalog, target.type, target.id, yield* granted(access, env.catalog, target.type, "r"))
        }
        if (target._tag === "instance") {
          return yield* fromRead(entry, yield* readCurrent(env.sql, target.type, target.id), `${target.type}/${target.id}`)
        }
        if (target._tag === "version") {
          const version = /^[1-9]\d{0,9}$/.test(target.version) ? Number(target.version) : 0
          const row = version === 0 ? undefined : yield* readVersion(env.sql, target.type, target.id, version)
          return yield* fromRead(entry, row, `${target.type}/${target.id}/_history/${target.version}`)
        }
        const restriction = searchRestriction(env.sql, access, env.catalog, yield* Clock.currentTimeMillis)
        if (target._tag === "type") {
          // A search, never lenient in a Bundle (spec: Search rules 6); it sees the Bundle's own writes.
          const params = new URLSearchParams(entry.query ?? "")
          yield* searchGranted(access, env.catalog, target.type, params)
          const text = yield* searchset(env.sql, { catalog: env.catalog, base: env.base, params, lenient: false, restriction, ...pageBytes(env) }, target.type)
          return { status: 200, resource: text }
        }
        if (target._tag === "system" || target._tag === "compartment") {
          const params = new URLSearchParams(entry.query ?? "")
          const resolved = target._tag === "system"
            ? { scope: { types: undefined, typeParameter: true }, condition: undefined, path: "" }
            : yield* resolveCompartment(env.catalog, target.compartment, target.id, target.type)
          yield* searchGranted(access, env.catalog, resolved.scope, params)
          if (target._tag === "compartment") yield* compartmentGranted(access, env.catalog, target.compartment, target.id, searchedTypes(resolved.scope))
          const context = { catalog: env.catalog, base: env.base, params, lenient: false, path: resolved.path, restriction, ...pageBytes(env) }
          const text = yield* searchset(env.sql, resolved.condition === undefined ? context : { ...context, condition: resolved.condition(env.sql) }, resolved.scope)
          return { status: 200, resource: text }
        }
        return yield* notAvailable(`${entry.url} inside a Bundle`)
      }
    }
  })
