/** Kept apart from postgres.ts, which the global set-up imports outside any test file. */
import { afterAll, beforeAll } from "vitest"
import { createTestDatabase, postgresAvailable } from "./postgres.ts"

/**
 * A database of its own for the enclosing suite, created before its tests and dropped after them.
 * `url()` is only called by tests that run, i.e. when `available` is true.
 */
export const suiteDatabase = async (): Promise<{ readonly available: boolean; readonly url: () => string }> => {
  const available = await postgresAvailable()
  let database: Awaited<ReturnType<typeof createTestDatabase>> | undefined
  beforeAll(async () => {
    if (available) database = await createTestDatabase()
  })
  afterAll(async () => {
    await database?.drop()
  })
  return {
    available,
    url: () => {
      if (database === undefined) throw new Error("the suite's Postgres database was not created")
      return database.url
    }
  }
}
