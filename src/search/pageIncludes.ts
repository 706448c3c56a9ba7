/**
 * `_include` and `_revinclude` within a page's byte bound (docs/search.md, "Paging"): the resources the page's
 * matches bring count against `server.max_page_bytes` with the matches. When they do not fit, the page
 * holds fewer matches (the most whose resources and included resources fit, found by halving), and its
 * `next` link goes on from the last it holds. The contents of the included resources are read only once
 * they fit. A single match whose included resources alone, all but the largest one, exceed the bound cannot
 * be served within it: that is a SearchError (too-costly).
 */
import type { Statement } from "@effect/sql"
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import { type IncludedKey, type IncludedResource, includedContents, includedKeys } from "./plan/include.ts"
import { SearchError } from "./SearchRows.ts"

/** A match of the page as its statement reads it: row key, type, id and the size of its content. */
export interface PageMatch {
  readonly rkey: number | string
  readonly type: string
  readonly id: string
  readonly size: number | string
}

/** The `_include` and `_revinclude` rules of a searchset, and its page's byte bound. */
export interface IncludeRules {
  readonly include: Parameters<typeof includedKeys>[2]
  readonly revinclude: Parameters<typeof includedKeys>[3]
  readonly maxPageBytes: number
  /** What every included resource meets besides the rules (the caller's restriction, spec Search rule 9). */
  readonly restrict?: Statement.Fragment | undefined
}

const keysOf = (rows: ReadonlyArray<PageMatch>) => rows.map((row) => ({ rkey: Number(row.rkey), type: row.type, id: row.id }))

const bytesOf = (sizes: ReadonlyArray<number>) => sizes.reduce((sum, size) => sum + size, 0)

/**
 * The included resources of the first matches of `rows` (the page's matches, in the order read), and how many
 * matches the page keeps with them (undefined: all).
 */
export const pageIncludes = (
  sql: SqlClient.SqlClient,
  plan: IncludeRules,
  rows: ReadonlyArray<PageMatch>
): Effect.Effect<{ readonly included: ReadonlyArray<IncludedResource>; readonly keep: number | undefined }, SearchError | SqlError> =>
  Effect.gen(function*() {
    if (rows.length === 0 || (plan.include.length === 0 && plan.revinclude.length === 0)) return { included: [], keep: undefined }
    const keysFor = (n: number) =>
      includedKeys(sql, keysOf(rows.slice(0, n)), plan.include, plan.revinclude, plan.restrict === undefined ? {} : { restrict: plan.restrict })
        .pipe(Effect.catchTag("TooManyIncluded", (error) => new SearchError({ code: "too-costly", diagnostics: error.message })))
    const sizes = (n: number, found: ReadonlyArray<IncludedKey>) => [...rows.slice(0, n).map((row) => Number(row.size)), ...found.map((key) => key.size)]
    const fits = (n: number, found: ReadonlyArray<IncludedKey>) => bytesOf(sizes(n, found)) <= plan.maxPageBytes

    let keep = rows.length
    let found = yield* keysFor(keep)
    if (!fits(keep, found)) {
      // The most matches that fit with what they bring, between 1 and keep - 1.
      let best: { readonly keep: number; readonly found: ReadonlyArray<IncludedKey> } | undefined
      let [low, high] = [1, keep - 1]
      while (low <= high) {
        const middle = Math.floor((low + high) / 2)
        const tried = yield* keysFor(middle)
        if (fits(middle, tried)) {
          best = { keep: middle, found: tried }
          low = middle + 1
        } else high = middle - 1
      }
      keep = best?.keep ?? 1
      found = best?.found ?? (keep === rows.length ? found : yield* keysFor(1))
      const all = sizes(keep, found)
      if (best === undefined && bytesOf(all) - Math.max(...all) > plan.maxPageBytes) {
        return yield* new SearchError({
          code: "too-costly",
          diagnostics: `The resources _include and _revinclude add to the first match of this page come to ${bytesOf(all)} bytes, ` +
            `more than a page holds (server.max_page_bytes, ${plan.maxPageBytes}): narrow the _include and _revinclude rules`
        })
      }
    }
    return { included: yield* includedContents(sql, found), keep: keep === rows.length ? undefined : keep }
  })
