/**
 * `channel.header` entries read as the headers of a rest-hook notification: valid ones in order with their
 * values trimmed, and each kind of refusal with a reason that names the entry and the header but never a value.
 */
import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import { readChannelHeaders } from "../../src/subscriptions/channelHeaders.ts"

const secret = "s3cr3t-token-value"

/** The reason `entries` are refused with; fails the test when they are read. */
const refusal = (entries: ReadonlyArray<unknown>): string => {
  const read = readChannelHeaders(entries)
  if (Either.isRight(read)) throw new Error(`${JSON.stringify(entries)} was read`)
  expect(read.left._tag).toBe("HeaderProblem")
  expect(read.left.reason).not.toContain(secret)
  return read.left.reason
}

describe("readChannelHeaders", () => {
  it("reads entries in order, names as written and values without surrounding spaces or tabs", () => {
    const read = readChannelHeaders([
      `Authorization: Bearer ${secret}`,
      "X-Tenant:acme",
      "x-padded: \t spaced value \t ",
      "X-Empty:",
      "X-Colons: a:b:c",
      "X-Latin1: caf\u00e9"
    ])
    expect(read).toEqual(Either.right([
      ["Authorization", `Bearer ${secret}`],
      ["X-Tenant", "acme"],
      ["x-padded", "spaced value"],
      ["X-Empty", ""],
      ["X-Colons", "a:b:c"],
      ["X-Latin1", "caf\u00e9"]
    ]))
  })

  it("reads a missing or empty list as no headers", () => {
    expect(readChannelHeaders([])).toEqual(Either.right([]))
    expect(readChannelHeaders(undefined)).toEqual(Either.right([]))
  })

  it("refuses an entry that is not a string, naming its position", () => {
    expect(refusal(["X-A: 1", { name: "X-B", value: secret }])).toBe(
      "channel.header[1] is not a string; an entry is \"Name: value\""
    )
    expect(refusal([42])).toContain("channel.header[0] is not a string")
    expect(refusal([null])).toContain("channel.header[0] is not a string")
  })

  it("refuses an entry without a colon and does not show it (it may be a credential)", () => {
    expect(refusal([`Authorization Bearer ${secret}`])).toBe("channel.header[0] has no colon; an entry is \"Name: value\"")
  })

  it("refuses a name that is not a token, showing only the valid part before the bad character", () => {
    expect(refusal([`X-Api Key: ${secret}`])).toBe(
      "channel.header[0] is not a valid header: its name \"X-Api\" is followed by a space, which a header name cannot hold"
    )
    expect(refusal([`Authorization : ${secret}`])).toContain("its name \"Authorization\" is followed by a space")
    expect(refusal([` X-Lead: ${secret}`])).toContain("its name starts with a space")
    expect(refusal([`X(y): ${secret}`])).toContain("its name \"X\" is followed by \"(\"")
    expect(refusal([`X-\u00e9: ${secret}`])).toContain("is followed by a non-ASCII character")
    expect(refusal([`: ${secret}`])).toBe("channel.header[0] has no header name before its colon")
  })

  it("refuses a value with a line break, NUL or other control character, naming the header but not the value", () => {
    for (const [bad, kind] of [["\r\nX-Injected: 1", "a line break"], ["\n", "a line break"], ["\u0000", "a NUL character"], ["\u0007", "a control character"], ["\u007f", "a control character"], ["\u20ac", "a character outside Latin-1"]] as const) {
      expect(refusal(["X-Ok: 1", `X-Key: ${secret}${bad}${secret}`])).toBe(
        `channel.header[1] (X-Key) has a value with ${kind}, which a header value cannot hold`
      )
    }
  })

  it("keeps a tab inside a value", () => {
    expect(readChannelHeaders(["X-Tab: a\tb"])).toEqual(Either.right([["X-Tab", "a\tb"]]))
  })

  it("refuses a name given twice, in any case, naming both positions", () => {
    expect(refusal([`X-Key: ${secret}`, "X-Other: 1", `x-KEY: ${secret}`])).toBe(
      "channel.header[2] repeats the header x-KEY given by channel.header[0]; a name may be given once"
    )
    expect(refusal(["content-type: application/json", "CONTENT-TYPE: text/plain"])).toContain("repeats the header CONTENT-TYPE")
  })

  it("refuses each header the server controls, in any case", () => {
    for (const name of ["Host", "Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive", "Upgrade", "TE", "Trailer", "Expect", "Cookie"]) {
      for (const written of [name, name.toLowerCase(), name.toUpperCase()]) {
        expect(refusal([`${written}: ${secret}`])).toBe(
          `channel.header[0] sets ${written}, which the server controls and a Subscription cannot set`
        )
      }
    }
  })

  it("refuses any Proxy-* header, Proxy-Authorization among them", () => {
    expect(refusal([`Proxy-Authorization: Basic ${secret}`])).toBe(
      "channel.header[0] sets Proxy-Authorization (a Proxy-* header), which the server controls and a Subscription cannot set"
    )
    expect(refusal([`proxy-connection: ${secret}`])).toContain("sets proxy-connection (a Proxy-* header)")
  })

  it("accepts names that merely resemble controlled ones", () => {
    expect(readChannelHeaders(["X-Host: a", "Hostname: b", "Cookies-Policy: c", "Proxyish: d", "Content-Type: text/plain"])).toEqual(
      Either.right([["X-Host", "a"], ["Hostname", "b"], ["Cookies-Policy", "c"], ["Proxyish", "d"], ["Content-Type", "text/plain"]])
    )
  })
})
