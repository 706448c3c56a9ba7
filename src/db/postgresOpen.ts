/** Opening a node-postgres pool that fails fast, with its TLS settings applied. */
import type * as Reactivity from "@effect/experimental/Reactivity"
import * as PgClient from "@effect/sql-pg/PgClient"
import { Cause, Duration, Effect, Either, type Scope } from "effect"
import pg from "pg"
import type * as Tls from "node:tls"
import { causeText, DatabaseOpenError } from "./errors.ts"
import { clientTls, maskUrl, parsePostgresUrl, type PostgresTarget, tlsLoader } from "./postgresTls.ts"

const connectTimeout = Duration.seconds(5)

const field = (cause: unknown, name: string): string | undefined => {
  if (typeof cause !== "object" || cause === null || !(name in cause)) return undefined
  const value: unknown = Reflect.get(cause, name)
  return typeof value === "string" ? value : undefined
}

/** What went wrong while connecting, in plain words. */
export const postgresReason = (cause: unknown, target: PostgresTarget): string => {
  const code = field(cause, "code")
  const where = target.unixSocket ? target.host : `${target.host}:${new URL(target.connectionString).port || "5432"}`
  switch (code) {
    case "ECONNREFUSED":
      return `no Postgres server answers at ${where} (connection refused)`
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return `host ${target.host} is not known`
    case "ETIMEDOUT":
      return `no Postgres server answers at ${where} (timed out)`
    case "ENOENT":
      return `no Postgres socket at ${where}`
  }
  const message = causeText(cause)
  if (code !== undefined && code.startsWith("28")) return `authentication failed: ${message}`
  if (code === "3D000") return message
  if (message === "The server does not support SSL connections") {
    return `the server does not offer TLS, but sslmode=${target.mode} requires it`
  }
  if (message === "Connection terminated unexpectedly") {
    return `the server at ${where} closed the connection before answering`
  }
  if (message.includes("timeout") || message.includes("timed out")) {
    return `no Postgres server answers at ${where} within ${Duration.format(connectTimeout)}`
  }
  if (code !== undefined && /CERT|UNABLE_TO|SELF_SIGNED|^ERR_TLS|^ERR_SSL/.test(code)) return `TLS: ${message}`
  return message
}

export interface PostgresOpenOptions {
  readonly url: string
  readonly pool: number
  /** `statement_timeout` of every pool connection, in ms; 0 or unset sets none. */
  readonly statementTimeoutMs?: number | undefined
  /** `idle_in_transaction_session_timeout` of every pool connection, in ms; 0 or unset sets none. */
  readonly idleInTransactionMs?: number | undefined
}

export interface OpenedPostgres {
  readonly client: PgClient.PgClient
  readonly pool: pg.Pool
  readonly tls: boolean
}

/** How long a statement waits for a pool connection before it fails (and the request answers 503). */
export const poolWait = connectTimeout

const cancelStatement = /^SELECT pg_cancel_backend\((\d+)\)$/

const makePool = (target: PostgresTarget, size: number, ssl: () => false | Tls.ConnectionOptions, statementTimeoutMs: number, idleInTransactionMs: number): pg.Pool => {
  // A client class of our own so each new connection takes the current (possibly rotated) certificates.
  class TlsClient extends pg.Client {
    constructor(config?: pg.ClientConfig) {
      super({ ...config, ...clientTls(target, ssl()) })
    }
  }
  const pool = new pg.Pool({
    connectionString: target.connectionString,
    max: size,
    connectionTimeoutMillis: Duration.toMillis(poolWait),
    application_name: "svc",
    ...(statementTimeoutMs > 0 ? { statement_timeout: statementTimeoutMs } : {}),
    ...(idleInTransactionMs > 0 ? { idle_in_transaction_session_timeout: idleInTransactionMs } : {}),
    Client: TlsClient
  })
  pool.on("error", () => {})
  // The SQL client cancels the statement of an interrupted fiber (a client that went away) with
  // `pg_cancel_backend` through `pool.query`, which waits for a free pool connection: when every connection
  // is busy, exactly when cancelling matters, it never got one. Such a cancel goes on a connection of its own.
  // A cancel reaches whatever its backend runs when it arrives, and the SQL client hands the connection back
  // as soon as the statement ends, cancel or not: so the connection serves no one else until the cancel has
  // gone through, and is then closed instead of reused.
  const checkedOut = new Map<number, pg.PoolClient>()
  const processId = (client: pg.PoolClient): number | undefined => {
    const pid: unknown = Reflect.get(client, "processID")
    return typeof pid === "number" ? pid : undefined
  }
  pool.on("acquire", (client) => {
    const pid = processId(client)
    if (pid !== undefined) checkedOut.set(pid, client)
  })
  pool.on("release", (_error, client) => {
    const pid = processId(client)
    if (pid !== undefined && checkedOut.get(pid) === client) checkedOut.delete(pid)
  })
  const query = pool.query.bind(pool) as (...args: Array<unknown>) => unknown
  const connectionString = target.connectionString
  const cancelAside = (pid: number, done: (error: Error | null) => void) => {
    const running = checkedOut.get(pid)
    // Handed back already: its statement has ended, and nothing of it is left to cancel.
    if (running === undefined) return done(null)
    const release = running.release
    let handedBack = false
    let cancelled = false
    running.release = () => {
      handedBack = true
      if (cancelled) release.call(running, true)
    }
    const client = new TlsClient({ connectionString: connectionString, application_name: "svc", connectionTimeoutMillis: Duration.toMillis(connectTimeout) })
    client.on("error", () => {})
    client.connect()
      .then(() => client.query("SELECT pg_cancel_backend($1)", [pid]))
      .then(() => done(null), (error: Error) => done(error))
      .finally(() => {
        cancelled = true
        if (handedBack) release.call(running, true)
        void client.end().catch(() => undefined)
      })
  }
  pool.query = ((...args: Array<unknown>) => {
    const [text, done] = args
    const cancel = typeof text === "string" ? cancelStatement.exec(text) : null
    if (cancel !== null && typeof done === "function") return cancelAside(Number(cancel[1]), done as (error: Error | null) => void)
    return query(...args)
  }) as typeof pool.query
  return pool
}

