/**
 * The current versions of resources read by id on a Postgres primary, kept in memory (docs/performance.md,
 * "Postgres: group commit, plans that hold, reads from memory"). A read by id on Postgres is a round trip to
 * another process, which on a loaded two-core machine costs more than everything else of the read; the primary
 * is the only process that writes resources (the writer lease), and its Writer tells this cache of every commit
 * before the commit's caller is answered, so what the cache holds is what the database holds:
 *
 * - a commit sets the new current version of each resource it changed (its text, version and timestamp), or
 *   drops a deleted one; a version changed in place (`$meta-add`, `$meta-delete`) replaces the text of that
 *   same version;
 * - a read that found nothing here reads the database and keeps what it found only when no commit came in
 *   between (it might be older than that commit's);
 * - the least recently read are let go beyond `maxBytes` of text.
 *
 * A read after a write answered to its client always sees that write. Nothing else changes resources: a
 * database changed behind the server's back (a restore, SQL by hand) needs a restart.
 */
import type { Committed } from "../db/ChangeFeed.ts"
import { LruBytes } from "./lru.ts"

export interface CachedVersion {
  readonly version: number
  /** `BIGINT` commit timestamp, as the driver gives it. */
  readonly commit_ts: string
  readonly content: string
}

/** What an entry costs beyond its text, roughly (the key, the object, the map's slot). */
const overheadBytes = 160

/** Text kept at most by default: some 30,000 resources of a kilobyte. */
export const defaultCacheBytes = 32 * 1024 * 1024

const keyOf = (type: string, id: string): string => `${type}/${id}`

const sizeOf = (key: string, entry: CachedVersion): number => 2 * (key.length + entry.content.length) + overheadBytes

export class ReadCache {
  private readonly entries: LruBytes<CachedVersion>
  /** Commits applied so far: a fill is kept only if none came since its read began. */
  private commits = 0
  hits = 0
  misses = 0

  constructor(readonly maxBytes: number = defaultCacheBytes) {
    this.entries = new LruBytes(maxBytes)
  }

  /** The current version of `type/id` when held (and now the most recently used). */
  get(type: string, id: string): CachedVersion | undefined {
    const entry = this.entries.get(keyOf(type, id))
    if (entry === undefined) this.misses++
    else this.hits++
    return entry
  }

  /** Taken before a read of the database: what `fill` checks. */
  ticket(): number {
    return this.commits
  }

  /** Keeps what a read of the database found, unless a commit came since its `ticket` or the resource is held. */
  fill(type: string, id: string, entry: CachedVersion, ticket: number): void {
    if (ticket !== this.commits) return
    const key = keyOf(type, id)
    if (this.entries.peek(key) !== undefined) return
    this.put(key, entry)
  }

  /** What a commit changed; called by the Writer after COMMIT and before the commit's caller is answered. */
  apply(committed: Committed): void {
    this.commits++
    for (const change of committed.changes) {
      const key = keyOf(change.type, change.id)
      const held = this.entries.peek(key)
      if (change.resource === null) {
        this.entries.delete(key)
      } else if (change.inPlace === true) {
        // The text of a version changed in place: its timestamp stays that of the version.
        if (held !== undefined && held.version === change.version) this.put(key, { ...held, content: change.resource })
        else if (held !== undefined && held.version < change.version) this.entries.delete(key)
      } else if (held === undefined || change.version >= held.version) {
        this.put(key, { version: change.version, commit_ts: String(committed.commitTs), content: change.resource })
      }
    }
  }

  /** How much it holds. */
  get size(): { readonly entries: number; readonly bytes: number } {
    return this.entries.size
  }

  private put(key: string, entry: CachedVersion): void {
    this.entries.set(key, entry, sizeOf(key, entry))
  }
}
