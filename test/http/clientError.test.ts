/**
 * Requests Node's HTTP parser refuses before any handler runs are answered with an OperationOutcome and
 * the connection closed, as a client writing raw bytes to the real server sees them.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { connect } from "node:net"
import { makePeerList } from "../../src/http/ClientAddress.ts"
import { maxHeaderBytes } from "../../src/http/ClientError.ts"
import { layer as readinessLayer } from "../../src/http/Readiness.ts"
import { listen, servingAppLayer } from "../../src/http/Server.ts"
import { memorySink } from "../../src/logging/Log.ts"

const serve = Effect.gen(function*() {
  const context = yield* Layer.build(Layer.mergeAll(readinessLayer, servingAppLayer, memorySink([])))
  const edge = { role: "primary" as const, trusted: { hops: 0, peers: makePeerList([]) }, requestLog: false, maxBodyBytes: 1024 }
  const { address } = yield* listen({ host: "127.0.0.1", port: 0 }, edge).pipe(Effect.provide(context))
  return address._tag === "TcpAddress" ? address.port : 0
})

/** Writes `raw` and reads until the server closes the connection. */
const exchange = (port: number, raw: string) =>
  Effect.promise(() =>
    new Promise<string>((resolve, reject) => {
      const socket = connect(port, "127.0.0.1")
      let text = ""
      socket.setEncoding("utf8")
      socket.on("data", (chunk: string) => (text += chunk))
      socket.on("end", () => resolve(text))
      socket.on("close", () => resolve(text))
      socket.on("error", (error) => (text === "" ? reject(error) : resolve(text)))
      socket.write(raw)
    })
  )

const parsed = (response: string) => {
  const [head = "", body = ""] = response.split("\r\n\r\n")
  const [statusLine = "", ...headers] = head.split("\r\n")
  return { status: Number(statusLine.split(" ")[1]), headers: headers.map((line) => line.toLowerCase()), body: JSON.parse(body) as { resourceType: string; issue: Array<{ code: string; diagnostics: string }> } }
}

describe("requests the HTTP parser refuses", () => {
  it.scoped("headers over the limit are a 431 OperationOutcome that says how to search instead, and the connection closes", () =>
    Effect.gen(function*() {
      const port = yield* serve
      const answer = parsed(yield* exchange(port, `GET /fhir/Patient?name=${"x".repeat(maxHeaderBytes)} HTTP/1.1\r\nhost: x\r\n\r\n`))
      expect(answer.status).toBe(431)
      expect(answer.headers).toContain("connection: close")
      expect(answer.body.resourceType).toBe("OperationOutcome")
      expect(answer.body.issue[0]).toMatchObject({ code: "too-costly" })
      expect(answer.body.issue[0]!.diagnostics).toContain("_search")
    }))

  it.scoped("a malformed request is a 400 OperationOutcome", () =>
    Effect.gen(function*() {
      const port = yield* serve
      for (const raw of ["GARBAGE\r\n\r\n", "GET / HTTP/1.1\r\nbad header\r\n\r\n", "GET /fhir\u0000 HTTP/1.1\r\nhost: x\r\n\r\n", "GET /fhir HTTP/1.1\r\nhost: x\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\n"]) {
        const answer = parsed(yield* exchange(port, raw))
        expect([raw, answer.status, answer.body.resourceType, answer.body.issue[0]!.code]).toEqual([raw, 400, "OperationOutcome", "structure"])
      }
    }))

  it.scoped("a request line of 40 KB, above Node's default of 16 KB, is read as usual", () =>
    Effect.gen(function*() {
      const port = yield* serve
      const answer = yield* exchange(port, `GET /livez?pad=${"x".repeat(40_000)} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n`)
      expect(answer.split("\r\n")[0]).toBe("HTTP/1.1 200 OK")
    }))
})