/** A pool of `pool` connections; fails within about five seconds when the server does not answer. */
export const openPostgres = (
  options: PostgresOpenOptions
): Effect.Effect<OpenedPostgres, DatabaseOpenError, Scope.Scope | Reactivity.Reactivity> =>
  Effect.gen(function*() {
    const database = maskUrl(options.url)
    const fail = (reason: string) => new DatabaseOpenError({ database, reason })
    const target = yield* Either.match(parsePostgresUrl(options.url), {
      onLeft: (reason) => Effect.fail(fail(reason)),
      onRight: Effect.succeed
    })
    const load = tlsLoader(target)
    let lastGood = yield* Effect.try({ try: load, catch: (cause) => fail(causeText(cause)) })
    const current = () => {
      try {
        lastGood = load()
      } catch {
        // A certificate file being replaced: keep the last one that could be read.
      }
      return lastGood
    }
    const connect = (useTls: boolean) =>
      Effect.acquireRelease(
        Effect.sync(() => makePool(target, options.pool, useTls ? current : () => false, options.statementTimeoutMs ?? 0, options.idleInTransactionMs ?? 0)),
        // A release runs uninterruptibly: without `interruptible` the timeout would wait for `end` all the same.
        (pool) => Effect.promise(() => pool.end()).pipe(Effect.interruptible, Effect.timeoutOption(1000), Effect.ignore)
      ).pipe(Effect.tap((pool) =>
        Effect.tryPromise({ try: () => pool.query("SELECT 1"), catch: (cause): unknown => cause }).pipe(
          Effect.timeoutFail({ duration: connectTimeout, onTimeout: (): unknown => new Error("timed out") })
        )
      ))
    const wantsTls = lastGood !== false
    const opened = yield* connect(wantsTls).pipe(
      Effect.map((pool) => ({ pool, tls: wantsTls })),
      // sslmode=prefer: node-postgres has no fallback of its own, so retry once without TLS.
      Effect.catchAll((cause) =>
        target.mode === "prefer" && causeText(cause) === "The server does not support SSL connections"
          ? Effect.map(connect(false), (pool) => ({ pool, tls: false }))
          : Effect.fail(cause)
      ),
      Effect.mapError((cause) => fail(postgresReason(cause, target)))
    )
    const client = yield* PgClient.fromPool({
      acquire: Effect.succeed(opened.pool),
      applicationName: "svc"
    }).pipe(Effect.catchAllCause((cause) => fail(causeText(Cause.squash(cause)))))
    return { client, pool: opened.pool, tls: opened.tls }
  })

/**
 * One connection of its own, outside the pool, with the URL's TLS settings: for what must live as long
 * as the process (the process lock's session). Closed when the scope closes.
 */
export const openSession = (url: string): Effect.Effect<pg.Client, DatabaseOpenError, Scope.Scope> =>
  Effect.gen(function*() {
    const fail = (reason: string) => new DatabaseOpenError({ database: maskUrl(url), reason })
    const target = yield* Either.match(parsePostgresUrl(url), { onLeft: (reason) => Effect.fail(fail(reason)), onRight: Effect.succeed })
    const ssl = yield* Effect.try({ try: tlsLoader(target), catch: (cause) => fail(causeText(cause)) })
    const connect = (tls: false | Tls.ConnectionOptions) =>
      Effect.acquireRelease(
        Effect.tryPromise({
          try: async () => {
            const client = new pg.Client({ connectionString: target.connectionString, ...clientTls(target, tls), application_name: "svc", connectionTimeoutMillis: Duration.toMillis(connectTimeout) })
            client.on("error", () => {})
            try {
              await client.connect()
            } catch (cause) {
              await client.end().catch(() => undefined)
              throw cause
            }
            return client
          },
          catch: (cause): unknown => cause
        }),
        (client) => Effect.promise(() => client.end()).pipe(Effect.interruptible, Effect.timeoutOption(1000), Effect.ignore)
      )
    return yield* connect(ssl).pipe(
      Effect.catchAll((cause) =>
        ssl !== false && target.mode === "prefer" && causeText(cause) === "The server does not support SSL connections" ? connect(false) : Effect.fail(cause)
      ),
      Effect.mapError((cause) => fail(postgresReason(cause, target)))
    )
  })
