/**
 * Forwarding from a replica to the primary, over real HTTP on 127.0.0.1: a stand-in primary (a plain
 * Node server, with a `ws` WebSocket server for upgrades) and a stand-in replica whose listener forwards
 * every request and upgrade to it. What the primary receives and what the client gets back are compared
 * with what was sent.
 */
import { execFileSync, spawnSync } from "node:child_process"
import { createHash, randomBytes } from "node:crypto"
import { once } from "node:events"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import * as Http from "node:http"
import * as Https from "node:https"
import * as Net from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest"
import { WebSocket, WebSocketServer } from "ws"
import { forwardRequest, makeForwarder } from "../../src/cluster/forward.ts"
import { mustForward } from "../../src/cluster/forwardRules.ts"

// ---------------------------------------------------------------------------------------------------------
// Servers and clients
// ---------------------------------------------------------------------------------------------------------

/** Listens on 127.0.0.1 on a free port, closed (with every connection) when the test ends. */
const listen = async (server: Http.Server): Promise<number> => {
  server.listen(0, "127.0.0.1")
  await once(server, "listening")
  onTestFinished(() => {
    server.closeAllConnections()
    server.close()
  })
  return (server.address() as Net.AddressInfo).port
}

/** A port nothing listens on: a server's, once it is closed. */
const closedPort = async (): Promise<number> => {
  const server = Net.createServer()
  server.listen(0, "127.0.0.1")
  await once(server, "listening")
  const port = (server.address() as Net.AddressInfo).port
  server.close()
  await once(server, "close")
  return port
}

type Handler = (request: Http.IncomingMessage, response: Http.ServerResponse) => void

/** The stand-in primary: `handler` answers; returns its URL. */
const startPrimary = async (handler: Handler): Promise<{ readonly server: Http.Server; readonly url: string }> => {
  const server = Http.createServer(handler)
  const port = await listen(server)
  return { server, url: `http://127.0.0.1:${port}` }
}

/** The stand-in replica: forwards every request and upgrade to `primaryUrl`, with the client's socket address. */
const startReplica = async (primaryUrl: string, connectTimeoutMs?: number): Promise<number> => {
  const forwarder = makeForwarder(new URL(primaryUrl), connectTimeoutMs === undefined ? undefined : { connectTimeoutMs })
  onTestFinished(() => forwarder.close())
  const server = Http.createServer((request, response) => void forwarder.request(request, response, request.socket.remoteAddress!))
  server.on("upgrade", (request: Http.IncomingMessage, socket: Net.Socket, head: Buffer) => forwarder.upgrade(request, socket, head, request.socket.remoteAddress!))
  return listen(server)
}

interface Answer {
  readonly status: number
  readonly statusMessage: string
  readonly headers: Http.IncomingHttpHeaders
  readonly rawHeaders: ReadonlyArray<string>
  readonly body: Buffer
  /** The client's connection it came on. */
  readonly socket: Net.Socket
}

/** Sends one request (on a connection of its own) and reads the whole answer. */
const send = async (
  port: number,
  options: {
    readonly method?: string
    readonly path: string
    readonly headers?: Http.OutgoingHttpHeaders
    readonly body?: Buffer | string
    readonly agent?: Http.Agent
  }
): Promise<Answer> => {
  const request = Http.request({ host: "127.0.0.1", port, method: options.method ?? "GET", path: options.path, headers: options.headers ?? {}, agent: options.agent ?? false })
  request.end(options.body)
  const [response] = (await once(request, "response")) as [Http.IncomingMessage]
  const chunks: Array<Buffer> = []
  for await (const chunk of response) chunks.push(chunk as Buffer)
  return {
    status: response.statusCode!,
    statusMessage: response.statusMessage!,
    headers: response.headers,
    rawHeaders: response.rawHeaders,
    body: Buffer.concat(chunks),
    socket: request.socket!
  }
}

/** Reads a request's whole body. */
const bodyOf = async (request: Http.IncomingMessage): Promise<Buffer> => {
  const chunks: Array<Buffer> = []
  for await (const chunk of request) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}

