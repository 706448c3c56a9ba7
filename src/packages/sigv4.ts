/**
 * AWS Signature Version 4 for the S3-compatible package source (header signing, single chunk).
 * https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html
 */
import { DateTime } from "effect"
import * as Crypto from "node:crypto"

export interface SigningInput {
  readonly method: string
  readonly url: URL
  /** Extra headers to sign, lower-case names. */
  readonly headers: Readonly<Record<string, string>>
  readonly payloadHash: string
  readonly accessKeyId: string
  readonly secretAccessKey: string
  readonly region: string
  readonly service: string
  /** Epoch milliseconds, taken from Effect's Clock by the caller. */
  readonly timeMillis: number
}

export const emptyPayloadHash = Crypto.createHash("sha256").update("").digest("hex")

const sha256Hex = (text: string): string => Crypto.createHash("sha256").update(text, "utf8").digest("hex")
const hmac = (key: Buffer | string, text: string): Buffer => Crypto.createHmac("sha256", key).update(text, "utf8").digest()

/** RFC 3986 encoding as SigV4 wants it: everything but unreserved characters. */
export const uriEncode = (text: string): string =>
  encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)

/** `20150830T123600Z` */
export const amzDate = (timeMillis: number): string =>
  DateTime.formatIso(DateTime.unsafeMake(timeMillis)).replace(/[-:]/g, "").replace(/\.\d{3}/, "")

const canonicalQuery = (url: URL): string =>
  [...url.searchParams.entries()]
    .map(([k, v]) => [uriEncode(k), uriEncode(v)] as const)
    .sort(([a, av], [b, bv]) => (a < b ? -1 : a > b ? 1 : av < bv ? -1 : av > bv ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join("&")

export const canonicalRequest = (input: SigningInput, signed: Readonly<Record<string, string>>): string => {
  const names = Object.keys(signed).sort()
  return [
    input.method,
    input.url.pathname === "" ? "/" : input.url.pathname,
    canonicalQuery(input.url),
    ...names.map((name) => `${name}:${signed[name]!.trim().replace(/\s+/g, " ")}`),
    "",
    names.join(";"),
    input.payloadHash
  ].join("\n")
}

/** The headers to send: the given ones plus `x-amz-date` and `authorization` (host is set by fetch). */
export const sign = (input: SigningInput): Record<string, string> => {
  const date = amzDate(input.timeMillis)
  const day = date.slice(0, 8)
  const signed: Record<string, string> = { ...input.headers, host: input.url.host, "x-amz-date": date }
  const scope = `${day}/${input.region}/${input.service}/aws4_request`
  const stringToSign = ["AWS4-HMAC-SHA256", date, scope, sha256Hex(canonicalRequest(input, signed))].join("\n")
  const key = hmac(hmac(hmac(hmac(`AWS4${input.secretAccessKey}`, day), input.region), input.service), "aws4_request")
  const signature = Crypto.createHmac("sha256", key).update(stringToSign, "utf8").digest("hex")
  const { host: _host, ...headers } = signed
  return {
    ...headers,
    authorization: `AWS4-HMAC-SHA256 Credential=${input.accessKeyId}/${scope}, SignedHeaders=${Object.keys(signed).sort().join(";")}, Signature=${signature}`
  }
}
