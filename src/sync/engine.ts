/**
 * The live-query engine (LiveQueries.ts; docs/sync.md): each live query holds its result page (ids and
 * versions); a follower of the change feed finds, for each commit, the queries the commit can change (those
 * whose result holds a changed resource, and those the relevance index, src/subscriptions/criteriaIndex.ts,
 * names for a created or updated resource), searches each again as its caller would, and sends each connection
 * one `changes` message with what entered, changed and left each of its affected queries.
 *
 * The connection layer checks the caller's token, charges each subscribe and closes the queries of a token
 * that expired (`closeAll`); here every search of a query, first or again, is its caller's search.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import { Chunk, Clock, Effect, Either, Layer, SubscriptionRef } from "effect"
import { type Access, accessOf } from "../auth/access/Access.ts"
import { searchRestriction } from "../auth/access/conditions.ts"
import { compartmentGranted, searchGranted } from "../auth/access/enforce.ts"
import type { Catalog } from "../catalog/Catalog.ts"
import { CatalogService } from "../catalog/CatalogService.ts"
import { ChangeFeed, type Committed } from "../db/ChangeFeed.ts"
import { Database } from "../db/Database.ts"
import { fail, type FhirError } from "../http/FhirError.ts"
import { operationOutcome } from "../http/OperationOutcome.ts"
import { resolveCompartment, searchedTypes } from "../rest/compartment.ts"
import * as Search from "../search/Search.ts"
import { parseSearch } from "../search/parse/parseSearch.ts"
import type { SearchScope } from "../search/parse/parseScope.ts"
import { CriteriaIndex } from "../subscriptions/criteriaIndex.ts"
import { LiveQueries, type Subscribed, type SyncConnection } from "./LiveQueries.ts"
import type { QueryChanges } from "./protocol.ts"

/** A live result holds at most this many resources (`_count` above it is read as it); 100 without `_count`. */
export const maxResult = 1000
export const defaultResult = 100

/** A resume reads at most this many written resources from the log; more, and the query gets a whole result. */
export const resumeLimit = 10_000

/** Result parameters a live query does not take: a live result is whole resources, the matches only, from the first. */
const refusedParameters: ReadonlySet<string> = new Set(["_include", "_revinclude", "_total", "_summary", "_elements", "_offset", "_cursor", "_contained", "_containedType"])

const queryForm = /^(?:([A-Z][A-Za-z]*)\/([A-Za-z0-9\-.]{1,64})\/)?([A-Z][A-Za-z0-9]*)(?:\?(.*))?$/s

/** A query read: what it searches, and the criteria the relevance index files it under. */
interface Query {
  readonly type: string
  readonly params: URLSearchParams
  readonly scope: string | SearchScope
  readonly condition: ((sql: SqlClient.SqlClient) => import("@effect/sql").Statement.Fragment) | undefined
  readonly compartment: { readonly name: string; readonly id: string } | undefined
  readonly text: string
}

interface Failed {
  readonly code: string
  readonly error: FhirError
}

/** `Type?params` or `Compartment/id/Type?params`, read as a live query, or why not. */
export const readQuery = (catalog: Catalog, text: string): Either.Either<Query & { readonly search: import("../search/parse/SearchRequest.ts").SearchRequest }, Failed> => {
  const invalid = (error: FhirError): Either.Either<never, Failed> => Either.left({ code: "InvalidQuery", error })
  const form = typeof text === "string" ? queryForm.exec(text.trim()) : null
  if (form === null) return invalid(fail("invalid", `${JSON.stringify(text)} is not a search (Type?name=value&... or Patient/<id>/Type?...)`, 400))
  const [, compartmentName, compartmentId, type, query] = form
  const params = new URLSearchParams(query ?? "")
  const refused = [...new Set([...params.keys()].filter((key) => refusedParameters.has(key.split(":")[0]!)))]
  if (refused.length > 0) {
    return Either.left({ code: "NotSupported", error: fail("not-supported", `a live query does not take ${refused.join(", ")}: its result is the first page of whole matching resources`, 400) })
  }
  const count = params.get("_count")
  if (count === null) params.set("_count", String(defaultResult))
  else if (/^\d+$/.test(count) && Number(count) > maxResult) params.set("_count", String(maxResult))
  let scope: string | SearchScope = type!
  let condition: Query["condition"]
  if (compartmentName !== undefined && compartmentId !== undefined) {
    const resolved = resolveCompartment(catalog, compartmentName, compartmentId, type!)
    if (Either.isLeft(resolved)) return invalid(resolved.left)
    scope = resolved.right.scope
    condition = resolved.right.condition
  } else if (!catalog.isResourceType(type!)) {
    return invalid(fail("not-found", `${type} is not a resource type this server knows`, 400))
  }
  const parsed = parseSearch(type!, params, catalog, { lenient: false })
  if (Either.isLeft(parsed)) return invalid(fail("invalid", parsed.left.map((problem) => problem.message).join("; "), 400))
  return Either.right({
    type: type!,
    params,
    scope,
    condition,
    compartment: compartmentName === undefined ? undefined : { name: compartmentName, id: compartmentId! },
    text,
    search: parsed.right
  })
}

