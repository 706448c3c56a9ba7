/**
 * The links of a page (https://hl7.org/fhir/R4/http.html#paging) for searches, compartment searches and
 * history: `self`, `first`, and `next` and `previous` as keyset cursors (src/search/plan/cursor.ts), which cost
 * the same at any depth. A page asked for by `_offset` keeps it in its `self` link; the pages it leads to
 * are cursors. docs/search.md, "Paging", gives the decisions.
 */
import type { Problem } from "./parse/SearchRequest.ts"
import { type Cursor, encodeCursor } from "./plan/cursor.ts"

/** Where a page starts: an offset into the rows, or a cursor. */
export type PageAt = { readonly offset: number } | { readonly cursor: string }

/** Parameters that say how a page is read or shown, not which rows it pages through: left out of a cursor's check. */
const pagingCodes: ReadonlySet<string> = new Set(["_offset", "_cursor", "_count", "_format", "_pretty"])

/** The request's own parameters less those `lenient` set aside: what page links repeat. */
export const linkParams = (params: URLSearchParams, request: { readonly ignored: ReadonlyArray<Problem> }): URLSearchParams => {
  // A `_filter` set aside names its whole expression: only that occurrence leaves the links.
  const ignored = new Set(request.ignored.filter((problem) => problem.parameter !== "_filter").map((problem) => problem.parameter))
  const ignoredFilters = new Set(request.ignored.filter((problem) => problem.parameter === "_filter").map((problem) => problem.value))
  const out = new URLSearchParams()
  for (const [name, value] of params) {
    if (ignored.has(name) || ignored.has(name.split(":")[0]!)) continue
    if (name === "_filter" && ignoredFilters.has(value)) continue
    out.append(name, value)
  }
  return out
}

/** `params` with the page position `at` in place of any `_offset` or `_cursor`. */
export const atPage = (params: URLSearchParams, at: PageAt): string => {
  const out = new URLSearchParams()
  for (const [name, value] of params) if (name !== "_offset" && name !== "_cursor") out.append(name, value)
  if ("offset" in at) out.set("_offset", String(at.offset))
  else out.set("_cursor", at.cursor)
  return out.toString()
}

/**
 * What a cursor is checked against: the path paged through and the parameters that choose and order its
 * rows (as the page links carry them, in any order). A cursor made for one search is refused by another.
 */
export const cursorOwner = (path: string, params: URLSearchParams): string => {
  const kept: Array<string> = []
  for (const [name, value] of params) if (!pagingCodes.has(name)) kept.push(`${encodeURIComponent(name)}=${encodeURIComponent(value)}`)
  return `${path}?${kept.sort().join("&")}`
}

export interface PageState<Row> {
  /** How the page was asked for: the cursor as written, or the offset (0 for the first page). */
  readonly at: PageAt
  readonly backwards: boolean
  readonly count: number
  /** The page's rows in the order they were read (from its end when `backwards`). */
  readonly rows: ReadonlyArray<Row>
  /** Whether rows follow the page in the direction it was read. */
  readonly more: boolean
  /** The cursor values of a row: its order keys. */
  readonly keys: (row: Row) => Cursor["values"]
  /** What the cursors are checked against (`cursorOwner`). */
  readonly owner: string
}

/** The relations and positions of a page's links. */
export const pageLinks = <Row>(page: PageState<Row>): Array<{ readonly relation: string; readonly at: PageAt }> => {
  const shown = page.backwards ? [...page.rows].reverse() : page.rows
  const first = shown[0]
  const last = shown[shown.length - 1]
  const cursor = (row: Row, direction: Cursor["direction"]) => ({ cursor: encodeCursor({ direction, values: page.keys(row) }, page.owner) })
  const links: Array<{ readonly relation: string; readonly at: PageAt }> = [{ relation: "self", at: page.at }, { relation: "first", at: { offset: 0 } }]
  if (last !== undefined && page.count > 0 && (page.backwards || page.more)) links.push({ relation: "next", at: cursor(last, "after") })
  const fromStart = "offset" in page.at && page.at.offset === 0
  if (first !== undefined && (page.backwards ? page.more : !fromStart)) links.push({ relation: "previous", at: cursor(first, "before") })
  else if (first === undefined && "offset" in page.at && page.at.offset > 0) {
    links.push({ relation: "previous", at: { offset: Math.max(0, page.at.offset - page.count) } })
  }
  return links
}
