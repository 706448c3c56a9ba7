/**
 * Rest-hook retries and the Subscription status table, the server on the TestClock and real receivers on
 * loopback: 8 attempts at least 1.5 s apart, then `error` with the time and the reason (an ordinary update);
 * delivery goes on in `error`, and the next delivery that gets through puts it back to `active` with `error`
 * cleared; a 5xx, a redirect (never followed), a receiver that does not answer in time and a refused
 * connection are failures; before each retry the Subscription is read again (deleted or `off`: the
 * notification is dropped; another endpoint: dropped, the next goes to the new one; a changed header: sent).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Queue, TestClock } from "effect"
import { backends } from "../support/backends.ts"
import { skipRealPackages } from "../support/npmRegistry.ts"
import { closedPort, type Received, type Receiver, startReceiver } from "../support/receiver.ts"
import { call, type TestServer } from "../support/server.ts"
import { create, createSubscription, notified, observation, readSubscription, subscription, subscriptionServer, watchSubscription } from "./support.ts"

const start = Date.parse("2026-05-04T10:00:00Z")

/** Lets Node run what is ready (sockets, the database) without moving any clock. */
const turn = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))

/**
 * The next request `receiver` gets, moving the TestClock 100 ms at a time meanwhile (the server's retry waits
 * on it); with the TestClock's time when it arrived (the receiver reads it).
 */
const nextAttempt = (receiver: Receiver) =>
  Effect.gen(function*() {
    const waiting = yield* Effect.fork(receiver.next)
    for (;;) {
      const done = yield* Fiber.poll(waiting)
      if (done._tag === "Some") {
        const received = yield* Fiber.join(waiting)
        return { received, at: received.at }
      }
      yield* TestClock.adjust("100 millis")
      yield* turn
    }
  })

/** Moves the TestClock `millis` in steps, letting the server run between them. */
const advance = (millis: number) =>
  Effect.gen(function*() {
    for (let moved = 0; moved < millis; moved += 100) {
      yield* TestClock.adjust("100 millis")
      yield* turn
    }
  })

const setUp = (kind: "sqlite" | "postgres") =>
  Effect.gen(function*() {
    yield* TestClock.setTime(start)
    return yield* subscriptionServer(kind)
  })

const putSubscription = (server: TestServer, id: string, body: Record<string, unknown>) =>
  Effect.gen(function*() {
    const reply = yield* call("PUT", `${server.base}/Subscription/${id}`, { body: { ...body, id } })
    expect(reply.status, reply.text).toBe(200)
    yield* server.subscriptionsSettled
  })

