import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { Database } from "../../src/db/Database.ts"
import { flatInsert, type FlatValue } from "../../src/db/multiRowInsert.ts"
import { unnestedRowsPerStatement } from "../../src/db/unnest.ts"
import { backends } from "../support/backends.ts"
import { withStore } from "../support/store.ts"

const columns = ["time", "request_id", "method", "path", "status", "duration_ms", "client", "caller", "interaction", "resource_type", "cost", "bytes_in", "bytes_out", "aborted"]
const insertRows = flatInsert("svc_request_log", columns)

for (const backend of backends) {
  describe.skipIf(backend.skip)(`rows as one flat list of values on ${backend.kind}`, () => {
    it.scoped("are all stored, in their order, with their texts as given, past what one statement takes", () =>
      withStore(backend.kind, Effect.gen(function*() {
        const db = yield* Database
        // More rows than one statement inserts on either database (100 rows on SQLite, 8,192 on Postgres).
        const count = unnestedRowsPerStatement + 7
        const paths = ['/fhir/Patient?name="x"', "/fhir/a\\b", "/fhir/line\nbreak", '{"json": ["\\u0001"]}', "/fhir/Patient/1"]
        const values: Array<FlatValue> = []
        for (let n = 0; n < count; n++) {
          values.push(n, `r${n}`, "GET", paths[n % paths.length]!, 200, 1.5, "127.0.0.1", "anonymous", "read", n % 3 === 0 ? null : "Patient", "read", null, n, 0)
        }
        yield* db.writer.withTransaction(insertRows(db.writer, db.dialect, values))
        const rows = yield* db.writer<{ readonly time: number | string; readonly request_id: string; readonly path: string; readonly resource_type: string | null }>`
          SELECT time, request_id, path, resource_type FROM svc_request_log ORDER BY id`
        expect(rows.length).toBe(count)
        // A statement to run after the rows: on Postgres in the last insert's statement.
        yield* db.writer.withTransaction(insertRows(db.writer, db.dialect, values.slice(0, 3 * columns.length), {
          text: (parameter) => `UPDATE svc_audit_head SET last_seq = ${parameter(0)}, last_hash = ${parameter(1)} WHERE id = 1`,
          values: [count, "after"]
        }))
        const head = yield* db.writer<{ readonly last_seq: number | string; readonly last_hash: string }>`SELECT last_seq, last_hash FROM svc_audit_head`
        expect(head.map((row) => [Number(row.last_seq), row.last_hash])).toEqual([[count, "after"]])
        const more = yield* db.writer<{ readonly n: number | string }>`SELECT count(*) AS n FROM svc_request_log`
        expect(Number(more[0]!.n)).toBe(count + 3)
        expect(rows.map((row) => [Number(row.time), row.request_id, row.path, row.resource_type])).toEqual(
          Array.from({ length: count }, (_, n) => [n, `r${n}`, paths[n % paths.length], n % 3 === 0 ? null : "Patient"]))
      })))
  })
}
