/**
 * Start-up as one layer graph (ARCHITECTURE.md, "Shape"): the services a process serves with, each built
 * from the ones below it, in the order `/readyz` reports (spec: Readiness of a process): the database is
 * opened and locked, migrated (by the process that writes; another checks it is), the Writer and the
 * ResourceStore are made, the packages installed and the catalog built, the search index brought up to
 * date, then the planner statistics and the catalog reload follow the change feed; the `$operations` are served
 * with these services, and governance (src/governance/) adds its rules to the front door.
 *
 * The graph reads the configuration only through its sections, each a Tag of the module that reads it
 * (`configLayer` makes them from an AppConfig); the writer lease is an input too. A test gives its own
 * section or lease in their place.
 */
import { Context, Duration, Effect, Layer, Schedule } from "effect"
import type { AppConfig } from "../config/AppConfig.ts"
import { Database, type DatabaseOptions, layer as databaseLayer } from "../db/Database.ts"
import { checkMigrated, migrate, migratesAtStart } from "../db/Migrations.ts"
import * as ProcessLock from "../db/ProcessLock.ts"
import { CatalogService, layer as catalogLayer } from "../catalog/CatalogService.ts"
import { Readiness, Reasons } from "../http/Readiness.ts"
import { layer as fetcherLayer, optionsFromConfig, type PackageFetcher } from "../packages/Fetcher.ts"
import { layer as operationsLayer } from "../operations/registry.ts"
import { RestSettings } from "../rest/Rest.ts"
import { layer as backfillLayer } from "../search/Backfill.ts"
import { layer as catalogReloadLayer } from "../search/CatalogReload.ts"
import { layer as statisticsLayer } from "../search/Statistics.ts"
import { layer as resourceStoreLayer, StoreSettings } from "../store/ResourceStore.ts"
import { layer as writerLayer } from "../db/Writer.ts"
import { alwaysHeld, replicaLease, WriterLease } from "../db/WriterLease.ts"
import { PollingStatus } from "../db/ChangeFeed.ts"
import { followerLayer } from "../db/Writer.ts"
import { followerLayer as backfillFollower } from "../search/Backfill.ts"
import * as PostgresLease from "../db/PostgresLease.ts"
import { randomBytes } from "node:crypto"
import * as Os from "node:os"
import { awaitConformance, indexForSearch, prepareConformance } from "./Conformance.ts"
import { GovernanceSettings, layer as governanceLayer, settingsOf as governanceSettingsOf } from "../governance/Governance.ts"
import { AuditKey, commitHookLayer, noAuditKey } from "../governance/audit/AuditTrail.ts"
import { ExportSettings, layer as exportsLayer, replicaLayer as replicaExports } from "../export/Exports.ts"

/** `database.*` and `cluster.db_pool`: what the database is and how it is opened. */
export class DatabaseSettings extends Context.Tag("svc/app/DatabaseSettings")<DatabaseSettings, DatabaseOptions>() {}

/** `cluster.*`: the process's role and the writer lease's length (docs/cluster.md). */
export class ClusterSettings extends Context.Tag("svc/app/ClusterSettings")<ClusterSettings, {
  readonly role: "primary" | "standby" | "replica"
  readonly leaseSeconds: number
}>() {}

/** The writer lease this process holds on Postgres: its epoch, and what fails once another process takes it. */
export class HeldWriterLease extends Context.Tag("svc/app/HeldWriterLease")<HeldWriterLease, PostgresLease.HeldLease>() {}

/** `fhir.version` and `conformance.packages`: what the catalog is built from. */
export class ConformanceSettings extends Context.Tag("svc/app/ConformanceSettings")<ConformanceSettings, {
  readonly fhirVersion: string
  readonly packages: ReadonlyArray<string>
}>() {}

export const databaseOptions = (config: AppConfig): DatabaseOptions => ({
  kind: config.database.kind,
  sqlitePath: config.database.sqlite_path,
  postgresUrl: config.database.postgres_url,
  pool: config.cluster.db_pool,
  statementTimeoutMs: config.database.statement_timeout_ms,
  idleInTransactionMs: config.cluster.lease_seconds * 1000
})

