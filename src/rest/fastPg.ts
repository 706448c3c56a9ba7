/**
 * `GET /fhir/{type}/{id}` of a current version and `GET /fhir/{type}?...` as JSON on Postgres, answered from the
 * Node request itself as on a SQLite file (fastRead.ts, fastSearch.ts): the same checks (`fastReadTarget`,
 * `planFastSearch`), the same statements, run on the server's pool as named statements (parsed once on each
 * connection, then only bound and run), the stored text written as it is, with the headers the general path
 * gives. On the primary a read by id is answered from memory when the resource's
 * current version is held there (readCache.ts).
 *
 * The statements answer later than the request arrives, so the handler takes the request and, when the
 * resource is missing or deleted or a statement fails (no connection free within the pool's wait, the statement
 * deadline, a cancel), hands it to the general path (`decline`), which answers it as it always does (404, 410,
 * 503; a request that found no connection free waits for one again there). A client that goes away has its
 * statement cancelled, as on the general path.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Statement } from "@effect/sql"
import { Effect, Scope } from "effect"
import type { IncomingMessage, ServerResponse } from "node:http"
import type pg from "pg"
import type { FastHandler, FastSlot } from "../http/Server.ts"
import { answerRead, answerSearch, type FastCounts, fastReadTarget, followServed } from "./fastRead.ts"
import { answerPlanLater, type FastSearchPlanning, planFastSearch, preparedLimit, textHash } from "./fastSearch.ts"
import { ChangeFeed } from "../db/ChangeFeed.ts"
import { databaseLimit } from "../db/errors.ts"
import type { Admission } from "../http/FrontDoor.ts"
import type { ReadCache } from "./readCache.ts"
import type { SearchCache } from "./searchCache.ts"
import type { SearchsetPlan } from "./search.ts"

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
  /** The primary's current versions in memory (readCache.ts); none on a replica, which reads the database. */
  readonly cache?: ReadCache | undefined
  /** The primary's search results in memory (searchCache.ts); none on a replica. */
  readonly searches?: SearchCache | undefined
}

/** A statement's key in the search cache: its name and its values, or none for values JSON cannot hold (then it is not kept). */
const cacheKey = (name: string, values: ReadonlyArray<unknown>): string | undefined => {
  try {
    return `${name}\u0000${JSON.stringify(values)}`
  } catch {
    return undefined
  }
}

