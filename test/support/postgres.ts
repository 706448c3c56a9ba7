/**
 * A Postgres database of its own for one test file: created in `beforeAll`, dropped in `afterAll`.
 * The server is found at SVC_TEST_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/postgres).
 * Without a server the Postgres tests are skipped with a visible notice, except under CI=true,
 * where a missing server is a failure.
 */
import pg from "pg"

export const adminUrl = process.env["SVC_TEST_POSTGRES_URL"] ?? "postgres://postgres@127.0.0.1:5432/postgres"

export const withAdmin = async <A>(f: (client: pg.Client) => Promise<A>): Promise<A> => {
  const client = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 3000 })
  await client.connect()
  try {
    return await f(client)
  } finally {
    await client.end()
  }
}

let available: boolean | undefined

/** Whether a Postgres server answers; fails instead under CI=true. */
export const postgresAvailable = async (): Promise<boolean> => {
  if (available !== undefined) return available
  try {
    await withAdmin((c) => c.query("select 1"))
    available = true
  } catch (error) {
    if (process.env["CI"] === "true") {
      throw new Error(`Postgres is required under CI but did not answer at ${adminUrl}: ${String(error)}`)
    }
    console.warn(`NOTICE: Postgres tests skipped: no server answers at ${adminUrl}`)
    available = false
  }
  return available
}

/** The URL of `database` on the test server. */
export const urlFor = (database: string): string => {
  const url = new URL(adminUrl)
  url.pathname = `/${database}`
  return url.toString()
}

/** Creates a fresh database (a copy of `template` when given) and returns its URL and a function that drops it. */
export const createTestDatabase = async (prefix = "svc_test", template?: string): Promise<{ url: string; name: string; drop: () => Promise<void> }> => {
  const name = `${prefix}_${process.pid}_${Math.random().toString(36).slice(2, 10)}`
  await withAdmin((c) => c.query(`create database "${name}"${template === undefined ? "" : ` template "${template}"`}`))
  return {
    name,
    url: urlFor(name),
    drop: () => withAdmin((c) => c.query(`drop database if exists "${name}" with (force)`)).then(() => undefined)
  }
}