const sha256 = (bytes: Buffer): string => createHash("sha256").update(bytes).digest("hex")

/** A promise and its resolver, for events seen in one server's handler and awaited in the test. */
const signal = <A>() => {
  let resolve!: (value: A) => void
  const promise = new Promise<A>((done) => (resolve = done))
  return { promise, resolve }
}

interface Outcome {
  readonly resourceType: string
  readonly issue: ReadonlyArray<{ readonly severity: string; readonly code: string; readonly diagnostics: string }>
}

// ---------------------------------------------------------------------------------------------------------
// mustForward
// ---------------------------------------------------------------------------------------------------------

describe("mustForward", () => {
  const cases: ReadonlyArray<readonly [method: string, url: string, forwarded: boolean]> = [
    // FHIR writes, and every method but GET and HEAD under /fhir
    ["POST", "/fhir/Patient", true],
    ["PUT", "/fhir/Patient/1", true],
    ["PATCH", "/fhir/Patient/1", true],
    ["DELETE", "/fhir/Patient/1", true],
    ["DELETE", "/fhir/Patient?identifier=x", true],
    ["POST", "/fhir", true],
    ["POST", "/fhir/", true],
    ["POST", "/fhir/Patient/_search", true],
    ["POST", "/fhir/Patient/$validate", true],
    ["OPTIONS", "/fhir/Patient", true],
    ["PROPFIND", "/fhir/Patient/1", true],
    ["POST", "/fhir/metadata", true],
    // FHIR reads and searches
    ["GET", "/fhir/Patient/1", false],
    ["HEAD", "/fhir/Patient/1", false],
    ["GET", "/fhir/Patient?name=x", false],
    ["GET", "/fhir/Patient/1/_history/2", false],
    ["GET", "/fhir", false],
    ["GET", "/fhir/Patient/$everything", false],
    ["GET", "/fhir/metadata", false],
    ["HEAD", "/fhir/metadata", false],
    ["GET", "/fhir/.well-known/smart-configuration", false],
    // $export kick-offs, however they are spelt
    ["GET", "/fhir/$export", true],
    ["HEAD", "/fhir/$export", true],
    ["GET", "/fhir/$export?_type=Patient", true],
    ["GET", "/fhir/Patient/$export", true],
    ["GET", "/fhir/Patient/$export?_since=2024-01-01", true],
    ["GET", "/fhir/Group/g1/$export", true],
    ["GET", "/fhir/Group/g1/$export?_type=Observation", true],
    ["GET", "/fhir/%24export", true],
    ["GET", "/fhir/Group/g1/%24export", true],
    ["GET", "/fhir/Patient/%24%65xport", true],
    ["GET", "/fhir//Patient/$export/", true],
    ["GET", "/fhir/Patient/$exports", false],
    ["GET", "/fhir/Patient/$EXPORT", false],
    ["GET", "/fhir/Patient?_query=$export", false],
    // $install: its jobs, their status and the installed packages are the primary's
    ["POST", "/fhir/$install", true],
    ["GET", "/fhir/$install", true],
    ["GET", "/fhir/$install?_job=1b2c", true],
    ["GET", "/fhir/%24install?_job=1b2c", true],
    ["GET", "/fhir/Group%2Fg1%2F%24export", false],
    ["GET", "/fhir/%E0%A4%A", false],
    // $document stores the document it assembles with persist=true
    ["GET", "/fhir/Composition/c1/$document?persist=true", true],
    ["GET", "/fhir/Composition/$document?id=c1&persist=true", true],
    ["GET", "/fhir/Composition/c1/%24document?_format=xml&persist=true", true],
    ["GET", "/fhir/Composition/c1/$document", false],
    ["GET", "/fhir/Composition/c1/$document?persist=false", false],
    ["GET", "/fhir/Composition/c1/$document?_persist=true", false],
    // not the FHIR API
    ["POST", "/fhirX", false],
    ["POST", "/fhirX/Patient", false],
    ["GET", "/fhirX/$export", false],
    ["POST", "/%66hir/Patient", false],
    // the authorization server and export jobs: any method
    ["GET", "/auth/authorize?response_type=code", true],
    ["POST", "/auth/token", true],
    ["GET", "/auth/jwks", true],
    ["HEAD", "/auth/jwks", true],
    ["GET", "/auth/login/callback?code=1", true],
    ["GET", "/authX/token", false],
    ["GET", "/export/job1", true],
    ["DELETE", "/export/job1", true],
    ["GET", "/export/job1/file?n=1", true],
    ["GET", "/exports/job1", false],
    // GraphQL: a mutation may be in anything but a GET
    ["POST", "/graphql", true],
    ["GET", "/graphql?query={Patient{id}}", false],
    ["HEAD", "/graphql", false],
    ["POST", "/graphqlX", false],
    // Subscriptions' WebSocket
    ["GET", "/ws", true],
    ["GET", "/ws?token=x", true],
    ["GET", "/wsX", false],
    // the replica's own
    ["GET", "/livez", false],
    ["GET", "/readyz", false],
    ["GET", "/healthz", false],
    ["GET", "/healthz?verbose=1", false],
    ["GET", "/sync", false],
    ["GET", "/sync?token=x", false],
    ["GET", "/_usage", false],
    ["GET", "/_usage?client=app", false],
    ["GET", "/_audit", false],
    ["GET", "/_audit/verify", false],
    ["GET", "/_requests", false],
    ["GET", "/.well-known/smart-configuration", false],
    ["GET", "/.well-known/openid-configuration", false],
    ["GET", "/", false],
    ["OPTIONS", "*", false],
    ["GET", "", false]
  ]

  it("forwards writes, $export, /auth/, /export/, GraphQL posts and /ws, and keeps reads, probes, /sync and the rest", () => {
    const got = cases.map(([method, url]) => [method, url, mustForward(method, url)])
    expect(got).toEqual(cases)
  })
})

