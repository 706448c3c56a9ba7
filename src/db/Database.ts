/**
 * The database: one writer plus reader connections (ARCHITECTURE.md, Storage).
 * SQLite file: one writer connection and `pool` read-only connections on the same file in WAL mode,
 * so reads go on during a long write transaction. Memory: the writer serves reads too, since separate
 * in-memory connections do not share data. Postgres: one pool of `pool` connections for both.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as SqlClient from "@effect/sql/SqlClient"
import { Context, Effect, Layer, Queue, Ref, type Scope } from "effect"
import * as Path from "node:path"
import type pg from "pg"
import { causeText, DatabaseError, DatabaseOpenError } from "./errors.ts"
import { openPostgres } from "./postgresOpen.ts"
import { maskUrl } from "./postgresTls.ts"
import { openSqlite } from "./sqliteOpen.ts"

export interface DatabaseOptions {
  readonly kind: "sqlite" | "memory" | "postgres"
  readonly sqlitePath: string
  readonly postgresUrl?: string | undefined
  /** SQLite: reader connections next to the one writer; Postgres: pool size. */
  readonly pool: number
  /** Postgres: the most one statement may run (`statement_timeout`), in ms; 0 or unset sets none. */
  readonly statementTimeoutMs?: number | undefined
  /**
   * Postgres: the longest a connection may stay idle inside a transaction before the database ends its session
   * (`idle_in_transaction_session_timeout`), in ms; 0 or unset sets none. The writer lease's length: a process
   * paused inside a write transaction cannot keep a standby from taking over (PostgresLease.ts).
   */
  readonly idleInTransactionMs?: number | undefined
}

export type Dialect = "sqlite" | "pg"

export interface DatabaseStats {
  readonly kind: DatabaseOptions["kind"]
  readonly dialect: Dialect
  /** Where the database is, redacted for `/healthz?verbose=1` (`databaseLocation`). */
  readonly location: string
  /** The configured `cluster.db_pool`. */
  readonly pool: number
  /** Connections open for reads now (memory: 0, reads share the writer). */
  readonly readers: number
  readonly idleReaders: number
  /** Reads waiting for a free connection. */
  readonly waiting: number
  /** Postgres: whether the connections use TLS. */
  readonly tls: boolean
}

