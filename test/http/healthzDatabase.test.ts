/**
 * `/healthz?verbose=1` names the database by kind and a redacted location (docs/operations.md): a SQLite
 * file by its name alone, `memory`, or a Postgres server's host, port and database, never a password,
 * a user or the directory of a file.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { backends, freshDatabase } from "../support/backends.ts"
import { call, startServerOn } from "../support/server.ts"

const withSecret = (url: string): string => {
  const parsed = new URL(url)
  parsed.username = "postgres"
  parsed.password = "s3cret-pw"
  return parsed.toString()
}

describe("/healthz?verbose=1 and the database", () => {
  for (const backend of backends) {
    it.live.skipIf(backend.skip)(`shows the kind and a redacted location on ${backend.kind}`, () =>
      Effect.gen(function*() {
        const fresh = yield* freshDatabase(backend.kind)
        const database = fresh.postgresUrl === undefined ? fresh : { ...fresh, postgresUrl: withSecret(fresh.postgresUrl) }
        const server = yield* startServerOn(database)
        const reply = yield* call("GET", `${server.url}/healthz?verbose=1`)
        expect(reply.status).toBe(200)
        const shown = reply.json.database
        expect(shown.kind).toBe(backend.kind)
        switch (backend.kind) {
          case "memory":
            expect(shown.location).toBe("memory")
            break
          case "sqlite":
            expect(shown.location).toBe("svc.sqlite")
            expect(reply.text).not.toContain(database.sqlitePath)
            break
          case "postgres": {
            const url = new URL(database.postgresUrl!)
            expect(shown.location).toBe(`${url.host}${url.pathname}`)
            expect(reply.text).not.toContain("s3cret-pw")
            expect(reply.text).not.toContain("postgres:")
            break
          }
        }
      }).pipe(Effect.scoped), 120_000)
  }
})
