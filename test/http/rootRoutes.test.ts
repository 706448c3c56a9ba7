/**
 * The paths outside the FHIR API (src/http/RootRoutes.ts, docs/operations.md "Paths outside the FHIR API"),
 * over HTTP on the real server: an endpoint not built yet is a 501 OperationOutcome for the methods it takes
 * and a 405 with `Allow` for any other; the probes, `/fhir` and an unknown path answer as before.
 */
import { describe, expect, layer } from "@effect/vitest"
import { HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Context, Effect, Layer } from "effect"
import { connect } from "node:net"
import { app, match, notBuilt, type RootRoute, rootRoutes } from "../../src/http/RootRoutes.ts"
import { call, startServer, type TestServer } from "../support/server.ts"

class Server extends Context.Tag("test/RootRoutesServer")<Server, TestServer>() {}

/** Each endpoint with the methods it takes, and a method it does not take. */
const endpoints: ReadonlyArray<readonly [path: string, methods: ReadonlyArray<string>, refused: string | undefined]> = [
  ["/_usage", ["GET"], "POST"],
  ["/_requests", ["GET"], "DELETE"],
  ["/_audit", ["GET"], "POST"],
  ["/_audit/verify", ["GET"], "PUT"],
  ["/sync", ["GET"], "POST"],
  ["/graphql", ["GET", "POST"], "PUT"],
  ["/export/job-1", ["GET", "DELETE"], "POST"],
  ["/export/job-1/file", ["GET"], "DELETE"],
  ["/.well-known/smart-configuration", ["GET"], "POST"],
  ["/.well-known/openid-configuration", ["GET"], "POST"],
  // The interface leaves the authorization server's methods open: every method is a 501 until it is built.
  ...["authorize", "token", "register", "introspect", "revoke", "jwks", "login"].map((name) =>
    [`/auth/${name}`, ["GET", "POST", "PUT", "DELETE"], undefined] as const
  )
]

/** Endpoints built since: their own tests cover them (test/governance/metering.http.test.ts, requestLogEndpoint.test.ts, audit.endpoint.test.ts, test/sync/, test/export/). */
const built = new Set(["/_usage", "/_requests", "/_audit", "/_audit/verify", "/sync", "/graphql", "/export/job-1", "/export/job-1/file"])

