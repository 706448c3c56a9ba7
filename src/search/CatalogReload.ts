/**
 * Follows the change feed (ARCHITECTURE.md, "Catalog and packages"): when a conformance resource the catalog
 * holds is created, updated or deleted, the catalog is built again from the database and swapped in, and the
 * search index backfill is asked to catch up with it. A SearchParameter rebuilds it at once (commits that
 * arrive while a rebuild runs make one more); the other conformance resources (StructureDefinition,
 * OperationDefinition, CodeSystem, ValueSet, ConceptMap, CompartmentDefinition) once their writes pause for
 * `quiet`, or `longest` after the first at the latest, so that loading many of them rebuilds it a few times
 * rather than once per resource. `settled` waits for both. `reachedNow` rebuilds at once, for a writer that
 * needs what it wrote in the catalog before it goes on (the terminology pull).
 */
import { Chunk, Clock, Context, Duration, Effect, Layer, Option, Queue, Stream, SubscriptionRef } from "effect"
import { CatalogService } from "../catalog/CatalogService.ts"
import { storedEntries } from "../catalog/stored.ts"
import { Database } from "../db/Database.ts"
import { type Change, ChangeFeed } from "../db/ChangeFeed.ts"
import { Backfill } from "./Backfill.ts"
import { sameJson } from "../json/sameJson.ts"

/** The resource types whose changes rebuild the catalog at once. */
const reloadingTypes: ReadonlySet<string> = new Set(["SearchParameter"])

/** The resource types whose changes rebuild the catalog when their writes pause. */
const laterTypes: ReadonlySet<string> = new Set([
  "StructureDefinition",
  "OperationDefinition",
  "CodeSystem",
  "ValueSet",
  "ConceptMap",
  "CompartmentDefinition"
])

export interface ReloadTiming {
  /** A pause in writes of conformance resources this long rebuilds the catalog. */
  readonly quiet: Duration.DurationInput
  /** However they go on, the catalog is rebuilt this long after the first write not yet in it. */
  readonly longest: Duration.DurationInput
}

export const defaultTiming: ReloadTiming = { quiet: "250 millis", longest: "2 seconds" }

export class CatalogReload extends Context.Tag("svc/search/CatalogReload")<CatalogReload, {
  /** Waits until every commit published so far has reached the catalog and the search index. */
  readonly settled: Effect.Effect<void>
  /** Waits until the catalog holds every commit up to `commitTs` (a replica's `X-Svc-Min-Ts`). */
  readonly reached: (commitTs: number) => Effect.Effect<void>
  /**
   * As `reached`, rebuilding the catalog at once rather than after the pause in writes: for a writer of many
   * conformance resources that needs them in the catalog before it goes on (the terminology pull).
   */
  readonly reachedNow: (commitTs: number) => Effect.Effect<void>
}>() {}

