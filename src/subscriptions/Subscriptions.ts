/**
 * R4 Subscriptions (https://hl7.org/fhir/R4/subscription.html; interface spec, capability 7, Subscription fields,
 * Subscription status, Subscription notifications; docs/subscriptions.md): a follower of the change feed that
 * keeps the Subscriptions that deliver (`active`, `error`, and `requested`, which it turns `active`) in a
 * `CriteriaIndex`, tests each commit's created and updated resources against the Subscriptions the index says
 * they could match, and queues what matched, one notification per Subscription and commit, to the Subscription's
 * own delivery fiber (Delivery.ts). Only the process that writes the database runs it (the primary).
 *
 * It joins the feed before it reads the Subscriptions, so that a Subscription created meanwhile is in the
 * feed. A follower that fell behind reads what it missed from the log (ChangeFeed.ts): no commit is skipped.
 */
import { Chunk, Context, Effect, Either, ExecutionStrategy, Exit, Layer, Scope, Stream, SubscriptionRef } from "effect"
import type { Catalog } from "../catalog/Catalog.ts"
import { CatalogService } from "../catalog/CatalogService.ts"
import { type Change, ChangeFeed, type Committed } from "../db/ChangeFeed.ts"
import { Database } from "../db/Database.ts"
import { type Access, accessOf } from "../auth/access/Access.ts"
import { matchRestriction } from "../auth/access/enforce.ts"
import { readCurrent } from "../store/reads.ts"
import { ResourceStore } from "../store/ResourceStore.ts"
import { updateCommand } from "../store/commands.ts"
import { type Criteria, readCriteria } from "./criteria.ts"
import { CriteriaIndex } from "./criteriaIndex.ts"
import { type Deliverer, type DeliveryServices, startDeliverer, type Target } from "./Delivery.ts"
import { principalOf } from "./grants.ts"
import { matchingVersions } from "./matching.ts"
import type { MatchedVersion, Notification } from "./notification.ts"
import { SubscriptionSockets } from "./SubscriptionSockets.ts"

/** The statuses of a Subscription that is delivered to. */
const delivering: ReadonlySet<string> = new Set(["active", "error", "requested"])

export interface SubscriptionsOptions {
  /** `[base]` of the fullUrls in notifications: `server.public_url`'s, or the listen address's. */
  readonly base: string
}

export class Subscriptions extends Context.Tag("svc/subscriptions/Subscriptions")<Subscriptions, {
  /** How many Subscriptions are delivered to (active, error or requested, with readable criteria). */
  readonly watched: Effect.Effect<number>
  /** Waits until every commit published so far has been matched and its notifications queued. */
  readonly settled: Effect.Effect<void>
}>() {}

interface Watched {
  readonly id: string
  readonly status: string
  readonly criteria: Criteria
  /** What the token that wrote it may do; undefined when written without one. */
  readonly access: Access | undefined
}

const objectOf = (value: unknown): Record<string, unknown> | undefined =>
  typeof value === "object" && value !== null && !Array.isArray(value) ? value as Record<string, unknown> : undefined

/** The Subscription in `text` as delivery reads it. */
const targetOf = (text: string): Target => {
  const resource = JSON.parse(text) as Record<string, unknown>
  const channel = objectOf(resource["channel"]) ?? {}
  return {
    status: typeof resource["status"] === "string" ? resource["status"] : "",
    channelType: typeof channel["type"] === "string" ? channel["type"] : undefined,
    endpoint: typeof channel["endpoint"] === "string" ? channel["endpoint"] : undefined,
    header: channel["header"]
  }
}

/** The reason of an `error` text, without the instant before it (`<instant>: <reason>`). */
const reasonOf = (error: unknown): string | undefined =>
  typeof error === "string" ? error.replace(/^\d{4}-\d\d-\d\dT[0-9:.]+Z: /, "") : undefined