/** `export.*`, and where the files go by default (src/export/Exports.ts). */
export const exportOptions = (config: AppConfig): ExportSettings["Type"] => ({
  dir: config.export.dir,
  maxFileBytes: config.export.max_file_bytes,
  kind: config.database.kind,
  sqlitePath: config.database.sqlite_path,
  databaseName: config.database.postgres_url === undefined || !URL.canParse(config.database.postgres_url)
    ? undefined
    : decodeURIComponent(new URL(config.database.postgres_url).pathname.slice(1)) || undefined,
  works: config.cluster.role !== "replica"
})

/**
 * The export service of a process that writes: its jobs worked on under this process's writer lease (its holder
 * and epoch on Postgres).
 */
const exportsOfWriter = Layer.unwrapEffect(Effect.gen(function*() {
  const settings = yield* ExportSettings
  const held = yield* Effect.serviceOption(HeldWriterLease)
  const lease = held._tag === "Some" ? { holder: held.value.holder, epoch: held.value.epoch } : undefined
  return Layer.provide(exportsLayer, Layer.succeed(ExportSettings, { ...settings, works: true, lease }))
}))

/** The sections of `config` the graph reads, and the package fetcher its `conformance.*` settings make. */
export const configLayer = (
  config: AppConfig
): Layer.Layer<DatabaseSettings | ClusterSettings | ConformanceSettings | StoreSettings | RestSettings | GovernanceSettings | ExportSettings | PackageFetcher> =>
  Layer.mergeAll(
    Layer.succeed(DatabaseSettings, databaseOptions(config)),
    Layer.succeed(ClusterSettings, { role: config.cluster.role, leaseSeconds: config.cluster.lease_seconds }),
    Layer.succeed(ConformanceSettings, { fhirVersion: config.fhir.version, packages: config.conformance.packages }),
    Layer.succeed(StoreSettings, {
      updateAsCreate: config.conformance.update_as_create,
      referencePolicy: config.conformance.reference_policy,
      allowedExtensionDomains: config.validation.allowed_extension_domains,
      allowExampleUrls: config.validation.allow_example_urls,
      vitalSigns: config.validation.vital_signs,
      maxIndexRows: config.server.max_index_rows,
      maxPatchOperations: config.server.max_patch_operations
    }),
    Layer.succeed(RestSettings, { publicUrl: config.server.public_url }),
    Layer.succeed(GovernanceSettings, governanceSettingsOf(config)),
    Layer.succeed(ExportSettings, exportOptions(config)),
    fetcherLayer(optionsFromConfig(config.conformance))
  )

/** This process, as the writer lease names its holder: host, process id and a random part. */
const holderName = () => `${Os.hostname()}:${process.pid}:${randomBytes(3).toString("hex")}`

/**
 * The writer lease on Postgres (PostgresLease.ts), taken before anything else: a primary takes it or stops
 * (another holds it: exit status 3), a standby waits for it, reported as starting; either is the primary
 * from then on. Every write transaction checks it (WriterLease). An input of the graph, like SQLite's
 * `alwaysHeld`, so that a test may give its own check in its place.
 */
export const postgresLease = Layer.scopedContext(Effect.gen(function*() {
  const options = yield* DatabaseSettings
  const cluster = yield* ClusterSettings
  const readiness = yield* Readiness
  const standby = cluster.role === "standby"
  yield* readiness.setRole(standby ? "standby" : "primary")
  if (standby) yield* readiness.starting(Reasons.waitingForLease)
  const held = yield* PostgresLease.acquire({
    url: options.postgresUrl ?? "",
    times: PostgresLease.leaseTimes(cluster.leaseSeconds),
    holder: holderName(),
    wait: standby,
    onHeld: (holder, secondsLeft) =>
      readiness.starting(Reasons.waitingForLease, Effect.succeed({ lease: { holder, seconds_left: Math.ceil(secondsLeft) } }))
  })
  yield* readiness.setRole("primary")
  yield* readiness.starting(Reasons.openingDatabase)
  return Context.make(HeldWriterLease, held).pipe(Context.add(WriterLease, held.writerLease))
}))

