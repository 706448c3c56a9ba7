/**
 * The rows of the fast search's statements on a Postgres primary, kept in memory while nothing has changed
 * (docs/performance.md, "Postgres: search results from memory"). A search on Postgres is a round trip to another
 * process, and the same searches come again and again (a dashboard, a form's look-ups, a client polling); the
 * primary is the only process that writes resources (the writer lease), and its Writer tells this cache of every
 * commit that changed a resource before the commit's caller is answered (as for the read cache, readCache.ts):
 *
 * - a statement's rows are kept under its text and its values, and answered again for the same text and
 *   values until a commit changes a resource, a new catalog is served, or the backfill changes a search index
 *   (`invalidate`): then everything held is let go at once (the statements read across types: a chain, `_has`);
 * - a search that read the database keeps its rows only when no such change came since it began, so what it
 *   keeps is what the database holds now;
 * - the least recently used are let go beyond `maxBytes` of text.
 *
 * A search after a write answered to its client always sees that write. The statements are the fast search's,
 * which read only resources and their search index (no clock, no caller: a caller the fast search answers may
 * search every resource of the type); what a response adds (its id, time and links) is made for each response.
 */
import type { Committed } from "../db/ChangeFeed.ts"
import { LruBytes } from "./lru.ts"

/** Text kept at most by default: some 500 pages of 20 resources of a kilobyte and a half. */
export const defaultSearchCacheBytes = 16 * 1024 * 1024

/** What an entry costs beyond its rows' text, roughly (the key, the array, the row objects, the map's slot). */
const overheadBytes = 256
const rowOverheadBytes = 96

interface Entry {
  /** The statement's text, checked on a hit (the key holds a hash of it). */
  readonly text: string
  readonly rows: ReadonlyArray<unknown>
}

const sizeOf = (key: string, rows: ReadonlyArray<unknown>): number => {
  let bytes = overheadBytes + 2 * key.length
  for (const row of rows) {
    bytes += rowOverheadBytes
    if (typeof row !== "object" || row === null) continue
    for (const value of Object.values(row)) if (typeof value === "string") bytes += 2 * value.length
  }
  return bytes
}

export class SearchCache {
  private readonly entries: LruBytes<Entry>
  /** Changes so far: a fill is kept only if none came since its search began. */
  private changes = 0
  hits = 0
  misses = 0

  constructor(readonly maxBytes: number = defaultSearchCacheBytes) {
    this.entries = new LruBytes(maxBytes)
  }

  /** The rows kept for the statement `text` under `key` (its name and values), now the most recently used. */
  get(key: string, text: string): ReadonlyArray<unknown> | undefined {
    const entry = this.entries.get(key)
    if (entry === undefined || entry.text !== text) {
      this.misses++
      return undefined
    }
    this.hits++
    return entry.rows
  }

  /** Taken before a search's first statement: what `fill` checks. */
  ticket(): number {
    return this.changes
  }

  /** Keeps the rows a statement read, unless a change came since the search's `ticket`. */
  fill(key: string, text: string, rows: ReadonlyArray<unknown>, ticket: number): void {
    if (ticket !== this.changes) return
    this.entries.set(key, { text, rows }, sizeOf(key, rows))
  }

  /** A commit that changed resources; called by the Writer after COMMIT and before the commit's caller is answered. */
  apply(committed: Committed): void {
    if (committed.changes.length > 0) this.invalidate()
  }

  /** Lets everything go: the database's resources or search index, or the catalog that reads them, changed. */
  invalidate(): void {
    this.changes++
    this.entries.clear()
  }

  /** How much it holds. */
  get size(): { readonly entries: number; readonly bytes: number } {
    return this.entries.size
  }
}
