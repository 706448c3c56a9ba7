/**
 * Forwarding from a replica to the primary (docs/cluster.md). A replica serves reads from its own
 * connection to the database and sends every request that writes, or that only the primary can answer,
 * to `cluster.primary_url`, relaying the primary's answer as it comes: status, headers and body.
 *
 * - `mustForward` (forwardRules.ts) says which requests go to the primary.
 * - `forwardRequest` is a streaming reverse proxy for one HTTP exchange (RFC 9110 7.6: hop-by-hop headers
 *   stay on their hop; `X-Forwarded-For`, `-Proto` and `-Host` tell the primary about the original request).
 * - `forwardUpgrade` tunnels a WebSocket upgrade: the request is written to the primary and bytes are
 *   copied both ways until one side closes.
 * - `makeForwarder` holds one keep-alive connection pool for one primary.
 *
 * A primary that cannot be reached (refused, unknown host, no connection within the connect timeout) is
 * answered 503 with `Retry-After: 1`: the client may try again, as during a failover. Nothing here throws
 * or leaves a socket without an error listener: a failing primary or client never ends the process.
 */
import * as Http from "node:http"
import * as Https from "node:https"
import * as Net from "node:net"
import type { Duplex } from "node:stream"
import { pipeline } from "node:stream"
import * as Tls from "node:tls"

// ---------------------------------------------------------------------------------------------------------
// Headers
// ---------------------------------------------------------------------------------------------------------

/** Hop-by-hop headers (RFC 9110 7.6.1), besides those the Connection header names. */
const hopByHop = new Set(["connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"])

/** Headers the forwarder writes itself: the primary's Host and the `X-Forwarded-*` set. */
const rewritten = new Set(["host", "x-forwarded-for", "x-forwarded-proto", "x-forwarded-host"])

/** The header names a message's Connection headers list (lower case). */
const connectionTokens = (rawHeaders: ReadonlyArray<string>): Set<string> => {
  const tokens = new Set<string>()
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i]!.toLowerCase() !== "connection") continue
    for (const token of rawHeaders[i + 1]!.split(",")) {
      const name = token.trim().toLowerCase()
      if (name !== "") tokens.add(name)
    }
  }
  return tokens
}

/**
 * The end-to-end headers of a message, from its raw headers: names as written (the first spelling of
 * each), every value kept (repeated headers, such as two Set-Cookie lines, stay separate lines), in
 * order. Hop-by-hop headers and those in `drop` are left out.
 */
const endToEnd = (rawHeaders: ReadonlyArray<string>, drop: ReadonlySet<string>): Record<string, Array<string>> => {
  const named = connectionTokens(rawHeaders)
  const spelling = new Map<string, string>()
  const headers: Record<string, Array<string>> = {}
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!
    const lower = name.toLowerCase()
    if (hopByHop.has(lower) || named.has(lower) || drop.has(lower)) continue
    let key = spelling.get(lower)
    if (key === undefined) {
      key = name
      spelling.set(lower, key)
      headers[key] = []
    }
    headers[key]!.push(rawHeaders[i + 1]!)
  }
  return headers
}

/** Every value of a request header, joined as one list (`a, b`); undefined when it is absent. */
const joined = (request: Http.IncomingMessage, name: string): string | undefined => {
  const values: Array<string> = []
  for (let i = 0; i < request.rawHeaders.length; i += 2) {
    if (request.rawHeaders[i]!.toLowerCase() === name) values.push(request.rawHeaders[i + 1]!)
  }
  return values.length === 0 ? undefined : values.join(", ")
}

/**
 * The headers the forwarder adds: Host is the primary's; X-Forwarded-For is the list the request came
 * with and the client's address after it (so a primary that trusts the replica as one more proxy hop
 * finds the client where it finds it behind any proxy: `http/ClientAddress.ts`); X-Forwarded-Proto and
 * X-Forwarded-Host say how the client addressed the replica (the scheme of the replica's own connection,
 * its Host header).
 */
