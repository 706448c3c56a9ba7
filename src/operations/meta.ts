/**
 * `$meta` (https://hl7.org/fhir/R4/resource-operation-meta.html): `GET|POST [base]/$meta`,
 * `[base]/{type}/$meta`, `[base]/{type}/{id}/$meta` and `[base]/{type}/{id}/_history/{vid}/$meta`. On an
 * instance, the meta of its current version or of the version named; on a type or the whole system, the
 * profiles, security labels and tags in use there: those of the current versions of the resources, read
 * from the search index (`_profile`, `_security` and `_tag` rows), each once, as one Meta. A tag or
 * security label is listed by its system and code (the index keeps no display as written).
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import { Clock, Effect } from "effect"
import { accessCondition } from "../auth/access/conditions.ts"
import { granted, seen } from "../auth/access/enforce.ts"
import type { Catalog } from "../catalog/Catalog.ts"
import { Database } from "../db/Database.ts"
import { fail } from "../http/FhirError.ts"
import { parseJson } from "../json/Json.ts"
import type { FhirRequest } from "../rest/FhirRequest.ts"
import { resourceBody } from "../rest/respond.ts"
import { readCurrent, readVersion } from "../store/reads.ts"
import { definedInputs, readArguments } from "./arguments.ts"
import { metaParameters } from "./metaSets.ts"
import type { OperationCall, OperationModule } from "./Operation.ts"

export const metaDefinition = "http://hl7.org/fhir/OperationDefinition/Resource-meta"

/** The most distinct profiles, security labels or tags a type or system level answer lists (413 beyond). */
export const maxMetaEntries = 10_000

const largestVersion = 2_147_483_647

/** The version a path names (`_history/{vid}`); the 404 of a version no resource can have. */
export const versionNumber = (type: string, id: string, text: string | undefined) =>
  text === undefined
    ? Effect.succeed(undefined)
    : /^[1-9]\d{0,9}$/.test(text) && Number(text) <= largestVersion
    ? Effect.succeed(Number(text))
    : Effect.fail(fail("not-found", `${type}/${id} has no version ${JSON.stringify(text)}`))

const answer = (request: FhirRequest, meta: Record<string, unknown>) =>
  resourceBody(metaParameters(meta), request.negotiated, request.catalog)

/** The meta of `type/id`, of version `versionText` or of its current version; the caller must be able to read it. */
const instanceMeta = (request: FhirRequest, type: string, id: string, versionText: string | undefined) =>
  Effect.gen(function*() {
    const rule = yield* granted(request.access, request.catalog, type, "r")
    const version = yield* versionNumber(type, id, versionText)
    const db = yield* Database
    const row = yield* db.withReader((sql) =>
      Effect.zipRight(seen(sql, request.catalog, type, id, rule), version === undefined ? readCurrent(sql, type, id) : readVersion(sql, type, id, version)))
    if (row === undefined) return yield* fail("not-found", version === undefined ? `${type}/${id} is not known` : `${type}/${id} has no version ${version}`)
    if (row.content === null) return yield* fail("deleted", `${type}/${id} was deleted (version ${row.version})`)
    const resource = parseJson(row.content) as Record<string, unknown>
    const meta = resource["meta"]
    return answer(request, typeof meta === "object" && meta !== null && !Array.isArray(meta) ? meta as Record<string, unknown> : {})
  })

interface TokenRow {
  readonly param: string
  readonly system: string | null
  readonly code: string | null
}

const bySystemAndCode = (a: TokenRow, b: TokenRow): number =>
  (a.system ?? "").localeCompare(b.system ?? "") || (a.code ?? "").localeCompare(b.code ?? "")

/**
 * The profiles, security labels and tags of the current resources of `types` that the caller may read,
 * from the index: one statement for the token rows and one for the uri rows, each over the lookup index
 * (type, param).
 */
