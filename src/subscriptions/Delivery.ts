/**
 * The delivery of one Subscription's notifications (interface spec, Subscription notifications 2-8, and the
 * Subscription status table; docs/subscriptions.md, "Delivery"): one fiber per Subscription takes its
 * notifications in order from a bounded queue. A rest-hook notification is tried up to 8 times, at least 1.5 s
 * apart; before each retry the Subscription is read again, and one deleted, turned `off` or sending elsewhere
 * drops the notification, while a changed header is the one sent. Eight failures, a missing endpoint or a bad
 * `channel.header` entry put the Subscription in `error` with the time and the reason; the next notification
 * that gets through puts it back to `active`. Both are ordinary updates (a new version), made only while the
 * Subscription is not `off`. A websocket notification is `ping <id>` on the socket bound to the id, if any.
 * Retries live in memory: a restart drops them.
 */
import { Duration, Effect, Either, Queue } from "effect"
import { readChannelHeaders } from "./channelHeaders.ts"
import { type Notification, notificationBody } from "./notification.ts"
import { defaultTimeout, describeEndpoint, postNotification } from "./restHook.ts"

/** Attempts of one rest-hook notification, and the least time between two (interface spec, Limits). */
export const attempts = 8
export const retrySpacing = Duration.millis(1500)

/** Notifications waiting for one Subscription before more are dropped (and counted). */
export const queueCapacity = 100

/** A Subscription as delivery reads it, from the database, before each attempt. */
export interface Target {
  readonly status: string
  readonly channelType: string | undefined
  readonly endpoint: string | undefined
  readonly header: unknown
}

/** What delivery needs of the rest of the service. */
export interface DeliveryServices {
  /** The Subscription as it now stands; undefined when it is deleted; `unreadable` when the database could not be read. */
  readonly read: (id: string) => Effect.Effect<Target | undefined | "unreadable">
  /** Sets `status` (and `error`, or clears it) by an ordinary update, unless the Subscription is `off` or gone. */
  readonly setStatus: (id: string, status: "active" | "error", error: string | undefined) => Effect.Effect<void>
  /** Sends `ping <id>` on the socket bound to the id; false when none is. */
  readonly ping: (id: string) => Effect.Effect<boolean>
  /** `[base]` for the fullUrls of the body. */
  readonly base: string
  readonly timeout?: Duration.DurationInput
}

/** An ISO instant and a reason: what `Subscription.error` holds. */
const errorText = (reason: string) => Effect.map(Effect.clockWith((clock) => clock.currentTimeMillis), (now) => `${new Date(now).toISOString()}: ${reason}`)

type Outcome =
  | { readonly _tag: "Delivered" }
  | { readonly _tag: "Dropped"; readonly why: string }
  | { readonly _tag: "Failed"; readonly reason: string }

