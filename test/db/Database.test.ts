import * as Reactivity from "@effect/experimental/Reactivity"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Deferred, Effect, Exit, Fiber, Option, TestClock } from "effect"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { Database, type DatabaseOptions, layer, make } from "../../src/db/Database.ts"
import { readerCacheKib, writerCacheKib } from "../../src/db/sqliteOpen.ts"
import { backends, freshDatabase, pgAvailable, tempDirectory } from "../support/backends.ts"
import { silentServer } from "../support/silentServer.ts"

const openError = (options: DatabaseOptions) =>
  Effect.scoped(make(options)).pipe(Effect.provide(Reactivity.layer), Effect.flip)

describe("Database", () => {
  for (const backend of backends) {
    describe.skipIf(backend.skip)(backend.kind, () => {
      it.scoped("answers the probe and reports its pool", () =>
        Effect.gen(function*() {
          const options = yield* freshDatabase(backend.kind, 3)
          yield* Effect.gen(function*() {
            const db = yield* Database
            yield* db.probe
            const stats = yield* db.stats
            expect(stats).toMatchObject({ kind: backend.kind, pool: 3, dialect: db.dialect, waiting: 0 })
            expect(stats.readers).toBe(backend.kind === "sqlite" ? 3 : backend.kind === "memory" ? 0 : stats.readers)
            // The layer offers the writer as the plain SqlClient too.
            const sql = yield* SqlClient.SqlClient
            expect(sql).toBe(db.writer)
          }).pipe(Effect.provide(layer(options)))
        }))

      it.scoped.skipIf(backend.kind === "memory")("a reader sees a committed write and reads while a write transaction is open", () =>
        Effect.gen(function*() {
          const options = yield* freshDatabase(backend.kind)
          yield* Effect.gen(function*() {
            const db = yield* Database
            const sql = db.writer
            yield* sql`CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL)`
            yield* sql`INSERT INTO notes (id, body) VALUES (1, 'committed')`
            const inside = yield* Deferred.make<void>()
            const release = yield* Deferred.make<void>()
            const writing = yield* sql.withTransaction(Effect.gen(function*() {
              yield* sql`INSERT INTO notes (id, body) VALUES (2, 'uncommitted')`
              yield* Deferred.succeed(inside, undefined)
              yield* Deferred.await(release)
            })).pipe(Effect.fork)
            yield* Deferred.await(inside)
            const during = yield* db.withReader((reader) => reader<{ body: string }>`SELECT body FROM notes ORDER BY id`)
            expect(during.map((r) => r.body)).toEqual(["committed"])
            yield* Deferred.succeed(release, undefined)
            yield* Fiber.join(writing)
            const after = yield* db.withReader((reader) => reader<{ body: string }>`SELECT body FROM notes ORDER BY id`)
            expect(after.map((r) => r.body)).toEqual(["committed", "uncommitted"])
          }).pipe(Effect.provide(layer(options)))
        }))
    })
  }

  it.scoped("a SQLite file is opened in WAL mode with foreign keys and a busy timeout", () =>
    Effect.gen(function*() {
      const options = yield* freshDatabase("sqlite")
      yield* Effect.gen(function*() {
        const db = yield* Database
        const [journal] = yield* db.writer<{ journal_mode: string }>`PRAGMA journal_mode`
        const [keys] = yield* db.writer<{ foreign_keys: number }>`PRAGMA foreign_keys`
        const [busy] = yield* db.withReader((sql) => sql<{ timeout: number }>`PRAGMA busy_timeout`)
        expect(journal?.journal_mode).toBe("wal")
        expect(keys?.foreign_keys).toBe(1)
        expect(busy?.timeout).toBe(5000)
      }).pipe(Effect.provide(layer(options)))
    }))

  it.scoped("a SQLite file's readers keep a 2 MiB page cache and its writer 8 MiB, not 16 MiB each", () =>
    Effect.gen(function*() {
      const options = yield* freshDatabase("sqlite", 2)
      yield* Effect.gen(function*() {
        const db = yield* Database
        const [writer] = yield* db.writer<{ cache_size: number }>`PRAGMA cache_size`
        const [reader] = yield* db.withReader((sql) => sql<{ cache_size: number }>`PRAGMA cache_size`)
        // Negative: KiB rather than pages.
        expect([writer?.cache_size, reader?.cache_size]).toEqual([-writerCacheKib, -readerCacheKib])
        expect([writerCacheKib, readerCacheKib]).toEqual([8192, 2048])
      }).pipe(Effect.provide(layer(options)))
    }))

  it.scoped("a SQLite file that is not a database is refused in one clear line", () =>
    Effect.gen(function*() {
      const dir = yield* tempDirectory
      const path = Path.join(dir, "garbage.sqlite")
      yield* Effect.promise(() => Fs.writeFile(path, "this is not a SQLite database, just some garbage bytes ".repeat(20)))
      const error = yield* openError({ kind: "sqlite", sqlitePath: path, pool: 2 })
      expect(error._tag).toBe("DatabaseOpenError")
      expect(error.message).toBe(`cannot open database SQLite file ${path}: file is not a database`)
    }))

  it.scoped("a SQLite file in a directory that does not exist is refused, and nothing is created", () =>
    Effect.gen(function*() {
      const dir = yield* tempDirectory
      const path = Path.join(dir, "missing", "svc.sqlite")
      const error = yield* openError({ kind: "sqlite", sqlitePath: path, pool: 2 })
      expect(error.message).toBe(`cannot open database SQLite file ${path}: directory ${Path.join(dir, "missing")} does not exist`)
      expect(yield* Effect.promise(() => Fs.readdir(dir))).toEqual([])
    }))

  // TestClock never moves here: a refused connection is reported at once, not after the connect timeout.
  it.scoped("an unreachable Postgres fails at once, naming the server with its password masked", () =>
    Effect.gen(function*() {
      const error = yield* openError({
        kind: "postgres",
        sqlitePath: "",
        postgresUrl: "postgres://svc:s3cret@127.0.0.1:1/svc",
        pool: 2
      })
      expect(error.message).toBe(
        "cannot open database postgres://svc:***@127.0.0.1:1/svc: no Postgres server answers at 127.0.0.1:1 (connection refused)"
      )
      expect(error.message).not.toContain("s3cret")
    }))

  it.scoped("a Postgres address that takes the connection and never answers fails after the 5-second connect timeout", () =>
    Effect.gen(function*() {
      const silent = yield* silentServer
      const opening = yield* Effect.fork(openError({
        kind: "postgres",
        sqlitePath: "",
        postgresUrl: `postgres://svc:s3cret@127.0.0.1:${silent.port}/svc?sslmode=disable`,
        pool: 2
      }))
      yield* Deferred.await(silent.accepted)
      yield* TestClock.adjust("4999 millis")
      // Still waiting: its one timer is the connect timeout, due at 5 s.
      expect(Chunk.toReadonlyArray(yield* TestClock.sleeps())).toEqual([5000])
      expect(Option.isNone(yield* Fiber.poll(opening))).toBe(true)
      yield* TestClock.adjust("1 millis")
      // The pool that never connected is closed with a bound of its own.
      yield* TestClock.adjust("1 second")
      const error = yield* Fiber.join(opening)
      expect(error.message).toBe(
        `cannot open database postgres://svc:***@127.0.0.1:${silent.port}/svc?sslmode=disable: no Postgres server answers at 127.0.0.1:${silent.port} within 5s`
      )
    }))

  it.live("Postgres without a URL is refused", () =>
    Effect.gen(function*() {
      const error = yield* openError({ kind: "postgres", sqlitePath: "", pool: 2 })
      expect(error.message).toBe("cannot open database Postgres: no Postgres URL is configured")
    }))

  it.live.skipIf(!pgAvailable)("a Postgres database that does not exist is named in the error", () =>
    Effect.gen(function*() {
      const options = yield* Effect.scoped(freshDatabase("postgres"))
      // The scope above has dropped the database again.
      const error = yield* openError(options)
      const name = new URL(options.postgresUrl ?? "").pathname.slice(1)
      expect(error.message).toContain(`database "${name}" does not exist`)
    }))

  it.live.skipIf(!pgAvailable)("a Postgres role that does not exist fails authentication", () =>
    Effect.gen(function*() {
      const url = new URL(process.env["SVC_TEST_POSTGRES_URL"] ?? "postgres://postgres@127.0.0.1:5432/postgres")
      url.username = "svc_no_such_role"
      const exit = yield* Effect.exit(openError({ kind: "postgres", sqlitePath: "", postgresUrl: url.toString(), pool: 1 }))
      expect(Exit.isSuccess(exit) && exit.value.message).toContain("authentication failed")
    }))
})