const forwardingHeaders = (request: Http.IncomingMessage, primaryUrl: URL, clientAddress: string): Record<string, string> => {
  const forwardedFor = joined(request, "x-forwarded-for")
  const host = joined(request, "host")
  return {
    Host: primaryUrl.host,
    "X-Forwarded-For": forwardedFor === undefined || forwardedFor.trim() === "" ? clientAddress : `${forwardedFor}, ${clientAddress}`,
    "X-Forwarded-Proto": (request.socket as Partial<Tls.TLSSocket>).encrypted === true ? "https" : "http",
    ...(host === undefined ? {} : { "X-Forwarded-Host": host })
  }
}

// ---------------------------------------------------------------------------------------------------------
// Where the request goes, and what is said when it cannot
// ---------------------------------------------------------------------------------------------------------

/** The connect timeout by default: a primary that has not accepted the connection by then is unreachable. */
export const defaultConnectTimeoutMs = 5_000

/** The primary's URL as it may be shown: without user name or password. */
export const shownUrl = (url: URL): string => {
  const shown = new URL(url.href)
  shown.username = ""
  shown.password = ""
  return shown.href
}

/**
 * The path and query to ask the primary for: the request's, under the primary URL's path
 * (`http://primary/svc` and `/fhir/Patient?x=1` make `/svc/fhir/Patient?x=1`). A request target in
 * absolute form is reduced to its path and query; undefined for one with no path (`*`).
 */
export const upstreamPath = (primaryUrl: URL, url: string): string | undefined => {
  let target = url
  if (!url.startsWith("/")) {
    if (!URL.canParse(url)) return undefined
    const parsed = new URL(url)
    target = `${parsed.pathname}${parsed.search}`
  }
  return `${primaryUrl.pathname.replace(/\/+$/, "")}${target}`
}

/** An OperationOutcome body with one error issue. */
const outcomeBody = (code: "transient" | "exception" | "invalid", diagnostics: string): string =>
  JSON.stringify({ resourceType: "OperationOutcome", issue: [{ severity: "error", code, diagnostics }] })

const outcomeContentType = "application/fhir+json; charset=utf-8"

const errorText = (error: unknown): string =>
  error instanceof Error ? error.message : String(error)

const unreachable = (primaryUrl: URL, error: unknown): string =>
  `the primary at ${shownUrl(primaryUrl)} cannot be reached (${errorText(error)}); try again shortly`

/** The error a connection attempt ends with when it outlasts the connect timeout. */
class ConnectTimeout extends Error {
  constructor(readonly ms: number) {
    super(`no connection within ${ms} ms`)
  }
}

/** Destroys `socket` with a ConnectTimeout unless it connects within `ms`. */
const connectDeadline = (socket: Net.Socket, ms: number): void => {
  const timer = setTimeout(() => socket.destroy(new ConnectTimeout(ms)), ms)
  timer.unref()
  const clear = () => clearTimeout(timer)
  socket.once("connect", clear)
  socket.once("close", clear)
}

// ---------------------------------------------------------------------------------------------------------
// HTTP
// ---------------------------------------------------------------------------------------------------------

export interface ForwardOptions {
  /** `cluster.primary_url`; its path, when it has one, goes before every forwarded path. */
  readonly primaryUrl: URL
  /** The client's address, appended to X-Forwarded-For. */
  readonly clientAddress: string
  /** How long connecting to the primary may take; 5 s by default. */
  readonly connectTimeoutMs?: number
  /** The connection pool; by default a keep-alive pool shared by every forwarder of the process without one. */
  readonly agent?: Http.Agent
  /** TLS options for an `https` primary: a private CA in `ca`, say. */
  readonly tls?: Tls.ConnectionOptions
}

/** How a forwarded exchange ended: the status the client was sent (or was being sent), and whether all of the answer went out. */
export interface Forwarded {
  readonly status: number
  readonly complete: boolean
}

