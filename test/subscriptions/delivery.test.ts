/**
 * One Subscription's delivery fiber (src/subscriptions/Delivery.ts) against a real receiver, with the
 * Subscription held in memory (a whole server adds nothing here): notifications go out one at a time in order,
 * a full queue drops and counts what does not fit and reports the count in the status, and a database that
 * cannot be read fails the attempt (retried) rather than dropping the notification.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, TestClock } from "effect"
import { type DeliveryServices, queueCapacity, startDeliverer, type Target } from "../../src/subscriptions/Delivery.ts"
import type { Notification } from "../../src/subscriptions/notification.ts"
import { startReceiver } from "../support/receiver.ts"

const notification = (n: number): Notification => ({
  commitTs: 1_700_000_000_000_000 + n,
  versions: [{ type: "Patient", id: `p${n}`, version: 1, op: "create", resource: JSON.stringify({ resourceType: "Patient", id: `p${n}`, meta: { versionId: "1" } }) }]
})

const turn = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))

describe("a Subscription's delivery fiber", () => {
  it.scoped("delivers in order; what a full queue cannot hold is dropped, counted and reported in the status", () =>
    Effect.gen(function*() {
      const receiver = yield* startReceiver()
      const statuses: Array<{ readonly status: string; readonly error: string | undefined }> = []
      const target: Target = { status: "active", channelType: "rest-hook", endpoint: receiver.url, header: [] }
      const services: DeliveryServices = {
        base: "http://svc.example/fhir",
        read: () => Effect.succeed(target),
        setStatus: (_id, status, error) => Effect.sync(() => void statuses.push({ status, error })),
        ping: () => Effect.succeed(false)
      }
      const deliverer = yield* startDeliverer("s1", services)
      // Offered at once, before the fiber takes any: the queue holds `queueCapacity`, the rest is dropped.
      const offered = Array.from({ length: queueCapacity + 5 }, (_, n) => deliverer.offer(notification(n)))
      expect(offered.filter((ok) => !ok)).toHaveLength(5)
      for (let n = 0; n < queueCapacity; n++) {
        const got = yield* receiver.next
        expect(JSON.parse(got.body).entry[0].resource.id).toBe(`p${n}`)
      }
      while (statuses.length === 0) yield* turn
      expect(statuses[0]!.status).toBe("error")
      expect(statuses[0]!.error).toMatch(/5 notifications were dropped: more than 100 waited/)
    }), 60_000)

  it.scoped("an attempt that cannot read the Subscription fails and is tried again, not dropped", () =>
    Effect.gen(function*() {
      const receiver = yield* startReceiver()
      let reads = 0
      const services: DeliveryServices = {
        base: "http://svc.example/fhir",
        read: () => Effect.sync(() => ++reads === 1 ? "unreadable" as const : { status: "active", channelType: "rest-hook", endpoint: receiver.url, header: [] }),
        setStatus: () => Effect.void,
        ping: () => Effect.succeed(false)
      }
      const deliverer = yield* startDeliverer("s2", services)
      expect(deliverer.offer(notification(1))).toBe(true)
      const arrival = yield* Effect.fork(receiver.next)
      while ((yield* Fiber.poll(arrival))._tag === "None") {
        yield* TestClock.adjust("100 millis")
        yield* turn
      }
      expect(JSON.parse((yield* Fiber.join(arrival)).body).entry[0].resource.id).toBe("p1")
      expect(reads).toBe(2)
    }), 60_000)
})
