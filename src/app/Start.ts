/**
 * Start-up (spec: Readiness of a process): listen first, then open the database and apply
 * migrations while `/readyz` says which step is running, then serve. On SIGTERM/SIGINT the
 * server drains (src/http/Server.ts: in-flight requests finish, within a bound) before the database closes.
 */
import { Context, Effect, Exit, Layer, Option, Ref, Scope } from "effect"
import v8 from "node:v8"
import type { AppConfig } from "../config/AppConfig.ts"
import { Database, layer as databaseLayer } from "../db/Database.ts"
import { checkMigrated, migrate, migratesAtStart } from "../db/Migrations.ts"
import * as ProcessLock from "../db/ProcessLock.ts"
import { CatalogService, layer as catalogLayer } from "../catalog/CatalogService.ts"
import { CatalogReload, layer as catalogReloadLayer } from "../search/CatalogReload.ts"
import { Backfill, layer as backfillLayer, progressDetails } from "../search/Backfill.ts"
import { layer as fetcherLayer, optionsFromConfig } from "../packages/Fetcher.ts"
import { layer as writerLayer, Writer } from "../store/Writer.ts"
import { alwaysHeld } from "../store/WriterLease.ts"
import { ChangeFeed } from "../store/ChangeFeed.ts"
import { layer as statisticsLayer } from "../search/Statistics.ts"
import { indexForSearch, prepareConformance } from "./Conformance.ts"
import { defaultOptions as idleCollectOptions, processProbes, run as runIdleCollect } from "./IdleCollect.ts"
import { makePeerList } from "../http/ClientAddress.ts"
import { cachedProbe, Readiness, Reasons } from "../http/Readiness.ts"
import { type HttpServer, HttpServerRequest, type HttpServerResponse } from "@effect/platform"
import * as RootRoutes from "../http/RootRoutes.ts"
import { type EdgeOptions, listen, type ListenOptions, ServingApp } from "../http/Server.ts"
import { type FastCounts, installFastRead } from "../rest/fastRead.ts"
import * as FhirApp from "../rest/FhirApp.ts"
import { basePath, RestSettings } from "../rest/Rest.ts"
import { layer as resourceStoreLayer, StoreSettings } from "../store/ResourceStore.ts"
import { parseBind } from "../config/Setting.ts"

export const edgeOptions = (config: AppConfig): EdgeOptions => ({
  role: config.cluster.role,
  trusted: { hops: config.server.trusted_proxy_hops, peers: makePeerList(config.server.trusted_proxy_peers) },
  requestLog: config.request_log.enabled,
  maxBodyBytes: config.server.max_body_bytes
})

export const databaseOptions = (config: AppConfig) => ({
  kind: config.database.kind,
  sqlitePath: config.database.sqlite_path,
  postgresUrl: config.database.postgres_url,
  pool: config.cluster.db_pool,
  statementTimeoutMs: config.database.statement_timeout_ms
})

/** The listen address of `server.bind` (validated by the configuration), IPv6 without brackets. */
const listenAddress = (bind: string): ListenOptions => {
  const parsed = parseBind(bind) ?? { host: bind, port: Number.NaN }
  return { host: parsed.host.replace(/^\[(.*)\]$/, "$1"), port: parsed.port }
}

/** FHIR paths go to the FHIR app; every other path to the root route table (a 404 OperationOutcome where it has none). */
const routeByPrefix = <E>(fhir: Effect.Effect<HttpServerResponse.HttpServerResponse, E, HttpServerRequest.HttpServerRequest>) => {
  const root = RootRoutes.app(RootRoutes.rootRoutes)
  return Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
    request.url === basePath || request.url.startsWith(`${basePath}/`) || request.url.startsWith(`${basePath}?`) ? fhir : root)
}

export interface Started {
  readonly address: HttpServer.Address
  /** Waits until every change committed so far has reached the catalog and the search index. */
  readonly searchIndexed: Effect.Effect<void>
  /** The change feed of the process's commits. */
  readonly changeFeed: ChangeFeed["Type"]
}