// ---------------------------------------------------------------------------------------------------------
// HTTP
// ---------------------------------------------------------------------------------------------------------

describe("forwarding a request", () => {
  it("a POST of several MB arrives whole, and the primary's status, headers and body come back unchanged", async () => {
    const upload = randomBytes(6 * 1024 * 1024)
    const answerBody = randomBytes(3 * 1024 * 1024)
    const seen = signal<{ method: string; url: string; length: number; digest: string; contentType: string | undefined }>()
    const primary = await startPrimary(async (request, response) => {
      const body = await bodyOf(request)
      seen.resolve({ method: request.method!, url: request.url!, length: body.length, digest: sha256(body), contentType: request.headers["content-type"] })
      response.writeHead(201, "Created Here", [
        "Location", "http://primary.example/fhir/Binary/b1/_history/1",
        "ETag", "W/\"1\"",
        "X-Svc-Commit-Ts", "1718000000123456",
        "Set-Cookie", "a=1; Path=/",
        "Set-Cookie", "b=2; Path=/; HttpOnly",
        "Content-Type", "application/octet-stream",
        "Content-Length", String(answerBody.length)
      ])
      response.end(answerBody)
    })
    const port = await startReplica(primary.url)

    const answer = await send(port, { method: "POST", path: "/fhir/Binary?_pretty=true", headers: { "content-type": "application/octet-stream" }, body: upload })

    expect(await seen.promise).toEqual({ method: "POST", url: "/fhir/Binary?_pretty=true", length: upload.length, digest: sha256(upload), contentType: "application/octet-stream" })
    expect(answer.status).toBe(201)
    expect(answer.statusMessage).toBe("Created Here")
    expect(answer.headers["location"]).toBe("http://primary.example/fhir/Binary/b1/_history/1")
    expect(answer.headers["etag"]).toBe("W/\"1\"")
    expect(answer.headers["x-svc-commit-ts"]).toBe("1718000000123456")
    expect(answer.headers["set-cookie"]).toEqual(["a=1; Path=/", "b=2; Path=/; HttpOnly"])
    expect(answer.headers["content-length"]).toBe(String(answerBody.length))
    expect(answer.body.length).toBe(answerBody.length)
    expect(sha256(answer.body)).toBe(sha256(answerBody))
  })

  it("bodies stream both ways: the primary reads the start of an upload before the rest is sent, the client the start of an answer before the rest is written", async () => {
    const firstUpload = signal<string>()
    const restOfAnswer = signal<void>()
    const primary = await startPrimary((request, response) => {
      request.once("data", (chunk: Buffer) => firstUpload.resolve(chunk.toString()))
      void bodyOf(request).then(async (body) => {
        response.writeHead(200, { "content-type": "text/plain" })
        response.write(`got ${body.length} bytes;`)
        await restOfAnswer.promise
        response.end(" the end")
      })
    })
    const port = await startReplica(primary.url)

    // No Content-Length: the upload is chunked, its end unknown until the client ends it.
    const request = Http.request({ host: "127.0.0.1", port, method: "POST", path: "/fhir/Binary", agent: false })
    request.write("first part;")
    expect(await firstUpload.promise).toBe("first part;")
    request.end("second part")
    const [response] = (await once(request, "response")) as [Http.IncomingMessage]
    const [first] = (await once(response, "data")) as [Buffer]
    expect(first.toString()).toBe("got 22 bytes;")
    restOfAnswer.resolve()
    expect((await bodyOf(response)).toString()).toBe(" the end")
  })

  it("hop-by-hop headers stay on their hop both ways; end-to-end headers pass; Host is the primary's, X-Forwarded-Host and -Proto the original's", async () => {
    const seen = signal<{ readonly headers: Http.IncomingHttpHeaders; readonly body: string }>()
    const primary = await startPrimary(async (request, response) => {
      seen.resolve({ headers: request.headers, body: (await bodyOf(request)).toString() })
      response.writeHead(200, {
        Connection: "X-Hop-Back",
        "X-Hop-Back": "1",
        "Keep-Alive": "timeout=999, max=7",
        "Proxy-Connection": "keep-alive",
        "X-End-Back": "kept",
        "Content-Type": "text/plain"
      })
      response.end("ok")
    })
    const port = await startReplica(primary.url)

    // A DELETE with a chunked body: Node frames one only when told to, so the framing must be passed on.
    const answer = await send(port, {
      method: "DELETE",
      path: "/fhir/Patient/1",
      body: "a body in chunks",
      headers: {
        "Transfer-Encoding": "chunked",
        Host: "fhir.example.org",
        Connection: "keep-alive, X-Hop",
        "X-Hop": "1",
        "Keep-Alive": "timeout=9",
        "Proxy-Connection": "keep-alive",
        TE: "trailers",
        Trailer: "X-Checksum",
        Upgrade: "h2c",
        Authorization: "Bearer abc",
        "X-End": "kept"
      }
    })

    const { headers, body } = await seen.promise
    expect(body).toBe("a body in chunks")
    expect(headers["x-hop"]).toBeUndefined()
    expect(headers["keep-alive"]).toBeUndefined()
    expect(headers["proxy-connection"]).toBeUndefined()
    expect(headers["te"]).toBeUndefined()
    expect(headers["trailer"]).toBeUndefined()
    expect(headers["upgrade"]).toBeUndefined()
    expect(headers["connection"]?.toLowerCase()).not.toContain("x-hop")
    expect(headers["authorization"]).toBe("Bearer abc")
    expect(headers["x-end"]).toBe("kept")
    expect(headers["host"]).toBe(new URL(primary.url).host)
    expect(headers["x-forwarded-host"]).toBe("fhir.example.org")
    expect(headers["x-forwarded-proto"]).toBe("http")

    expect(answer.status).toBe(200)
    expect(answer.body.toString()).toBe("ok")
    expect(answer.headers["x-end-back"]).toBe("kept")
    expect(answer.headers["x-hop-back"]).toBeUndefined()
    expect(answer.headers["proxy-connection"]).toBeUndefined()
    expect(answer.headers["keep-alive"]).not.toBe("timeout=999, max=7")
    expect(answer.headers["connection"]?.toLowerCase()).not.toContain("x-hop-back")
  })

  it("X-Forwarded-For carries the client's address, after the list the request came with", async () => {
    const seen: Array<string | undefined> = []
    const primary = await startPrimary((request, response) => {
      seen.push(request.headers["x-forwarded-for"] as string | undefined)
      response.end()
    })
    const port = await startReplica(primary.url)

    await send(port, { method: "POST", path: "/fhir/Patient", body: "{}" })
    await send(port, { method: "POST", path: "/fhir/Patient", headers: { "X-Forwarded-For": "203.0.113.7" }, body: "{}" })
    await send(port, { method: "POST", path: "/fhir/Patient", headers: { "X-Forwarded-For": ["203.0.113.7", "198.51.100.2"] }, body: "{}" })

    expect(seen).toEqual(["127.0.0.1", "203.0.113.7, 127.0.0.1", "203.0.113.7, 198.51.100.2, 127.0.0.1"])
  })

  it("a primary URL with a path puts it before the request's path, with or without a trailing slash", async () => {
    const seen: Array<string> = []
    const primary = await startPrimary((request, response) => {
      seen.push(request.url!)
      response.end()
    })
    for (const base of [`${primary.url}/svc`, `${primary.url}/svc/`, `${primary.url}/`]) {
      const port = await startReplica(base)
      const answer = await send(port, { method: "DELETE", path: "/fhir/Patient/1?_cascade=delete" })
      expect(answer.status).toBe(200)
    }
    expect(seen).toEqual(["/svc/fhir/Patient/1?_cascade=delete", "/svc/fhir/Patient/1?_cascade=delete", "/fhir/Patient/1?_cascade=delete"])
  })

  it("an unreachable primary is a 503 with Retry-After and an OperationOutcome that names it without its password, and the connection stays usable", async () => {
    const port = await startReplica(`http://svc:s3cret-pw@127.0.0.1:${await closedPort()}/base`)
    // One connection for both requests: the first one's body, unread by any primary, is read and dropped.
    const agent = new Http.Agent({ keepAlive: true, maxSockets: 1 })
    onTestFinished(() => agent.destroy())
    const sockets = new Set<Net.Socket>()

    for (const body of [Buffer.alloc(2 * 1024 * 1024, "x"), "{\"resourceType\":\"Patient\"}"]) {
      const answer = await send(port, { method: "POST", path: "/fhir/Patient", headers: { "content-type": "application/fhir+json" }, body, agent })
      sockets.add(answer.socket)
      expect(answer.status).toBe(503)
      expect(answer.headers["retry-after"]).toBe("1")
      expect(answer.headers["content-type"]).toBe("application/fhir+json; charset=utf-8")
      const outcome = JSON.parse(answer.body.toString()) as Outcome
      expect(outcome.resourceType).toBe("OperationOutcome")
      expect(outcome.issue).toHaveLength(1)
      expect(outcome.issue[0]).toMatchObject({ severity: "error", code: "transient" })
      expect(outcome.issue[0]!.diagnostics).toContain("the primary at http://127.0.0.1:")
      expect(outcome.issue[0]!.diagnostics).toContain("/base")
      expect(outcome.issue[0]!.diagnostics).toContain("ECONNREFUSED")
      const text = `${answer.rawHeaders.join("\n")}\n${answer.body.toString()}`
      expect(text).not.toContain("s3cret-pw")
      expect(text).not.toContain("svc:")
    }
    expect(sockets.size).toBe(1)
  })

  it("a client that goes away in the middle of its upload aborts the primary's request", async () => {
    const started = signal<void>()
    const ended = signal<{ complete: boolean }>()
    const primary = await startPrimary((request, response) => {
      if (request.url === "/fhir/Patient") return void response.end("still here")
      request.on("error", () => {})
      request.once("data", () => started.resolve())
      request.once("close", () => ended.resolve({ complete: request.complete }))
      request.resume()
    })
    const port = await startReplica(primary.url)

    const request = Http.request({ host: "127.0.0.1", port, method: "POST", path: "/fhir/Binary", headers: { "content-length": String(10 * 1024 * 1024) }, agent: false })
    request.on("error", () => {})
    request.write(randomBytes(64 * 1024))
    await started.promise
    request.destroy()

    expect(await ended.promise).toEqual({ complete: false })
    // The replica lives on.
    const next = await send(port, { method: "POST", path: "/fhir/Patient", body: "{}" })
    expect(next.body.toString()).toBe("still here")
  })

  it("a primary that dies in the middle of its answer leaves the client with a cut-off answer, not a complete one", async () => {
    const primary = await startPrimary((request, response) => {
      response.writeHead(200, { "content-length": "1000000" })
      response.write("the first bytes", () => request.socket.destroy())
    })
    const port = await startReplica(primary.url)

    const request = Http.request({ host: "127.0.0.1", port, method: "POST", path: "/fhir/Patient", agent: false })
    request.end("{}")
    const [response] = (await once(request, "response")) as [Http.IncomingMessage]
    expect(response.statusCode).toBe(200)
    const failed = signal<string>()
    response.on("error", (error) => failed.resolve(error.message))
    response.resume()
    expect(await failed.promise).toBe("aborted")
    expect(response.complete).toBe(false)
  })

  it("forwardRequest on its own works with the shared pool", async () => {
    const primary = await startPrimary((request, response) => {
      response.writeHead(202, { "x-path": request.url! })
      response.end()
    })
    const server = Http.createServer((request, response) => {
      void forwardRequest(request, response, { primaryUrl: new URL(primary.url), clientAddress: "127.0.0.1" })
    })
    const answer = await send(await listen(server), { method: "PUT", path: "/fhir/Patient/1", body: "{}" })
    expect([answer.status, answer.headers["x-path"]]).toEqual([202, "/fhir/Patient/1"])
  })
})

