/**
 * Start-up (spec: Readiness of a process): listen first, then open the database and apply
 * migrations while `/readyz` says which step is running, then serve. On SIGTERM/SIGINT the
 * server drains (src/http/Server.ts: in-flight requests finish, within a bound) before the database closes.
 */
import { Context, Duration, Effect, Exit, Layer, Option, Ref, Schedule, Scope } from "effect"
import v8 from "node:v8"
import type { AppConfig } from "../config/AppConfig.ts"
import { Database } from "../db/Database.ts"
import { CatalogService } from "../catalog/CatalogService.ts"
import { CatalogReload } from "../search/CatalogReload.ts"
import { Backfill, progressDetails } from "../search/Backfill.ts"
import { Writer } from "../db/Writer.ts"
import { ChangeFeed } from "../db/ChangeFeed.ts"
import { type AppInput, appLayerOf, HeldWriterLease } from "./AppLayer.ts"
import type { LeaseLost } from "../db/WriterLease.ts"
import { Governance } from "../governance/Governance.ts"
import { defaultOptions as idleCollectOptions, processProbes, run as runIdleCollect } from "./IdleCollect.ts"
import { makePeerList } from "../http/ClientAddress.ts"
import { cachedProbe, Readiness, Reasons } from "../http/Readiness.ts"
import * as PostgresLease from "../db/PostgresLease.ts"
import { makeForwarder } from "../cluster/forward.ts"
import { makeRelay } from "../cluster/replica.ts"
import { Door } from "../http/FrontDoor.ts"
import { type HttpServer, HttpServerRequest, type HttpServerResponse } from "@effect/platform"
import * as RootRoutes from "../http/RootRoutes.ts"
import { type EdgeOptions, listen, type ListenOptions, ServingApp } from "../http/Server.ts"
import { type FastCounts, installFastRead } from "../rest/fastRead.ts"
import { installFastPg } from "../rest/fastPg.ts"
import { ReadCache } from "../rest/readCache.ts"
import { SearchCache } from "../rest/searchCache.ts"
import * as FhirApp from "../rest/FhirApp.ts"
import { basePath } from "../rest/Rest.ts"
import { parseBind } from "../config/Setting.ts"
import { outcomeResponse } from "../http/OperationOutcome.ts"
import * as Smart from "../auth/Smart.ts"
import * as Subscriptions from "../subscriptions/Subscriptions.ts"
import * as SubscriptionSockets from "../subscriptions/SubscriptionSockets.ts"
import * as SyncEngine from "../sync/engine.ts"
import * as SyncSockets from "../sync/SyncSockets.ts"
import { LiveQueries } from "../sync/LiveQueries.ts"
import { SyncTokens } from "../sync/SyncTokens.ts"
import { generatedSecrets, SmartSecrets } from "../auth/SmartSecrets.ts"
import * as TerminologyPull from "../terminology/pull/TerminologyPull.ts"
import { exportRoutes } from "../export/routes.ts"
import { graphqlRoutes } from "../graphql/endpoint.ts"

export const edgeOptions = (config: AppConfig): EdgeOptions => ({
  role: config.cluster.role,
  verboseNeedsToken: config.smart.enabled,
  trusted: { hops: config.server.trusted_proxy_hops, peers: makePeerList(config.server.trusted_proxy_peers) },
  requestLog: config.request_log.enabled,
  maxBodyBytes: config.server.max_body_bytes
})

/** The listen address of `server.bind` (validated by the configuration), IPv6 without brackets. */
const listenAddress = (bind: string): ListenOptions => {
  const parsed = parseBind(bind) ?? { host: bind, port: Number.NaN }
  return { host: parsed.host.replace(/^\[(.*)\]$/, "$1"), port: parsed.port }
}

/** FHIR paths go to the FHIR app; every other path to the root route table (a 404 OperationOutcome where it has none). */
const routeByPrefix = <E>(
  fhir: Effect.Effect<HttpServerResponse.HttpServerResponse, E, HttpServerRequest.HttpServerRequest>,
  handlers: Readonly<Record<string, RootRoutes.RootHandler>>
) => {
  const root = RootRoutes.app(RootRoutes.withHandlers(RootRoutes.rootRoutes, handlers))
  return Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
    (request.url === basePath || request.url.startsWith(`${basePath}/`) || request.url.startsWith(`${basePath}?`)) &&
      !request.url.startsWith(smartDiscoveryPath)
      ? fhir
      : root)
}

