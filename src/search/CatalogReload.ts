/**
 * Follows the Writer's commits (ARCHITECTURE.md, A request's way): when a SearchParameter is created,
 * updated or deleted, the catalog is built again from the database and swapped in, and the search index
 * backfill is asked to catch up with it. Commits that arrive while a rebuild runs make one more rebuild.
 */
import { Chunk, Context, Effect, Layer, Stream, SubscriptionRef } from "effect"
import { CatalogService } from "../catalog/CatalogService.ts"
import { storedEntries } from "../catalog/stored.ts"
import { Database } from "../db/Database.ts"
import { readCurrent } from "../store/reads.ts"
import { type Change, ChangeFeed } from "../store/ChangeFeed.ts"
import { Backfill } from "./Backfill.ts"

/** The resource types whose changes rebuild the catalog. */
const reloadingTypes: ReadonlySet<string> = new Set(["SearchParameter"])

export class CatalogReload extends Context.Tag("svc/search/CatalogReload")<CatalogReload, {
  /** Waits until every commit published so far has reached the catalog and the search index. */
  readonly settled: Effect.Effect<void>
}>() {}

export const make = Effect.gen(function*() {
  const db = yield* Database
  const catalogs = yield* CatalogService
  const backfill = yield* Backfill
  const feed = yield* ChangeFeed
  const events = yield* feed.follow()
  const handled = yield* SubscriptionRef.make(yield* feed.published)

  /**
   * Whether a change can alter the catalog. A SearchParameter written with the same content as the one
   * the catalog has for its url and version (a copy, or an update of its narrative) cannot: loading the
   * R4 examples writes some 1400 of those, each of which would otherwise cost a whole rebuild.
   */
  const changesCatalog = (change: Change) =>
    Effect.gen(function*() {
      if (change.op === "delete") return true
      const current = yield* db.withReader((sql) => readCurrent(sql, change.type, change.id))
      if (current === undefined || current.content === null) return true
      const resource = JSON.parse(current.content) as Record<string, unknown>
      const url = resource["url"]
      const version = resource["version"]
      if (typeof url !== "string") return true
      const known = (yield* catalogs.get).searchParameterByUrl(typeof version === "string" ? `${url}|${version}` : url)
      return known === undefined || !sameJson(withoutServerFields(known.resource), withoutServerFields(resource))
    })

  const reload = Effect.gen(function*() {
    const { entries, made } = yield* storedEntries.pipe(Effect.provideService(Database, db))
    const catalog = yield* catalogs.replaceEntries(entries)
    yield* Effect.logInfo("catalog rebuilt", {
      generation: catalog.generation,
      resources: entries.length,
      entries_made: made,
      resource_types: catalog.resourceTypes.length
    })
    yield* backfill.request(catalog)
  }).pipe(Effect.catchAllCause((cause) => Effect.logError("catalog rebuild failed", cause)))

  // Commits that arrived together are looked at together: one rebuild for all of them.
  yield* events.pipe(
    Stream.runForEachChunk((chunk) =>
      Effect.gen(function*() {
        const commits = Chunk.toArray(chunk).filter((event) => event._tag === "Committed")
        if (commits.length === 0) return
        const changes = commits.flatMap((event) => event.changes.filter((change) => reloadingTypes.has(change.type)))
        const needed = yield* Effect.exists(changes, changesCatalog).pipe(
          Effect.catchAllCause((cause) => Effect.as(Effect.logWarning("could not tell whether the catalog changed", cause), true))
        )
        if (needed) yield* reload
        yield* SubscriptionRef.set(handled, commits[commits.length - 1]!.commitTs)
      })
    ),
    Effect.forkScoped
  )

  const settled = Effect.gen(function*() {
    const target = yield* feed.published
    yield* handled.changes.pipe(Stream.filter((ts) => ts >= target), Stream.runHead)
    yield* backfill.idle
  })
  return CatalogReload.of({ settled })
})

export const layer = Layer.scoped(CatalogReload, make)

const withoutServerFields = (resource: Readonly<Record<string, unknown>>): Record<string, unknown> => {
  const { id: _id, meta: _meta, text: _text, ...rest } = resource
  return rest
}

/** Deep equality of parsed JSON, whatever the order of object keys. */
const sameJson = (a: unknown, b: unknown): boolean => {
  if (a === b) return true
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((item, i) => sameJson(item, b[i]))
  }
  const left = a as Readonly<Record<string, unknown>>
  const right = b as Readonly<Record<string, unknown>>
  const keys = Object.keys(left)
  return keys.length === Object.keys(right).length && keys.every((key) => key in right && sameJson(left[key], right[key]))
}
