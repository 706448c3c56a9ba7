/**
 * One rest-hook attempt against real receivers on loopback: what the receiver gets (method, body, headers,
 * one Content-Type), and the reason the user reads when it does not get through (an error status, a redirect
 * left unfollowed, no answer in time, no connection, a TLS failure, an endpoint that is not http).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Option, TestClock } from "effect"
import { describeEndpoint, postNotification } from "../../src/subscriptions/restHook.ts"
import { closedPort, startReceiver } from "../support/receiver.ts"

const body = JSON.stringify({ resourceType: "Bundle", type: "history", entry: [{ fullUrl: "urn:x:Ärzte" }] })

const post = (endpoint: string, headers: ReadonlyArray<readonly [string, string]> = []) =>
  postNotification({ endpoint, headers, body, contentType: "application/fhir+json", timeout: "10 seconds" })

/** The reason `endpoint` fails with; fails the test when it is delivered. */
const reasonOf = (endpoint: string, headers: ReadonlyArray<readonly [string, string]> = []) =>
  Effect.map(Effect.flip(post(endpoint, headers)), (failed) => failed.reason)

/** Waits, turn by turn of the event loop (not by time), until `check` holds; its last answer. */
const eventually = (check: () => boolean) =>
  Effect.gen(function*() {
    for (let turn = 0; turn < 1000 && !check(); turn++) {
      yield* Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
    }
    return check()
  })

const contentTypes = (rawHeaders: ReadonlyArray<readonly [string, string]>) =>
  rawHeaders.filter(([name]) => name.toLowerCase() === "content-type").map(([, value]) => value)

