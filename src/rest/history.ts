/** history at instance, type and system level (https://hl7.org/fhir/R4/http.html#history). */
import { Clock, Effect } from "effect"
import { accessCondition } from "../auth/access/conditions.ts"
import { granted, seen } from "../auth/access/enforce.ts"
import { Database } from "../db/Database.ts"
import { Writer } from "../db/Writer.ts"
import { decodeCursor } from "../search/plan/cursor.ts"
import { countExpected, defaultCount, offsetExpected, readCount, readOffset } from "../search/parse/result.ts"
import { history as historyRows, type HistoryRow, historyTotal, type VersionRow } from "../store/reads.ts"
import { instantOf } from "../store/versions.ts"
import { readDate } from "../search/parse/dates.ts"
import { fail, type FhirError } from "../http/FhirError.ts"
import type { FhirRequest } from "./FhirRequest.ts"
import { bundleText } from "./bundleText.ts"
import { atPage, cursorOwner, pageLinks } from "../search/paging.ts"
import { largeBody } from "./largeBody.ts"

/**
 * A FHIR date, dateTime or instant as a half-open span of commit timestamps (microseconds), or a 400
 * naming the parameter. The span is as long as the value's precision (search.html#date): `_at=2024-01-31`
 * is the whole day; `_since` takes its start.
 */
const timeParam = (name: string, value: string): { readonly from: number; readonly to: number } | FhirError => {
  const range = readDate(value)
  return range === undefined
    ? fail("value", `${name}=${value} is not a date or instant (expected e.g. 2024-01-31T12:00:00Z)`)
    : { from: range.low * 1000, to: range.high * 1000 }
}

const countParam = (value: string | null): number | FhirError => {
  if (value === null) return defaultCount
  return readCount(value) ?? fail("value", `_count=${value} cannot be read: expected ${countExpected}`)
}

const offsetParam = (value: string | null): number | FhirError => {
  if (value === null) return 0
  return readOffset(value) ?? fail("value", `_offset=${value} cannot be read: expected ${offsetExpected}`)
}

const methods = { create: "POST", update: "PUT", patch: "PATCH", delete: "DELETE" } as const
const statuses = { create: "201 Created", update: "200 OK", patch: "200 OK", delete: "204 No Content" } as const
const methodOf = (row: VersionRow) => methods[row.op]
const statusOf = (row: VersionRow) => statuses[row.op]

/** One entry as JSON text, the stored resource text embedded as it is. */
const entryText = (base: string, row: VersionRow): string => {
  const url = row.op === "create" ? row.type : `${row.type}/${row.id}`
  const tail = JSON.stringify({
    request: { method: methodOf(row), url },
    response: { status: statusOf(row), etag: `W/"${row.version}"`, lastModified: instantOf(row.commitTs) }
  }).slice(1)
  const resource = row.content === null ? "" : `"resource":${row.content},`
  return `{"fullUrl":${JSON.stringify(`${base}/${row.type}/${row.id}`)},${resource}${tail}`
}

export interface HistoryScope {
  readonly type?: string | undefined
  readonly id?: string | undefined
}

export const history = (request: FhirRequest, scope: HistoryScope) =>
  Effect.gen(function*() {
    const params = request.params
    const count = countParam(params.get("_count"))
    if (typeof count !== "number") return yield* count
    const sinceText = params.get("_since")
    const since = sinceText === null ? undefined : timeParam("_since", sinceText)
    if (since !== undefined && !("from" in since)) return yield* since
    const atText = params.get("_at")
    const at = atText === null ? undefined : timeParam("_at", atText)
    if (at !== undefined && !("from" in at)) return yield* at
    const offset = offsetParam(params.get("_offset"))
    if (typeof offset !== "number") return yield* offset
    // Pages of one history are read against the first page's snapshot, so later writes do not shift them.
    const untilText = params.get("_until")
    if (untilText !== null && !(/^\d{1,16}$/.test(untilText) && Number.isSafeInteger(Number(untilText)))) {
      return yield* fail("value", `_until=${untilText} is not a commit timestamp (microseconds, as the paging links give it)`)
    }
    const until = untilText !== null ? Number(untilText) : yield* (yield* Writer).lastCommitTs

    const path = scope.type === undefined ? "_history" : scope.id === undefined ? `${scope.type}/_history` : `${scope.type}/${scope.id}/_history`
    const linkParams = new URLSearchParams()
    if (sinceText !== null) linkParams.set("_since", sinceText)
    if (atText !== null) linkParams.set("_at", atText)
    linkParams.set("_count", String(count))
    linkParams.set("_until", String(until))
    const owner = cursorOwner(path, linkParams)
    const cursorText = params.get("_cursor")
    const cursor = cursorText === null ? undefined : decodeCursor(cursorText, owner, 3)
    if (typeof cursor === "string") return yield* fail("value", `The value of _cursor cannot be used: ${cursor}`)
    if (cursor !== undefined && params.get("_offset") !== null) {
      return yield* fail("value", "_cursor and _offset cannot be used together: a cursor names where its page starts")
    }

    // Under a restricted grant, the versions of the resources that, as they are now, the caller may read
    // (docs/smart.md, "Scopes"): at instance level any other resource is not known.
    const rule = scope.type === undefined ? undefined : yield* granted(request.access, request.catalog, scope.type, "r")
    const db = yield* Database
    const [page, total] = yield* db.withReader((sql) =>
      Effect.gen(function*() {
        if (rule !== undefined && scope.id !== undefined) yield* seen(sql, request.catalog, scope.type!, scope.id, rule)
        const restrict = accessCondition(sql, request.access, request.catalog, scope.type === undefined ? undefined : [scope.type], "r", yield* Clock.currentTimeMillis)
        const query = { type: scope.type, id: scope.id, since: since?.from, until, currentDuring: at, restrict }
        return yield* Effect.all([historyRows(sql, { ...query, count, offset, cursor, maxBytes: request.maxPageBytes }), historyTotal(sql, query)])
      })
    )
    const backwards = cursor?.direction === "before"
    const links = pageLinks<HistoryRow>({
      at: cursorText === null ? { offset } : { cursor: cursorText },
      backwards,
      count,
      rows: page.rows,
      more: page.more,
      keys: (row) => [row.commitTs, row.rkey, row.version],
      owner
    }).map(({ relation, at }) => ({ relation, url: `${request.base}/${path}?${atPage(linkParams, at)}` }))
    const rows = backwards ? [...page.rows].reverse() : page.rows
    const now = yield* Clock.currentTimeMillis
    const text = bundleText({ type: "history", total, link: links }, rows.map((row) => entryText(request.base, row)), now)
    return yield* largeBody(text, request.negotiated, request.catalog)
  })
