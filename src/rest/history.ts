/** history at instance, type and system level (https://hl7.org/fhir/R4/http.html#history). */
import { Clock, Effect } from "effect"
import { Database } from "../db/Database.ts"
import { Writer } from "../store/Writer.ts"
import { history as historyRows, historyTotal, type VersionRow } from "../store/reads.ts"
import { instantOf } from "../store/ResourceStore.ts"
import { readDate } from "../search/parse/dates.ts"
import { fail, type FhirError } from "./FhirError.ts"
import type { FhirRequest } from "./FhirRequest.ts"
import { bundleText } from "./bundleText.ts"
import { resourceBody } from "./respond.ts"

export const defaultCount = 20
export const maxCount = 1000

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
  if (!/^\d+$/.test(value)) return fail("value", `_count=${value} is not a whole number`)
  return Math.min(Number(value), maxCount)
}

const methodOf = (row: VersionRow) => (row.op === "create" ? "POST" : row.op === "update" ? "PUT" : "DELETE")
const statusOf = (row: VersionRow) => (row.op === "create" ? "201 Created" : row.op === "update" ? "200 OK" : "204 No Content")

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
    const offsetText = params.get("_offset") ?? "0"
    if (!/^\d+$/.test(offsetText)) return yield* fail("value", `_offset=${offsetText} is not a whole number`)
    const offset = Number(offsetText)
    // Pages of one history are read against the first page's snapshot, so later writes do not shift them.
    const untilText = params.get("_until")
    if (untilText !== null && !/^\d+$/.test(untilText)) {
      return yield* fail("value", `_until=${untilText} is not a commit timestamp (microseconds, as the paging links give it)`)
    }
    const until = untilText !== null ? Number(untilText) : yield* (yield* Writer).lastCommitTs

    const db = yield* Database
    const query = { type: scope.type, id: scope.id, since: since?.from, until, currentDuring: at }
    const [rows, total] = yield* db.withReader((sql) =>
      Effect.all([historyRows(sql, { ...query, count, offset }), historyTotal(sql, query)])
    )
    const path = scope.type === undefined ? "_history" : scope.id === undefined ? `${scope.type}/_history` : `${scope.type}/${scope.id}/_history`
    const link = (relation: string, pageOffset: number) => {
      const linkParams = new URLSearchParams()
      if (sinceText !== null) linkParams.set("_since", sinceText)
      if (atText !== null) linkParams.set("_at", atText)
      linkParams.set("_count", String(count))
      linkParams.set("_until", String(query.until))
      linkParams.set("_offset", String(pageOffset))
      return { relation, url: `${request.base}/${path}?${linkParams.toString()}` }
    }
    const links = [link("self", offset), link("first", 0)]
    if (offset + count < total) links.push(link("next", offset + count))
    if (offset > 0) links.push(link("previous", Math.max(0, offset - count)))
    const now = yield* Clock.currentTimeMillis
    const text = bundleText({ type: "history", total, link: links }, rows.map((row) => entryText(request.base, row)), now)
    return resourceBody(text, request.negotiated, request.catalog)
  })