// ---------------------------------------------------------------------------------------------------------
// WebSocket upgrades
// ---------------------------------------------------------------------------------------------------------

/** The stand-in primary with a `ws` server on `/ws`: each connection and its upgrade request are handed out. */
const startWsPrimary = async () => {
  const server = Http.createServer((_, response) => response.writeHead(426).end())
  const wss = new WebSocketServer({ server, path: "/ws", handleProtocols: (protocols) => (protocols.has("fhir-notify") ? "fhir-notify" : false) })
  const connections: Array<{ readonly socket: WebSocket; readonly request: Http.IncomingMessage }> = []
  const waiting: Array<(connection: { readonly socket: WebSocket; readonly request: Http.IncomingMessage }) => void> = []
  wss.on("connection", (socket, request) => {
    const connection = { socket, request }
    const next = waiting.shift()
    if (next === undefined) connections.push(connection)
    else next(connection)
  })
  onTestFinished(() => wss.close())
  const port = await listen(server)
  return {
    url: `http://127.0.0.1:${port}`,
    next: () => {
      const ready = connections.shift()
      return ready === undefined ? new Promise<{ readonly socket: WebSocket; readonly request: Http.IncomingMessage }>((resolve) => waiting.push(resolve)) : Promise.resolve(ready)
    }
  }
}