const sharedAgents: { http?: Http.Agent; https?: Https.Agent } = {}

/** The process's shared keep-alive pool for the primary's scheme, made on first use. */
const sharedAgent = (primaryUrl: URL): Http.Agent =>
  primaryUrl.protocol === "https:"
    ? (sharedAgents.https ??= new Https.Agent({ keepAlive: true }))
    : (sharedAgents.http ??= new Http.Agent({ keepAlive: true }))

/**
 * Answers the client with an OperationOutcome. The rest of the request body is read and dropped, so that
 * the client, still sending, reads the answer, and its connection stays usable.
 */
const answerOutcome = (
  request: Http.IncomingMessage,
  response: Http.ServerResponse,
  status: number,
  code: "transient" | "exception" | "invalid",
  diagnostics: string
): void => {
  request.resume()
  if (response.headersSent) {
    response.destroy()
    return
  }
  const body = outcomeBody(code, diagnostics)
  response.writeHead(status, {
    "content-type": outcomeContentType,
    "content-length": Buffer.byteLength(body),
    ...(status === 503 ? { "retry-after": "1" } : {})
  })
  response.end(body)
}

/**
 * Sends one request to the primary and relays its answer. The request body is streamed to the primary as
 * it arrives, and the answer to the client as it comes back; neither is held whole. The returned promise
 * settles (it never rejects) when the client's response is finished or abandoned.
 *
 * - The primary not reachable: 503, `Retry-After: 1`, an OperationOutcome naming the primary (without its
 *   password) and why.
 * - The connection lost after it was made but before an answer: 502, an OperationOutcome saying that the
 *   request may or may not have been applied (a write cannot be assumed undone).
 * - The client gone before the end of the answer: the request to the primary is aborted.
 * - The primary gone in the middle of its answer: the client's connection is destroyed, so that the client
 *   sees a truncated answer as such.
 */
export const forwardRequest = (
  request: Http.IncomingMessage,
  response: Http.ServerResponse,
  options: ForwardOptions
): Promise<Forwarded> =>
  new Promise((resolve) => {
    response.once("close", () => resolve({ status: response.statusCode, complete: response.writableFinished }))
    response.on("error", () => {})
    request.on("error", () => {})
    const { primaryUrl } = options
    const path = upstreamPath(primaryUrl, request.url ?? "")
    if (path === undefined) {
      answerOutcome(request, response, 400, "invalid", `the request target ${request.url ?? ""} cannot be forwarded to the primary`)
      return
    }
    const headers: Record<string, string | Array<string>> = {
      ...endToEnd(request.rawHeaders, rewritten),
      ...forwardingHeaders(request, primaryUrl, options.clientAddress)
    }
    // A body framed in chunks stays in chunks on this hop: Node sends a GET, DELETE or OPTIONS body
    // without any framing unless told.
    if (request.headers["transfer-encoding"] !== undefined) headers["Transfer-Encoding"] = "chunked"
    const https = primaryUrl.protocol === "https:"
    const requestOptions: Http.RequestOptions = {
      protocol: primaryUrl.protocol,
      hostname: primaryUrl.hostname.startsWith("[") ? primaryUrl.hostname.slice(1, -1) : primaryUrl.hostname,
      port: primaryUrl.port === "" ? (https ? 443 : 80) : Number(primaryUrl.port),
      method: request.method ?? "GET",
      path,
      headers,
      agent: options.agent ?? sharedAgent(primaryUrl),
      // The agent keeps connections made with different TLS options apart.
      ...(https ? options.tls : undefined)
    }
    let upstream: Http.ClientRequest
    try {
      upstream = (https ? Https.request : Http.request)(requestOptions)
    } catch (error) {
      answerOutcome(request, response, 502, "exception", `the request cannot be forwarded to the primary at ${shownUrl(primaryUrl)}: ${errorText(error)}`)
      return
    }
    let connected = false
    let answered = false
    upstream.on("socket", (socket) => {
      if (!socket.connecting) {
        connected = true
        return
      }
      // The request is sent once the connection is made: after its TLS handshake for an `https` primary.
      socket.once(https ? "secureConnect" : "connect", () => (connected = true))
      connectDeadline(socket, options.connectTimeoutMs ?? defaultConnectTimeoutMs)
    })
    upstream.on("error", (error) => {
      if (answered) return
      request.unpipe(upstream)
      if (response.writableEnded || response.destroyed) return
      if (!connected) answerOutcome(request, response, 503, "transient", unreachable(primaryUrl, error))
      else {
        answerOutcome(request, response, 502, "exception",
          `the connection to the primary at ${shownUrl(primaryUrl)} was lost before it answered (${errorText(error)}); the request may or may not have been applied`)
      }
    })
    upstream.on("response", (answer) => {
      answered = true
      answer.on("error", () => {})
      response.writeHead(answer.statusCode ?? 502, answer.statusMessage, endToEnd(answer.rawHeaders, new Set()))
      // Ends the client's response with the answer, or destroys it when either side fails first.
      pipeline(answer, response, () => {})
    })
    // The client gone before its answer is complete: the primary's request goes too.
    response.once("close", () => {
      if (!response.writableFinished) upstream.destroy()
    })
    request.once("error", () => upstream.destroy())
    // The primary done with the request (or gone) before the body ended: the rest is read and dropped,
    // so that the client's connection does not stall.
    upstream.once("close", () => {
      request.unpipe(upstream)
      if (!request.readableEnded) request.resume()
    })
    request.pipe(upstream)
  })

