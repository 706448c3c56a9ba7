/**
 * Follows the Writer's commits (ARCHITECTURE.md, A request's way): when a SearchParameter is created,
 * updated or deleted, the catalog is built again from the database and swapped in, and the search index
 * backfill is asked to catch up with it. Commits that arrive while a rebuild runs make one more rebuild.
 */
import { Context, Effect, Layer, PubSub, Queue, Stream, SubscriptionRef } from "effect"
import { Database } from "../db/Database.ts"
import { conformanceTypes } from "../packages/LoadedPackage.ts"
import { Backfill } from "../search/Backfill.ts"
import { currentOfTypes } from "../store/reads.ts"
import { Writer } from "../store/Writer.ts"
import { CatalogService } from "./CatalogService.ts"

/** The resource types whose changes rebuild the catalog. */
const reloadingTypes: ReadonlySet<string> = new Set(["SearchParameter"])

export class CatalogReload extends Context.Tag("svc/catalog/CatalogReload")<CatalogReload, {
  /** Waits until every commit published so far has reached the catalog and the search index. */
  readonly settled: Effect.Effect<void>
}>() {}

export const make = Effect.gen(function*() {
  const db = yield* Database
  const writer = yield* Writer
  const catalogs = yield* CatalogService
  const backfill = yield* Backfill
  const subscription = yield* PubSub.subscribe(writer.committed)
  const handled = yield* SubscriptionRef.make(yield* writer.lastPublishedTs)

  const reload = Effect.gen(function*() {
    const rows = yield* db.withReader((sql) => currentOfTypes(sql, [...conformanceTypes]))
    const catalog = yield* catalogs.replace(rows.map((row) => JSON.parse(row.content) as Record<string, unknown>))
    yield* Effect.logInfo("catalog rebuilt", { generation: catalog.generation, resources: rows.length, resource_types: catalog.resourceTypes.length })
    yield* backfill.request(catalog)
  }).pipe(Effect.catchAllCause((cause) => Effect.logError("catalog rebuild failed", cause)))

  yield* Effect.gen(function*() {
    const first = yield* Queue.take(subscription)
    const events = [first, ...(yield* Queue.takeAll(subscription))]
    if (events.some((event) => event.changes.some((change) => reloadingTypes.has(change.type)))) yield* reload
    yield* SubscriptionRef.set(handled, events[events.length - 1]!.commitTs)
  }).pipe(Effect.forever, Effect.forkScoped)

  const settled = Effect.gen(function*() {
    const target = yield* writer.lastPublishedTs
    yield* handled.changes.pipe(Stream.filter((ts) => ts >= target), Stream.runHead)
    yield* backfill.idle
  })
  return CatalogReload.of({ settled })
})

export const layer = Layer.scoped(CatalogReload, make)