describe("postNotification", () => {
  it.scoped("POSTs the body with the headers as given and the default content type; a 2xx is delivered", () =>
    Effect.gen(function*() {
      const receiver = yield* startReceiver({ status: 200 })
      const delivered = yield* post(`${receiver.url}/hook/in?tenant=a`, [
        ["X-Svc-Subscription", "Subscription/s1"],
        ["Authorization", "Bearer abc"],
        ["x-lower-Mixed", "v"]
      ])
      expect(delivered.status).toBe(200)
      const [one] = receiver.received
      expect(receiver.received).toHaveLength(1)
      expect(one!.method).toBe("POST")
      expect(one!.path).toBe("/hook/in?tenant=a")
      expect(one!.body).toBe(body)
      expect(one!.headers["content-length"]).toBe(String(Buffer.byteLength(body)))
      expect(contentTypes(one!.rawHeaders)).toEqual(["application/fhir+json"])
      const sent = one!.rawHeaders.filter(([name]) => ["X-Svc-Subscription", "Authorization", "x-lower-Mixed"].includes(name))
      expect(sent).toEqual([["X-Svc-Subscription", "Subscription/s1"], ["Authorization", "Bearer abc"], ["x-lower-Mixed", "v"]])
    }))

  it.scoped("any 2xx status is delivered", () =>
    Effect.gen(function*() {
      const receiver = yield* startReceiver({ status: 204 })
      expect((yield* post(`${receiver.url}/hook`)).status).toBe(204)
      receiver.answerWith({ status: 202 })
      expect((yield* post(`${receiver.url}/hook`)).status).toBe(202)
    }))

  it.scoped("a Content-Type entry in any case replaces the default, and exactly one Content-Type is sent", () =>
    Effect.gen(function*() {
      const receiver = yield* startReceiver({ status: 200 })
      for (const name of ["content-type", "CONTENT-TYPE", "Content-Type"]) {
        yield* post(`${receiver.url}/hook`, [["X-Svc-Subscription", "Subscription/s1"], [name, "application/json"]])
        const one = yield* receiver.next
        expect(contentTypes(one.rawHeaders)).toEqual(["application/json"])
        expect(one.rawHeaders.find(([sent]) => sent.toLowerCase() === "content-type")![0]).toBe(name)
      }
      // One given by the caller and one later (a channel's): the later is the one sent.
      yield* post(`${receiver.url}/hook`, [["Content-Type", "text/plain"], ["content-type", "application/json"]])
      expect(contentTypes((yield* receiver.next).rawHeaders)).toEqual(["application/json"])
    }))

  it.scoped("an error status fails with the status in the reason", () =>
    Effect.gen(function*() {
      const receiver = yield* startReceiver({ status: 500 })
      expect(yield* reasonOf(`${receiver.url}/hook`)).toBe(`POST ${receiver.url}/hook answered 500`)
      receiver.answerWith({ status: 404 })
      expect(yield* reasonOf(`${receiver.url}/hook`)).toBe(`POST ${receiver.url}/hook answered 404`)
      expect(receiver.received).toHaveLength(2)
    }))

  it.scoped("a redirect is not followed and fails", () =>
    Effect.gen(function*() {
      const elsewhere = yield* startReceiver({ status: 200 })
      for (const status of [302, 307, 308]) {
        const receiver = yield* startReceiver({ status, headers: { location: `${elsewhere.url}/hook` } })
        expect(yield* reasonOf(`${receiver.url}/hook`)).toBe(`POST ${receiver.url}/hook answered ${status}; redirects are not followed`)
        expect(receiver.received).toHaveLength(1)
      }
      expect(elsewhere.received).toHaveLength(0)
    }))

  it.scoped("a receiver that never answers fails after the timeout, and its request is closed", () =>
    Effect.gen(function*() {
      const receiver = yield* startReceiver("hang")
      const attempt = yield* Effect.fork(reasonOf(`${receiver.url}/hook`))
      yield* receiver.next
      yield* TestClock.adjust("9999 millis")
      expect(yield* Fiber.poll(attempt)).toEqual(Option.none())
      yield* TestClock.adjust("1 millis")
      expect(yield* Fiber.join(attempt)).toBe(`POST ${receiver.url}/hook did not answer within 10 s`)
      expect(yield* eventually(() => receiver.abandoned() === 1)).toBe(true)
    }))

  it.scoped("an interrupted attempt closes its request", () =>
    Effect.gen(function*() {
      const receiver = yield* startReceiver("hang")
      const attempt = yield* Effect.fork(post(`${receiver.url}/hook`))
      yield* receiver.next
      yield* Fiber.interrupt(attempt)
      expect(yield* eventually(() => receiver.abandoned() === 1)).toBe(true)
    }))

  it.scoped("a port nothing listens on fails with could not connect", () =>
    Effect.gen(function*() {
      const port = yield* closedPort()
      expect(yield* reasonOf(`http://127.0.0.1:${port}/hook`)).toBe(`POST http://127.0.0.1:${port}/hook could not connect: ECONNREFUSED`)
    }))

  it.scoped("https to a receiver that does not speak TLS fails in the TLS handshake", () =>
    Effect.gen(function*() {
      const receiver = yield* startReceiver({ status: 200 })
      const endpoint = receiver.url.replace("http:", "https:")
      expect(yield* reasonOf(`${endpoint}/hook`)).toMatch(new RegExp(`^POST ${endpoint}/hook failed its TLS handshake: \\S+$`))
      expect(receiver.received).toHaveLength(0)
    }))

  it.scoped("an endpoint that is not an http or https URL fails without sending", () =>
    Effect.gen(function*() {
      expect(yield* reasonOf("ftp://files.example/hook")).toBe("channel.endpoint (scheme ftp) is not an http or https URL")
      expect(yield* reasonOf("mailto:ops@example.org")).toBe("channel.endpoint (scheme mailto) is not an http or https URL")
      expect(yield* reasonOf("hook.example/in")).toBe("channel.endpoint (not a valid URL) is not an http or https URL")
    }))

  it.scoped("a header that cannot be sent fails without sending, and the reason shows no value", () =>
    Effect.gen(function*() {
      const receiver = yield* startReceiver({ status: 200 })
      const reason = yield* reasonOf(`${receiver.url}/hook`, [["X-Key", "secret\r\nX-Injected: 1"]])
      expect(reason).toBe(`POST ${receiver.url}/hook was not sent: a header name or value is not valid (ERR_INVALID_CHAR)`)
      expect(receiver.received).toHaveLength(0)
    }))

  it.scoped("credentials in the URL are sent as Basic authorization and never appear in a reason", () =>
    Effect.gen(function*() {
      const receiver = yield* startReceiver({ status: 503 })
      const endpoint = receiver.url.replace("http://", "http://hook%20user:pa%3Ass@") + "/hook?token=t0k3n#part"
      const reason = yield* reasonOf(endpoint)
      expect(reason).toBe(`POST ${receiver.url}/hook answered 503`)
      const one = yield* receiver.next
      expect(one.path).toBe("/hook?token=t0k3n")
      expect(one.headers["authorization"]).toBe(`Basic ${Buffer.from("hook user:pa:ss").toString("base64")}`)
    }))

  it.scoped("an Authorization header given replaces the URL's credentials", () =>
    Effect.gen(function*() {
      const receiver = yield* startReceiver({ status: 200 })
      yield* post(receiver.url.replace("http://", "http://u:p@") + "/hook", [["Authorization", "Bearer given"]])
      const one = yield* receiver.next
      expect(one.rawHeaders.filter(([name]) => name.toLowerCase() === "authorization")).toEqual([["Authorization", "Bearer given"]])
    }))
})

describe("describeEndpoint", () => {
  it("keeps scheme, host, port and path, and drops userinfo, query and fragment", () => {
    expect(describeEndpoint("https://user:secret@hooks.example:8443/in/box?key=secret#frag")).toBe("https://hooks.example:8443/in/box")
    expect(describeEndpoint("http://[::1]:9000/")).toBe("http://[::1]:9000/")
    expect(describeEndpoint("HTTPS://Hooks.Example")).toBe("https://hooks.example/")
  })

  it("shows only the scheme of other URLs and nothing of text that is not a URL", () => {
    expect(describeEndpoint("ftp://user:secret@files.example/x")).toBe("(scheme ftp)")
    expect(describeEndpoint("not a url with secret")).toBe("(not a valid URL)")
  })
})
