/**
 * The websocket channel of R4 Subscriptions at `/ws` (src/subscriptions/SubscriptionSockets.ts;
 * https://hl7.org/fhir/R4/subscription.html): on the real server, with a real WebSocket client. `bind <id>` is
 * answered `bound <id>`, and the server's `ping` reaches the socket bound to the id as `ping <id>`; one socket per
 * id, a later one taking it over; refusals are `error` messages on a socket left open; the bounds close a socket
 * with the code that says why.
 */
import { describe, expect, it, layer } from "@effect/vitest"
import { Context, Deferred, Effect, Exit, Layer, Queue, Scope } from "effect"
import { WebSocket } from "ws"
import { pgAvailable } from "../support/backends.ts"
import { realPackageCache, registryUrl, skipRealPackages } from "../support/npmRegistry.ts"
import { call, startServer, type TestServer } from "../support/server.ts"
import { resolutionLayer } from "../auth/enforcementSupport.ts"
import type { BackendKind } from "../support/backends.ts"

class Server extends Context.Tag("test/WebsocketServer")<Server, TestServer>() {}

const conformance = { package_registry: registryUrl ?? "", package_cache: realPackageCache }

/** A server with the real R4 packages; the test header `x-test-principal` names a caller known by a token. */
const server = (kind: BackendKind) => startServer(kind, { conformance }).pipe(Effect.provide(resolutionLayer))

const subscription = (type: "websocket" | "rest-hook", status = "active") => ({
  resourceType: "Subscription",
  status,
  reason: "websocket channel test",
  criteria: "Observation?code=http://loinc.org|1234-5",
  channel: type === "websocket" ? { type } : { type, endpoint: "http://127.0.0.1:9/hook", payload: "application/fhir+json" }
})

/** Creates a Subscription and gives its id. */
const create = (type: "websocket" | "rest-hook", status = "active") =>
  Effect.gen(function*() {
    const { base } = yield* Server
    const reply = yield* call("POST", `${base}/Subscription`, { body: subscription(type, status) })
    expect(reply.status, reply.text).toBe(201)
    return reply.json.id as string
  })

interface Client {
  readonly ws: WebSocket
  /** Every message received, in order. */
  readonly received: ReadonlyArray<string>
  /** The `x-request-id` of the 101. */
  readonly requestId: string | undefined
  /** The next message not taken yet. */
  readonly next: Effect.Effect<string>
  readonly send: (message: string | Buffer) => void
  /** The code and reason of the close, once the socket is closed. */
  readonly closed: Effect.Effect<{ readonly code: number; readonly reason: string }>
}

const within = (what: string) => <A>(effect: Effect.Effect<A>) =>
  effect.pipe(Effect.timeoutFail({ duration: "10 seconds", onTimeout: () => new Error(`${what}: nothing within 10 s`) }), Effect.orDie)

/** A WebSocket open on the server's `/ws`, closed with the scope. */
const connect = (headers: Record<string, string> = {}) =>
  Effect.gen(function*() {
    const { url } = yield* Server
    const inbox = yield* Queue.unbounded<string>()
    const closed = yield* Deferred.make<{ readonly code: number; readonly reason: string }>()
    const received: Array<string> = []
    const opened = Effect.async<{ readonly ws: WebSocket; readonly requestId: string | undefined }, Error>((resume) => {
      const ws = new WebSocket(`${url.replace(/^http/, "ws")}/ws`, { headers })
      let requestId: string | undefined
      ws.on("upgrade", (response) => {
        const id = response.headers["x-request-id"]
        requestId = typeof id === "string" ? id : undefined
      })
      ws.on("message", (data, isBinary) => {
        const text = isBinary ? "<binary>" : String(data)
        received.push(text)
        inbox.unsafeOffer(text)
      })
      ws.on("close", (code, reason) => Deferred.unsafeDone(closed, Effect.succeed({ code, reason: reason.toString("utf8") })))
      ws.on("error", (error) => resume(Effect.fail(error)))
      ws.once("open", () => resume(Effect.succeed({ ws, requestId })))
    })
    const { requestId, ws } = yield* Effect.acquireRelease(within("open")(Effect.orDie(opened)), ({ ws }) => Effect.sync(() => ws.terminate()))
    const client: Client = {
      ws,
      received,
      requestId,
      next: within("a message")(Queue.take(inbox)),
      send: (message) => ws.send(message),
      closed: within("the close")(Deferred.await(closed))
    }
    return client
  })

/** Sends `message` and gives the answer. */
const ask = (client: Client, message: string) => Effect.suspend(() => (client.send(message), client.next))

const ping = (id: string) => Effect.flatMap(Server, (server) => server.subscriptionSockets.ping(id))

