/**
 * A map bounded by a size in bytes (each entry's given by its user), the least recently used let go first:
 * what the caches of a Postgres primary hold (readCache.ts, searchCache.ts).
 */
export class LruBytes<V> {
  /** In order of last use, oldest first, each with what it costs. */
  private readonly entries = new Map<string, { readonly value: V; readonly bytes: number }>()
  private held = 0

  constructor(readonly maxBytes: number) {}

  /** The value under `key` when held, now the most recently used. */
  get(key: string): V | undefined {
    const entry = this.entries.get(key)
    if (entry === undefined) return undefined
    this.entries.delete(key)
    this.entries.set(key, entry)
    return entry.value
  }

  /** The value under `key` when held, its place left as it is. */
  peek(key: string): V | undefined {
    return this.entries.get(key)?.value
  }

  /** Keeps `value` under `key` as the most recently used (unless larger than the whole), letting the oldest go beyond the bound. */
  set(key: string, value: V, bytes: number): void {
    this.delete(key)
    if (bytes > this.maxBytes) return
    this.entries.set(key, { value, bytes })
    this.held += bytes
    for (const [oldest, entry] of this.entries) {
      if (this.held <= this.maxBytes) break
      this.entries.delete(oldest)
      this.held -= entry.bytes
    }
  }

  delete(key: string): void {
    const entry = this.entries.get(key)
    if (entry === undefined) return
    this.entries.delete(key)
    this.held -= entry.bytes
  }

  clear(): void {
    this.entries.clear()
    this.held = 0
  }

  /** How much it holds. */
  get size(): { readonly entries: number; readonly bytes: number } {
    return { entries: this.entries.size, bytes: this.held }
  }
}
