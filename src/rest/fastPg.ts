/**
 * `GET /fhir/{type}/{id}` of a current version and `GET /fhir/{type}?...` as JSON on Postgres, answered from the
 * Node request itself as on a SQLite file (fastRead.ts, fastSearch.ts): the same checks (`fastReadTarget`,
 * `planFastSearch`), the same statements, run on the server's pool as named statements (parsed once on each
 * connection, then only bound and run), the stored text written as it is, with the headers the general path
 * gives.
 *
 * The statements answer later than the request arrives, so the handler takes the request and, when the
 * resource is missing or deleted or a statement fails (no connection free within the pool's wait, the statement
 * deadline), hands it to the general path (`decline`), which answers it as it always does (404, 410, 503).
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Statement } from "@effect/sql"
import { Effect, Option, type Scope, Stream } from "effect"
import type pg from "pg"
import type { Catalog } from "../catalog/Catalog.ts"
import { CatalogService } from "../catalog/CatalogService.ts"
import type { FastHandler, FastSlot } from "../http/Server.ts"
import { Backfill } from "../search/Backfill.ts"
import { answerRead, answerSearch, type FastCounts, fastReadTarget } from "./fastRead.ts"
import { answerPlanLater, type FastSearchPlanning, planFastSearch, preparedLimit, textHash } from "./fastSearch.ts"

interface Row {
  readonly version: number
  /** `BIGINT`: text as the driver gives it. */
  readonly commit_ts: string
  readonly content: string | null
}

/** The read's statement, under its name on each connection (pg prepares it on a connection's first use of the name). */
const currentVersion = {
  name: "svc_fast_read",
  text: `SELECT v.version, v.commit_ts, v.content
     FROM resources r JOIN resource_versions v ON v.rkey = r.rkey AND v.version = r.version
     WHERE r.type = $1 AND r.id = $2`
}

export interface FastPgOptions extends FastSearchPlanning {
  readonly pool: pg.Pool
  /** Counted up for each answer. */
  readonly counts: FastCounts
}

/** The fast read and search on `options.pool`. */
export const fastPg = (options: FastPgOptions): FastHandler => {
  const { pool, counts } = options
  // A search's statement is named by its text (a search's text depends on its shape, not its values): the first
  // `preparedLimit` texts are prepared on each connection that runs them; any later one is parsed each time.
  const names = new Map<string, string>()
  const nameOf = (text: string): string | undefined => {
    const name = `svc_fs_${(textHash(text) >>> 0).toString(36)}_${text.length}`
    const known = names.get(name)
    if (known === text) return name
    if (known !== undefined || names.size >= preparedLimit) return undefined
    names.set(name, text)
    return name
  }
  const all = async <A>(statement: Statement.Statement<A>): Promise<ReadonlyArray<A>> => {
    const [text, values] = statement.compile()
    const name = nameOf(text)
    const result = await pool.query({ ...(name === undefined ? {} : { name }), text, values: values as Array<unknown> })
    return result.rows as ReadonlyArray<A>
  }

  return (request, response, admission, decline) => {
    const target = fastReadTarget(request, admission, options.catalog())
    if (target !== undefined) {
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
    let plan
    try {
      plan = planFastSearch(options, request, admission.principal)
    } catch {
      return false
    }
    if (plan === undefined) return false
    answerPlanLater(plan, all).then(
      (text) => {
        counts.searches++
        answerSearch(response, admission, text)
      },
      () => decline()
    )
    return true
  }
}

/**
 * Puts the Postgres fast read and search in `slot` while the server serves, following the catalog as it is
 * rebuilt and the backfill's progress; the slot is emptied when the current scope closes (before the pool, which
 * closes with the database's `scope`).
 */
export const installFastPg = (
  slot: FastSlot,
  options: { readonly pool: pg.Pool; readonly sql: SqlClient.SqlClient; readonly publicUrl: string | undefined; readonly maxPageBytes: number; readonly counts: FastCounts },
  scope: Scope.Scope
) =>
  Effect.gen(function*() {
    const catalogs = yield* CatalogService
    const clock = yield* Effect.clock
    const served: { catalog: Catalog; indexing: boolean } = { catalog: yield* catalogs.get, indexing: false }
    yield* catalogs.changes.pipe(
      Stream.runForEach((catalog) => Effect.sync(() => void (served.catalog = catalog))),
      Effect.forkIn(scope)
    )
    const backfill = yield* Effect.serviceOption(Backfill)
    if (Option.isSome(backfill)) {
      yield* backfill.value.changes.pipe(
        Stream.runForEach((progress) => Effect.sync(() => void (served.indexing = progress.running))),
        Effect.forkIn(scope)
      )
    }
    slot.current = fastPg({
      ...options,
      catalog: () => served.catalog,
      indexing: () => served.indexing,
      nowMillis: () => clock.unsafeCurrentTimeMillis()
    })
    yield* Effect.addFinalizer(() => Effect.sync(() => void (slot.current = undefined)))
  })
