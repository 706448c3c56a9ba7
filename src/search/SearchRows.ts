/**
 * What a search returns (`Search.run`), before anything renders it: the page's matches and the resources
 * `_include`/`_revinclude` add, each with its stored JSON text as it is (never parsed here), the total, the
 * warnings of the search, and the page positions its links name. The REST searchset Bundle is one rendering
 * (src/rest/search.ts); GraphQL, `$export`, subscriptions and `/sync` render the same rows their own way.
 */
import { Schema } from "effect"
import type { ScopedSearch } from "./parse/parseScope.ts"
import type { PageAt } from "./paging.ts"

/** A resource a search returns: a match of the page, or one an `_include`/`_revinclude` rule adds. */
export interface SearchRow {
  readonly type: string
  readonly id: string
  /** The version read (matches; included resources are read at their current version without it). */
  readonly version?: number
  /** The stored JSON text of that version, byte for byte. */
  readonly content: string
  readonly mode: "match" | "include"
}

/** A warning the search produced: a parameter `handling=lenient` set aside (`invalid`), or one its caller adds (`informational`). */
export interface SearchIssue {
  readonly severity: "warning"
  readonly code: "invalid" | "informational"
  readonly diagnostics: string
}

/** Where the page and its neighbours are: what a renderer needs for `self`, `first`, `next` and `previous`. */
export interface SearchPaging {
  /** The path the links repeat (under `[base]`): the type searched, a compartment's path, or "" across types. */
  readonly path: string
  /** The parameters the links repeat: the request's own, less those set aside (`atPage` puts a position in them). */
  readonly params: URLSearchParams
  /** Each link's relation and position, `self` and `first` always. */
  readonly links: ReadonlyArray<{ readonly relation: string; readonly at: PageAt }>
}

export interface SearchRows {
  /** The search as read: its result parameters (`_summary`, `_elements`, ...) tell a renderer how to show the rows. */
  readonly request: ScopedSearch
  /** The time the search ran at, in epoch milliseconds (what it read is current as of then). */
  readonly searchedAt: number
  /** The page's matches, in the search's order. */
  readonly matches: ReadonlyArray<SearchRow>
  /** The number of matches across every page, when the search asked for it (`_total`, `_summary=count`). */
  readonly total: number | undefined
  /** What `_include` and `_revinclude` add to the page, each once and none a match. */
  readonly included: ReadonlyArray<SearchRow>
  readonly outcome: ReadonlyArray<SearchIssue>
  readonly paging: SearchPaging
}

/**
 * A search refused before or while it runs: always something about the request (a 400 at the REST API),
 * `invalid` when the client wrote what cannot be read, `not-supported` for what this server does not do,
 * `too-costly` for a page whose included resources cannot fit.
 */
export class SearchError extends Schema.TaggedError<SearchError>()("SearchError", {
  code: Schema.Literal("invalid", "not-supported", "too-costly"),
  diagnostics: Schema.String
}) {
  override get message(): string {
    return this.diagnostics
  }
}