/**
 * The database, opened for this process: a SQLite file locked (a second process on it stops here: exit status
 * 3); Postgres once the writer lease is held (`postgresLease`).
 */
const database = Layer.unwrapEffect(Effect.gen(function*() {
  const options = yield* DatabaseSettings
  const readiness = yield* Readiness
  yield* readiness.starting(Reasons.openingDatabase)
  // On Postgres the writer lease, an input, was taken before.
  if (options.kind === "postgres") return databaseLayer(options)
  return Layer.provideMerge(Layer.scopedDiscard(ProcessLock.acquire(options)), databaseLayer(options))
}))

/** Migrations: applied by a process that will write, checked by one that will not (spec: Versioning). */
const migrated = (role: string) =>
  Layer.effectDiscard(Effect.gen(function*() {
    const { fhirVersion } = yield* ConformanceSettings
    yield* (yield* Readiness).starting(Reasons.migrating)
    yield* migratesAtStart(role) ? Effect.asVoid(migrate({ fhirVersion })) : checkMigrated({ fhirVersion })
  }))

/** The catalog of the installed packages (those configured and missing installed first). */
const catalog = Layer.unwrapEffect(Effect.map(
  Effect.flatMap(ConformanceSettings, (settings) => prepareConformance(settings)),
  (built) => catalogLayer(built)
))

/** The search index brought up to date with the catalog before serving (spec: Readiness, "search indexes backfilled"). */
const indexed = Layer.effectDiscard(Effect.flatMap(Effect.flatMap(CatalogService, (service) => service.get), indexForSearch))

/**
 * The graph of a process that writes its database (the primary): every service the FHIR app and the fast
 * handlers are served with, built in start-up's order. Inputs: the configuration's sections, the writer lease
 * and the readiness reporter.
 */
const writerGraph = (role: string) => {
  const opened = Layer.provideMerge(migrated(role), database)
  // The Writer appends a change's audit rows in the change's transaction: its hook is made from the settings
  // and the chain's key (src/governance/audit/AuditTrail.ts).
  const writing = Layer.provide(writerLayer, commitHookLayer)
  const store = Layer.provideMerge(Layer.provideMerge(resourceStoreLayer, writing), opened)
  const catalogued = Layer.provideMerge(catalog, store)
  const indexing = Layer.provideMerge(Layer.provideMerge(indexed, backfillLayer()), catalogued)
  // After the first indexing, so that the statistics' first refresh sees the index it plans searches over.
  const following = Layer.provideMerge(Layer.merge(statisticsLayer(), catalogReloadLayer()), indexing)
  // Governance (metering, the request log, audit, limits) is installed on the front door once these are built.
  return Layer.provideMerge(Layer.merge(operationsLayer, governanceLayer), Layer.provideMerge(exportsOfWriter, following))
}

/** A replica polls the database's change log this often (docs/cluster.md). */
export const replicaPollInterval = Duration.millis(100)
/** A replica whose last read of the log is older than this is not following: `/readyz` answers unavailable. */
export const replicaStalledAfter = Duration.seconds(5)

/** A replica's migrations: checked, and waited for while the database lacks only this build's (its primary applies them). */
const awaitMigrated = Layer.effectDiscard(Effect.gen(function*() {
  const { fhirVersion } = yield* ConformanceSettings
  yield* (yield* Readiness).starting(Reasons.waitingForPrimary)
  yield* checkMigrated({ fhirVersion }).pipe(
    Effect.tapError((error) =>
      error._tag === "MigrationRefused" && error.pendingOnly ? Effect.logInfo("replica: waiting for the primary to migrate the database", { reason: error.reason }) : Effect.void
    ),
    Effect.retry({ while: (error) => error._tag === "MigrationRefused" && error.pendingOnly, schedule: Schedule.spaced(Duration.seconds(1)) })
  )
}))