export const make = (options: SubscriptionsOptions): Effect.Effect<Subscriptions["Type"], never, Scope.Scope | Database | ChangeFeed | CatalogService | ResourceStore | SubscriptionSockets> =>
  Effect.gen(function*() {
    const db = yield* Database
    const feed = yield* ChangeFeed
    const catalogs = yield* CatalogService
    const store = yield* ResourceStore
    const sockets = yield* SubscriptionSockets
    const scope = yield* Effect.scope

    const index = new CriteriaIndex()
    const watched = new Map<string, Watched>()
    const deliverers = new Map<string, { readonly deliverer: Deliverer; readonly scope: Scope.CloseableScope }>()
    let catalog: Catalog = yield* catalogs.get
    const handledTs = yield* SubscriptionRef.make(yield* feed.published)

    const setStatus = (id: string, status: "active" | "error", error: string | undefined) =>
      store.transaction({ base: options.base, catalog, maxBundleEntries: 1 }, (env) =>
        Effect.gen(function*() {
          const current = yield* readCurrent(env.sql, "Subscription", id)
          if (current === undefined || current.content === null) return
          const resource = JSON.parse(current.content) as Record<string, unknown>
          // The server never changes an `off` Subscription, nor writes a status it already has for the same reason.
          if (resource["status"] === "off") return
          if (resource["status"] === status && reasonOf(resource["error"]) === reasonOf(error)) return
          const { error: _previous, ...rest } = resource
          yield* updateCommand(env, "Subscription", id, { ...rest, status, ...(error === undefined ? {} : { error }) }, current.version)
        })).pipe(
        Effect.asVoid,
        Effect.catchAllCause((cause) => Effect.logWarning("the status of a Subscription could not be written", { subscription: id, status }, cause))
      )

    const services: DeliveryServices = {
      base: options.base,
      read: (id) =>
        db.withReader((sql) => readCurrent(sql, "Subscription", id)).pipe(
          Effect.map((row) => (row === undefined || row.content === null ? undefined : targetOf(row.content))),
          // A read that fails is a failed attempt, tried again after the spacing like any other.
          Effect.catchAll((error) => Effect.as(Effect.logWarning("a Subscription could not be read for its delivery", { subscription: id }, error), "unreadable" as const))
        ),
      setStatus,
      ping: sockets.ping
    }

    const stopDelivering = (id: string) =>
      Effect.suspend(() => {
        const running = deliverers.get(id)
        deliverers.delete(id)
        return running === undefined ? Effect.void : Scope.close(running.scope, Exit.void)
      })

    const delivererOf = (id: string) =>
      Effect.suspend(() => {
        const running = deliverers.get(id)
        if (running !== undefined) return Effect.succeed(running.deliverer)
        return Effect.gen(function*() {
          const own = yield* Scope.fork(scope, ExecutionStrategy.sequential)
          const deliverer = yield* startDeliverer(id, services).pipe(Scope.extend(own))
          deliverers.set(id, { deliverer, scope: own })
          return deliverer
        })
      })

    /** The grant kept for Subscription `id` (grants.ts), as an Access. */
    const grantOf = (id: string) =>
      db.withReader((sql) => sql<{ readonly principal: string }>`SELECT principal FROM svc_subscription_grants WHERE id = ${id}`).pipe(
        Effect.map((rows) => (rows[0] === undefined ? undefined : accessOf(principalOf(rows[0].principal))))
      )

    /** Files, refiles or forgets the Subscription `id` as its current text says (and with the grant it was written under). */
    const track = (id: string, text: string | null, grant?: Access) =>
      Effect.gen(function*() {
        const resource = text === null ? undefined : JSON.parse(text) as Record<string, unknown>
        const status = resource === undefined ? undefined : resource["status"]
        const criteria = resource === undefined ? undefined : readCriteria(catalog, resource["criteria"])
        if (resource === undefined || typeof status !== "string" || !delivering.has(status) || criteria === undefined || Either.isLeft(criteria)) {
          index.remove(id)
          watched.delete(id)
          yield* stopDelivering(id)
          if (resource === undefined) yield* sockets.unbindAll(id)
          return
        }
        index.add(id, criteria.right)
        watched.set(id, { id, status, criteria: criteria.right, access: grant ?? (yield* grantOf(id)) })
        if (status === "requested") yield* Effect.forkIn(setStatus(id, "active", undefined), scope)
      })

    /** Every Subscription read again (at start, and when the catalog changed how criteria read). */
    const trackAll = Effect.gen(function*() {
      const rows = yield* db.withReader((sql) =>
        sql<{ readonly id: string; readonly content: string; readonly principal: string | null }>`
          SELECT r.id, v.content, g.principal FROM resources r JOIN resource_versions v ON v.rkey = r.rkey AND v.version = r.version
          LEFT JOIN svc_subscription_grants g ON g.id = r.id
          WHERE r.type = 'Subscription' AND NOT r.deleted`)
      const seen = new Set<string>()
      for (const row of rows) {
        seen.add(row.id)
        yield* track(row.id, row.content, row.principal === null ? undefined : accessOf(principalOf(row.principal)))
      }
      for (const id of [...watched.keys()]) if (!seen.has(id)) yield* track(id, null)
    })

    /** The notifications of one commit: the changes each Subscription's criteria match, by Subscription. */
    const matchCommit = (committed: Committed) =>
      Effect.gen(function*() {
        const candidates = new Map<string, Array<Change>>()
        for (const change of committed.changes) {
          if (change.op === "delete" || change.resource === null || !index.watches(change.type)) continue
          const resource = JSON.parse(change.resource) as Record<string, unknown>
          for (const id of index.candidates(change.type, resource, catalog)) {
            const list = candidates.get(id)
            if (list === undefined) candidates.set(id, [change])
            else list.push(change)
          }
        }
        for (const [id, changes] of candidates) {
          const subscription = watched.get(id)
          if (subscription === undefined) continue
          const matched = yield* db.withReader((sql) =>
            subscription.access === undefined
              ? matchingVersions(sql, subscription.criteria, changes.map((change) => change.id))
              : matchRestriction(sql, subscription.access, catalog, subscription.criteria.type, "r").pipe(
                Effect.flatMap((restriction) => matchingVersions(sql, subscription.criteria, changes.map((change) => change.id), restriction)),
                // A grant that may not read the type at all: nothing it could be told of.
                Effect.catchTag("FhirError", () => Effect.succeed(new Map<string, number>()))
              ))
          // A version already replaced when it is matched is not notified on its own: its successor is matched in turn.
          const versions: Array<MatchedVersion> = changes
            .filter((change) => matched.get(change.id) === change.version)
            .map((change) => ({ type: change.type, id: change.id, version: change.version, op: change.op, resource: change.resource! }))
          if (versions.length === 0) continue
          const notification: Notification = { commitTs: committed.commitTs, versions }
          const deliverer = yield* delivererOf(id)
          if (!deliverer.offer(notification)) yield* Effect.logWarning("a Subscription's queue is full: a notification was dropped", { subscription: id })
        }
      })

    const handle = (committed: Committed) =>
      Effect.gen(function*() {
        const current = yield* catalogs.get
        if (current.generation !== catalog.generation) {
          catalog = current
          yield* trackAll
        }
        for (const change of committed.changes) {
          if (change.type === "Subscription") yield* track(change.id, change.op === "delete" ? null : change.resource)
        }
        yield* matchCommit(committed)
      }).pipe(
        Effect.catchAllCause((cause) => Effect.logError("matching a commit against the Subscriptions failed", { commit_ts: committed.commitTs }, cause)),
        Effect.ensuring(SubscriptionRef.update(handledTs, (ts) => Math.max(ts, committed.commitTs)))
      )

    const next = yield* feed.pull()
    yield* trackAll.pipe(Effect.catchAllCause((cause) => Effect.logError("the Subscriptions could not be read", cause)))
    yield* next.pipe(
      Effect.flatMap((events) => Effect.forEach(Chunk.toReadonlyArray(events), (event) => event._tag === "Committed" ? handle(event) : Effect.void, { discard: true })),
      Effect.forever,
      Effect.forkScoped
    )

    return Subscriptions.of({
      watched: Effect.sync(() => watched.size),
      settled: Effect.flatMap(feed.published, (ts) =>
        handledTs.changes.pipe(Stream.takeUntil((handled) => handled >= ts), Stream.runDrain))
    })
  })

export const layer = (options: SubscriptionsOptions) => Layer.scoped(Subscriptions, make(options))