// ---------------------------------------------------------------------------------------------------------
// WebSocket upgrades
// ---------------------------------------------------------------------------------------------------------

/** An HTTP/1.1 503 with an OperationOutcome, written on a raw socket that is then closed. */
const refuseUpgrade = (socket: Duplex, diagnostics: string): void => {
  if (!socket.writable) {
    socket.destroy()
    return
  }
  const body = outcomeBody("transient", diagnostics)
  socket.end(
    "HTTP/1.1 503 Service Unavailable\r\n" +
      `Content-Type: ${outcomeContentType}\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\n` +
      "Retry-After: 1\r\n" +
      "Connection: close\r\n\r\n" +
      body
  )
}

/** Ends a stream's writing and destroys it once what it holds is written. */
const closeAfterFlush = (stream: Duplex): void => {
  if (stream.destroyed) return
  if (stream.writableFinished) {
    stream.destroy()
    return
  }
  stream.once("finish", () => stream.destroy())
  stream.end()
}

/** The request line and headers of an upgrade as written to the primary: Upgrade kept, Connection reduced to `Upgrade`. */
const upgradeHead = (request: Http.IncomingMessage, path: string, primaryUrl: URL, clientAddress: string): string => {
  const upgrade = joined(request, "upgrade")
  const headers = {
    ...endToEnd(request.rawHeaders, rewritten),
    ...forwardingHeaders(request, primaryUrl, clientAddress),
    Connection: "Upgrade",
    ...(upgrade === undefined ? {} : { Upgrade: upgrade })
  }
  let head = `${request.method ?? "GET"} ${path} HTTP/1.1\r\n`
  for (const [name, value] of Object.entries(headers)) {
    for (const one of Array.isArray(value) ? value : [value]) head += `${name}: ${one}\r\n`
  }
  return `${head}\r\n`
}

/**
 * Tunnels a connection upgrade (a WebSocket) to the primary: connects to it (TLS for an `https` primary),
 * writes the request with the primary's Host and the X-Forwarded headers, then the bytes the client sent
 * after its headers (`head`), and from then on copies bytes both ways. The primary's answer (its 101, or
 * a refusal) reaches the client as the primary wrote it. A side that closes cleanly has its last bytes
 * delivered, then the other is closed; a side that fails (a reset) takes the other down at once. A
 * primary that cannot be reached gets the client a 503 with an OperationOutcome, and the connection
 * closed; a request target with no path (`*`) gets the connection closed.
 */