/** A replica's catalog: built once the primary has installed the packages (it installs none). */
const awaitedCatalog = Layer.unwrapEffect(Effect.map(
  Effect.flatMap(ConformanceSettings, (settings) => awaitConformance(settings, Duration.seconds(1))),
  (built) => catalogLayer(built)
))

/**
 * A replica follows its primary: `/readyz` answers unavailable when it stopped reading the log, or when no primary
 * holds a live writer lease (the primary is gone and no standby has taken over: writes cannot be forwarded, and
 * nothing new will come). The lease is looked at every second.
 */
const followingRequired = Layer.scopedDiscard(Effect.gen(function*() {
  const status = yield* PollingStatus
  const readiness = yield* Readiness
  const db = yield* Database
  const clock = yield* Effect.clock
  const stalled = Duration.toMillis(replicaStalledAfter)
  let primary = true
  yield* PostgresLease.primaryLive(db.writer).pipe(
    Effect.orElseSucceed(() => false),
    Effect.tap((live) =>
      live === primary
        ? Effect.void
        : Effect.zipRight(
          Effect.sync(() => void (primary = live)),
          live ? Effect.logInfo("a primary holds the writer lease again: following it") : Effect.logWarning("no primary holds the writer lease: this replica is unavailable until one does")
        )
    ),
    Effect.repeat(Schedule.spaced(Duration.seconds(1))),
    Effect.forkScoped
  )
  yield* readiness.require(() => {
    const reading = clock.unsafeCurrentTimeMillis() - status.lastRead() <= stalled
    return reading && primary ? undefined : Reasons.notFollowing
  })
}))

/**
 * The graph of a replica (docs/cluster.md): the database opened without a lock or lease, the migrations and the
 * primary's packages waited for, a Writer that commits only what changes no resource, the change feed read from
 * the database's log, no backfill; the catalog reload, the planner statistics, the operations and governance as
 * on the primary.
 */
const replicaGraph = () => {
  const opened = Layer.provideMerge(awaitMigrated, database)
  const writing = Layer.provide(followerLayer({ interval: replicaPollInterval }), commitHookLayer)
  const store = Layer.provideMerge(Layer.provideMerge(resourceStoreLayer, writing), opened)
  const catalogued = Layer.provideMerge(awaitedCatalog, store)
  const indexing = Layer.provideMerge(Layer.merge(backfillFollower, followingRequired), catalogued)
  const following = Layer.provideMerge(Layer.merge(statisticsLayer(), catalogReloadLayer()), indexing)
  return Layer.provideMerge(Layer.merge(operationsLayer, governanceLayer), Layer.provideMerge(replicaExports, following))
}

/**
 * The services of a process of `role`: the primary's graph for a primary and a standby (which builds it once it
 * holds the writer lease), the replica's for a replica.
 */
export const AppLayer = (role: ClusterSettings["Type"]["role"]) => (role === "replica" ? replicaGraph() : writerGraph(role))

/**
 * The graph of `config.cluster.role` with the configuration's sections and the lease of a process that alone
 * writes its database; `overrides` (a test's) takes the place of any of these inputs.
 */
export const appLayerOf = <O extends AppInput = never, E = never>(config: AppConfig, overrides?: Layer.Layer<O, E>) => {
  const settings = configLayer(config)
  // The writer lease first: on Postgres it decides whether this process may go on (and migrate).
  const lease = config.cluster.role === "replica"
    ? replicaLease
    : config.database.kind === "postgres"
    ? Layer.provide(postgresLease, settings)
    : alwaysHeld
  const inputs = Layer.mergeAll(settings, lease, noAuditKey)
  return AppLayer(config.cluster.role).pipe(Layer.provideMerge(overrides === undefined ? inputs : Layer.merge(inputs, overrides)))
}

/** What the graph is built from besides the readiness reporter: any of these a test may give its own. */
export type AppInput = DatabaseSettings | ClusterSettings | HeldWriterLease | ConformanceSettings | StoreSettings | RestSettings | GovernanceSettings | ExportSettings | PackageFetcher | WriterLease | AuditKey

export type { Database }