describe.skipIf(skipRealPackages)("the websocket channel of Subscriptions on sqlite", () => {
  layer(Layer.scoped(Server, server("sqlite")), { timeout: 120_000, excludeTestServices: true })((it) => {
    it.scoped("answers bind with bound, and a ping of the id reaches the socket as `ping <id>`", () =>
      Effect.gen(function*() {
        const id = yield* create("websocket")
        expect(yield* ping(id)).toBe(false)
        const client = yield* connect()
        expect(client.requestId).toMatch(/.+/)
        expect(yield* ask(client, `bind ${id}`)).toBe(`bound ${id}`)
        expect(yield* ping(id)).toBe(true)
        expect(yield* client.next).toBe(`ping ${id}`)
        expect(yield* ping(id)).toBe(true)
        expect(yield* client.next).toBe(`ping ${id}`)
        // Binding an id the socket holds again changes nothing.
        expect(yield* ask(client, `bind ${id}`)).toBe(`bound ${id}`)
        expect(client.received).toEqual([`bound ${id}`, `ping ${id}`, `ping ${id}`, `bound ${id}`])
      }))

    it.scoped("keeps one socket per id: a second socket's bind takes it over, and the first is closed with 4001", () =>
      Effect.gen(function*() {
        const id = yield* create("websocket")
        const first = yield* connect()
        expect(yield* ask(first, `bind ${id}`)).toBe(`bound ${id}`)
        const second = yield* connect()
        expect(yield* ask(second, `bind ${id}`)).toBe(`bound ${id}`)
        expect(yield* first.closed).toEqual({ code: 4001, reason: `replaced by a newer socket for Subscription/${id}` })
        expect(yield* ping(id)).toBe(true)
        expect(yield* second.next).toBe(`ping ${id}`)
        expect(first.received).toEqual([`bound ${id}`])
      }))

    it.scoped("tells a socket that holds other ids which one was taken over, and keeps it open for the others", () =>
      Effect.gen(function*() {
        const taken = yield* create("websocket")
        const kept = yield* create("websocket")
        const first = yield* connect()
        expect(yield* ask(first, `bind ${taken}`)).toBe(`bound ${taken}`)
        expect(yield* ask(first, `bind ${kept}`)).toBe(`bound ${kept}`)
        const second = yield* connect()
        expect(yield* ask(second, `bind ${taken}`)).toBe(`bound ${taken}`)
        expect(yield* first.next).toBe(`error ${taken} replaced by a newer socket for Subscription/${taken}`)
        expect(yield* ping(taken)).toBe(true)
        expect(yield* ping(kept)).toBe(true)
        expect(yield* second.next).toBe(`ping ${taken}`)
        // What `first` receives next is the ping of the id it kept: none of the id it lost came before.
        expect(yield* first.next).toBe(`ping ${kept}`)
        expect(first.ws.readyState).toBe(WebSocket.OPEN)
      }))

    it.scoped("answers an error for an unknown id, a rest-hook Subscription and any other message, and keeps the socket open", () =>
      Effect.gen(function*() {
        const restHook = yield* create("rest-hook")
        const id = yield* create("websocket")
        const client = yield* connect()
        expect(yield* ask(client, "bind no-such-subscription")).toBe("error no-such-subscription Subscription/no-such-subscription is not known")
        expect(yield* ask(client, `bind ${restHook}`)).toBe(`error ${restHook} Subscription/${restHook} has channel type rest-hook, not websocket`)
        expect(yield* ask(client, "hello")).toBe("error only \"bind <id>\" is understood")
        expect(yield* ask(client, "bind")).toBe("error bind takes one Subscription id (1 to 64 letters, digits, \"-\" and \".\"): \"bind <id>\"")
        expect(yield* ask(client, "bind a b")).toBe("error bind takes one Subscription id (1 to 64 letters, digits, \"-\" and \".\"): \"bind <id>\"")
        expect(yield* ask(client, "bind no/such")).toBe("error bind takes one Subscription id (1 to 64 letters, digits, \"-\" and \".\"): \"bind <id>\"")
        client.send(Buffer.from(`bind ${id}`))
        expect(yield* client.next).toBe("error binary messages are not understood: send \"bind <id>\" as text")
        expect(yield* ping(restHook)).toBe(false)
        expect(yield* ask(client, `bind ${id}`)).toBe(`bound ${id}`)
      }))

    it.scoped("binds an off Subscription, and ends the binding of a deleted one: its socket is closed with 4002", () =>
      Effect.gen(function*() {
        const { base } = yield* Server
        const off = yield* create("websocket", "off")
        const client = yield* connect()
        expect(yield* ask(client, `bind ${off}`)).toBe(`bound ${off}`)
        expect((yield* call("DELETE", `${base}/Subscription/${off}`)).status).toBe(204)
        // What delivery does when it sees the delete.
        yield* Effect.flatMap(Server, (server) => server.subscriptionSockets.unbindAll(off))
        expect(yield* client.closed).toEqual({ code: 4002, reason: `Subscription/${off} was deleted` })
        expect(yield* ping(off)).toBe(false)
        const again = yield* connect()
        expect(yield* ask(again, `bind ${off}`)).toBe(`error ${off} Subscription/${off} was deleted`)
      }))

    it.scoped("refuses a bind to a caller whose token may not read Subscription, and binds for one that may", () =>
      Effect.gen(function*() {
        const id = yield* create("websocket")
        const refused = yield* connect({ "x-test-principal": "observationsA" })
        const answer = yield* ask(refused, `bind ${id}`)
        expect(answer).toMatch(new RegExp(`^error ${id} not allowed: the token's scopes do not allow reading Subscription`))
        expect(yield* ping(id)).toBe(false)
        const allowed = yield* connect({ "x-test-principal": "systemReader" })
        expect(yield* ask(allowed, `bind ${id}`)).toBe(`bound ${id}`)
      }))

    it.scoped("holds at most 100 ids on one socket", () =>
      Effect.gen(function*() {
        const { base } = yield* Server
        const bundle = yield* call("POST", base, {
          body: {
            resourceType: "Bundle",
            type: "transaction",
            entry: Array.from({ length: 101 }, () => ({ resource: subscription("websocket"), request: { method: "POST", url: "Subscription" } }))
          }
        })
        expect(bundle.status, bundle.text.slice(0, 500)).toBe(200)
        const ids: Array<string> = bundle.json.entry.map((entry: any) => String(entry.response.location).split("/")[1])
        const client = yield* connect()
        for (const id of ids.slice(0, 100)) expect(yield* ask(client, `bind ${id}`)).toBe(`bound ${id}`)
        expect(yield* ask(client, `bind ${ids[100]}`)).toBe(`error ${ids[100]} this socket holds 100 Subscriptions already, the most one may`)
        // An id it holds may be bound again.
        expect(yield* ask(client, `bind ${ids[0]}`)).toBe(`bound ${ids[0]}`)
        expect(yield* ping(ids[100]!)).toBe(false)
      }))

    it.scoped("closes a socket that sends a message over 256 bytes with 1009, and one that sends faster than it is answered with 1008", () =>
      Effect.gen(function*() {
        const large = yield* connect()
        large.send(`bind ${"a".repeat(300)}`)
        expect((yield* large.closed).code).toBe(1009)
        const id = yield* create("websocket")
        const hasty = yield* connect()
        // Sent in one go: they arrive together, before the first is answered.
        for (let i = 0; i < 40; i++) hasty.send(`bind ${id}`)
        expect(yield* hasty.closed).toEqual({ code: 1008, reason: "too many messages waiting for an answer" })
      }))

    it.effect("answers a plain GET of /ws with a 426 OperationOutcome, and a POST with a 405", () =>
      Effect.gen(function*() {
        const { url } = yield* Server
        const plain = yield* call("GET", `${url}/ws`)
        expect([plain.status, plain.headers.get("upgrade"), plain.headers.get("content-type")]).toEqual([426, "websocket", "application/fhir+json; charset=utf-8"])
        expect(plain.json.resourceType).toBe("OperationOutcome")
        expect(plain.json.issue[0].diagnostics).toContain("open it as a WebSocket")
        const posted = yield* call("POST", `${url}/ws`, { body: "{}" })
        expect([posted.status, posted.headers.get("allow")]).toEqual([405, "GET, HEAD"])
      }))
  })

  it.scopedLive("stops without waiting for sockets: a client that vanished is forgotten, a bound one is closed with 1001", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const running = yield* server("sqlite").pipe(Scope.extend(scope))
      const client = yield* Effect.gen(function*() {
        const id = yield* create("websocket")
        const vanished = yield* connect()
        expect(yield* ask(vanished, `bind ${id}`)).toBe(`bound ${id}`)
        vanished.ws.terminate()
        expect((yield* vanished.closed).code).toBe(1006)
        const client = yield* connect()
        expect(yield* ask(client, `bind ${id}`)).toBe(`bound ${id}`)
        return client
      }).pipe(Effect.provideService(Server, running))
      yield* within("the server's stop")(Scope.close(scope, Exit.void))
      expect(yield* client.closed).toEqual({ code: 1001, reason: "the server is stopping" })
    }), { timeout: 120_000 })
})

describe.skipIf(skipRealPackages || !pgAvailable)("the websocket channel of Subscriptions on postgres", () => {
  layer(Layer.scoped(Server, server("postgres")), { timeout: 120_000, excludeTestServices: true })((it) => {
    it.scoped("binds, pings, and hands an id over to a newer socket", () =>
      Effect.gen(function*() {
        const id = yield* create("websocket")
        const first = yield* connect()
        expect(yield* ask(first, `bind ${id}`)).toBe(`bound ${id}`)
        expect(yield* ping(id)).toBe(true)
        expect(yield* first.next).toBe(`ping ${id}`)
        const second = yield* connect()
        expect(yield* ask(second, `bind ${id}`)).toBe(`bound ${id}`)
        expect((yield* first.closed).code).toBe(4001)
        expect(yield* ping(id)).toBe(true)
        expect(yield* second.next).toBe(`ping ${id}`)
      }))
  })
})