/** SMART discovery under the FHIR base, answered by the root table (src/auth/Discovery.ts). */
const smartDiscoveryPath = `${basePath}/.well-known/`

/** A root handler with the services it needs, whose failures and defects are a logged 500 OperationOutcome. */
const served = <R>(handler: RootRoutes.RootHandler<unknown, R>, services: Context.Context<R>): RootRoutes.RootHandler => (request) =>
  handler(request).pipe(
    Effect.provide(services),
    Effect.catchAllCause((cause) =>
      Effect.logError("request failed", cause).pipe(Effect.as(outcomeResponse("exception", "the server failed to answer this request; see its log")))
    )
  )

/** The public URL of a server listening at `address` without `server.public_url` (a loopback bind). */
const listenUrl = (address: HttpServer.Address): string =>
  address._tag === "TcpAddress" ? `http://${address.hostname.includes(":") ? `[${address.hostname}]` : address.hostname}:${address.port}` : "http://localhost"

export interface Started {
  readonly address: HttpServer.Address
  /** Waits until every change committed so far has reached the catalog and the search index. */
  readonly searchIndexed: Effect.Effect<void>
  /** The change feed of the process's commits. */
  readonly changeFeed: ChangeFeed["Type"]
  /** The sockets bound to Subscriptions at `/ws`, which their notifications ping. */
  readonly subscriptionSockets: SubscriptionSockets.SubscriptionSockets["Type"]
  /** Waits until every commit published so far has been matched against the Subscriptions. */
  readonly subscriptionsSettled: Effect.Effect<void>
  /** The live-query engine of `/sync`. */
  readonly liveQueries: LiveQueries["Type"]
  /** Fails when another process takes this one's writer lease (Postgres): the process must stop. Never, otherwise. */
  readonly leaseLost: Effect.Effect<never, LeaseLost>
}

/**
 * The primary's published watermark (docs/cluster.md): the last commit published, recorded in the writer lease's
 * row as often as the lease is renewed. A primary that cannot record it answers `/readyz` unavailable.
 */
const publishWatermark = (db: Database["Type"], feed: ChangeFeed["Type"], held: PostgresLease.HeldLease, readiness: Readiness["Type"]) =>
  Effect.gen(function*() {
    const clock = yield* Effect.clock
    const every = held.times.renewEvery
    let recordedAt = clock.unsafeCurrentTimeMillis()
    const record = Effect.flatMap(feed.published, (watermark) => PostgresLease.recordWatermark(db.writer, held.holder, held.epoch, watermark)).pipe(
      Effect.flatMap((recorded) => recorded ? Effect.sync(() => void (recordedAt = clock.unsafeCurrentTimeMillis())) : Effect.void),
      Effect.catchAll((error) => Effect.logWarning("the published watermark could not be recorded", { reason: error.message }))
    )
    yield* Effect.forkScoped(Effect.repeat(record, Schedule.spaced(every)))
    yield* readiness.require(() => clock.unsafeCurrentTimeMillis() - recordedAt > 3 * Duration.toMillis(every) ? Reasons.noWatermark : undefined)
  })

/** How far a replica has followed the primary: the commit it has taken in, the primary's watermark, the lag between. */
const followingDetails = (db: Database["Type"], feed: ChangeFeed["Type"]) =>
  Effect.gen(function*() {
    const position = yield* feed.published
    const watermark = yield* PostgresLease.readWatermark(db.writer).pipe(Effect.orElseSucceed(() => undefined))
    return {
      commit_ts: position,
      primary_watermark: watermark ?? null,
      lag_ms: watermark === undefined ? null : Math.max(0, (watermark - position) / 1000)
    }
  })

