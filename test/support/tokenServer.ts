/**
 * The token machinery of one server (src/auth/Keys.ts, Tokens.ts) on a migrated database, opened and closed
 * at will on the same database options: a restart, or two servers sharing one database.
 */
import { Cause, Context, Effect, HashMap, Layer, Logger, LogLevel, type Scope } from "effect"
import { layer as keysLayer, type KeyOptions, SigningKeys } from "../../src/auth/Keys.ts"
import { layer as tokensLayer, type TokenSettings, tokenSettings, Tokens } from "../../src/auth/Tokens.ts"
import { Database, type DatabaseOptions, layer as databaseLayer } from "../../src/db/Database.ts"
import { migrate } from "../../src/db/Migrations.ts"
import { layer as writerLayer, Writer } from "../../src/db/Writer.ts"

export const origin = "http://127.0.0.1:8080"
export const settings: TokenSettings = tokenSettings(origin)

/** The Database (migrated) and its Writer, in the current scope. */
export const openStore = (options: DatabaseOptions): Effect.Effect<Context.Context<Database | Writer>, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    const database = yield* Layer.build(databaseLayer(options))
    yield* migrate({ fhirVersion: "r4" }).pipe(Effect.provide(database))
    const writer = yield* Layer.build(writerLayer.pipe(Layer.provide(Layer.succeedContext(database))))
    return Context.make(Database, Context.get(database, Database)).pipe(Context.add(Writer, Context.get(writer, Writer)))
  })

export interface TokenServer {
  readonly keys: SigningKeys["Type"]
  readonly tokens: Tokens["Type"]
}

/** The signing keys and tokens of one server on `store`, in the current scope. */
export const openServer = (
  store: Context.Context<Database | Writer>,
  options: { readonly keys?: KeyOptions; readonly tokens?: TokenSettings } = {}
): Effect.Effect<TokenServer, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    const keys = yield* Layer.build(keysLayer(options.keys)).pipe(Effect.provide(store))
    const tokens = yield* Layer.build(tokensLayer(options.tokens ?? settings)).pipe(Effect.provide(Context.merge(store, keys)))
    return { keys: Context.get(keys, SigningKeys), tokens: Context.get(tokens, Tokens) }
  })

/** Runs `effect` with every log line, at every level, written to `lines` (message, annotations and cause). */
export const capturingLogs = (lines: Array<string>) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  effect.pipe(
    Effect.provide(Layer.merge(
      Logger.replace(
        Logger.defaultLogger,
        Logger.make(({ annotations, cause, message }) =>
          lines.push(JSON.stringify({
            message,
            annotations: HashMap.toEntries(annotations),
            cause: Cause.isEmpty(cause) ? undefined : Cause.pretty(cause)
          }))
        )
      ),
      Logger.minimumLogLevel(LogLevel.All)
    ))
  )

/**
 * Waits, without moving the clock, until `condition` holds: work the clock started on another fiber (a
 * reload) may still be waiting for the database when `TestClock.adjust` returns.
 */
export const eventually = (condition: () => boolean): Effect.Effect<boolean> =>
  Effect.gen(function*() {
    for (let turn = 0; turn < 10_000 && !condition(); turn++) {
      yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
    }
    return condition()
  })
