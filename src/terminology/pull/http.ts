/**
 * Bounded HTTP GETs of a terminology source (docs/terminology-pull.md, "Limits"): the answer's headers within
 * a time, its body within another and up to a size, redirects followed by hand (a few, http and https only),
 * credentials sent only to the origin they were configured for. Everything read is untrusted: this module
 * returns text and a status, never throws, and its reasons never hold a password.
 */
import { Data, Duration, Effect } from "effect"
import { networkFailure } from "../../http/networkFailure.ts"

export interface HttpLimits {
  /** Connect plus the answer's status and headers. */
  readonly response: Duration.Duration
  /** Reading one whole body. */
  readonly body: Duration.Duration
  /** The most bytes one body may have (after decompression). */
  readonly maxBytes: number
  /** The most redirects one request follows. */
  readonly maxRedirects: number
}

export const defaultLimits: HttpLimits = {
  response: Duration.seconds(30),
  body: Duration.seconds(120),
  maxBytes: 128 * 1024 * 1024,
  maxRedirects: 5
}

/** A request that got no usable answer: the reason in plain words, without credentials. */
export class SourceError extends Data.TaggedError("SourceError")<{ readonly reason: string }> {
  override get message(): string {
    return this.reason
  }
}

/** A URL as logs, `/healthz` and `meta.source` show it: without its user and password. */
export const withoutCredentials = (url: URL): string => {
  if (url.username === "" && url.password === "") return url.href
  const copy = new URL(url.href)
  copy.username = ""
  copy.password = ""
  return copy.href
}

/** The `Authorization` header of a URL's user and password (HTTP Basic), or undefined when it has none. */
export const basicAuthorization = (url: URL): string | undefined => {
  if (url.username === "" && url.password === "") return undefined
  const decode = (part: string) => {
    try {
      return decodeURIComponent(part)
    } catch {
      return part
    }
  }
  return `Basic ${Buffer.from(`${decode(url.username)}:${decode(url.password)}`, "utf8").toString("base64")}`
}

/** Where a source's requests go, and the credentials that go only to its origin. */
export interface Target {
  readonly url: URL
  readonly credentials: { readonly origin: string; readonly authorization: string } | undefined
}

export interface Answer {
  /** The final URL, after redirects, without credentials. */
  readonly url: string
  readonly status: number
  /** The media type alone, lower case (`application/fhir+json`); "" when none was sent. */
  readonly contentType: string
  /** The body as text for a 2xx answer; "" for any other. */
  readonly body: string
}

/** The reason of a failed fetch: a known network code in words, else the messages down the causes. */
const failureOf = (error: unknown): string => {
  const parts: Array<string> = []
  for (let e: unknown = error, depth = 0; e !== undefined && e !== null && depth < 4; depth++) {
    const known = networkFailure(e)
    if (known !== undefined) return known
    if (e instanceof Error) parts.push(e.message)
    e = e instanceof Error ? e.cause : undefined
  }
  return parts.length === 0 ? String(error) : parts.join(": ")
}

const redirects: ReadonlySet<number> = new Set([301, 302, 303, 307, 308])

/** Reads a body up to `maxBytes`; the stream is cancelled beyond it. */
const readBody = async (response: Response, maxBytes: number, where: string, signal: AbortSignal): Promise<string> => {
  const declared = Number(response.headers.get("content-length") ?? "")
  if (Number.isFinite(declared) && declared > maxBytes) {
    await response.body?.cancel().catch(() => undefined)
    throw new SourceError({ reason: `${where} is larger than ${maxBytes} bytes` })
  }
  if (response.body === null) return ""
  const reader = response.body.getReader()
  // A timeout or a shutdown stops the read.
  signal.addEventListener("abort", () => void reader.cancel().catch(() => undefined), { once: true })
  const chunks: Array<Uint8Array> = []
  let total = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    total += value.byteLength
    if (total > maxBytes) {
      await reader.cancel().catch(() => undefined)
      throw new SourceError({ reason: `${where} is larger than ${maxBytes} bytes` })
    }
    chunks.push(value)
  }
  const text = new TextDecoder("utf-8").decode(Buffer.concat(chunks))
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text
}

/**
 * GETs `url` with `accept`, following at most `limits.maxRedirects` redirects to http or https URLs; the
 * credentials of `target` go with a request only to their origin. A 2xx answer's body is read (bounded);
 * another status is returned without its body.
 */
export const get = (target: Target, url: URL, accept: string, limits: HttpLimits = defaultLimits): Effect.Effect<Answer, SourceError> =>
  Effect.gen(function*() {
    let current = url
    for (let hop = 0; ; hop++) {
      const where = `GET ${withoutCredentials(current)}`
      const headers: Record<string, string> = { accept }
      if (target.credentials !== undefined && current.origin === target.credentials.origin) headers["authorization"] = target.credentials.authorization
      const bare = withoutCredentials(current)
      const response = yield* Effect.tryPromise({
        try: (signal) => fetch(bare, { headers, redirect: "manual", signal }),
        catch: (error) => new SourceError({ reason: `${where} failed: ${failureOf(error)}` })
      }).pipe(
        Effect.timeoutFail({
          duration: limits.response,
          onTimeout: () => new SourceError({ reason: `${where}: no answer within ${Duration.format(limits.response)}` })
        })
      )
      if (redirects.has(response.status)) {
        yield* Effect.promise(() => response.body?.cancel().catch(() => undefined) ?? Promise.resolve())
        const location = response.headers.get("location")
        let next: URL | undefined
        try {
          next = location === null ? undefined : new URL(location, current)
        } catch {
          next = undefined
        }
        if (next === undefined) return yield* new SourceError({ reason: `${where} answered ${response.status} without a usable Location` })
        if (next.protocol !== "http:" && next.protocol !== "https:") {
          return yield* new SourceError({ reason: `${where} redirects to a ${next.protocol.slice(0, -1)} URL; only http and https are followed` })
        }
        if (hop >= limits.maxRedirects) return yield* new SourceError({ reason: `${where}: more than ${limits.maxRedirects} redirects` })
        // A redirect never brings credentials of its own.
        next.username = ""
        next.password = ""
        current = next
        continue
      }
      const contentType = (response.headers.get("content-type") ?? "").split(";")[0]!.trim().toLowerCase()
      if (response.status < 200 || response.status > 299) {
        yield* Effect.promise(() => response.body?.cancel().catch(() => undefined) ?? Promise.resolve())
        return { url: bare, status: response.status, contentType, body: "" }
      }
      const body = yield* Effect.tryPromise({
        try: (signal) => readBody(response, limits.maxBytes, where, signal),
        catch: (error) => error instanceof SourceError ? error : new SourceError({ reason: `${where}: the body could not be read: ${failureOf(error)}` })
      }).pipe(
        Effect.timeoutFail({
          duration: limits.body,
          onTimeout: () => new SourceError({ reason: `${where}: the body was not read within ${Duration.format(limits.body)}` })
        })
      )
      return { url: bare, status: response.status, contentType, body }
    }
  })