describe("the root route table", () => {
  layer(Layer.scoped(Server, startServer("sqlite")), { timeout: 60_000, excludeTestServices: true })((it) => {
    it.effect("answers 501 with an OperationOutcome naming the path on each endpoint not built yet", () =>
      Effect.gen(function*() {
        const { url } = yield* Server
        for (const [path, methods] of endpoints) {
          if (built.has(path)) continue
          for (const method of methods) {
            const reply = yield* call(method, `${url}${path}?x=1`, method === "POST" ? { body: "{}" } : {})
            expect([method, path, reply.status, reply.headers.get("content-type")]).toEqual([method, path, 501, "application/fhir+json; charset=utf-8"])
            expect(reply.json).toEqual({
              resourceType: "OperationOutcome",
              issue: [{ severity: "error", code: "not-supported", diagnostics: `${path} is not available in this build yet` }]
            })
          }
        }
      }))

    it.effect("answers HEAD as GET where an endpoint takes GET", () =>
      Effect.gen(function*() {
        const { url } = yield* Server
        const reply = yield* call("HEAD", `${url}/.well-known/smart-configuration`)
        expect([reply.status, reply.headers.get("content-type"), reply.text]).toEqual([501, "application/fhir+json; charset=utf-8", ""])
        const served = yield* call("HEAD", `${url}/_audit`)
        expect([served.status, served.headers.get("content-type"), served.text]).toEqual([200, "application/fhir+json; charset=utf-8", ""])
      }))

    it.effect("answers a WebSocket handshake on /sync by switching protocols", () =>
      Effect.gen(function*() {
        const { url } = yield* Server
        const { hostname, port } = new URL(url)
        const head = yield* Effect.promise(() =>
          new Promise<string>((resolve, reject) => {
            const socket = connect(Number(port), hostname, () =>
              socket.write(
                "GET /sync HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" +
                  "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
              ))
            let text = ""
            socket.on("data", (chunk) => {
              text += chunk.toString()
              if (text.includes("\r\n\r\n")) {
                socket.destroy()
                resolve(text)
              }
            })
            socket.on("error", reject)
          })
        )
        expect(head.split("\r\n")[0]).toBe("HTTP/1.1 101 Switching Protocols")
        expect(head.toLowerCase()).toContain("upgrade: websocket")
      }))

    it.effect("answers 405 with Allow and an OperationOutcome for a method an endpoint does not take", () =>
      Effect.gen(function*() {
        const { url } = yield* Server
        for (const [path, methods, refused] of endpoints) {
          if (refused === undefined) continue
          const reply = yield* call(refused, `${url}${path}`)
          const allow = [...methods, ...(methods.includes("GET") ? ["HEAD"] : [])].join(", ")
          expect([refused, path, reply.status, reply.headers.get("allow"), reply.headers.get("content-type")])
            .toEqual([refused, path, 405, allow, "application/fhir+json; charset=utf-8"])
          expect(reply.json).toEqual({
            resourceType: "OperationOutcome",
            issue: [{ severity: "error", code: "not-supported", diagnostics: `${refused} is not allowed on ${path}` }]
          })
        }
      }))

    it.effect("answers 404 not-found on a path the table does not hold, as before", () =>
      Effect.gen(function*() {
        const { url } = yield* Server
        for (const path of ["/nothing", "/", "/graphqlx", "/_auditor", "/_audit/", "/_audit/verify/x", "/export", "/export/", "/export/job-1/other", "/auth", "/auth/other", "/.well-known/other", "/fhirx"]) {
          const reply = yield* call("GET", `${url}${path}`)
          expect([path, reply.status, reply.json]).toEqual([path, 404, {
            resourceType: "OperationOutcome",
            issue: [{ severity: "error", code: "not-found", diagnostics: `no route for GET ${path}` }]
          }])
        }
        const posted = yield* call("POST", `${url}/nothing`, { body: "{}" })
        expect([posted.status, posted.json.issue[0].diagnostics]).toEqual([404, "no route for POST /nothing"])
      }))

    it.effect("leaves the probes and the FHIR API as they were", () =>
      Effect.gen(function*() {
        const { url, base } = yield* Server
        for (const probe of ["/livez", "/readyz"]) expect([probe, (yield* call("GET", `${url}${probe}`)).json]).toEqual([probe, { status: "ok" }])
        expect((yield* call("GET", `${url}/healthz`)).json).toEqual({ status: "ok", role: "primary" })
        const metadata = yield* call("GET", `${base}/metadata`)
        expect([metadata.status, metadata.json.resourceType]).toEqual([200, "CapabilityStatement"])
        // A FHIR path is the FHIR app's, whatever the table holds.
        const unknown = yield* call("GET", `${base}/graphql`)
        expect([unknown.status, unknown.json.issue[0].code]).toEqual([404, "not-found"])
      }))
  })
})

describe("RootRoutes.app", () => {
  const answer = <E, R>(routes: ReadonlyArray<RootRoute<E, R>>, method: string, path: string) =>
    app(routes).pipe(
      Effect.provideService(HttpServerRequest.HttpServerRequest, HttpServerRequest.fromWeb(new Request(`http://localhost${path}`, { method }))),
      Effect.map((response) => HttpServerResponse.toWeb(response)),
      Effect.flatMap((response) => Effect.promise(async () => [response.status, await response.text()] as const))
    )

  layer(Layer.empty)((it) => {
    it.effect("serves an entry's handler, with its decoded path parameters, once a feature replaces notBuilt", () =>
      Effect.gen(function*() {
        const routes = rootRoutes.map((route): RootRoute =>
          route.path === "/export/{job}/file"
            ? { ...route, handler: (request) => Effect.succeed(HttpServerResponse.text(`${request.params.job} ${request.path}`)) }
            : route
        )
        expect(yield* answer(routes, "GET", "/export/a%20b/file?name=Patient.ndjson")).toEqual([200, "a b /export/a%20b/file"])
        expect((yield* answer(routes, "GET", "/export/a%20b"))[0]).toBe(501)
        expect((yield* answer([{ path: "/x/{id}", methods: ["GET"], handler: notBuilt }], "GET", "/x/%zz"))[0]).toBe(404)
      }))

    it.effect("fits a path to a pattern segment by segment", () =>
      Effect.sync(() => {
        expect(match("/export/{job}/file", "/export/j1/file")).toEqual({ job: "j1" })
        expect(match("/export/{job}", "/export/")).toBeUndefined()
        expect(match("/export/{job}", "/export/j1/file")).toBeUndefined()
        expect(match("/_audit", "/_audit")).toEqual({})
      }))
  })
})
