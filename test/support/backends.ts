/** The three storage kinds the db tests run over, each giving a fresh, empty database per test. */
import { Effect, type Scope } from "effect"
import { copyFileSync } from "node:fs"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"
import type { DatabaseOptions } from "../../src/db/Database.ts"
import { createTestDatabase, postgresAvailable } from "./postgres.ts"

export const pgAvailable = await postgresAvailable()

export type BackendKind = DatabaseOptions["kind"]

export const backends: ReadonlyArray<{ readonly kind: BackendKind; readonly skip: boolean }> = [
  { kind: "sqlite", skip: false },
  { kind: "memory", skip: false },
  { kind: "postgres", skip: !pgAvailable }
]

/** A temporary directory removed when the scope closes. */
export const tempDirectory: Effect.Effect<string, never, Scope.Scope> = Effect.acquireRelease(
  Effect.promise(() => Fs.mkdtemp(Path.join(Os.tmpdir(), "svc-db-"))),
  (dir) => Effect.promise(() => Fs.rm(dir, { recursive: true, force: true }))
)

/** Options for a fresh database of `kind` (a copy of `template`, a SQLite file or a Postgres database, when given); dropped or deleted when the scope closes. */
export const freshDatabase = (kind: BackendKind, pool = 2, template?: string): Effect.Effect<DatabaseOptions, never, Scope.Scope> => {
  switch (kind) {
    case "memory":
      return Effect.succeed({ kind, sqlitePath: ":memory:", pool })
    case "sqlite":
      return Effect.map(tempDirectory, (dir) => {
        const sqlitePath = Path.join(dir, "svc.sqlite")
        if (template !== undefined) copyFileSync(template, sqlitePath)
        return { kind, sqlitePath, pool }
      })
    case "postgres":
      return Effect.map(
        Effect.acquireRelease(Effect.promise(() => createTestDatabase("svc_db", template)), (db) => Effect.promise(db.drop)),
        (db) => ({ kind, sqlitePath: "", postgresUrl: db.url, pool })
      )
  }
}