/** Runs the server until interrupted; fails when listening, opening or migrating fails. */
export const start = (config: AppConfig) =>
  Effect.gen(function*() {
    const readiness = yield* Readiness
    const slot = yield* ServingApp
    // Registered before the server exists, so it closes after the server has drained.
    const databaseScope = yield* Scope.make()
    yield* Effect.addFinalizer(() => Scope.close(databaseScope, Exit.void))

    const { address, fast } = yield* listen(listenAddress(config.server.bind), edgeOptions(config))
    // Registered after the server, so it runs before the server drains: from then on every request is a 503.
    yield* Effect.addFinalizer(() => readiness.stopping)
    yield* Effect.logInfo("listening", address._tag === "TcpAddress" ? { host: address.hostname, port: address.port } : { path: address.path })

    yield* readiness.starting(Reasons.openingDatabase)
    const database = yield* Layer.buildWithScope(databaseLayer(databaseOptions(config)), databaseScope)
    const db = Context.get(database, Database)
    // Opened (with its own plain errors) but not yet read or written: a second process on the database stops here (exit status 3).
    yield* ProcessLock.acquire(databaseOptions(config)).pipe(Scope.extend(databaseScope))
    // Only the process that writes migrates; another checks that it has (spec: Versioning).
    yield* readiness.starting(Reasons.migrating)
    yield* (migratesAtStart(config.cluster.role) ? Effect.asVoid(migrate({ fhirVersion: config.fhir.version })) : checkMigrated({ fhirVersion: config.fhir.version })).pipe(
      Effect.provide(database)
    )
    // The process lock above makes this process the only writer of its database: its lease is always held.
    const store = yield* Layer.buildWithScope(
      Layer.provideMerge(writerLayer, Layer.merge(Layer.succeedContext(database), alwaysHeld)),
      databaseScope
    )
    const writer = Context.get(store, Writer)

    const catalog = yield* prepareConformance({
      fhirVersion: config.fhir.version,
      packages: config.conformance.packages
    }).pipe(Effect.provide(fetcherLayer(optionsFromConfig(config.conformance))), Effect.provide(store))
    const catalogContext = yield* Layer.buildWithScope(catalogLayer(catalog), databaseScope)
    const indexing = yield* Layer.buildWithScope(Layer.provide(backfillLayer(), Layer.succeedContext(store)), databaseScope)
    const backfill = Context.get(indexing, Backfill)
    yield* indexForSearch(catalog).pipe(Effect.provide(indexing))
    // After the first indexing, so that its first refresh sees the index it plans searches over.
    yield* Layer.buildWithScope(Layer.provide(statisticsLayer(), Layer.succeedContext(Context.merge(store, indexing))), databaseScope)
    const reload = yield* Layer.buildWithScope(
      Layer.provide(catalogReloadLayer(), Layer.succeedContext(Context.mergeAll(store, catalogContext, indexing))),
      databaseScope
    )
    const services = Context.mergeAll(store, catalogContext, indexing).pipe(
      Context.add(RestSettings, { publicUrl: config.server.public_url }),
      Context.add(StoreSettings, {
        updateAsCreate: config.conformance.update_as_create,
        referencePolicy: config.conformance.reference_policy,
        allowedExtensionDomains: config.validation.allowed_extension_domains,
        allowExampleUrls: config.validation.allow_example_urls,
        vitalSigns: config.validation.vital_signs,
        maxIndexRows: config.server.max_index_rows,
        maxPatchOperations: config.server.max_patch_operations
      })
    )
    const storeContext = yield* Layer.buildWithScope(Layer.provide(resourceStoreLayer, Layer.succeedContext(services)), databaseScope)
    const withStore = Context.merge(services, storeContext)
    const fhir = yield* FhirApp.make({
      maxBodyBytes: config.server.max_body_bytes,
      maxBundleEntries: config.server.max_bundle_entries,
      maxPageBytes: config.server.max_page_bytes
    }).pipe(Effect.provide(withStore))
    const app = routeByPrefix(fhir.pipe(Effect.provide(withStore)))

    // A full garbage collection when the server falls idle, so that memory an ingest grew goes back.
    const idle = { collections: 0, releases: 0 }
    yield* Effect.forkIn(runIdleCollect(processProbes(), idleCollectOptions, idle), databaseScope)
    const probe = yield* cachedProbe(db.probe)
    // Reads and searches answered by the fast path on SQLite (src/rest/fastRead.ts), shown by `/healthz?verbose=1`.
    const fastCounts: FastCounts = { reads: 0, searches: 0 }
    yield* Ref.set(slot, Option.some(app))
    const details = Effect.gen(function*() {
      const current = yield* Context.get(catalogContext, CatalogService).get
      return {
        database: yield* db.stats,
        commits: { since_start: yield* writer.commits, last_commit_ts: yield* writer.lastCommitTs },
        catalog: { generation: current.generation, resource_types: current.resourceTypes.length },
        search_index: progressDetails(yield* backfill.progress),
        ...(config.database.kind === "sqlite" ? { fast_path: { ...fastCounts } } : {}),
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
    }
    yield* Effect.logInfo("serving", { database: config.database.kind })
    const started: Started = { address, searchIndexed: Context.get(reload, CatalogReload).settled, changeFeed: Context.get(store, ChangeFeed) }
    return started
  })
