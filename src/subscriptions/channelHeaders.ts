/**
 * The `channel.header` entries of a rest-hook Subscription read as the headers to send (interface spec,
 * Subscription notifications 2-3, and the Subscription status table): each entry is `Name: value`; an entry
 * that is not a valid header, a name given twice (in any case), or a header the server controls (the connection,
 * the framing, the target host, cookies, anything for a proxy) is refused with a reason the user reads in
 * `Subscription.error`. A reason names the entry's position and, when it is a valid name, the header; it never
 * shows a value, since values are often credentials (Authorization, API keys).
 */
import { Either, Schema } from "effect"
import { validateHeaderName, validateHeaderValue } from "node:http"

/** Why the `channel.header` entries cannot be sent; `reason` is what `Subscription.error` shows. */
export class HeaderProblem extends Schema.TaggedError<HeaderProblem>()("HeaderProblem", {
  reason: Schema.String
}) {
  override get message(): string {
    return this.reason
  }
}

/**
 * Headers that belong to the server or the connection (interface spec, Subscription notifications 3): the
 * framing and target of the request, hop-by-hop headers, and cookies, which a receiver would take for a
 * browser's. Any `Proxy-*` header is refused as well (see `isControlled`).
 */
const controlled: ReadonlyMap<string, string> = new Map(
  ["Host", "Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive", "Upgrade", "TE", "Trailer", "Expect", "Cookie"]
    .map((name) => [name.toLowerCase(), name])
)

const isControlled = (lowerName: string): boolean => controlled.has(lowerName) || lowerName.startsWith("proxy-")

/** Node's own check of a field name (an RFC 9110 token), as a predicate. */
const isToken = (text: string): boolean => {
  try {
    validateHeaderName(text)
    return true
  } catch {
    return false
  }
}

/** Node's own check of a field value (HTAB, visible ASCII, space, obs-text), as a predicate. */
const isFieldValue = (name: string, value: string): boolean => {
  try {
    validateHeaderValue(name, value)
    return true
  } catch {
    return false
  }
}

/** A character in words, without showing anything of a value beyond what kind of character it is. */
const characterKind = (char: string): string => {
  const code = char.codePointAt(0) ?? 0
  if (char === " ") return "a space"
  if (char === "\t") return "a tab"
  if (char === "\r" || char === "\n") return "a line break"
  if (code === 0) return "a NUL character"
  if (code < 0x20 || code === 0x7f) return "a control character"
  if (code > 0xff) return "a character outside Latin-1"
  if (code > 0x7e) return "a non-ASCII character"
  return `"${char}"`
}

/**
 * Why `name` is not a header name. The valid part before the first bad character is shown: it cannot reach a
 * value (there is no colon in it), and it is what the user typed as the name.
 */
const badName = (at: string, name: string): string => {
  if (name === "") return `${at} has no header name before its colon`
  const chars = Array.from(name)
  const index = chars.findIndex((char) => !isToken(char))
  const before = chars.slice(0, index).join("")
  const where = before === "" ? "starts with" : `"${before}" is followed by`
  return `${at} is not a valid header: its name ${where} ${characterKind(chars[index]!)}, which a header name cannot hold`
}

/** The first character of `value` a field value cannot hold, in words. */
const badValue = (value: string): string => {
  const bad = Array.from(value).find((char) => !isFieldValue("x", char))
  return bad === undefined ? "a character a header value cannot hold" : characterKind(bad)
}

/** RFC 9110 optional whitespace: spaces and tabs only, so a stray line break is refused rather than hidden. */
const trimOws = (text: string): string => text.replace(/^[ \t]+|[ \t]+$/g, "")

/**
 * Reads the `channel.header` entries (a missing or empty list is no headers) as `[name, value]` pairs in their
 * order, names as written and values without surrounding whitespace; the first problem found refuses them all,
 * since the notification must not go out with some of the headers the user asked for.
 */
export const readChannelHeaders = (
  entries: ReadonlyArray<unknown> | undefined
): Either.Either<ReadonlyArray<readonly [string, string]>, HeaderProblem> => {
  const headers: Array<readonly [string, string]> = []
  const seen = new Map<string, number>()
  for (const [index, entry] of (entries ?? []).entries()) {
    const at = `channel.header[${index}]`
    const refuse = (reason: string) => Either.left(new HeaderProblem({ reason }))
    if (typeof entry !== "string") return refuse(`${at} is not a string; an entry is "Name: value"`)
    const colon = entry.indexOf(":")
    if (colon === -1) return refuse(`${at} has no colon; an entry is "Name: value"`)
    const name = entry.slice(0, colon)
    if (!isToken(name)) return refuse(badName(at, name))
    const lower = name.toLowerCase()
    if (isControlled(lower)) {
      const which = controlled.get(lower) === undefined ? `${name} (a Proxy-* header)` : name
      return refuse(`${at} sets ${which}, which the server controls and a Subscription cannot set`)
    }
    const earlier = seen.get(lower)
    if (earlier !== undefined) {
      return refuse(`${at} repeats the header ${name} given by channel.header[${earlier}]; a name may be given once`)
    }
    const value = trimOws(entry.slice(colon + 1))
    if (!isFieldValue(name, value)) {
      return refuse(`${at} (${name}) has a value with ${badValue(value)}, which a header value cannot hold`)
    }
    seen.set(lower, index)
    headers.push([name, value])
  }
  return Either.right(headers)
}