export const forwardUpgrade = (request: Http.IncomingMessage, socket: Duplex, head: Buffer, options: ForwardOptions): void => {
  const { primaryUrl } = options
  socket.on("error", () => {})
  const path = upstreamPath(primaryUrl, request.url ?? "")
  if (path === undefined) {
    socket.destroy()
    return
  }
  const https = primaryUrl.protocol === "https:"
  const host = primaryUrl.hostname.startsWith("[") ? primaryUrl.hostname.slice(1, -1) : primaryUrl.hostname
  const port = primaryUrl.port === "" ? (https ? 443 : 80) : Number(primaryUrl.port)
  const upstream: Net.Socket = https
    ? Tls.connect({ ...options.tls, host, port, ...(Net.isIP(host) === 0 ? { servername: host } : {}) })
    : Net.connect({ host, port })
  let open = false
  connectDeadline(upstream, options.connectTimeoutMs ?? defaultConnectTimeoutMs)
  upstream.on("error", (error) => {
    if (!open) refuseUpgrade(socket, unreachable(primaryUrl, error))
  })
  // A side closed cleanly has its last bytes delivered to the other, which then closes; a side that
  // failed takes the other down at once.
  socket.once("close", (hadError?: boolean) => (open && hadError !== true ? closeAfterFlush(upstream) : upstream.destroy()))
  upstream.once(https ? "secureConnect" : "connect", () => {
    open = true
    if (socket.destroyed) {
      upstream.destroy()
      return
    }
    upstream.setNoDelay(true)
    if (socket instanceof Net.Socket) socket.setNoDelay(true)
    upstream.write(upgradeHead(request, path, primaryUrl, options.clientAddress))
    if (head.length > 0) upstream.write(head)
    upstream.once("close", (hadError: boolean) => (hadError ? socket.destroy() : closeAfterFlush(socket)))
    upstream.pipe(socket)
    socket.pipe(upstream)
  })
}

// ---------------------------------------------------------------------------------------------------------
// One primary
// ---------------------------------------------------------------------------------------------------------

export interface Forwarder {
  /** `forwardRequest` to this primary, over this forwarder's pool. */
  readonly request: (request: Http.IncomingMessage, response: Http.ServerResponse, clientAddress: string) => Promise<Forwarded>
  /** `forwardUpgrade` to this primary. */
  readonly upgrade: (request: Http.IncomingMessage, socket: Duplex, head: Buffer, clientAddress: string) => void
  /** Closes the pool's idle connections; requests still in flight finish. */
  readonly close: () => void
}

/**
 * A forwarder for one primary with its own keep-alive pool, so that writes reuse connections instead of
 * opening one each. `tls` is for an `https` primary whose certificate a private CA signed (its `ca`).
 */
export const makeForwarder = (
  primaryUrl: URL,
  settings?: { readonly connectTimeoutMs?: number; readonly tls?: Tls.ConnectionOptions }
): Forwarder => {
  const agent = primaryUrl.protocol === "https:"
    ? new Https.Agent({ keepAlive: true })
    : new Http.Agent({ keepAlive: true })
  const base = {
    primaryUrl,
    agent,
    ...(settings?.connectTimeoutMs === undefined ? {} : { connectTimeoutMs: settings.connectTimeoutMs }),
    ...(settings?.tls === undefined ? {} : { tls: settings.tls })
  }
  return {
    request: (request, response, clientAddress) => forwardRequest(request, response, { ...base, clientAddress }),
    upgrade: (request, socket, head, clientAddress) => forwardUpgrade(request, socket, head, { ...base, clientAddress }),
    close: () => agent.destroy()
  }
}
