/**
 * A throwaway Postgres database for one run: `svc_bench_<random>` on the server at
 * SVC_TEST_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/postgres), dropped afterwards.
 */
import pg from "pg"
import { randomBytes } from "node:crypto"

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

/** Undefined when a server answers, otherwise why not. */
export const postgresUnavailable = async (): Promise<string | undefined> => {
  try {
    await withAdmin((client) => client.query("select 1"))
    return undefined
  } catch (error) {
    return error instanceof Error ? error.message : String(error)
  }
}

/** The admin URL with its password hidden, for messages. */
export const shownAdminUrl = (): string => {
  const url = new URL(adminUrl)
  if (url.password !== "") url.password = "***"
  return url.toString()
}

/** A fresh database `svc_bench_<random>`, empty or a copy of the database `template`. */
export const createBenchDatabase = async (template?: string): Promise<{ readonly name: string; readonly url: string; readonly drop: () => Promise<void> }> => {
  const name = `svc_bench_${randomBytes(5).toString("hex")}`
  await withAdmin((client) => client.query(`create database "${name}"${template === undefined ? "" : ` template "${template}"`}`))
  const url = new URL(adminUrl)
  url.pathname = `/${name}`
  return {
    name,
    url: url.toString(),
    drop: () => withAdmin((client) => client.query(`drop database if exists "${name}" with (force)`)).then(() => undefined)
  }
}