/** Opens a WebSocket to the replica's `/ws` and waits until it is open. */
const openClient = async (port: number): Promise<WebSocket> => {
  const client = new WebSocket(`ws://127.0.0.1:${port}/ws?channel=1`, ["fhir-notify"], { headers: { "X-Forwarded-For": "203.0.113.7" } })
  onTestFinished(() => client.terminate())
  await once(client, "open")
  return client
}

const nextMessage = async (socket: WebSocket): Promise<string> => {
  const [data] = (await once(socket, "message")) as [Buffer]
  return data.toString()
}

describe("forwarding a WebSocket upgrade", () => {
  it("reaches the primary's WebSocket server with the primary's Host and X-Forwarded-For, and messages go both ways", async () => {
    const primary = await startWsPrimary()
    const port = await startReplica(primary.url)

    const client = await openClient(port)
    const { socket, request } = await primary.next()

    expect(request.url).toBe("/ws?channel=1")
    expect(request.headers["host"]).toBe(new URL(primary.url).host)
    expect(request.headers["x-forwarded-for"]).toBe("203.0.113.7, 127.0.0.1")
    expect(request.headers["x-forwarded-host"]).toBe(`127.0.0.1:${port}`)
    expect(client.protocol).toBe("fhir-notify")

    const atPrimary = nextMessage(socket)
    client.send("hello from the client")
    expect(await atPrimary).toBe("hello from the client")

    const atClient = nextMessage(client)
    socket.send("a notification from the primary")
    expect(await atClient).toBe("a notification from the primary")

    // Larger than one TCP segment, both ways.
    const big = "x".repeat(512 * 1024)
    const bigAtPrimary = nextMessage(socket)
    client.send(big)
    expect(await bigAtPrimary).toBe(big)
  })

  it("the client closing closes the primary's side, with its code and reason", async () => {
    const primary = await startWsPrimary()
    const port = await startReplica(primary.url)
    const client = await openClient(port)
    const { socket } = await primary.next()

    const closedAtPrimary = once(socket, "close")
    const closedAtClient = once(client, "close")
    client.close(1000, "done here")
    const [code, reason] = (await closedAtPrimary) as [number, Buffer]
    expect([code, reason.toString()]).toEqual([1000, "done here"])
    await closedAtClient
  })

  it("the primary closing closes the client's side, with its code and reason", async () => {
    const primary = await startWsPrimary()
    const port = await startReplica(primary.url)
    const client = await openClient(port)
    const { socket } = await primary.next()

    const closedAtClient = once(client, "close")
    socket.close(4001, "primary going away")
    const [code, reason] = (await closedAtClient) as [number, Buffer]
    expect([code, reason.toString()]).toEqual([4001, "primary going away"])
  })

  it("a client that drops its connection without a close frame closes the primary's side", async () => {
    const primary = await startWsPrimary()
    const port = await startReplica(primary.url)
    const client = await openClient(port)
    const { socket } = await primary.next()

    const closedAtPrimary = once(socket, "close")
    client.terminate()
    const [code] = (await closedAtPrimary) as [number]
    expect(code).toBe(1006)
  })

  it("a client connection reset (not closed) closes the primary's side", async () => {
    const primary = await startWsPrimary()
    const port = await startReplica(primary.url)
    const raw = Net.connect(port, "127.0.0.1")
    raw.on("error", () => {})
    raw.write(
      "GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" +
        "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    )
    const [reply] = (await once(raw, "data")) as [Buffer]
    expect(reply.toString().split("\r\n")[0]).toBe("HTTP/1.1 101 Switching Protocols")
    const { socket } = await primary.next()

    const closedAtPrimary = once(socket, "close")
    raw.resetAndDestroy()
    const [code] = (await closedAtPrimary) as [number]
    expect(code).toBe(1006)
  })

  it("a primary connection reset closes the client's side", async () => {
    const primary = await startWsPrimary()
    const port = await startReplica(primary.url)
    const client = await openClient(port)
    const { request } = await primary.next()

    const closedAtClient = once(client, "close")
    ;(request.socket as Net.Socket).resetAndDestroy()
    const [code] = (await closedAtClient) as [number]
    expect(code).toBe(1006)
  })

  it("an unreachable primary is a 503 with an OperationOutcome on the client's socket, which is then closed", async () => {
    const port = await startReplica(`http://svc:s3cret-pw@127.0.0.1:${await closedPort()}`)
    const socket = Net.connect(port, "127.0.0.1")
    socket.on("error", () => {})
    socket.write(
      "GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" +
        "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    )
    let text = ""
    socket.setEncoding("utf8")
    socket.on("data", (chunk: string) => (text += chunk))
    await once(socket, "close")

    const [head = "", body = ""] = text.split("\r\n\r\n")
    const lines = head.split("\r\n")
    expect(lines[0]).toBe("HTTP/1.1 503 Service Unavailable")
    expect(lines).toContain("Retry-After: 1")
    expect(lines).toContain("Content-Type: application/fhir+json; charset=utf-8")
    const outcome = JSON.parse(body) as Outcome
    expect(outcome.issue[0]).toMatchObject({ severity: "error", code: "transient" })
    expect(outcome.issue[0]!.diagnostics).toContain("ECONNREFUSED")
    expect(text).not.toContain("s3cret-pw")
  })
})

// ---------------------------------------------------------------------------------------------------------
// An https primary
// ---------------------------------------------------------------------------------------------------------

const hasOpenssl = spawnSync("openssl", ["version"], { stdio: "ignore" }).status === 0
if (!hasOpenssl) console.warn("test/cluster/forward.test.ts: `openssl` is not on the PATH; the https primary tests are skipped")

describe.skipIf(!hasOpenssl)("an https primary", () => {
  let dir = ""
  let key = ""
  let cert = ""

  beforeAll(() => {
    // A self-signed certificate for 127.0.0.1, given to the forwarder as its CA.
    dir = mkdtempSync(join(tmpdir(), "svc-forward-"))
    execFileSync("openssl", [
      "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
      "-subj", "/CN=primary", "-addext", "subjectAltName=IP:127.0.0.1",
      "-keyout", join(dir, "key.pem"), "-out", join(dir, "cert.pem")
    ], { stdio: "ignore" })
    key = readFileSync(join(dir, "key.pem"), "utf8")
    cert = readFileSync(join(dir, "cert.pem"), "utf8")
  })
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  /** The primary over TLS: a request handler and a `ws` server on `/ws` that echoes. */
  const startTlsPrimary = async (handler: Handler): Promise<string> => {
    const server = Https.createServer({ key, cert }, handler)
    const wss = new WebSocketServer({ server, path: "/ws" })
    wss.on("connection", (socket) => socket.on("message", (data: Buffer) => socket.send(`echo ${data.toString()}`)))
    onTestFinished(() => wss.close())
    const port = await listen(server)
    return `https://127.0.0.1:${port}`
  }

  const startTlsReplica = async (primaryUrl: string, ca: string | undefined): Promise<number> => {
    const forwarder = makeForwarder(new URL(primaryUrl), ca === undefined ? undefined : { tls: { ca } })
    onTestFinished(() => forwarder.close())
    const server = Http.createServer((request, response) => void forwarder.request(request, response, "127.0.0.1"))
    server.on("upgrade", (request: Http.IncomingMessage, socket: Net.Socket, head: Buffer) => forwarder.upgrade(request, socket, head, "127.0.0.1"))
    return listen(server)
  }

  it("requests and WebSockets are forwarded over TLS, the primary's certificate checked against the CA given", async () => {
    const primaryUrl = await startTlsPrimary(async (request, response) => {
      const body = await bodyOf(request)
      response.writeHead(201, { location: `${request.url}/1` })
      response.end(`${request.method} ${body.length}`)
    })
    const port = await startTlsReplica(primaryUrl, cert)

    const answer = await send(port, { method: "POST", path: "/fhir/Patient", body: "{}" })
    expect([answer.status, answer.headers["location"], answer.body.toString()]).toEqual([201, "/fhir/Patient/1", "POST 2"])

    const client = new WebSocket(`ws://127.0.0.1:${port}/ws`)
    onTestFinished(() => client.terminate())
    await once(client, "open")
    const reply = nextMessage(client)
    client.send("over TLS")
    expect(await reply).toBe("echo over TLS")
  })

  it("a primary whose certificate is not trusted is a 503 for requests and upgrades, naming the certificate problem", async () => {
    const primaryUrl = await startTlsPrimary((_, response) => response.end("never"))
    const port = await startTlsReplica(primaryUrl, undefined)

    const answer = await send(port, { method: "POST", path: "/fhir/Patient", body: "{}" })
    expect(answer.status).toBe(503)
    const outcome = JSON.parse(answer.body.toString()) as Outcome
    expect(outcome.issue[0]!.diagnostics).toContain("self-signed certificate")

    const client = new WebSocket(`ws://127.0.0.1:${port}/ws`)
    client.on("error", () => {})
    const [, response] = (await once(client, "unexpected-response")) as [unknown, Http.IncomingMessage]
    expect(response.statusCode).toBe(503)
    expect((await bodyOf(response)).toString()).toContain("self-signed certificate")
  })
})