/** Runs the server until interrupted; fails when listening, opening or migrating fails. */
export const start = <O extends AppInput = never, E = never>(config: AppConfig, overrides?: Layer.Layer<O, E>) =>
  Effect.gen(function*() {
    const readiness = yield* Readiness
    const slot = yield* ServingApp
    // Registered before the server exists, so it closes after the server has drained.
    const databaseScope = yield* Scope.make()
    yield* Effect.addFinalizer(() => Scope.close(databaseScope, Exit.void))

    const { address, door, fast, relay } = yield* listen(listenAddress(config.server.bind), edgeOptions(config))
    const replica = config.cluster.role === "replica"
    // Registered after the server, so it runs before the server drains: from then on every request is a 503.
    yield* Effect.addFinalizer(() => readiness.stopping)
    yield* Effect.logInfo("listening", address._tag === "TcpAddress" ? { host: address.hostname, port: address.port } : { path: address.path })

    // The services, built in start-up's order (src/app/AppLayer.ts); they close after the server has drained.
    const services = yield* Layer.buildWithScope(appLayerOf(config, overrides), databaseScope)
    const db = Context.get(services, Database)
    const writer = Context.get(services, Writer)
    const catalogService = Context.get(services, CatalogService)
    const backfill = Context.get(services, Backfill)
    const held = Option.getOrUndefined(Context.getOption(services, HeldWriterLease))
    const fhir = yield* FhirApp.make({
      maxBodyBytes: config.server.max_body_bytes,
      maxBundleEntries: config.server.max_bundle_entries,
      maxPageBytes: config.server.max_page_bytes
    }).pipe(Effect.provide(services))
    const feed = Context.get(services, ChangeFeed)
    if (held !== undefined) yield* publishWatermark(db, feed, held, readiness).pipe(Scope.extend(databaseScope))
    if (replica) {
      // Writes go to the primary, reads wait for X-Svc-Min-Ts (src/cluster/replica.ts).
      const forwarder = makeForwarder(new URL(config.cluster.primary_url ?? ""))
      yield* Scope.addFinalizer(databaseScope, Effect.sync(() => forwarder.close()))
      const catalogReload = Context.get(services, CatalogReload)
      relay.current = makeRelay(forwarder, {
        reached: (commitTs) => Effect.zipRight(feed.settled(commitTs), catalogReload.reached(commitTs))
      }, yield* Effect.runtime<never>())
    }
    const governance = Context.get(services, Governance)
    door.install(governance)
    let rootHandlers: Record<string, RootRoutes.RootHandler> = { ...governance.routes }
    // The export job endpoints (docs/export.md); a replica forwards them to the primary before they reach here.
    const exportRoot = (config.server.public_url ?? listenUrl(address)).replace(/\/+$/, "")
    for (const [path, handler] of Object.entries(exportRoutes({ smart: config.smart.enabled, root: exportRoot }))) {
      rootHandlers[path] = served(handler, services)
    }
    // FHIR GraphQL (docs/graphql.md).
    for (const [path, handler] of Object.entries(graphqlRoutes({ smart: config.smart.enabled, base: `${exportRoot}${basePath}`, maxBundleEntries: config.server.max_bundle_entries }))) {
      rootHandlers[path] = served(handler, services)
    }
    let syncTokens: SyncTokens["Type"] | undefined
    if (config.smart.enabled) {
      const secrets = Option.getOrElse(yield* Effect.serviceOption(SmartSecrets), generatedSecrets)
      const smart = yield* Smart.make(config, config.server.public_url ?? listenUrl(address), secrets).pipe(
        Effect.provide(services),
        Scope.extend(databaseScope)
      )
      for (const [path, handler] of Object.entries(smart.routes)) rootHandlers[path] = served(handler, services)
      door.install({ policies: smart.policies, listeners: [], resolve: smart.resolve, settle: smart.settle })
      syncTokens = smart.syncTokens
    }
    // Subscriptions follow the change feed from here on; their sockets are served at /ws (docs/subscriptions.md).
    // On a replica neither: the primary delivers every notification, and the replica relays /ws to it.
    const subscribing = yield* Layer.buildWithScope(
      (replica
        ? SubscriptionSockets.layer
        : Layer.provideMerge(
          Subscriptions.layer({ base: `${(config.server.public_url ?? listenUrl(address)).replace(/\/+$/, "")}${basePath}` }),
          SubscriptionSockets.layer
        )).pipe(Layer.provide(Layer.succeedContext(services))),
      databaseScope
    )
    const subscriptionsSettled = Option.match(Context.getOption(subscribing as Context.Context<unknown>, Subscriptions.Subscriptions), {
      onNone: () => Effect.void,
      onSome: (subscriptions) => subscriptions.settled
    })
    rootHandlers["/ws"] = served(SubscriptionSockets.handler, subscribing)
    // Live queries follow the change feed from here on (docs/sync.md).
    const live = yield* Layer.buildWithScope(SyncEngine.layer.pipe(Layer.provide(Layer.succeedContext(services))), databaseScope)
    // Its connections at /sync, closed (1001) before the engine stops.
    const syncing = yield* Layer.buildWithScope(
      SyncSockets.layer.pipe(Layer.provide(Layer.succeedContext(Context.merge(services, live).pipe(
        Context.add(Door, door),
        syncTokens === undefined ? (context) => context : Context.add(SyncTokens, syncTokens)
      )))),
      databaseScope
    )
    rootHandlers["/sync"] = served(SyncSockets.handler, syncing)
    const app = routeByPrefix(fhir.pipe(Effect.provide(services)), rootHandlers)
    // The terminology sources, pulled by the process that writes the database: at start, then on their schedule.
    const terminology = replica || config.terminology.urls.length === 0 ? undefined : yield* TerminologyPull.start({
      urls: config.terminology.urls,
      refresh: Duration.minutes(config.terminology.refresh_minutes),
      base: `${(config.server.public_url ?? listenUrl(address)).replace(/\/+$/, "")}${basePath}`,
      maxBundleEntries: config.server.max_bundle_entries
    }).pipe(Effect.provide(services), Scope.extend(databaseScope))

    // A full garbage collection when the server falls idle, so that memory an ingest grew goes back.
    const idle = { collections: 0, releases: 0 }
    yield* Effect.forkIn(runIdleCollect(processProbes(), idleCollectOptions, idle), databaseScope)
    const probe = yield* cachedProbe(db.probe)
    // Reads and searches answered by the fast path on SQLite (src/rest/fastRead.ts), shown by `/healthz?verbose=1`.
    const fastCounts: FastCounts = { reads: 0, searches: 0 }
    // The primary, the only process that writes resources, keeps the current versions read by id in memory
    // (src/rest/readCache.ts); a replica reads the database.
    const readCache = config.database.kind === "postgres" && !replica ? new ReadCache() : undefined
    // And the rows of its searches while nothing changes (src/rest/searchCache.ts).
    const searchCache = readCache === undefined ? undefined : new SearchCache()
    yield* Ref.set(slot, Option.some(app))
    const details = Effect.gen(function*() {
      const current = yield* catalogService.get
      return {
        database: yield* db.stats,
        commits: { since_start: yield* writer.commits, last_commit_ts: yield* writer.lastCommitTs },
        ...(held === undefined ? {} : { lease: { holder: held.holder, epoch: held.epoch, watermark: yield* feed.published } }),
        ...(replica ? { following: yield* followingDetails(db, feed) } : {}),
        catalog: { generation: current.generation, resource_types: current.resourceTypes.length },
        search_index: progressDetails(yield* backfill.progress),
        ...(terminology === undefined ? {} : { terminology: yield* terminology }),
        ...(config.database.kind === "memory" ? {} : { fast_path: { ...fastCounts, ...(readCache === undefined ? {} : { read_cache: { ...readCache.size, hits: readCache.hits, misses: readCache.misses } }),
          ...(searchCache === undefined ? {} : { search_cache: { ...searchCache.size, hits: searchCache.hits, misses: searchCache.misses } }) } }),
        memory: { rss_bytes: process.memoryUsage.rss(), heap_used_bytes: v8.getHeapStatistics().used_heap_size, idle_collections: idle.collections, native_releases: idle.releases }
      }
    })
    yield* readiness.serving(probe, details)
    if (config.database.kind === "sqlite") {
      // The request id, caller and log line of what it answers are the front door's (src/http/FrontDoor.ts).
      const options = {
        sqlitePath: config.database.sqlite_path,
        publicUrl: config.server.public_url,
        maxPageBytes: config.server.max_page_bytes,
        sql: db.writer,
        counts: fastCounts
      }
      yield* installFastRead(fast, options, databaseScope).pipe(Effect.provide(services))
    } else if (db.pgPool !== undefined) {
      // Reads by id and searches on Postgres (src/rest/fastPg.ts), on the server's own pool.
      const options = {
        pool: db.pgPool,
        sql: db.writer,
        publicUrl: config.server.public_url,
        maxPageBytes: config.server.max_page_bytes,
        counts: fastCounts,
        cache: readCache,
        searches: searchCache
      }
      yield* installFastPg(fast, options, databaseScope).pipe(Effect.provide(services))
    }
    yield* Effect.logInfo("serving", { database: config.database.kind })
    const started: Started = {
      address,
      searchIndexed: Context.get(services, CatalogReload).settled,
      changeFeed: Context.get(services, ChangeFeed),
      subscriptionSockets: Context.get(subscribing, SubscriptionSockets.SubscriptionSockets),
      subscriptionsSettled,
      liveQueries: Context.get(live, LiveQueries),
      leaseLost: held?.lost ?? Effect.never
    }
    return started
  })