const inUse = (sql: SqlClient.SqlClient, request: FhirRequest, types: ReadonlyArray<string>, level: string, now: number) =>
  Effect.gen(function*() {
    const meta: Record<string, unknown> = {}
    if (types.length === 0) return meta
    const restrict = accessCondition(sql, request.access, request.catalog, types, "r", now)
    const of = (alias: string) =>
      restrict === undefined ? sql`` : sql`JOIN resources r ON r.rkey = ${sql.literal(alias)}.rkey AND ${restrict}`
    const tokens = yield* sql<TokenRow>`
      SELECT DISTINCT t.param, coalesce(t.system_full, t.system) AS system, coalesce(t.value_full, t.value) AS code
      FROM search_token t ${of("t")}
      WHERE ${sql.in("t.type", types)} AND ${sql.in("t.param", ["_security", "_tag"])}
      LIMIT ${2 * maxMetaEntries + 1}`
    const profiles = yield* sql<{ readonly value: string }>`
      SELECT DISTINCT coalesce(u.value_full, u.value) AS value
      FROM search_uri u ${of("u")}
      WHERE ${sql.in("u.type", types)} AND u.param = '_profile'
      LIMIT ${maxMetaEntries + 1}`
    const security = tokens.filter((row) => row.param === "_security").sort(bySystemAndCode)
    const tags = tokens.filter((row) => row.param === "_tag").sort(bySystemAndCode)
    for (const [what, count] of [["profiles", profiles.length], ["security labels", security.length], ["tags", tags.length]] as const) {
      if (count > maxMetaEntries) {
        return yield* fail("too-costly", `more than ${maxMetaEntries} distinct ${what} are in use ${level}; $meta lists at most ${maxMetaEntries}: ask it of a type, or of a resource`)
      }
    }
    const coding = (row: TokenRow) => ({ ...(row.system === null ? {} : { system: row.system }), ...(row.code === null ? {} : { code: row.code }) })
    if (profiles.length > 0) meta["profile"] = profiles.map((row) => row.value).sort()
    if (security.length > 0) meta["security"] = security.map(coding)
    if (tags.length > 0) meta["tag"] = tags.map(coding)
    return meta
  })

/**
 * The meta in use on `type`, or (undefined) in the whole system. On a type the caller needs `r` on it (403
 * otherwise); at system level the answer keeps to the types it may read. Under a restricted grant only the
 * resources the grant allows count.
 */
const levelMeta = (request: FhirRequest, type: string | undefined) =>
  Effect.gen(function*() {
    if (type !== undefined) yield* granted(request.access, request.catalog, type, "r")
    const types = type !== undefined ? [type] : readableTypes(request.catalog, request)
    const db = yield* Database
    const now = yield* Clock.currentTimeMillis
    const meta = yield* db.withReader((sql) => inUse(sql, request, types, type === undefined ? "on this server" : `on ${type}`, now))
    return answer(request, meta)
  })

const readableTypes = (catalog: Catalog, request: FhirRequest): ReadonlyArray<string> =>
  request.access.wholly("r") ? catalog.resourceTypes : catalog.resourceTypes.filter((type) => request.access.rule(catalog, type, "r")._tag !== "None")

/** `$meta` at the level of `call`. */
export const meta = (call: OperationCall) =>
  Effect.gen(function*() {
    const { request } = call
    // No input parameters: anything but the format's parameters is refused (400).
    yield* readArguments(request, "$meta", definedInputs(request.catalog, metaDefinition))
    if (call.type !== undefined && call.id !== undefined) return yield* instanceMeta(request, call.type, call.id, call.version)
    return yield* levelMeta(request, call.type)
  })

export const metaModule = {
  name: "meta",
  levels: ["system", "type", "instance"],
  types: undefined,
  definition: () => metaDefinition,
  methods: ["GET", "POST"],
  checksAccess: true,
  onVersions: true,
  run: meta
} satisfies OperationModule<ReturnType<typeof meta>>
