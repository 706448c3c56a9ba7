/**
 * Shutdown as a client of the real process sees it (docs/operations.md, "Shutdown"): idle and silent
 * connections do not hold the exit, a request arriving while the server drains is answered 503 with
 * `Connection: close`, and a request in flight still gets its answer.
 */
import { connect, type Socket } from "node:net"
import { performance } from "node:perf_hooks"
import { describe, expect, it } from "vitest"
import { startSvc } from "../support/process.ts"
import { scratchDirectories } from "../support/scratch.ts"

const scratch = scratchDirectories()

interface Connection {
  readonly socket: Socket
  /** Resolves with the next whole response (status line, headers, a body of `Content-Length`) and consumes it. */
  readonly response: () => Promise<{ readonly status: number; readonly headers: Record<string, string>; readonly body: string }>
  /** Resolves when the server has closed the connection. */
  readonly closed: Promise<void>
}

/** A raw HTTP/1.1 connection, so the test decides when each byte is sent. */
const open = (url: string): Promise<Connection> =>
  new Promise((resolve, reject) => {
    const { hostname, port } = new URL(url)
    const socket = connect(Number(port), hostname)
    let data = ""
    const waiters: Array<() => void> = []
    socket.setEncoding("utf8")
    socket.on("data", (chunk: string) => {
      data += chunk
      waiters.splice(0).forEach((w) => w())
    })
    const closed = new Promise<void>((done) => socket.on("close", () => done()))
    socket.on("error", () => undefined)
    const until = <A>(read: () => A | undefined): Promise<A> =>
      new Promise((found, missing) => {
        const check = () => {
          const value = read()
          if (value !== undefined) found(value)
          else if (socket.destroyed || socket.readableEnded) missing(new Error(`connection closed after ${JSON.stringify(data)}`))
          else waiters.push(check)
        }
        socket.on("close", check)
        check()
      })
    const response = () =>
      until(() => {
        const end = data.indexOf("\r\n\r\n")
        if (end < 0) return undefined
        const [statusLine = "", ...lines] = data.slice(0, end).split("\r\n")
        const headers = Object.fromEntries(lines.map((line) => [line.slice(0, line.indexOf(":")).toLowerCase(), line.slice(line.indexOf(":") + 1).trim()]))
        const length = Number(headers["content-length"] ?? 0)
        if (data.length < end + 4 + length) return undefined
        const body = data.slice(end + 4, end + 4 + length)
        data = data.slice(end + 4 + length)
        return { status: Number(statusLine.split(" ")[1]), headers, body }
      })
    socket.once("connect", () => resolve({ socket, response, closed }))
    socket.once("error", reject)
  })

describe("svc shutdown", () => {
  it("exits at once on SIGTERM though a keep-alive client and a silent one hold connections", async () => {
    const server = await startSvc(["--memory"], { cwd: scratch() })
    await server.logged("serving")
    const silent = await open(server.url)
    const kept = await open(server.url)
    kept.socket.write("GET /fhir/metadata HTTP/1.1\r\nHost: svc\r\n\r\n")
    const first = await kept.response()
    expect(first.status).toBe(200)
    expect(first.headers["connection"]).toBe("keep-alive")

    const started = performance.now()
    const finished = await server.stop("SIGTERM")
    const took = performance.now() - started
    expect(finished.code).toBe(0)
    // The keep-alive timeout is 65 s and a silent connection's header timeout 66 s: neither was waited for.
    expect(took).toBeLessThan(5_000)
    await Promise.all([silent.closed, kept.closed])
    expect(await server.logged("stopping")).toMatchObject({ in_flight: 0 })
  })

  it("answers a request arriving while it drains 503 with Connection: close, and finishes the one in flight", async () => {
    const server = await startSvc(["--memory"], { cwd: scratch() })
    await server.logged("serving")
    const late = await open(server.url)
    const inFlight = await open(server.url)
    const body = JSON.stringify({ resourceType: "Patient", gender: "female" })
    inFlight.socket.write(
      `POST /fhir/Patient HTTP/1.1\r\nHost: svc\r\nContent-Type: application/fhir+json\r\nContent-Length: ${body.length}\r\nExpect: 100-continue\r\n\r\n`
    )
    // Node writes 100 Continue just before it hands the request on: from here the request is in flight.
    expect((await inFlight.response()).status).toBe(100)
    inFlight.socket.write(body.slice(0, 10))

    const exited = server.stop("SIGTERM")
    expect(await server.logged("stopping")).toMatchObject({ in_flight: 1 })

    late.socket.write("GET /fhir/Patient HTTP/1.1\r\nHost: svc\r\n\r\n")
    const refused = await late.response()
    expect(refused.status).toBe(503)
    expect(refused.headers["connection"]).toBe("close")
    expect(refused.headers["retry-after"]).toBe("1")
    expect(JSON.parse(refused.body)).toMatchObject({ resourceType: "OperationOutcome", issue: [{ severity: "error", code: "transient" }] })
    await late.closed

    inFlight.socket.write(body.slice(10))
    const created = await inFlight.response()
    expect(created.status).toBe(201)
    expect(created.headers["connection"]).toBe("close")
    expect(JSON.parse(created.body)).toMatchObject({ resourceType: "Patient", gender: "female" })
    await inFlight.closed

    expect((await exited).code).toBe(0)
  })
})
