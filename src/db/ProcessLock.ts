/**
 * One svc process per database (docs/database.md, "One process per database"): the server takes a lock
 * the database system holds for it and drops when the process ends, however it ends (a kill -9 included),
 * and a second server on the same database is refused at start with `DatabaseInUse` (exit status 3).
 *
 * Postgres: a session-level advisory lock (`pg_try_advisory_lock`, scoped to the database) on a
 * connection of its own, held for the life of the process. SQLite file: an exclusive lock on a side
 * database `<file>-lock`, taken by a connection in `EXCLUSIVE` locking mode and held open; the operating
 * system releases it with the process. In memory there is nothing to share.
 */
import Sqlite from "better-sqlite3"
import { Effect, type Scope } from "effect"
import type { DatabaseOptions } from "./Database.ts"
import { describeDatabase } from "./Database.ts"
import { causeText, DatabaseInUse, DatabaseOpenError } from "./errors.ts"
import { openSession } from "./postgresOpen.ts"

/** The advisory lock's key: "svc" in ASCII, so another application's keys are unlikely to meet it. */
export const advisoryKey = 0x737663

/** The side file of a SQLite database that carries its process lock. */
export const lockFileOf = (sqlitePath: string): string => `${sqlitePath}-lock`

const isBusy = (cause: unknown): boolean =>
  typeof cause === "object" && cause !== null && "code" in cause && (cause.code === "SQLITE_BUSY" || cause.code === "SQLITE_LOCKED")

const lockSqlite = (options: DatabaseOptions): Effect.Effect<void, DatabaseInUse | DatabaseOpenError, Scope.Scope> => {
  const database = describeDatabase(options)
  return Effect.acquireRelease(
    Effect.try({
      try: () => {
        const db = new Sqlite(lockFileOf(options.sqlitePath), { timeout: 0 })
        try {
          db.pragma("locking_mode = EXCLUSIVE")
          // A write takes the exclusive lock, and EXCLUSIVE mode keeps it until the connection closes.
          db.exec("CREATE TABLE IF NOT EXISTS holder (pid INTEGER NOT NULL)")
          db.exec("BEGIN EXCLUSIVE")
          db.exec("DELETE FROM holder")
          db.prepare("INSERT INTO holder (pid) VALUES (?)").run(process.pid)
          db.exec("COMMIT")
          return db
        } catch (cause) {
          db.close()
          throw cause
        }
      },
      catch: (cause) => isBusy(cause) ? new DatabaseInUse({ database }) : new DatabaseOpenError({ database, reason: `its lock file ${lockFileOf(options.sqlitePath)}: ${causeText(cause)}` })
    }),
    (db) => Effect.sync(() => db.close())
  ).pipe(Effect.asVoid)
}

const lockPostgres = (options: DatabaseOptions): Effect.Effect<void, DatabaseInUse | DatabaseOpenError, Scope.Scope> =>
  Effect.gen(function*() {
    const database = describeDatabase(options)
    const session = yield* openSession(options.postgresUrl ?? "")
    const taken = yield* Effect.tryPromise({
      try: () => session.query<{ taken: boolean }>("SELECT pg_try_advisory_lock($1) AS taken", [advisoryKey]),
      catch: (cause) => new DatabaseOpenError({ database, reason: causeText(cause) })
    })
    if (taken.rows[0]?.taken !== true) return yield* new DatabaseInUse({ database })
    // Losing the session loses the lock: say so loudly. Interrupted before the session closes at the scope's end.
    yield* Effect.async<void>((resume) => {
      const ended = () => resume(Effect.void)
      session.once("end", ended)
      return Effect.sync(() => void session.off("end", ended))
    }).pipe(
      Effect.zipRight(Effect.logError("the database's process lock was lost: its connection closed", { database })),
      Effect.forkScoped
    )
  })

/** Takes the database's process lock for the scope's life, or fails with `DatabaseInUse`. */
export const acquire = (options: DatabaseOptions): Effect.Effect<void, DatabaseInUse | DatabaseOpenError, Scope.Scope> => {
  switch (options.kind) {
    case "memory":
      return Effect.void
    case "sqlite":
      return lockSqlite(options)
    case "postgres":
      return lockPostgres(options)
  }
}
