/** What the Subscription tests share: a server with the real R4 packages, Subscriptions and resources to create, and a watch on a Subscription's versions. */
import { expect } from "@effect/vitest"
import { Effect, Queue, type Scope, Stream } from "effect"
import type { BackendKind } from "../support/backends.ts"
import { realPackageCache, registryUrl } from "../support/npmRegistry.ts"
import { call, startServer, type TestServer } from "../support/server.ts"

/** A server with the real R4 packages (Subscription is not in the fixture catalog). */
export const subscriptionServer = (kind: BackendKind): Effect.Effect<TestServer, unknown, Scope.Scope> =>
  startServer(kind, { conformance: { package_registry: registryUrl ?? "", package_cache: realPackageCache } })

export interface Channel {
  readonly type?: string
  readonly endpoint?: string
  readonly header?: ReadonlyArray<string>
  readonly payload?: string
}

export const subscription = (criteria: string, channel: Channel, status = "active") => ({
  resourceType: "Subscription",
  status,
  reason: "test",
  criteria,
  channel: { type: "rest-hook", payload: "application/fhir+json", ...channel }
})

/** Creates a Subscription; its id. */
export const createSubscription = (server: TestServer, criteria: string, channel: Channel, status = "active") =>
  Effect.gen(function*() {
    const created = yield* call("POST", `${server.base}/Subscription`, { body: subscription(criteria, channel, status) })
    expect(created.status, created.text).toBe(201)
    yield* server.subscriptionsSettled
    return created.json.id as string
  })

export const observation = (code: string, options: { readonly subject?: string; readonly status?: string; readonly system?: string } = {}) => ({
  resourceType: "Observation",
  status: options.status ?? "final",
  code: { coding: [{ system: options.system ?? "http://example.org/codes", code }] },
  ...(options.subject === undefined ? {} : { subject: { reference: options.subject } })
})

/** Creates a resource; its id. */
export const create = (server: TestServer, resource: Record<string, unknown>) =>
  Effect.gen(function*() {
    const created = yield* call("POST", `${server.base}/${String(resource["resourceType"])}`, { body: resource })
    expect(created.status, created.text).toBe(201)
    return created.json.id as string
  })

/** The Subscription as it now stands. */
export const readSubscription = (server: TestServer, id: string) =>
  Effect.map(call("GET", `${server.base}/Subscription/${id}`), (reply) => reply.json as Record<string, any>)

/**
 * The versions of Subscription `id` (of every Subscription without one) committed from now on, as a queue: `take`
 * waits for the next one (the server's own status updates included). Follows the change feed, so it waits for
 * an event, never for time.
 */
export const watchSubscription = (server: TestServer, id?: string) =>
  Effect.gen(function*() {
    const versions = yield* Queue.unbounded<Record<string, any>>()
    const stream = yield* server.changeFeed.follow()
    yield* stream.pipe(
      Stream.runForEach((event) =>
        Effect.sync(() => {
          if (event._tag !== "Committed") return
          for (const change of event.changes) {
            if (change.type === "Subscription" && (id === undefined || change.id === id) && change.resource !== null) versions.unsafeOffer(JSON.parse(change.resource))
          }
        })),
      Effect.forkScoped
    )
    return versions
  })

/** The entries' resources of a notification body (a history Bundle). */
export const notified = (body: string): ReadonlyArray<Record<string, any>> => {
  const bundle = JSON.parse(body) as { resourceType: string; type: string; entry?: ReadonlyArray<{ resource: Record<string, any> }> }
  expect(bundle.resourceType).toBe("Bundle")
  expect(bundle.type).toBe("history")
  return (bundle.entry ?? []).map((entry) => entry.resource)
}
