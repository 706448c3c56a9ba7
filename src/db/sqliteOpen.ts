/** Opening SQLite connections with errors a user can act on. */
import type * as Reactivity from "@effect/experimental/Reactivity"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import { Cause, Effect, type Scope } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { causeText, DatabaseOpenError } from "./errors.ts"

const busyTimeoutMillis = 5000

/**
 * Page caches, in KiB. better-sqlite3 builds SQLite with 16 MiB per connection, and a SQLite file has
 * `cluster.db_pool` readers besides the writer and the read by id's connection: after the bench's searches
 * every reader's cache was full, some 80 MB of the server's memory for pages the OS keeps cached anyway (a
 * page a connection no longer holds is read again from there, without touching the disk). With 4 MiB per
 * reader the searches cost the same CPU per page. The writer's cache holds the pages a transaction changes
 * until its commit (more spill into the write-ahead log early, which is allowed): with 8 MiB a Synthea ingest
 * cost the same CPU per resource. An in-memory database is all cache and ignores the setting.
 */
export const readerCacheKib = 2048
export const writerCacheKib = 8192
/**
 * The fast path's connection (src/rest/fastRead.ts) answers most reads and plain searches, and keeps 16 MiB.
 * A page it does not hold is read again from the OS, a system call and a copy: at 10x the Synthea data a
 * chained search touches a B-tree page or two per matched target, scattered over a file of 900 MB, and with
 * 2 MiB the connection read most of them again on every search (the chained search's median 1.95 ms there,
 * 1.70 ms with 16 MiB; its growth from 1x to 10x 1.6x and 1.37x).
 */
export const fastCacheKib = 16384

const errorCode = (cause: unknown): string | undefined =>
  typeof cause === "object" && cause !== null && "code" in cause && typeof cause.code === "string"
    ? cause.code
    : undefined

/** The driver's error in plain words; SqlError wraps it as `cause`. */
export const sqliteReason = (cause: unknown): string => {
  const inner = cause instanceof Error && cause.cause !== undefined ? cause.cause : cause
  switch (errorCode(inner)) {
    case "SQLITE_NOTADB":
      return "file is not a database"
    case "SQLITE_CORRUPT":
      return "the database file is corrupt"
    case "SQLITE_CANTOPEN":
      return "the file cannot be opened"
    case "SQLITE_READONLY":
      return "the file is read-only"
    case "SQLITE_PERM":
    case "SQLITE_AUTH":
      return "permission denied"
  }
  return causeText(inner)
}

/**
 * A clear reason when the path or its directory cannot hold the file; checked before opening. `statSync`
 * throws even with `throwIfNoEntry: false` when a part of the path is a regular file (ENOTDIR) or cannot be
 * searched (EACCES), so every failure is read here.
 */
export const directoryProblem = (path: string, writable: boolean): string | undefined => {
  const dir = Path.dirname(Path.resolve(path))
  try {
    if (Fs.statSync(path, { throwIfNoEntry: false })?.isDirectory() === true) return `${path} is a directory`
  } catch (error) {
    if (errorCode(error) !== "ENOTDIR") return `${path} cannot be reached: ${causeText(error)}`
  }
  try {
    if (!Fs.statSync(dir).isDirectory()) return `${dir} is not a directory`
  } catch (error) {
    return errorCode(error) === "ENOTDIR"
      ? `${dir} is not a directory: a part of the path is a file`
      : errorCode(error) === "ENOENT"
      ? `directory ${dir} does not exist`
      : `directory ${dir} cannot be reached: ${causeText(error)}`
  }
  if (!writable) return undefined
  try {
    Fs.accessSync(dir, Fs.constants.W_OK)
  } catch {
    return `directory ${dir} is not writable`
  }
  return undefined
}

export interface SqliteOpenOptions {
  readonly filename: string
  readonly database: string
  readonly readonly: boolean
}

/**
 * One SQLite connection (the client keeps exactly one). The writer sets WAL; a read-only
 * connection leaves the journal mode alone, since it may not change it.
 */
export const openSqlite = (
  options: SqliteOpenOptions
): Effect.Effect<SqliteClient.SqliteClient, DatabaseOpenError, Scope.Scope | Reactivity.Reactivity> => {
  const fail = (reason: string) => new DatabaseOpenError({ database: options.database, reason })
  const memory = options.filename === ":memory:"
  return Effect.gen(function*() {
    const problem = memory ? undefined : directoryProblem(options.filename, !options.readonly)
    if (problem !== undefined) return yield* fail(problem)
    const client = yield* SqliteClient.make({
      filename: options.filename,
      readonly: options.readonly,
      disableWAL: options.readonly || memory
    }).pipe(Effect.catchAllDefect((defect) => fail(sqliteReason(defect))))
    const setup = [
      `PRAGMA busy_timeout = ${busyTimeoutMillis}`,
      "PRAGMA foreign_keys = ON",
      ...(memory ? [] : [`PRAGMA cache_size = -${options.readonly ? readerCacheKib : writerCacheKib}`]),
      // Reads a page, so a file that is not a database is refused here rather than at first use.
      "SELECT count(*) FROM sqlite_master"
    ]
    for (const statement of setup) {
      yield* client.unsafe(statement).pipe(
        Effect.catchAllCause((cause) => fail(sqliteReason(Cause.squash(cause))))
      )
    }
    return client
  })
}