export const make = (timing: ReloadTiming = defaultTiming) => Effect.gen(function*() {
  const db = yield* Database
  const catalogs = yield* CatalogService
  const backfill = yield* Backfill
  const feed = yield* ChangeFeed
  const next = yield* feed.pull()
  const handled = yield* SubscriptionRef.make(yield* feed.published)

  /**
   * Whether a change can alter the catalog. A SearchParameter written with the same content as the one
   * the catalog has for its url and version (a copy, or an update of its narrative) cannot: loading the
   * R4 examples writes some 1400 of those, each of which would otherwise cost a whole rebuild.
   */
  const changesCatalog = (change: Change) =>
    Effect.gen(function*() {
      // The version as the change carries it (stored JSON); a later change of the same resource comes after it.
      if (change.op === "delete" || change.resource === null) return true
      const resource = JSON.parse(change.resource) as Record<string, unknown>
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

  // One rebuild at a time.
  const rebuilding = yield* Effect.makeSemaphore(1)
  const rebuild = rebuilding.withPermits(1)(reload)
  // The last commit seen, and whether one of them changed a conformance resource not yet in the catalog.
  let seen = yield* feed.published
  const seenChanges = yield* SubscriptionRef.make(seen)
  let pending = false
  // A rebuild for them runs now: what the feed brings meanwhile is handled once it ends.
  let laterRunning = false
  const wake = yield* Queue.sliding<void>(1)

  // Commits that arrived together are looked at together: one rebuild for all of them.
  yield* next.pipe(
    Effect.flatMap((chunk) =>
      Effect.gen(function*() {
        const commits = Chunk.toArray(chunk).filter((event) => event._tag === "Committed")
        if (commits.length === 0) return
        seen = commits[commits.length - 1]!.commitTs
        yield* SubscriptionRef.set(seenChanges, seen)
        const changes = commits.flatMap((event) => event.changes)
        const now = changes.filter((change) => reloadingTypes.has(change.type))
        const needed = now.length === 0 ? false : yield* Effect.exists(now, changesCatalog).pipe(
          Effect.catchAllCause((cause) => Effect.as(Effect.logWarning("could not tell whether the catalog changed", cause), true))
        )
        if (needed) {
          // A rebuild reads every conformance resource: those waiting for a pause are in it too.
          pending = false
          yield* rebuild
        } else if (changes.some((change) => laterTypes.has(change.type))) {
          pending = true
          yield* Queue.offer(wake, undefined)
        }
        if (!pending && !laterRunning) yield* SubscriptionRef.set(handled, seen)
      })
    ),
    Effect.forever,
    Effect.forkScoped
  )

  // The rebuild for the other conformance resources, once their writes pause.
  yield* Effect.gen(function*() {
    yield* Queue.take(wake)
    const first = yield* Clock.currentTimeMillis
    while (true) {
      yield* Effect.sleep(timing.quiet)
      const more = yield* Queue.poll(wake)
      if (Option.isNone(more) || (yield* Clock.currentTimeMillis) - first >= Duration.toMillis(timing.longest)) break
    }
    if (!pending) return
    const upTo = seen
    pending = false
    laterRunning = true
    yield* rebuild.pipe(Effect.ensuring(Effect.sync(() => void (laterRunning = false))))
    // Commits after `upTo` that change no conformance resource are handled too; one that does is pending again.
    const through = pending ? upTo : seen
    yield* SubscriptionRef.update(handled, (ts) => Math.max(ts, through))
  }).pipe(Effect.forever, Effect.forkScoped)

  const settled = Effect.gen(function*() {
    const target = yield* feed.published
    yield* handled.changes.pipe(Stream.filter((ts) => ts >= target), Stream.runHead)
    yield* backfill.idle
  })
  const reached = (commitTs: number) => Effect.asVoid(handled.changes.pipe(Stream.filter((ts) => ts >= commitTs), Stream.runHead))
  const isHandled = (commitTs: number) => Effect.map(SubscriptionRef.get(handled), (ts) => ts >= commitTs)
  const reachedNow = (commitTs: number) =>
    Effect.gen(function*() {
      yield* seenChanges.changes.pipe(Stream.filter((ts) => ts >= commitTs), Stream.runHead)
      if (yield* isHandled(commitTs)) return
      // Not given up half-way (a caller's timeout): the later rebuild is called off for what this one reads.
      yield* rebuilding.withPermits(1)(Effect.uninterruptible(Effect.gen(function*() {
        if (yield* isHandled(commitTs)) return
        // Every commit the follower has seen is read by this rebuild; the later one has nothing left of them.
        const upTo = seen
        pending = false
        yield* reload
        yield* SubscriptionRef.update(handled, (ts) => Math.max(ts, upTo))
      })))
    })
  return CatalogReload.of({ settled, reached, reachedNow })
})

export const layer = (timing: ReloadTiming = defaultTiming) => Layer.scoped(CatalogReload, make(timing))

const withoutServerFields = (resource: Readonly<Record<string, unknown>>): Record<string, unknown> => {
  const { id: _id, meta: _meta, text: _text, ...rest } = resource
  return rest
}
