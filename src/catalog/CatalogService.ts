/**
 * The current Catalog of the running server. Readers take the whole snapshot with one `get`; a rebuild
 * builds the next generation and swaps it in one step, so readers never see half a catalog.
 */
import { Context, Effect, Layer, type Stream, SubscriptionRef } from "effect"
import { build, type Catalog, type CatalogEntry, fromEntries } from "./Catalog.ts"

export class CatalogService extends Context.Tag("svc/catalog/Catalog")<CatalogService, {
  readonly get: Effect.Effect<Catalog>
  /** The current catalog, then every one swapped in after it. */
  readonly changes: Stream.Stream<Catalog>
  /** Builds generation + 1 from `resources` and swaps it in; concurrent replaces are applied one after the other. */
  readonly replace: (resources: Iterable<Record<string, unknown>>) => Effect.Effect<Catalog>
  /** The same from catalog entries (stored.ts). */
  readonly replaceEntries: (entries: Iterable<CatalogEntry>) => Effect.Effect<Catalog>
}>() {}

export const make = (initial: Catalog): Effect.Effect<Context.Tag.Service<CatalogService>> =>
  Effect.map(SubscriptionRef.make(initial), (ref) => ({
    get: SubscriptionRef.get(ref),
    changes: ref.changes,
    replace: (resources) =>
      SubscriptionRef.updateAndGetEffect(ref, (current) => Effect.sync(() => build(resources, current.generation + 1))),
    replaceEntries: (entries) =>
      SubscriptionRef.updateAndGetEffect(ref, (current) => Effect.sync(() => fromEntries(entries, current.generation + 1)))
  }))

export const layer = (initial: Catalog): Layer.Layer<CatalogService> => Layer.effect(CatalogService, make(initial))

export const current: Effect.Effect<Catalog, never, CatalogService> = Effect.flatMap(CatalogService, (service) => service.get)

export const replace = (
  resources: Iterable<Record<string, unknown>>
): Effect.Effect<Catalog, never, CatalogService> => Effect.flatMap(CatalogService, (service) => service.replace(resources))
