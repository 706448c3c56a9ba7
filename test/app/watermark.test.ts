/**
 * The primary's published watermark (docs/cluster.md): recorded in the writer lease's row as often as the lease
 * is renewed, so a replica can tell how far behind it is; a primary that cannot record it answers `/readyz`
 * unavailable. On Postgres, whose clock the lease's times come from; the server's own schedule is the test clock.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import pg from "pg"
import { backends, freshDatabase } from "../support/backends.ts"
import { call, startServerOn } from "../support/server.ts"

const postgres = backends.find((backend) => backend.kind === "postgres")!

/** One statement on the server's database, outside it. */
const onDatabase = (url: string, text: string) =>
  Effect.promise(async () => {
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    try {
      return (await client.query(text)).rows
    } finally {
      await client.end()
    }
  })

describe.skipIf(postgres.skip)("the published watermark", () => {
  it.scoped("is the last commit, recorded at each renewal; a primary that cannot record it is unavailable", () =>
    Effect.gen(function*() {
      const database = yield* freshDatabase("postgres")
      const server = yield* startServerOn(database)
      const url = database.postgresUrl!
      const created = yield* call("POST", `${server.base}/Patient`, { body: { resourceType: "Patient" } })
      const commitTs = Number(created.headers.get("x-svc-commit-ts"))
      // One renewal's time (2 s of a 10 s lease) later the watermark is the create's commit.
      yield* TestClock.adjust("2 seconds")
      let rows: Array<{ watermark: string }> = []
      for (let turn = 0; turn < 1000 && Number(rows[0]?.watermark ?? 0) < commitTs; turn++) {
        yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
        rows = yield* onDatabase(url, "SELECT watermark FROM svc_writer_lease")
      }
      expect(Number(rows[0]?.watermark)).toBe(commitTs)
      expect((yield* call("GET", `${server.url}/readyz`)).status).toBe(200)
      const health = yield* call("GET", `${server.url}/healthz?verbose=1`)
      expect(health.json).toMatchObject({ role: "primary", lease: { epoch: 1, watermark: commitTs }, database: { pool: expect.any(Number) } })

      // The row refuses a new watermark: three renewals later the primary says so.
      yield* onDatabase(url, `
        CREATE FUNCTION refuse_watermark() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'no watermark'; END $$;
        CREATE TRIGGER refuse_watermark BEFORE UPDATE OF watermark ON svc_writer_lease FOR EACH ROW EXECUTE FUNCTION refuse_watermark();`)
      yield* TestClock.adjust("7 seconds")
      const unavailable = yield* call("GET", `${server.url}/readyz`)
      expect([unavailable.status, unavailable.json]).toEqual([503, { status: "unavailable", reason: "the primary cannot record its published watermark" }])
    }))
})
