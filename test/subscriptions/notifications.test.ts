/**
 * Rest-hook Subscriptions over HTTP on SQLite and Postgres, with a real receiver on loopback: criteria refused
 * on create and update with a 400 naming the parameter; only creates and updates that match are notified (a
 * delete, or a resource that stops matching, sends nothing), with the AND/OR rules, chains and `_has`; a
 * transaction is one notification; the body is a history Bundle, a Subscription in it without its headers;
 * `channel.header` entries are sent and a Content-Type entry replaces the default; a bad entry, or no
 * endpoint, puts the Subscription in `error` with the reason; an `off` Subscription is never notified nor
 * changed; `requested` becomes `active`; a websocket Subscription's socket gets `ping <id>` for each notification.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer, Queue } from "effect"
import { WebSocket } from "ws"
import { backends } from "../support/backends.ts"
import { skipRealPackages } from "../support/npmRegistry.ts"
import { startReceiver } from "../support/receiver.ts"
import { call, type TestServer } from "../support/server.ts"
import { create, createSubscription, notified, observation, readSubscription, subscription, subscriptionServer, watchSubscription } from "./support.ts"

class Server extends Context.Tag("test/SubscriptionServer")<Server, TestServer>() {}

/** Codes of the Observations in a notification. */
const codes = (body: string) => notified(body).map((resource) => resource["code"]?.coding?.[0]?.code as string)

