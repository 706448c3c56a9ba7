/** read and vread (https://hl7.org/fhir/R4/http.html#read, #vread). */
import { HttpServerResponse } from "@effect/platform"
import { Effect, Either } from "effect"
import { forbidden, granted, seen } from "../auth/access/enforce.ts"
import { Database } from "../db/Database.ts"
import { readCurrent, readVersion, type VersionRow } from "../store/reads.ts"
import { fail } from "../http/FhirError.ts"
import { type FhirRequest, header } from "./FhirRequest.ts"
import { largeBody } from "./largeBody.ts"
import { etag, versionHeaders } from "./respond.ts"
import { shapeOfQuery, shapeText } from "./shape.ts"

const gone = (row: VersionRow) =>
  Effect.fail(fail("deleted", `${row.type}/${row.id} was deleted (version ${row.version})`))

/** 304 when the client's copy is current (If-None-Match, If-Modified-Since). */
const notModified = (request: FhirRequest, row: VersionRow): boolean => {
  const noneMatch = header(request, "if-none-match")
  if (noneMatch !== undefined) return noneMatch.split(",").some((tag) => tag.trim() === etag(row.version) || tag.trim() === `"${row.version}"` || tag.trim() === "*")
  const since = header(request, "if-modified-since")
  if (since === undefined) return false
  const sinceMillis = Date.parse(since)
  // HTTP dates have whole seconds: the resource is unmodified when it changed within that second or before.
  return !Number.isNaN(sinceMillis) && Math.floor(row.commitTs / 1_000_000) * 1000 <= sinceMillis
}

const answer = (request: FhirRequest, row: VersionRow) => {
  if (notModified(request, row)) return Effect.succeed(HttpServerResponse.empty({ status: 304, headers: versionHeaders(row) }))
  const shape = shapeOfQuery(request.params)
  if (Either.isLeft(shape)) return Effect.fail(fail("invalid", shape.left, 400))
  const body = shapeText(row.content!, row.type, request.catalog, shape.right)
  return largeBody(body, request.negotiated, request.catalog, { headers: versionHeaders(row) })
}

/**
 * Under a restricted grant (docs/smart.md, "Scopes") the resource, as it is now, must be one the grant allows:
 * any other is not known (404), and so is a deleted one (the index no longer says whose it was). A vread is
 * judged by the current version too.
 */
export const read = (request: FhirRequest, type: string, id: string) =>
  Effect.gen(function*() {
    const rule = request.access.rule(request.catalog, type, "r")
    if (rule._tag === "None") return yield* forbidden(request.access, request.catalog, type, "r")
    const db = yield* Database
    const row = yield* db.withReader((sql) =>
      rule._tag === "All" ? readCurrent(sql, type, id) : Effect.zipRight(seen(sql, request.catalog, type, id, rule), readCurrent(sql, type, id)))
    if (row === undefined) return yield* fail("not-found", `${type}/${id} is not known`)
    if (row.content === null) return yield* gone(row)
    return yield* answer(request, row)
  })

export const vread = (request: FhirRequest, type: string, id: string, versionText: string) =>
  Effect.gen(function*() {
    const rule = yield* granted(request.access, request.catalog, type, "r")
    if (!/^[1-9]\d{0,9}$/.test(versionText)) return yield* fail("not-found", `${type}/${id} has no version ${JSON.stringify(versionText)}`)
    const db = yield* Database
    const row = yield* db.withReader((sql) => Effect.zipRight(seen(sql, request.catalog, type, id, rule), readVersion(sql, type, id, Number(versionText))))
    if (row === undefined) return yield* fail("not-found", `${type}/${id} has no version ${versionText}`)
    if (row.content === null) return yield* gone(row)
    return yield* answer(request, row)
  })