/** One notification, its attempts and the status it leaves. */
export const deliver = (id: string, notification: Notification, services: DeliveryServices): Effect.Effect<void> =>
  Effect.gen(function*() {
    let endpoint: string | undefined
    let lastReason = ""
    for (let attempt = 1; attempt <= attempts; attempt++) {
      if (attempt > 1) yield* Effect.sleep(retrySpacing)
      const target = yield* services.read(id)
      const outcome: Outcome = yield* Effect.suspend((): Effect.Effect<Outcome> => {
        if (target === "unreadable") return Effect.succeed({ _tag: "Failed", reason: "the Subscription could not be read from the database" })
        if (target === undefined) return Effect.succeed({ _tag: "Dropped", why: "the Subscription was deleted" })
        if (target.status === "off") return Effect.succeed({ _tag: "Dropped", why: "the Subscription is off" })
        if (target.channelType === "websocket") return Effect.as(services.ping(id), { _tag: "Delivered" })
        if (target.channelType !== "rest-hook") return Effect.succeed({ _tag: "Dropped", why: `channel.type ${String(target.channelType)} is not delivered` })
        if (target.endpoint === undefined || target.endpoint === "") {
          return Effect.as(
            Effect.flatMap(errorText("the rest-hook channel has no endpoint (channel.endpoint)"), (text) => services.setStatus(id, "error", text)),
            { _tag: "Dropped", why: "no endpoint" }
          )
        }
        if (endpoint !== undefined && target.endpoint !== endpoint) return Effect.succeed({ _tag: "Dropped", why: "channel.endpoint changed" })
        endpoint = target.endpoint
        const headers = readChannelHeaders(Array.isArray(target.header) ? target.header : target.header === undefined ? [] : [target.header])
        if (Either.isLeft(headers)) {
          return Effect.as(
            Effect.flatMap(errorText(headers.left.reason), (text) => services.setStatus(id, "error", text)),
            { _tag: "Dropped", why: "a channel.header entry cannot be sent" }
          )
        }
        return postNotification({
          endpoint: target.endpoint,
          // The channel's own entries win over the server's informative headers of the same name.
          headers: [
            ...(([["X-Svc-Subscription", `Subscription/${id}`], ["X-Svc-Commit-Ts", String(notification.commitTs)]] as const)
              .filter(([name]) => !headers.right.some(([given]) => given.toLowerCase() === name.toLowerCase()))),
            ...headers.right
          ],
          body: notificationBody(notification, services.base),
          contentType: "application/fhir+json",
          timeout: services.timeout ?? defaultTimeout
        }).pipe(
          Effect.as<Outcome>({ _tag: "Delivered" }),
          Effect.catchAll((failed) => Effect.succeed<Outcome>({ _tag: "Failed", reason: failed.reason }))
        )
      })
      switch (outcome._tag) {
        case "Delivered":
          if (target !== "unreadable" && target?.status === "error") yield* services.setStatus(id, "active", undefined)
          return
        case "Dropped":
          yield* Effect.logDebug("a Subscription notification was dropped", { subscription: id, why: outcome.why })
          return
        case "Failed":
          lastReason = outcome.reason
      }
    }
    const where = endpoint === undefined ? "" : ` to ${describeEndpoint(endpoint)}`
    yield* Effect.logWarning("a Subscription notification failed", { subscription: id, attempts, reason: lastReason })
    yield* services.setStatus(id, "error", yield* errorText(`the notification${where} failed ${attempts} times; the last: ${lastReason}`))
  })

/** A Subscription's queue and what it has had to drop. */
export interface Deliverer {
  /** Queues a notification; false when the queue is full (the notification is dropped and counted). */
  readonly offer: (notification: Notification) => boolean
  readonly queue: Queue.Queue<Notification>
}

/**
 * The queue and the fiber of one Subscription, in the current scope: notifications in order, one at a time;
 * those dropped for a full queue are reported in the Subscription's status reason once the queue has room.
 */
export const startDeliverer = (id: string, services: DeliveryServices) =>
  Effect.gen(function*() {
    const queue = yield* Queue.bounded<Notification>(queueCapacity)
    let dropped = 0
    yield* Queue.take(queue).pipe(
      Effect.flatMap((notification) => deliver(id, notification, services)),
      Effect.zipRight(Effect.suspend(() => {
        if (dropped === 0) return Effect.void
        const count = dropped
        dropped = 0
        return Effect.flatMap(
          errorText(`${count} notification${count === 1 ? " was" : "s were"} dropped: more than ${queueCapacity} waited for delivery`),
          (text) => services.setStatus(id, "error", text)
        )
      })),
      Effect.catchAllCause((cause) => Effect.logError("a Subscription delivery failed", { subscription: id }, cause)),
      Effect.forever,
      Effect.forkScoped
    )
    const deliverer: Deliverer = {
      queue,
      offer: (notification) => {
        if (queue.unsafeOffer(notification)) return true
        dropped++
        return false
      }
    }
    return deliverer
  })
