/**
 * `GET /fhir/{type}/{id}` of a current version as JSON on Postgres, answered from the Node request itself as the
 * SQLite fast read is (fastRead.ts): the same checks (`fastReadTarget`: no query string, no conditional headers,
 * JSON, a type the catalog knows, a caller who may read the whole type), one statement prepared on each
 * connection of the server's pool (a named statement: parsed once per connection, then only bound and run), and
 * the stored text written as it is, with the headers the general path gives.
 *
 * The statement answers later than the request arrives, so the handler takes the request and, when the resource
 * is missing or deleted or the statement fails (no connection free within the pool's wait, the statement
 * deadline), hands it to the general path (`decline`), which answers it as it always does (404, 410, 503).
 */
import { Effect, type Scope, Stream } from "effect"
import type pg from "pg"
import type { Catalog } from "../catalog/Catalog.ts"
import { CatalogService } from "../catalog/CatalogService.ts"
import type { FastHandler, FastSlot } from "../http/Server.ts"
import { answerRead, type FastCounts, fastReadTarget } from "./fastRead.ts"

interface Row {
  readonly version: number
  /** `BIGINT`: text as the driver gives it. */
  readonly commit_ts: string
  readonly content: string | null
}

/** The statement, under its name on each connection (pg prepares it on a connection's first use of the name). */
const currentVersion = {
  name: "svc_fast_read",
  text: `SELECT v.version, v.commit_ts, v.content
     FROM resources r JOIN resource_versions v ON v.rkey = r.rkey AND v.version = r.version
     WHERE r.type = $1 AND r.id = $2`
}

/** The fast read on `pool`, following the catalog `catalog()` gives. */
export const fastReadPg = (pool: pg.Pool, catalog: () => Catalog, counts: FastCounts): FastHandler => (request, response, admission, decline) => {
  const target = fastReadTarget(request, admission, catalog())
  if (target === undefined) return false
  pool.query<Row>({ ...currentVersion, values: [target.type, target.id] }).then(
    (result) => {
      const row = result.rows[0]
      if (row === undefined || row.content === null) return decline()
      counts.reads++
      answerRead(response, admission, { version: row.version, commit_ts: row.commit_ts, content: row.content })
    },
    () => decline()
  )
  return true
}

/**
 * Puts the Postgres fast read in `slot` while the server serves, following the catalog as it is rebuilt; the
 * slot is emptied when the current scope closes (before the pool, which closes with the database's `scope`).
 */
export const installFastReadPg = (slot: FastSlot, pool: pg.Pool, counts: FastCounts, scope: Scope.Scope) =>
  Effect.gen(function*() {
    const catalogs = yield* CatalogService
    const served = { catalog: yield* catalogs.get }
    yield* catalogs.changes.pipe(
      Stream.runForEach((catalog) => Effect.sync(() => void (served.catalog = catalog))),
      Effect.forkIn(scope)
    )
    slot.current = fastReadPg(pool, () => served.catalog, counts)
    yield* Effect.addFinalizer(() => Effect.sync(() => void (slot.current = undefined)))
  })