interface Live {
  readonly key: string
  readonly connection: SyncConnection
  readonly id: string
  readonly query: Query
  /** What its caller may search: replaced when the connection's token changes. */
  access: Access
  /** `Type/id` → version, of the resources the result holds. */
  held: Map<string, number>
}

interface Page {
  /** `Type/id` → [version, resource JSON]. */
  readonly rows: Map<string, readonly [number, unknown]>
  readonly order: ReadonlyArray<string>
}

export const make = Effect.gen(function*() {
  const db = yield* Database
  const feed = yield* ChangeFeed
  const catalogs = yield* CatalogService
  const byConnection = new Map<SyncConnection, Map<string, Live>>()
  const byKey = new Map<string, Live>()
  /** `Type/id` → keys of the live queries whose result holds it. */
  const holders = new Map<string, Set<string>>()
  const index = new CriteriaIndex()
  let nextKey = 0
  let wokenCount = 0
  const handled = yield* SubscriptionRef.make(yield* feed.published)
  // A query is searched and held, and a commit taken in, one at a time: a commit the first search did not see is
  // taken in after the query is held, so none falls between the two.
  const lock = yield* Effect.makeSemaphore(1)

  /** The query's page as its caller would search it now. */
  const searchPage = (live: Pick<Live, "query" | "access">, catalog: Catalog) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const rows = yield* db.withReader((sql) =>
        Search.run(sql, {
          catalog,
          params: live.query.params,
          lenient: false,
          restriction: searchRestriction(sql, live.access, catalog, now),
          ...(live.query.condition === undefined ? {} : { condition: live.query.condition(sql) })
        }, live.query.scope))
      const page: Page = { rows: new Map(), order: [] }
      for (const row of rows.matches) {
        const ref = `${row.type}/${row.id}`
        page.rows.set(ref, [row.version ?? 0, JSON.parse(row.content)]);
        (page.order as Array<string>).push(ref)
      }
      return page
    })

  const hold = (live: Live, page: Page) => {
    for (const ref of live.held.keys()) {
      const keys = holders.get(ref)
      keys?.delete(live.key)
      if (keys?.size === 0) holders.delete(ref)
    }
    live.held = new Map([...page.rows].map(([ref, [version]]) => [ref, version]))
    for (const ref of live.held.keys()) {
      let keys = holders.get(ref)
      if (keys === undefined) holders.set(ref, keys = new Set())
      keys.add(live.key)
    }
  }

  const drop = (live: Live) => {
    hold(live, { rows: new Map(), order: [] })
    index.remove(live.key)
    byKey.delete(live.key)
    byConnection.get(live.connection)?.delete(live.id)
  }

  const queryFailed = (connection: SyncConnection, id: string, failed: Failed) =>
    Effect.sync((): Subscribed => {
      connection.send({
        type: "QueryFailed",
        id,
        code: failed.code,
        outcome: operationOutcome([{ severity: "error", code: failed.error.code, diagnostics: failed.error.diagnostics }])
      })
      return { _tag: "Failed", code: failed.code }
    })

  /** Whether `access` may search `query`: undefined, or the refusal. */
  const granted = (access: Access, catalog: Catalog, query: Query) =>
    Effect.zipRight(
      searchGranted(access, catalog, query.scope, query.params),
      query.compartment === undefined ? Effect.void : compartmentGranted(access, catalog, query.compartment.name, query.compartment.id, searchedTypes(query.scope))
    )

  const sendResult = (live: Live, page: Page) =>
    Effect.flatMap(SubscriptionRef.get(handled), (commitTs) =>
      Effect.sync(() =>
        void live.connection.send({
          type: "result",
          id: live.id,
          commitTs,
          resources: page.order.map((ref) => page.rows.get(ref)![1]),
          total: page.order.length
        })))

  /**
   * A resumed query (`since`): what its result missed, from the change log. The resources of the query's types
   * written after `since` are read from the log; those in the result now are sent as `entered` (a client treats
   * entered and changed alike, as the resource to keep), the others as `left`. That is exact when the result is
   * not a full page: a resource that left it without a write of its own could only have been pushed off a full
   * page. A full page, or more writes since then than `resumeLimit`, gets a whole `result` instead.
   */
  const resume = (live: Live, page: Page, since: number) =>
    Effect.gen(function*() {
      const commitTs = yield* SubscriptionRef.get(handled)
      const types = typeof live.query.scope === "string" ? [live.query.scope] : [...(live.query.scope.types ?? [])]
      const count = Number(live.query.params.get("_count") ?? defaultResult)
      const written = page.order.length >= count || since < 0
        ? undefined
        : yield* db.withReader((sql) =>
          sql<{ readonly type: string; readonly id: string }>`
            SELECT r.type, r.id FROM resource_versions v JOIN resources r ON r.rkey = v.rkey
            WHERE v.commit_ts > ${since} AND ${sql.in("r.type", types)}
            UNION
            SELECT r.type, r.id FROM resource_edits e JOIN resources r ON r.rkey = e.rkey
            WHERE e.commit_ts > ${since} AND ${sql.in("r.type", types)}
            LIMIT ${resumeLimit + 1}`).pipe(Effect.orDie)
      if (written === undefined || written.length > resumeLimit) return yield* sendResult(live, page)
      const refs = written.map((row) => `${row.type}/${row.id}`)
      const entered = refs.filter((ref) => page.rows.has(ref)).map((ref) => page.rows.get(ref)![1])
      const left = refs.filter((ref) => !page.rows.has(ref))
      if (entered.length + left.length > 0) {
        live.connection.send({ type: "changes", commitTs, queries: { [live.id]: { entered, changed: [], left } } })
      }
      live.connection.send({ type: "caughtUp", id: live.id, commitTs })
    })

  const held: Subscribed = { _tag: "Held" }

  const subscribe = (connection: SyncConnection, id: string, text: string, since?: number): Effect.Effect<Subscribed> =>
    Effect.gen(function*() {
      const catalog = yield* catalogs.get
      const read = readQuery(catalog, text)
      if (Either.isLeft(read)) return yield* queryFailed(connection, id, read.left)
      const query = read.right
      const access = accessOf(connection.principal)
      const allowed = yield* Effect.either(granted(access, catalog, query))
      if (Either.isLeft(allowed)) return yield* queryFailed(connection, id, { code: "Forbidden", error: allowed.left })
      const previous = byConnection.get(connection)?.get(id)
      if (previous !== undefined) drop(previous)
      const live: Live = { key: `q${nextKey++}`, connection, id, query, access, held: new Map() }
      // Held before its first search: a commit meanwhile wakes it and is compared with what the search read.
      const page = yield* searchPage(live, catalog).pipe(
        Effect.catchTag("SqlError", (error) => Effect.die(error)),
        Effect.catchTag("SearchError", (error) => Effect.fail<Failed>({ code: "InvalidQuery", error: fail(error.code, error.diagnostics, 400) })),
        Effect.either
      )
      if (Either.isLeft(page)) return yield* queryFailed(connection, id, page.left)
      let queries = byConnection.get(connection)
      if (queries === undefined) byConnection.set(connection, queries = new Map())
      queries.set(id, live)
      byKey.set(live.key, live)
      index.add(live.key, { type: query.type, text: query.text, search: query.search })
      hold(live, page.right)
      if (since === undefined) yield* sendResult(live, page.right)
      else yield* resume(live, page.right, since)
      return held
    }).pipe(lock.withPermits(1), Effect.catchAllCause((cause) =>
      Effect.zipRight(
        Effect.logError("a live query could not be started", cause),
        queryFailed(connection, id, { code: "ServerError", error: fail("exception", "the server failed to start this live query; see its log") })
      )))

  /** Searches a held query again and sends its whole `result` (a reload, a new token); under the lock. */
  const refresh = (live: Live, catalog: Catalog) =>
    Effect.gen(function*() {
      const page = yield* Effect.either(searchPage(live, catalog))
      if (Either.isLeft(page) || byKey.get(live.key) !== live) return
      hold(live, page.right)
      yield* sendResult(live, page.right)
    })

  /**
   * What changed between the result held and `page`. `edited` holds the versions the commit changed in place
   * (`$meta-add`, `$meta-delete`), by `Type/id`: such a version held has changed too.
   */
  const diff = (live: Live, page: Page, edited: ReadonlyMap<string, number>): QueryChanges | undefined => {
    const entered: Array<unknown> = []
    const changed: Array<unknown> = []
    const left: Array<string> = []
    for (const ref of page.order) {
      const [version, resource] = page.rows.get(ref)!
      const was = live.held.get(ref)
      if (was === undefined) entered.push(resource)
      else if (was !== version || edited.get(ref) === version) changed.push(resource)
    }
    for (const ref of live.held.keys()) if (!page.rows.has(ref)) left.push(ref)
    return entered.length + changed.length + left.length === 0 ? undefined : { entered, changed, left }
  }

  const handle = (committed: Committed) =>
    Effect.gen(function*() {
      const catalog = yield* catalogs.get
      const woken = new Set<string>()
      const edited = new Map<string, number>()
      for (const change of committed.changes) {
        if (change.inPlace === true) edited.set(`${change.type}/${change.id}`, change.version)
        for (const key of holders.get(`${change.type}/${change.id}`) ?? []) woken.add(key)
        if (change.op === "delete" || change.resource === null || !index.watches(change.type)) continue
        for (const key of index.candidates(change.type, JSON.parse(change.resource) as Record<string, unknown>, catalog)) woken.add(key)
      }
      const messages = new Map<SyncConnection, Record<string, QueryChanges>>()
      for (const key of woken) {
        const live = byKey.get(key)
        if (live === undefined) continue
        wokenCount++
        const page = yield* Effect.either(searchPage(live, catalog))
        // Unsubscribed (or its connection gone) while it was searched: nothing to hold or send.
        if (Either.isLeft(page) || byKey.get(key) !== live) continue
        const changes = diff(live, page.right, edited)
        hold(live, page.right)
        if (changes === undefined) continue
        let queries = messages.get(live.connection)
        if (queries === undefined) messages.set(live.connection, queries = {})
        queries[live.id] = changes
      }
      for (const [connection, queries] of messages) connection.send({ type: "changes", commitTs: committed.commitTs, queries })
    }).pipe(
      lock.withPermits(1),
      Effect.catchAllCause((cause) => Effect.logError("a commit could not be taken into the live queries", { commit_ts: committed.commitTs }, cause)),
      Effect.ensuring(SubscriptionRef.update(handled, (ts) => Math.max(ts, committed.commitTs)))
    )

  const next = yield* feed.pull()
  yield* next.pipe(
    Effect.flatMap((events) => Effect.forEach(Chunk.toReadonlyArray(events), (event) => event._tag === "Committed" ? handle(event) : Effect.void, { discard: true })),
    Effect.forever,
    Effect.forkScoped
  )

  return LiveQueries.of({
    subscribe: (connection, id, query, since) => subscribe(connection, id, query, since),
    unsubscribe: (connection, id) =>
      Effect.sync(() => {
        const live = byConnection.get(connection)?.get(id)
        if (live !== undefined) drop(live)
      }),
    reload: (connection, ids) =>
      lock.withPermits(1)(Effect.gen(function*() {
        const catalog = yield* catalogs.get
        for (const id of ids) {
          const live = byConnection.get(connection)?.get(id)
          if (live !== undefined) yield* refresh(live, catalog)
        }
      })),
    reauthorize: (connection, fresh) =>
      lock.withPermits(1)(Effect.gen(function*() {
        const catalog = yield* catalogs.get
        const access = accessOf(connection.principal)
        for (const live of [...(byConnection.get(connection)?.values() ?? [])]) {
          const allowed = yield* Effect.either(granted(access, catalog, live.query))
          if (Either.isLeft(allowed)) {
            drop(live)
            connection.send({ type: "closed", id: live.id, code: "Forbidden", reason: allowed.left.diagnostics })
            continue
          }
          live.access = access
          if (fresh) yield* refresh(live, catalog)
        }
      })),
    closeAll: (connection, code, reason) =>
      Effect.sync(() => {
        for (const live of [...(byConnection.get(connection)?.values() ?? [])]) {
          drop(live)
          connection.send({ type: "closed", id: live.id, code, reason })
        }
      }),
    disconnect: (connection) =>
      Effect.sync(() => {
        for (const live of [...(byConnection.get(connection)?.values() ?? [])]) drop(live)
        byConnection.delete(connection)
      }),
    held: (connection) => byConnection.get(connection)?.size ?? 0,
    handled: SubscriptionRef.get(handled),
    woken: Effect.sync(() => wokenCount)
  })
})

/** The engine, following the change feed for as long as its scope lasts. */
export const layer = Layer.scoped(LiveQueries, make)