for (const backend of backends.filter((b) => b.kind !== "memory")) {
  describe.skipIf(backend.skip || skipRealPackages)(`rest-hook Subscriptions on ${backend.kind}`, () => {
    layer(Layer.scoped(Server, subscriptionServer(backend.kind)), { timeout: 120_000, excludeTestServices: true })((it) => {
      it.scoped("refuses criteria that cannot be read, on create and on update, naming the parameter", () =>
        Effect.gen(function*() {
          const server = yield* Server
          const bad = yield* call("POST", `${server.base}/Subscription`, { body: subscription("Observation?date=yesterday", { endpoint: "http://127.0.0.1:9/x" }) })
          expect(bad.status).toBe(400)
          expect(bad.json.resourceType).toBe("OperationOutcome")
          expect(bad.json.issue[0].diagnostics).toMatch(/date/)
          expect(bad.json.issue[0].diagnostics).toMatch(/yesterday/)
          const unknown = yield* call("POST", `${server.base}/Subscription`, { body: subscription("Observation?no-such-parameter=1", { endpoint: "http://127.0.0.1:9/x" }) })
          expect(unknown.status).toBe(400)
          expect(unknown.json.issue[0].diagnostics).toMatch(/no-such-parameter/)
          const email = yield* call("POST", `${server.base}/Subscription`, { body: subscription("Observation?code=1", { type: "email", endpoint: "mailto:a@example.org" }) })
          expect(email.status).toBe(400)
          const id = yield* createSubscription(server, "Observation?code=1234-5", { endpoint: "http://127.0.0.1:9/x" }, "off")
          const update = yield* call("PUT", `${server.base}/Subscription/${id}`, {
            body: { ...subscription("Observation?code=1234-5&value-quantity=lots", { endpoint: "http://127.0.0.1:9/x" }, "off"), id }
          })
          expect(update.status).toBe(400)
          expect(update.json.issue[0].diagnostics).toMatch(/value-quantity/)
          expect((yield* readSubscription(server, id))["meta"].versionId).toBe("1")
          const inBundle = yield* call("POST", server.base, {
            body: {
              resourceType: "Bundle",
              type: "transaction",
              entry: [{ resource: subscription("Observation?code:missing=maybe", { endpoint: "http://127.0.0.1:9/x" }), request: { method: "POST", url: "Subscription" } }]
            }
          })
          expect(inBundle.status).toBe(400)
          expect(inBundle.text).toMatch(/missing/)
        }))

      it.scoped("notifies creates and updates that match, nothing for a delete or a resource that stops matching", () =>
        Effect.gen(function*() {
          const server = yield* Server
          const receiver = yield* startReceiver()
          const id = yield* createSubscription(server, "Observation?code=http://example.org/codes|1111-1,http://example.org/codes|2222-2&status=final", { endpoint: `${receiver.url}/hook` })
          yield* create(server, observation("3333-3"))
          yield* create(server, observation("1111-1", { status: "preliminary" }))
          const first = yield* create(server, observation("1111-1"))
          const hit = yield* receiver.next
          expect(hit.method).toBe("POST")
          expect(hit.path).toBe("/hook")
          expect(hit.headers["content-type"]).toBe("application/fhir+json")
          expect(hit.headers["x-svc-subscription"]).toBe(`Subscription/${id}`)
          const bundle = JSON.parse(hit.body)
          expect(bundle.entry).toHaveLength(1)
          expect(bundle.entry[0]).toMatchObject({
            fullUrl: `${server.base}/Observation/${first}`,
            request: { method: "POST", url: "Observation" },
            response: { status: "201 Created", etag: 'W/"1"' },
            resource: { resourceType: "Observation", id: first }
          })
          // An update that still matches is notified; one that stops matching, and a delete, are not.
          const updated = yield* call("PUT", `${server.base}/Observation/${first}`, { body: { ...observation("2222-2"), id: first } })
          expect(updated.status).toBe(200)
          const update = yield* receiver.next
          expect(JSON.parse(update.body).entry[0]).toMatchObject({ request: { method: "PUT", url: `Observation/${first}` }, response: { etag: 'W/"2"' } })
          expect(codes(update.body)).toEqual(["2222-2"])
          expect((yield* call("PUT", `${server.base}/Observation/${first}`, { body: { ...observation("4444-4"), id: first } })).status).toBe(200)
          expect((yield* call("DELETE", `${server.base}/Observation/${first}`)).status).toBe(204)
          // Deliveries of one Subscription are in order: the next to arrive is the next match.
          const second = yield* create(server, observation("2222-2", { system: "http://example.org/codes" }))
          const next = yield* receiver.next
          expect(notified(next.body).map((resource) => resource["id"])).toEqual([second])
          expect(receiver.received).toHaveLength(3)
        }))

      it.scoped("a transaction is one notification with every version that matched", () =>
        Effect.gen(function*() {
          const server = yield* Server
          const receiver = yield* startReceiver()
          yield* createSubscription(server, "Observation?code=5555-5", { endpoint: receiver.url })
          const entry = (resource: Record<string, unknown>) => ({ resource, request: { method: "POST", url: "Observation" } })
          const reply = yield* call("POST", server.base, {
            body: { resourceType: "Bundle", type: "transaction", entry: [entry(observation("5555-5")), entry(observation("6666-6")), entry(observation("5555-5", { status: "amended" }))] }
          })
          expect(reply.status, reply.text).toBe(200)
          const hit = yield* receiver.next
          expect(codes(hit.body)).toEqual(["5555-5", "5555-5"])
        }))

      it.scoped("chained and _has criteria are matched as a search matches them", () =>
        Effect.gen(function*() {
          const server = yield* Server
          const receiver = yield* startReceiver()
          const smith = yield* create(server, { resourceType: "Patient", name: [{ family: "Chainfield" }] })
          const other = yield* create(server, { resourceType: "Patient", name: [{ family: "Elsewhere" }] })
          yield* createSubscription(server, "Observation?patient.name=Chainfield", { endpoint: receiver.url })
          yield* create(server, observation("7777-7", { subject: `Patient/${other}` }))
          const matched = yield* create(server, observation("7777-7", { subject: `Patient/${smith}` }))
          expect(notified((yield* receiver.next).body).map((r) => r["id"])).toEqual([matched])

          const hasReceiver = yield* startReceiver()
          yield* createSubscription(server, "Patient?_has:Observation:patient:code=8888-8", { endpoint: hasReceiver.url })
          yield* create(server, observation("8888-8", { subject: `Patient/${other}` }))
          // The Patient is notified when it changes, and then only if an Observation with that code refers to it.
          expect((yield* call("PUT", `${server.base}/Patient/${smith}`, { body: { resourceType: "Patient", id: smith, name: [{ family: "Chainfield" }], gender: "male" } })).status).toBe(200)
          expect((yield* call("PUT", `${server.base}/Patient/${other}`, { body: { resourceType: "Patient", id: other, name: [{ family: "Elsewhere" }], gender: "female" } })).status).toBe(200)
          expect(notified((yield* hasReceiver.next).body).map((r) => r["id"])).toEqual([other])
          expect(hasReceiver.received).toHaveLength(1)
        }))

      it.scoped("sends the channel's headers; a Content-Type entry replaces the default whatever its case", () =>
        Effect.gen(function*() {
          const server = yield* Server
          const receiver = yield* startReceiver()
          yield* createSubscription(server, "Observation?code=9191-9", {
            endpoint: receiver.url,
            header: ["Authorization: Bearer secret-value", "X-Custom:  spaced ", "CONTENT-TYPE: application/json"]
          })
          yield* create(server, observation("9191-9"))
          const hit = yield* receiver.next
          expect(hit.headers["authorization"]).toBe("Bearer secret-value")
          expect(hit.headers["x-custom"]).toBe("spaced")
          expect(hit.rawHeaders.filter(([name]) => name.toLowerCase() === "content-type").map(([, value]) => value)).toEqual(["application/json"])
        }))

      it.scoped("a notification about a Subscription leaves out its channel.header", () =>
        Effect.gen(function*() {
          const server = yield* Server
          const receiver = yield* startReceiver()
          yield* createSubscription(server, "Subscription?status=off", { endpoint: receiver.url })
          yield* createSubscription(server, "Observation?code=0000-1", { endpoint: "http://127.0.0.1:9/x", header: ["Authorization: Bearer do-not-leak"] }, "off")
          const hit = yield* receiver.next
          expect(hit.body).not.toContain("do-not-leak")
          const [watched] = notified(hit.body)
          expect(watched!["channel"]).toEqual({ type: "rest-hook", endpoint: "http://127.0.0.1:9/x", payload: "application/fhir+json" })
        }))

      it.scoped("a bad channel.header entry or a missing endpoint puts the Subscription in error with the reason", () =>
        Effect.gen(function*() {
          const server = yield* Server
          const receiver = yield* startReceiver()
          for (const [channel, reason] of [
            [{ endpoint: receiver.url, header: ["Host: elsewhere.example"] }, /Host/],
            [{ endpoint: receiver.url, header: ["Proxy-Authorization: Basic abc"] }, /Proxy-Authorization/],
            [{ endpoint: receiver.url, header: ["X-A: 1", "x-a: 2"] }, /X-A|x-a/],
            [{ endpoint: receiver.url, header: ["Not a header"] }, /header/],
            [{}, /endpoint/]
          ] as const) {
            const id = yield* createSubscription(server, "Observation?code=4242-4", channel)
            const versions = yield* watchSubscription(server, id)
            const resource = yield* create(server, observation("4242-4"))
            const after = yield* Queue.take(versions)
            expect(after["status"]).toBe("error")
            expect(after["error"]).toMatch(/^\d{4}-\d\d-\d\dT[0-9:.]+Z: /)
            expect(after["error"]).toMatch(reason)
            expect(after["error"]).not.toMatch(/abc|elsewhere/)
            expect(after["meta"].versionId).toBe("2")
            // Switched off, it is not notified and never changed again.
            expect((yield* call("PUT", `${server.base}/Subscription/${id}`, { body: { ...after, status: "off" } })).status).toBe(200)
            yield* call("DELETE", `${server.base}/Observation/${resource}`)
          }
          yield* create(server, observation("4242-4"))
          yield* server.subscriptionsSettled
          expect(receiver.received).toHaveLength(0)
        }))

      it.scoped("an off Subscription is neither notified nor changed; requested becomes active", () =>
        Effect.gen(function*() {
          const server = yield* Server
          const receiver = yield* startReceiver()
          const off = yield* createSubscription(server, "Observation?code=6161-6", { endpoint: receiver.url }, "off")
          const versions = yield* watchSubscription(server)
          const created = yield* call("POST", `${server.base}/Subscription`, { body: subscription("Observation?code=6161-6", { endpoint: receiver.url }, "requested") })
          expect(created.status).toBe(201)
          const requested = created.json.id as string
          expect((yield* Queue.take(versions))["status"]).toBe("requested")
          const activated = yield* Queue.take(versions)
          expect(activated).toMatchObject({ id: requested, status: "active", meta: { versionId: "2" } })
          yield* create(server, observation("6161-6"))
          const hit = yield* receiver.next
          expect(hit.headers["x-svc-subscription"]).toBe(`Subscription/${requested}`)
          expect((yield* readSubscription(server, off))["meta"].versionId).toBe("1")
          expect((yield* readSubscription(server, off))["status"]).toBe("off")
        }))

      it.scoped("a websocket Subscription pings its bound socket for each notification, once per commit", () =>
        Effect.gen(function*() {
          const server = yield* Server
          const id = yield* createSubscription(server, "Observation?code=8080-8", { type: "websocket" })
          const messages = yield* Queue.unbounded<string>()
          const ws = yield* Effect.acquireRelease(
            Effect.async<WebSocket>((resume) => {
              const socket = new WebSocket(`${server.url.replace(/^http/, "ws")}/ws`)
              socket.on("message", (data) => messages.unsafeOffer(String(data)))
              socket.once("open", () => resume(Effect.succeed(socket)))
              socket.once("error", (error) => resume(Effect.die(error)))
            }),
            (socket) => Effect.sync(() => socket.terminate())
          )
          ws.send(`bind ${id}`)
          expect(yield* Queue.take(messages)).toBe(`bound ${id}`)
          yield* create(server, observation("9090-0"))
          yield* create(server, observation("8080-8"))
          expect(yield* Queue.take(messages)).toBe(`ping ${id}`)
          const entry = (resource: Record<string, unknown>) => ({ resource, request: { method: "POST", url: "Observation" } })
          const reply = yield* call("POST", server.base, {
            body: { resourceType: "Bundle", type: "transaction", entry: [entry(observation("8080-8")), entry(observation("8080-8"))] }
          })
          expect(reply.status).toBe(200)
          expect(yield* Queue.take(messages)).toBe(`ping ${id}`)
          yield* create(server, observation("8080-8"))
          expect(yield* Queue.take(messages)).toBe(`ping ${id}`)
          expect(yield* Queue.size(messages)).toBe(0)
        }))
    })
  })
}
