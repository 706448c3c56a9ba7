/**
 * One attempt at a rest-hook notification (interface spec, Subscription notifications 2 and 4): an HTTP POST
 * of the body to `channel.endpoint` with the headers as given. A 2xx answer delivers it; a 3xx (redirects are
 * not followed), 4xx or 5xx answer, a connection or TLS failure, or no complete answer within the timeout
 * fails it, with a reason the user reads in `Subscription.error`. Retries and status belong to Delivery.ts.
 *
 * Sent with node:http and node:https rather than fetch: fetch follows redirects unless told not to, refuses
 * some headers a receiver may expect, and would pool connections across Subscriptions.
 */
import { Duration, Effect, Schema } from "effect"
import * as Http from "node:http"
import * as Https from "node:https"
import type { Socket } from "node:net"

/**
 * How long one attempt may take, from connecting to the end of the answer. A receiver acknowledges a
 * notification and works on it afterwards, so a healthy one answers well within this; a receiver that hangs
 * holds up every later notification of its Subscription (they go out in order), so waiting longer only delays
 * them. Eight attempts against a hanging receiver then take about a minute and a half before the
 * Subscription is put in `error`.
 */
export const defaultTimeout: Duration.DurationInput = Duration.seconds(10)

/** How much of an answer's body is read before the connection is closed: the body is discarded anyway. */
const bodyCap = 64 * 1024

/** The receiver answered with a 2xx status. */
export interface Delivered {
  readonly status: number
}

/** The notification did not get through; `reason` is what `Subscription.error` shows. */
export class DeliveryFailed extends Schema.TaggedError<DeliveryFailed>()("DeliveryFailed", {
  reason: Schema.String
}) {
  override get message(): string {
    return this.reason
  }
}

/** `url` read as a URL, or undefined (`URL.parse` is newer than Node 20.0). */
const parseUrl = (url: string): URL | undefined => {
  try {
    return new URL(url)
  } catch {
    return undefined
  }
}

/**
 * The endpoint as reasons and logs show it: scheme, host and path, without the userinfo, query or fragment,
 * where credentials and tokens are usually put. A URL that cannot be read is not shown at all.
 */
export const describeEndpoint = (url: string): string => {
  const parsed = parseUrl(url)
  if (parsed === undefined) return "(not a valid URL)"
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") return `(scheme ${parsed.protocol.slice(0, -1)})`
  return `${parsed.protocol}//${parsed.host}${parsed.pathname}`
}

/** A duration as a reason shows it: whole seconds as `10 s`, anything else in milliseconds. */
const formatDuration = (duration: Duration.DurationInput): string => {
  const millis = Duration.toMillis(Duration.decode(duration))
  return millis % 1000 === 0 ? `${millis / 1000} s` : `${millis} ms`
}

/** An error's code (`ECONNREFUSED`, `CERT_HAS_EXPIRED`) rather than its message, which may quote a header. */
const errorCode = (error: unknown): string => {
  const code = typeof error === "object" && error !== null ? (error as { code?: unknown }).code : undefined
  return typeof code === "string" ? code : error instanceof Error ? error.name : "an unknown error"
}

/** Percent-decoding of a URL part, left as written where it is not valid percent-encoding. */
const decodePart = (part: string): string => {
  try {
    return decodeURIComponent(part)
  } catch {
    return part
  }
}

const isCaseInsensitively = (name: string) => (entry: readonly [string, string]) => entry[0].toLowerCase() === name

/**
 * The headers in the order sent, as Node's raw list: the caller's entries as given, except that the last
 * Content-Type among them replaces the default (so exactly one is sent); Host, Content-Length and an
 * Authorization from the URL's userinfo are added unless the caller gave them.
 */