/** The fast read and search on `options.pool`. */
export const fastPg = (options: FastPgOptions): FastHandler => {
  const { pool, counts, cache, searches } = options
  // A search's statement is named by its text (a search's text depends on its shape, not its values): the first
  // `preparedLimit` texts are prepared on each connection that runs them, any later one is parsed each time.
  // After five runs Postgres may keep one plan for every value. Planning each run instead cost more than the
  // rest of a token search's statement (at 10x the Synthea data: 8.2 against 4.4 ms median); the shape that such
  // a plan ruined (`r.rkey IN (matches) ORDER BY r.rkey`, which for a common LOINC code read all 4,870 matches
  // and sorted them, 64 ms) is now read in key order from the lookup index (`orderedPage`), whatever the value.
  const names = new Map<string, string>()
  const nameOf = (text: string): string | undefined => {
    const name = `svc_fs_${(textHash(text) >>> 0).toString(36)}_${text.length}`
    const known = names.get(name)
    if (known === text) return name
    if (known !== undefined || names.size >= preparedLimit) return undefined
    names.set(name, text)
    return name
  }

  /**
   * A connection of the pool, and how to hand it back. A client that goes away before the answer has the
   * statement cancelled, as the general path does (src/db/postgresOpen.ts: the cancel goes on a connection of
   * its own, and this one is closed once it has gone through).
   */
  const connect = async (response: ServerResponse): Promise<{ readonly client: pg.PoolClient; readonly release: () => void }> => {
    const client = await pool.connect()
    const pid: unknown = Reflect.get(client, "processID")
    const gone = () => {
      if (typeof pid === "number") pool.query(`SELECT pg_cancel_backend(${pid})`, () => undefined)
    }
    response.once("close", gone)
    return {
      client,
      release: () => {
        response.off("close", gone)
        client.release()
      }
    }
  }

  /** Runs `f` on a connection of the pool, handed back after. */
  const onConnection = async <A>(response: ServerResponse, f: (client: pg.PoolClient) => Promise<A>): Promise<A> => {
    const { client, release } = await connect(response)
    try {
      return await f(client)
    } finally {
      release()
    }
  }

  /**
   * Answers a planned search: each statement's rows from the search cache when held there, from the database
   * otherwise, on one connection taken at the first statement that needs it and handed back at the end.
   */
  const searchOn = async (response: ServerResponse, plan: SearchsetPlan): Promise<string> => {
    const ticket = searches?.ticket() ?? 0
    let taken: { readonly client: pg.PoolClient; readonly release: () => void } | undefined
    const all = async <A>(statement: Statement.Statement<A>): Promise<ReadonlyArray<A>> => {
      const [text, values] = statement.compile()
      const name = nameOf(text)
      const key = searches === undefined || name === undefined ? undefined : cacheKey(name, values)
      const held = key === undefined ? undefined : searches?.get(key, text)
      if (held !== undefined) return held as ReadonlyArray<A>
      taken ??= await connect(response)
      const result = await taken.client.query({ ...(name === undefined ? {} : { name }), text, values: values as Array<unknown> })
      if (key !== undefined) searches?.fill(key, text, result.rows, ticket)
      return result.rows as ReadonlyArray<A>
    }
    try {
      return await answerPlanLater(plan, all)
    } finally {
      taken?.release()
    }
  }

  return (request, response, admission, decline) => {
    const target = fastReadTarget(request, admission, options.catalog())
    if (target !== undefined) {
      const held = cache?.get(target.type, target.id)
      if (held !== undefined) {
        counts.reads++
        return answerRead(response, admission, held)
      }
      const ticket = cache?.ticket() ?? 0
      onConnection(response, (client) => client.query<Row>({ ...currentVersion, values: [target.type, target.id] })).then(
        (result) => {
          const row = result.rows[0]
          if (row !== undefined && row.content !== null) {
            cache?.fill(target.type, target.id, { version: row.version, commit_ts: row.commit_ts, content: row.content }, ticket)
          }
          // A client that went away was logged by the front door (499): nothing is left to answer.
          if (admission.closed) return
          if (row === undefined || row.content === null) return decline(request, response)
          counts.reads++
          answerRead(response, admission, { version: row.version, commit_ts: row.commit_ts, content: row.content })
        },
        (error: unknown) => failed(request, response, admission, decline, error)
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
    const planned = plan
    searchOn(response, planned).then(
      (text) => {
        if (admission.closed) return
        counts.searches++
        answerSearch(response, admission, text)
      },
      (error: unknown) => failed(request, response, admission, decline, error)
    )
    return true
  }
}

/**
 * A statement that failed goes to the general path, which answers as it does (503, ...); one that found no pool
 * connection within the pool's wait is marked so that the general path answers its 503 at once.
 */
const failed = (request: IncomingMessage, response: ServerResponse, admission: Admission, decline: (request: IncomingMessage, response: ServerResponse) => void, error: unknown) => {
  if (admission.closed) return
  if (databaseLimit(error) === "pool") admission.poolWaited = true
  decline(request, response)
}

/**
 * Puts the Postgres fast read and search in `slot` while the server serves, following the catalog as it is
 * rebuilt and the backfill's progress; the slot is emptied when the current scope closes (before the pool, which
 * closes with the database's `scope`).
 */
export const installFastPg = (
  slot: FastSlot,
  options: {
    readonly pool: pg.Pool
    readonly sql: SqlClient.SqlClient
    readonly publicUrl: string | undefined
    readonly maxPageBytes: number
    readonly counts: FastCounts
    /** Kept up to date from the change feed while `scope` lasts: the primary's. */
    readonly cache?: ReadCache | undefined
    /** The same. */
    readonly searches?: SearchCache | undefined
  },
  scope: Scope.Scope
) =>
  Effect.gen(function*() {
    const clock = yield* Effect.clock
    const { cache, searches } = options
    const served = yield* followServed(scope, () => searches?.invalidate())
    if (cache !== undefined || searches !== undefined) {
      const feed = yield* ChangeFeed
      yield* Scope.extend(feed.onPublish((committed) => {
        cache?.apply(committed)
        searches?.apply(committed)
      }), scope)
    }
    slot.current = fastPg({ ...options, ...served, nowMillis: () => clock.unsafeCurrentTimeMillis() })
    yield* Effect.addFinalizer(() => Effect.sync(() => void (slot.current = undefined)))
  })