for (const backend of backends.filter((b) => b.kind !== "memory")) {
  describe.skipIf(backend.skip || skipRealPackages)(`rest-hook retries and status on ${backend.kind}`, () => {
    it.scoped("8 attempts at least 1.5 s apart, then error; delivery goes on in error, and a delivery that gets through makes it active", () =>
      Effect.gen(function*() {
        const server = yield* setUp(backend.kind as "sqlite" | "postgres")
        const receiver = yield* startReceiver({ status: 500 })
        const id = yield* createSubscription(server, "Observation?code=1212-1", { endpoint: `${receiver.url}/hook` })
        const versions = yield* watchSubscription(server, id)
        yield* create(server, observation("1212-1"))
        const times: Array<number> = []
        for (let n = 1; n <= 8; n++) times.push((yield* nextAttempt(receiver)).at)
        const failed = yield* Queue.take(versions)
        expect(failed).toMatchObject({ status: "error", meta: { versionId: "2" } })
        expect(failed["error"]).toMatch(/^\d{4}-\d\d-\d\dT[0-9:.]+Z: /)
        expect(failed["error"]).toMatch(/answered 500/)
        expect(failed["error"]).toMatch(/8 times/)
        for (let n = 1; n < times.length; n++) expect(times[n]! - times[n - 1]!).toBeGreaterThanOrEqual(1500)
        expect(receiver.received).toHaveLength(8)

        // In error, the next notification is still delivered: it fails once, then gets through.
        receiver.answerWith((_received, count) => count === 9 ? { status: 503 } : { status: 200 })
        const second = yield* create(server, observation("1212-1"))
        const attempt9 = yield* nextAttempt(receiver)
        const attempt10 = yield* nextAttempt(receiver)
        expect(notified(attempt9.received.body).map((r) => r["id"])).toEqual([second])
        expect(attempt10.received.body).toBe(attempt9.received.body)
        const recovered = yield* Queue.take(versions)
        expect(recovered).toMatchObject({ status: "active", meta: { versionId: "3" } })
        expect(recovered).not.toHaveProperty("error")
      }), 120_000)

    if (backend.kind !== "sqlite") return

    it.scoped("a redirect is a failure and is not followed; a refused connection is a failure", () =>
      Effect.gen(function*() {
        const server = yield* setUp("sqlite")
        const elsewhere = yield* startReceiver()
        const receiver = yield* startReceiver((_received, count) => count === 1 ? { status: 302, headers: { location: `${elsewhere.url}/moved` } } : { status: 200 })
        yield* createSubscription(server, "Observation?code=3434-3", { endpoint: receiver.url })
        yield* create(server, observation("3434-3"))
        const first = yield* nextAttempt(receiver)
        const second = yield* nextAttempt(receiver)
        expect(second.at - first.at).toBeGreaterThanOrEqual(1500)
        expect(elsewhere.received).toHaveLength(0)

        const port = yield* closedPort()
        const id = yield* createSubscription(server, "Observation?code=5656-5", { endpoint: `http://127.0.0.1:${port}/hook` })
        const versions = yield* watchSubscription(server, id)
        yield* create(server, observation("5656-5"))
        const waiting = yield* Effect.fork(Queue.take(versions))
        while ((yield* Fiber.poll(waiting))._tag === "None") yield* advance(500)
        const failed = yield* Fiber.join(waiting)
        expect(failed["status"]).toBe("error")
        expect(failed["error"]).toMatch(/could not connect/)
      }), 120_000)

    it.scoped("a receiver that does not answer in time is a failure: the request is closed and retried", () =>
      Effect.gen(function*() {
        const server = yield* setUp("sqlite")
        const receiver = yield* startReceiver((_received, count) => count === 1 ? "hang" : { status: 204 })
        const id = yield* createSubscription(server, "Observation?code=7878-7", { endpoint: receiver.url })
        yield* create(server, observation("7878-7"))
        const first = yield* nextAttempt(receiver)
        const second = yield* nextAttempt(receiver)
        // The request timeout (10 s) and the spacing before the retry.
        expect(second.at - first.at).toBeGreaterThanOrEqual(10_000 + 1500)
        expect(receiver.abandoned()).toBe(1)
        yield* server.subscriptionsSettled
        expect((yield* readSubscription(server, id))["status"]).toBe("active")
      }), 120_000)

    it.scoped("before a retry the Subscription is read again: deleted or off drops the notification", () =>
      Effect.gen(function*() {
        const server = yield* setUp("sqlite")
        const receiver = yield* startReceiver({ status: 500 })
        const deleted = yield* createSubscription(server, "Observation?code=9090-9", { endpoint: receiver.url })
        yield* create(server, observation("9090-9"))
        yield* nextAttempt(receiver)
        expect((yield* call("DELETE", `${server.base}/Subscription/${deleted}`)).status).toBe(204)
        yield* server.subscriptionsSettled
        yield* advance(15_000)
        expect(receiver.received).toHaveLength(1)

        const off = yield* createSubscription(server, "Observation?code=9191-1", { endpoint: receiver.url })
        yield* create(server, observation("9191-1"))
        yield* nextAttempt(receiver)
        yield* putSubscription(server, off, subscription("Observation?code=9191-1", { endpoint: receiver.url }, "off"))
        yield* advance(15_000)
        expect(receiver.received).toHaveLength(2)
        expect((yield* readSubscription(server, off))).toMatchObject({ status: "off", meta: { versionId: "2" } })
      }), 120_000)

    it.scoped("before a retry the Subscription is read again: another endpoint drops it, a changed header is sent", () =>
      Effect.gen(function*() {
        const server = yield* setUp("sqlite")
        const first = yield* startReceiver({ status: 500 })
        const second = yield* startReceiver()
        const criteria = "Observation?code=2323-2"
        const id = yield* createSubscription(server, criteria, { endpoint: first.url, header: ["X-Key: one"] })
        const dropped = yield* create(server, observation("2323-2"))
        expect((yield* nextAttempt(first)).received.headers["x-key"]).toBe("one")
        yield* putSubscription(server, id, subscription(criteria, { endpoint: second.url, header: ["X-Key: two"] }))
        const next = yield* create(server, observation("2323-2"))
        const got: Received = (yield* nextAttempt(second)).received
        expect(notified(got.body).map((r) => r["id"])).toEqual([next])
        expect(got.body).not.toContain(dropped)
        expect(got.headers["x-key"]).toBe("two")
        expect(first.received).toHaveLength(1)

        // The same endpoint with a new header: the retry sends the new one.
        second.answerWith((_received, count) => count === 2 ? { status: 500 } : { status: 200 })
        yield* create(server, observation("2323-2"))
        expect((yield* nextAttempt(second)).received.headers["x-key"]).toBe("two")
        yield* putSubscription(server, id, subscription(criteria, { endpoint: second.url, header: ["X-Key: three"] }))
        expect((yield* nextAttempt(second)).received.headers["x-key"]).toBe("three")
      }), 120_000)
  })
}