const rawHeaders = (
  url: URL,
  headers: ReadonlyArray<readonly [string, string]>,
  contentType: string,
  length: number
): Array<string> => {
  let lastContentType = -1
  headers.forEach((entry, index) => {
    if (isCaseInsensitively("content-type")(entry)) lastContentType = index
  })
  const entries: Array<readonly [string, string]> = []
  if (!headers.some(isCaseInsensitively("host"))) entries.push(["Host", url.host])
  if (lastContentType === -1) entries.push(["Content-Type", contentType])
  if (!headers.some(isCaseInsensitively("content-length"))) entries.push(["Content-Length", String(length)])
  if ((url.username !== "" || url.password !== "") && !headers.some(isCaseInsensitively("authorization"))) {
    const userinfo = `${decodePart(url.username)}:${decodePart(url.password)}`
    entries.push(["Authorization", `Basic ${Buffer.from(userinfo, "utf8").toString("base64")}`])
  }
  headers.forEach((entry, index) => {
    if (entry[0].toLowerCase() !== "content-type" || index === lastContentType) entries.push(entry)
  })
  return entries.flat()
}

/**
 * Sends one notification and waits for the whole answer, within `timeout`. The timeout and any interruption
 * destroy the request, so no socket outlives the attempt.
 */
export const postNotification = (request: {
  readonly endpoint: string
  readonly headers: ReadonlyArray<readonly [string, string]>
  readonly body: string
  readonly contentType: string
  readonly timeout: Duration.DurationInput
}): Effect.Effect<Delivered, DeliveryFailed> => {
  const where = describeEndpoint(request.endpoint)
  const url = parseUrl(request.endpoint)
  if (url === undefined || (url.protocol !== "http:" && url.protocol !== "https:")) {
    return Effect.fail(new DeliveryFailed({ reason: `channel.endpoint ${where} is not an http or https URL` }))
  }
  const failed = (what: string) => new DeliveryFailed({ reason: `POST ${where} ${what}` })
  const tls = url.protocol === "https:"
  const body = Buffer.from(request.body, "utf8")
  return Effect.async<Delivered, DeliveryFailed>((resume) => {
    let settled = false
    const settle = (outcome: Effect.Effect<Delivered, DeliveryFailed>) => {
      if (settled) return
      settled = true
      resume(outcome)
    }
    // Which stage a connection error happened at, so the reason says what the receiver's side should look at.
    let connected = false
    let secured = false
    let outgoing: Http.ClientRequest
    try {
      outgoing = (tls ? Https.request : Http.request)({
        protocol: url.protocol,
        hostname: url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname,
        port: url.port === "" ? undefined : Number(url.port),
        path: `${url.pathname}${url.search}`,
        method: "POST",
        headers: rawHeaders(url, request.headers, request.contentType, body.length),
        // One connection per attempt, closed after it: attempts are seconds apart and go to many receivers.
        agent: false
      })
    } catch (error) {
      settle(Effect.fail(failed(`was not sent: a header name or value is not valid (${errorCode(error)})`)))
      return
    }
    outgoing.on("socket", (socket: Socket) => {
      socket.once("connect", () => void (connected = true))
      socket.once("secureConnect", () => void (secured = true))
    })
    outgoing.on("error", (error) => {
      const code = errorCode(error)
      if (!connected) settle(Effect.fail(failed(`could not connect: ${code}`)))
      else if (tls && !secured) settle(Effect.fail(failed(`failed its TLS handshake: ${code}`)))
      else settle(Effect.fail(failed(`lost the connection: ${code}`)))
    })
    outgoing.on("response", (response) => {
      const status = response.statusCode ?? 0
      if (status < 200 || status > 299) {
        const redirect = status >= 300 && status <= 399 ? "; redirects are not followed" : ""
        settle(Effect.fail(failed(`answered ${status}${redirect}`)))
        outgoing.destroy()
        return
      }
      // The status decides; the body is read only so the exchange ends cleanly, and no more of it than the cap.
      let read = 0
      const done = () => {
        settle(Effect.succeed({ status }))
        outgoing.destroy()
      }
      response.on("data", (chunk: Buffer) => {
        read += chunk.length
        if (read >= bodyCap) done()
      })
      response.on("end", done)
      response.on("error", done)
      response.on("aborted", done)
    })
    outgoing.end(body)
    return Effect.sync(() => outgoing.destroy())
  }).pipe(
    Effect.timeoutFail({
      duration: request.timeout,
      onTimeout: () => failed(`did not answer within ${formatDuration(request.timeout)}`)
    })
  )
}
