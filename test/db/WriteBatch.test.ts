import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { Database } from "../../src/db/Database.ts"
import { chunkSizes, insertMany, parameterLimit, rowsPerStatement, valuesPerStatement, WriteBatch } from "../../src/db/WriteBatch.ts"
import { workPerYield } from "../../src/db/EventLoop.ts"
import { unnestedRowsPerStatement } from "../../src/db/unnest.ts"
import { backends } from "../support/backends.ts"
import { withStore } from "../support/store.ts"

/** `count` rows of search_date (five columns), numbered in `param`. */
const dateRows = (count: number) =>
  Array.from({ length: count }, (_, n) => ({ rkey: n, type: "Observation", param: `p${n}`, low: n, high: n + 1 }))

for (const backend of backends) {
  describe.skipIf(backend.skip)(`batched inserts on ${backend.kind}`, () => {
    it.scoped("bind at most valuesPerStatement per statement, within the database's parameter limit, which is the database's", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const { writer: sql } = yield* Database
        const limit = backend.kind === "postgres" ? parameterLimit.pg : parameterLimit.sqlite
        const most = backend.kind === "postgres" ? valuesPerStatement.pg : valuesPerStatement.sqlite
        expect(most).toBeLessThanOrEqual(limit)
        const perStatement = rowsPerStatement(sql, 5)
        expect(perStatement).toBe(Math.floor(most / 5))
        for (const count of [1, 7, perStatement, perStatement + 1, 3 * perStatement + 2]) {
          const sizes = chunkSizes(sql, count, perStatement)
          expect(sizes.reduce((a, b) => a + b, 0)).toBe(count)
          expect(Math.max(...sizes) * 5).toBeLessThanOrEqual(most)
        }
        // A statement with exactly the limit's values runs; one more value is refused.
        const values = (n: number) => Array.from({ length: n }, (_, i) => i)
        const atLimit = yield* sql<{ readonly n: number | string }>`SELECT count(*) AS n FROM resources WHERE rkey IN ${sql.in(values(limit))}`
        expect(Number(atLimit[0]!.n)).toBe(0)
        const over = yield* Effect.either(sql`SELECT count(*) AS n FROM resources WHERE rkey IN ${sql.in(values(limit + 1))}`)
        expect(over._tag).toBe("Left")
      })))

    it.scoped("insert rows past the limit of one statement, all of them, in their order", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const { writer: sql } = yield* Database
        const count = 2 * rowsPerStatement(sql, 5) + 3
        yield* sql.withTransaction(insertMany(sql, "search_date", dateRows(count)))
        const rows = yield* sql<{ readonly rkey: number | string; readonly param: string; readonly low: number | string }>`
          SELECT rkey, param, low FROM search_date ORDER BY rkey`
        expect(rows.length).toBe(count)
        expect(rows.every((row, n) => Number(row.rkey) === n && row.param === `p${n}` && Number(row.low) === n)).toBe(true)
      })))

    it.scoped("store every text as it was given: quotes, backslashes, commas, braces, the word NULL, empty text, nulls, long text", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const { writer: sql } = yield* Database
        const texts = ['say "hi"', "back\\slash\\", "a,b", "{x}", "NULL", "", " padded ", "naïve ☃ 𝄞", '\\"', "line\nbreak", '{"json": [1, "two"]}', 'tab\t"quoted"\nand \\ back', "ü€".repeat(40_000)]
        const rows = texts.map((text, n) => ({ rkey: n, type: "Patient", param: "name", normalized: text, normalized_full: n % 2 === 0 ? null : text, exact: text }))
        yield* sql.withTransaction(insertMany(sql, "search_string", rows))
        const stored = yield* sql<{ readonly rkey: number | string; readonly normalized: string; readonly normalized_full: string | null; readonly exact: string }>`
          SELECT rkey, normalized, normalized_full, exact FROM search_string ORDER BY rkey`
        expect(stored.map((row) => [Number(row.rkey), row.normalized, row.normalized_full, row.exact])).toEqual(
          rows.map((row) => [row.rkey, row.normalized, row.normalized_full, row.exact]))
      })))

    it.scoped("store every number as it was given: negative, past 32 bits, fractions, large exponents, integers given as text", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const { writer: sql } = yield* Database
        const edges = [0, -1, 1, 2 ** 31, -(2 ** 31) - 1, 2 ** 40 + 3, -(2 ** 40) - 3, Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER, 1732780800000]
        const dates = edges.map((low, n) => ({ rkey: n % 2 === 0 ? n : String(n), type: "Observation", param: "date", low, high: -low || 0 }))
        yield* sql.withTransaction(insertMany(sql, "search_date", dates))
        const storedDates = yield* sql<{ readonly rkey: number | string; readonly low: number | string; readonly high: number | string }>`
          SELECT rkey, low, high FROM search_date ORDER BY rkey`
        expect(storedDates.map((row) => [Number(row.rkey), Number(row.low), Number(row.high)])).toEqual(dates.map((row, n) => [n, row.low, row.high]))
        const decimals = [0, -0.25, 1.5, 3.141592653589793, 1e300, -1e-300, 2 ** 53 + 2, 105.01]
        const numbers = decimals.map((value, n) => ({ rkey: n, type: "Observation", param: "value", value, low: value - 0.5, high: value + 0.5 }))
        yield* sql.withTransaction(insertMany(sql, "search_number", numbers))
        const storedNumbers = yield* sql<{ readonly value: number | string; readonly low: number | string; readonly high: number | string }>`
          SELECT value, low, high FROM search_number ORDER BY rkey`
        expect(storedNumbers.map((row) => [Number(row.value), Number(row.low), Number(row.high)])).toEqual(numbers.map((row) => [row.value, row.low, row.high]))
      })))

    // On Postgres every statement waits for the server anyway; on SQLite statements run synchronously.
    it.scoped.skipIf(backend.kind === "postgres")("let a macrotask queued before a large insert run before the insert ends (other requests get in between statements)", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const { writer: sql } = yield* Database
        let ran = false
        setImmediate(() => {
          ran = true
        })
        yield* sql.withTransaction(insertMany(sql, "search_date", dateRows(Math.max(4 * workPerYield, 3 * rowsPerStatement(sql, 5)))))
        expect(ran).toBe(true)
      })))

    it.scoped("hold rows until flushed, then insert each table's rows once", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const { writer: sql } = yield* Database
        const batch = new WriteBatch()
        for (const row of dateRows(3)) batch.add("search_date", row)
        batch.add("search_uri", { rkey: 1, type: "Observation", param: "url", value: "http://example.org" })
        const count = (table: "search_date" | "search_uri") =>
          Effect.map(sql<{ readonly n: number | string }>`SELECT count(*) AS n FROM ${sql(table)}`, (rows) => Number(rows[0]!.n))
        expect(batch.isEmpty).toBe(false)
        expect(yield* count("search_date")).toBe(0)
        yield* batch.flush(sql)
        expect(batch.isEmpty).toBe(true)
        yield* batch.flush(sql)
        expect([yield* count("search_date"), yield* count("search_uri")]).toEqual([3, 1])
      })))

    it.scoped("insert every table's rows on a flush, in their order, when together they are more than one statement takes", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const { writer: sql } = yield* Database
        const batch = new WriteBatch()
        // On Postgres the tables' rows go in statements of several tables, `unnestedRowsPerStatement` rows each at most.
        const dates = dateRows(unnestedRowsPerStatement - 5)
        const uris = Array.from({ length: unnestedRowsPerStatement + 9 }, (_, n) => ({ rkey: n, type: "Observation", param: "url", value: `http://example.org/${n}` }))
        for (const row of dates) batch.add("search_date", row)
        for (const row of uris) batch.add("search_uri", row)
        batch.add("search_string", { rkey: 7, type: "Patient", param: "name", normalized: 'o"neil', normalized_full: null, exact: "O'Neil" })
        yield* sql.withTransaction(batch.flush(sql))
        const dated = yield* sql<{ readonly param: string }>`SELECT param FROM search_date ORDER BY rkey`
        const uri = yield* sql<{ readonly value: string }>`SELECT value FROM search_uri ORDER BY rkey`
        const strings = yield* sql<{ readonly normalized: string; readonly exact: string }>`SELECT normalized, exact FROM search_string`
        expect(dated.map((row) => row.param)).toEqual(dates.map((row) => row.param))
        expect(uri.map((row) => row.value)).toEqual(uris.map((row) => row.value))
        expect(strings).toEqual([{ normalized: 'o"neil', exact: "O'Neil" }])
      })))
  })
}