export class Database extends Context.Tag("svc/db/Database")<Database, {
  readonly kind: DatabaseOptions["kind"]
  readonly dialect: Dialect
  /** The database as shown to users (any password masked). */
  readonly name: string
  /** SQLite: the one writer connection; Postgres: the pool. */
  readonly writer: SqlClient.SqlClient
  /**
   * Runs `f` with a reader connection. Inside a writer transaction of the same fiber the queries
   * still go to that transaction's connection (the SQL client's rule), so they see its writes.
   */
  readonly withReader: <A, E, R>(f: (sql: SqlClient.SqlClient) => Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** A one-row query on a reader. */
  readonly probe: Effect.Effect<void, DatabaseError>
  readonly stats: Effect.Effect<DatabaseStats>
  /** Postgres: the pool itself, for the fast read (src/rest/fastPg.ts), which runs its statement outside any fiber. */
  readonly pgPool?: pg.Pool
}>() {}

/** The database named the way messages show it, with any Postgres password masked. */
export const describeDatabase = (options: DatabaseOptions): string => {
  switch (options.kind) {
    case "memory":
      return "in-memory SQLite"
    case "sqlite":
      return `SQLite file ${options.sqlitePath}`
    case "postgres":
      return options.postgresUrl === undefined ? "Postgres" : maskUrl(options.postgresUrl)
  }
}

/**
 * Where the database is, as `/healthz?verbose=1` shows it to whoever may read it: `memory`, a SQLite
 * file's name without its directory, or a Postgres server's host, port and database name (never the
 * user, the password or the connection parameters, which may name key files).
 */
export const databaseLocation = (options: DatabaseOptions): string => {
  switch (options.kind) {
    case "memory":
      return "memory"
    case "sqlite":
      return Path.basename(options.sqlitePath)
    case "postgres": {
      try {
        const url = new URL(options.postgresUrl ?? "")
        const database = decodeURIComponent(url.pathname.replace(/^\//, ""))
        const host = url.hostname === "" ? (url.searchParams.get("host") ?? "") : url.host
        return `${host}/${database}`
      } catch {
        return "postgres"
      }
    }
  }
}

const dialectOf = (kind: DatabaseOptions["kind"]): Dialect => (kind === "postgres" ? "pg" : "sqlite")

/** A fixed set of reader connections handed out one fiber at a time. */
const readerPool = (readers: ReadonlyArray<SqlClient.SqlClient>) =>
  Effect.gen(function*() {
    const idle = yield* Queue.bounded<SqlClient.SqlClient>(Math.max(1, readers.length))
    yield* Queue.offerAll(idle, readers)
    const waiting = yield* Ref.make(0)
    const withReader = <A, E, R>(f: (sql: SqlClient.SqlClient) => Effect.Effect<A, E, R>) =>
      Effect.uninterruptibleMask((restore) =>
        Ref.update(waiting, (n) => n + 1).pipe(
          Effect.zipRight(restore(Queue.take(idle)).pipe(Effect.ensuring(Ref.update(waiting, (n) => n - 1)))),
          Effect.flatMap((sql) => restore(f(sql)).pipe(Effect.ensuring(Queue.offer(idle, sql))))
        )
      )
    return { withReader, idle: Queue.size(idle), waiting: Ref.get(waiting) }
  })

const probeWith = (withReader: Database["Type"]["withReader"]) =>
  Effect.fn("Database.probe")(function*() {
    yield* withReader((sql) => sql`SELECT 1 AS ok`).pipe(
      Effect.mapError((error) => new DatabaseError({ operation: "probe", reason: causeText(error) }))
    )
  })

/** Opens the database; fails fast with a `DatabaseOpenError` naming the database and the cause. */
export const make = (
  options: DatabaseOptions
): Effect.Effect<Database["Type"], DatabaseOpenError, Scope.Scope | Reactivity.Reactivity> =>
  Effect.gen(function*() {
    const name = describeDatabase(options)
    const common = { kind: options.kind, dialect: dialectOf(options.kind), name }
    const statsBase = { kind: options.kind, dialect: common.dialect, location: databaseLocation(options), pool: options.pool }
    switch (options.kind) {
      case "memory": {
        const writer = yield* openSqlite({ filename: ":memory:", database: name, readonly: false })
        const withReader: Database["Type"]["withReader"] = (f) => f(writer)
        const stats = Effect.succeed({ ...statsBase, readers: 0, idleReaders: 0, waiting: 0, tls: false })
        return { ...common, writer, withReader, probe: probeWith(withReader)(), stats }
      }
      case "sqlite": {
        // The writer first: it creates the file and switches it to WAL before the readers open it.
        const writer = yield* openSqlite({ filename: options.sqlitePath, database: name, readonly: false })
        const readers = yield* Effect.forEach(
          Array.from({ length: Math.max(1, options.pool) }),
          () => openSqlite({ filename: options.sqlitePath, database: name, readonly: true })
        )
        const pool = yield* readerPool(readers)
        const stats = Effect.map(
          Effect.all([pool.idle, pool.waiting]),
          ([idleReaders, waiting]) => ({ ...statsBase, readers: readers.length, idleReaders, waiting, tls: false })
        )
        return { ...common, writer, withReader: pool.withReader, probe: probeWith(pool.withReader)(), stats }
      }
      case "postgres": {
        if (options.postgresUrl === undefined || options.postgresUrl === "") {
          return yield* new DatabaseOpenError({ database: name, reason: "no Postgres URL is configured" })
        }
        const opened = yield* openPostgres({ url: options.postgresUrl, pool: Math.max(1, options.pool), statementTimeoutMs: options.statementTimeoutMs, idleInTransactionMs: options.idleInTransactionMs })
        const writer: SqlClient.SqlClient = opened.client
        const withReader: Database["Type"]["withReader"] = (f) => f(writer)
        const stats = Effect.sync(() => ({
          ...statsBase,
          readers: opened.pool.totalCount,
          idleReaders: opened.pool.idleCount,
          waiting: opened.pool.waitingCount,
          tls: opened.tls
        }))
        return { ...common, writer, withReader, probe: probeWith(withReader)(), stats, pgPool: opened.pool }
      }
    }
  })

/** The Database and, for code that only needs SQL, `SqlClient.SqlClient` (the writer). */
export const layer = (options: DatabaseOptions): Layer.Layer<Database | SqlClient.SqlClient, DatabaseOpenError> =>
  Layer.scopedContext(
    Effect.map(make(options), (db) => Context.make(Database, db).pipe(Context.add(SqlClient.SqlClient, db.writer)))
  ).pipe(Layer.provide(Reactivity.layer))
