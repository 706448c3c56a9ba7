/**
 * The catalog's entries as the database keeps them (table `catalog_entries`, one row per current version
 * of a conformance resource): a start reads the summaries and the deflated JSON, never parsing the
 * resources. A current version without a row of this build's summary format (a package just installed, a
 * conformance resource written through the API, an older build's rows) is read, summarized and packed
 * once, and its row written; rows of versions no longer current are removed then.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import { Database } from "../db/Database.ts"
import type { CatalogEntry } from "./Catalog.ts"
import { isObject } from "./json.ts"
import { pack } from "./source.ts"
import { catalogTypes, type Summary, summarize, summaryFormat } from "./summary.ts"

interface Row {
  readonly rkey: number | string
  readonly version: number
  readonly type: string
  readonly id: string
  readonly format: number | null
  readonly summary: string | null
  readonly packed: Uint8Array | null
}

/** How many resources one statement reads or writes while entries are made. */
const chunkSize = 200

const chunks = <A>(items: ReadonlyArray<A>): Array<ReadonlyArray<A>> => {
  const out: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < items.length; i += chunkSize) out.push(items.slice(i, i + chunkSize))
  return out
}

const currentEntries = (sql: SqlClient.SqlClient) =>
  sql<Row>`
    SELECT r.rkey, r.version, r.type, r.id, c.format, c.summary, c.packed
    FROM resources r LEFT JOIN catalog_entries c ON c.rkey = r.rkey AND c.version = r.version
    WHERE ${sql.in("r.type", catalogTypes)} AND NOT r.deleted`

const contents = (sql: SqlClient.SqlClient, rkeys: ReadonlyArray<number | string>) =>
  sql<{ readonly rkey: number | string; readonly content: string | null }>`
    SELECT r.rkey, v.content
    FROM resources r JOIN resource_versions v ON v.rkey = r.rkey AND v.version = r.version
    WHERE ${sql.in("r.rkey", rkeys)}`

const parsed = (content: string): unknown => {
  try {
    return JSON.parse(content)
  } catch {
    return undefined
  }
}

/** A row of `catalog_entries`. */
export interface StoredEntry {
  readonly rkey: number | string
  readonly version: number
  readonly summary: string
  readonly packed: Uint8Array
}

/**
 * The entry of one version of a resource, from its JSON text and that text parsed (undefined when it is not
 * JSON). The narrative (`text`), half of the R4 packages' text, is left out of the packed JSON: nothing
 * reads it from the catalog, and the server serves resources from `resource_versions`.
 */
export const entryOf = (rkey: number | string, version: number, json: unknown, content: string): StoredEntry => ({
  rkey,
  version,
  summary: JSON.stringify(summarize(json)),
  packed: pack(withoutNarrative(json, content))
})

const withoutNarrative = (json: unknown, content: string): string => {
  if (!isObject(json) || !("text" in json)) return content
  const { text: _narrative, ...rest } = json
  return JSON.stringify(rest)
}

/** Whether the catalog keeps entries for resources of `type`. */
export const hasEntries = (type: string): boolean => catalogTypes.includes(type)

/** Writes `entries` (replacing those of the same versions) and removes the entries of versions no longer current. */
export const writeEntries = (sql: SqlClient.SqlClient, entries: ReadonlyArray<StoredEntry>) =>
  Effect.gen(function*() {
    for (const chunk of chunks(entries)) {
      const rows = chunk.map((m) => ({ rkey: m.rkey, version: m.version, format: summaryFormat, summary: m.summary, packed: Buffer.from(m.packed) }))
      yield* sql`INSERT INTO catalog_entries ${sql.insert(rows)}
        ON CONFLICT (rkey, version) DO UPDATE SET format = excluded.format, summary = excluded.summary, packed = excluded.packed`
    }
    yield* sql`DELETE FROM catalog_entries WHERE NOT EXISTS (
      SELECT 1 FROM resources r WHERE r.rkey = catalog_entries.rkey AND r.version = catalog_entries.version AND NOT r.deleted)`
  })

/** Summarizes and packs the current versions of `missing`, reading their JSON in chunks. */
const make = (db: Database["Type"], missing: ReadonlyArray<Row>) =>
  Effect.gen(function*() {
    const made = new Map<string, StoredEntry>()
    for (const chunk of chunks(missing)) {
      const rows = yield* db.withReader((sql) => contents(sql, chunk.map((row) => row.rkey)))
      const byKey = new Map(rows.map((row) => [String(row.rkey), row.content]))
      for (const row of chunk) {
        const content = byKey.get(String(row.rkey)) ?? "{}"
        made.set(String(row.rkey), entryOf(row.rkey, row.version, parsed(content), content))
      }
    }
    return made
  })

/** Resources in the order of their type, then id: the order the catalog sees them in, whatever the database's plan. */
const byTypeAndId = (a: Row, b: Row): number =>
  a.type === b.type ? (a.id < b.id ? -1 : a.id > b.id ? 1 : 0) : a.type < b.type ? -1 : 1

const isStored = (row: Row): boolean => row.format === summaryFormat && row.summary !== null && row.packed !== null

/**
 * The entries of every current conformance resource the catalog compiles, with how many had to be made.
 * Rows that cannot be written (a read-only database) are made again at the next build; the entries are
 * the same either way.
 */
export const storedEntries = Effect.gen(function*() {
  const db = yield* Database
  const rows = [...yield* db.withReader(currentEntries)].sort(byTypeAndId)
  const missing = rows.filter((row) => !isStored(row))
  const made = missing.length === 0 ? new Map<string, StoredEntry>() : yield* make(db, missing)
  if (made.size > 0) {
    yield* db.writer.withTransaction(writeEntries(db.writer, [...made.values()])).pipe(
      Effect.catchAll((error) => Effect.logWarning("catalog entries not stored; they are made again at the next start", { error: error.message }))
    )
  }
  const entries: Array<CatalogEntry> = rows.map((row) => {
    const fresh = made.get(String(row.rkey))
    if (fresh !== undefined) return { summary: JSON.parse(fresh.summary) as Summary, packed: fresh.packed }
    return { summary: JSON.parse(row.summary!) as Summary, packed: row.packed! }
  })
  return { entries, made: made.size }
})
