/**
 * `node --import tsx scripts/profile/searchset.ts <svc.sqlite> [--postgres <url>] [--rounds n]`: the CPU a search
 * page costs in the server's own code and its database client, without HTTP: `searchset` (src/rest/search.ts)
 * called in a loop on a database the search profile (search.ts) loaded, over the bench's search paths.
 * CPU time per call (this process only: Postgres's own work is not in it) and elapsed time per call (one call at
 * a time), each the least of a few rounds.
 */
import { SqliteClient } from "@effect/sql-sqlite-node"
import { PgClient } from "@effect/sql-pg"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Layer, Redacted } from "effect"
import { parseArgs } from "node:util"
import { build } from "../../src/catalog/Catalog.ts"
import { conformanceTypes } from "../../src/packages/LoadedPackage.ts"
import { searchset } from "../../src/rest/search.ts"
import { currentOfTypes } from "../../src/store/reads.ts"
import { tokenDatePaths, tokenPaths } from "../bench/search.ts"

const { values: flags, positionals } = parseArgs({
  allowPositionals: true,
  options: { postgres: { type: "string" }, rounds: { type: "string" }, calls: { type: "string" } }
})

const families = (sql: SqlClient.SqlClient) =>
  Effect.map(
    sql<{ readonly exact: string }>`SELECT DISTINCT exact FROM search_string WHERE type = 'Patient' AND param = 'family' ORDER BY exact`,
    (rows) => rows.map((row) => `Observation?patient.name=${encodeURIComponent(row.exact)}`)
  )

const program = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* currentOfTypes(sql, [...conformanceTypes])
  const catalog = build(rows.map((row) => JSON.parse(row.content) as Record<string, unknown>), 1)
  const workloads: Record<string, ReadonlyArray<string>> = {
    token: tokenPaths(),
    "token+date": tokenDatePaths(),
    chained: yield* families(sql),
    paged: Array.from({ length: 10 }, (_, page) => `Observation?status=final&_count=100&_offset=${page * 100}`)
  }
  const rounds = Number(flags.rounds ?? 5)
  const calls = Number(flags.calls ?? 300)
  for (const [name, paths] of Object.entries(workloads)) {
    const queries = paths.map((path) => {
      const [type, query] = path.split("?") as [string, string]
      return { type, params: new URLSearchParams(query) }
    })
    const one = (n: number) => {
      const query = queries[n % queries.length]!
      return searchset(sql, { catalog, base: "http://127.0.0.1:8080/fhir", params: query.params, lenient: false, warnings: [] }, query.type)
    }
    for (let n = 0; n < calls; n++) yield* one(n)
    const perCall: Array<number> = []
    const wall: Array<number> = []
    for (let round = 0; round < rounds; round++) {
      const before = process.cpuUsage()
      const started = performance.now()
      for (let n = 0; n < calls; n++) yield* one(n)
      wall.push(((performance.now() - started) * 1000) / calls)
      const used = process.cpuUsage(before)
      perCall.push((used.user + used.system) / calls)
    }
    const least = (values: ReadonlyArray<number>) => Math.min(...values).toFixed(0).padStart(5)
    console.log(`${name.padEnd(11)} ${least(perCall)} µs CPU, ${least(wall)} µs elapsed per page, one at a time ` +
      `(least of ${rounds} rounds of ${calls}; CPU ${perCall.map((x) => x.toFixed(0)).join(" ")})`)
  }
})

const database: Layer.Layer<SqlClient.SqlClient, unknown> = flags.postgres !== undefined
  ? PgClient.layer({ url: Redacted.make(flags.postgres) })
  : SqliteClient.layer({ filename: positionals[0] ?? "svc.sqlite", readonly: true, disableWAL: true })

Effect.runPromise(program.pipe(Effect.provide(database))).catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
