/** HTTP for package sources: every wait is bounded, and an unreachable host is reported, not thrown. */
import { Duration, Effect } from "effect"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import { Readable, Transform } from "node:stream"
import { pipeline } from "node:stream/promises"
import type { ReadableStream as WebReadableStream } from "node:stream/web"
import { causeText } from "./errors.ts"

export interface HttpTimeouts {
  /** Connect plus response headers: an unreachable source is skipped after this. */
  readonly response: Duration.Duration
  /** Reading a whole body (a tarball of tens of MB). */
  readonly body: Duration.Duration
}

export type Reply =
  | { readonly _tag: "Response"; readonly response: Response }
  | { readonly _tag: "Unreachable"; readonly reason: string }

export const send = (url: string, init: RequestInit, timeouts: HttpTimeouts): Effect.Effect<Reply> =>
  Effect.tryPromise({
    try: (signal) => fetch(url, { ...init, signal, redirect: "follow" }),
    catch: causeText
  }).pipe(
    Effect.timeoutFail({
      duration: timeouts.response,
      onTimeout: () => `no answer within ${Duration.format(timeouts.response)}`
    }),
    Effect.match({
      onFailure: (reason): Reply => ({ _tag: "Unreachable", reason }),
      onSuccess: (response): Reply => ({ _tag: "Response", response })
    })
  )

export const readText = (response: Response, timeouts: HttpTimeouts): Effect.Effect<string, string> =>
  Effect.tryPromise({ try: () => response.text(), catch: causeText }).pipe(
    Effect.timeoutFail({ duration: timeouts.body, onTimeout: () => `body not read within ${Duration.format(timeouts.body)}` })
  )

export interface Digests {
  readonly sha1: Buffer
  readonly sha256: Buffer
  readonly sha512: Buffer
}

/** Streams a response body to `file`, hashing on the way (no second pass over a large tarball). */
export const saveBody = (response: Response, file: string, timeouts: HttpTimeouts): Effect.Effect<Digests, string> =>
  Effect.tryPromise({
    try: async (signal) => {
      if (response.body === null) throw new Error("empty body")
      const hashes = { sha1: Crypto.createHash("sha1"), sha256: Crypto.createHash("sha256"), sha512: Crypto.createHash("sha512") }
      const hasher = new Transform({
        transform(chunk: Buffer, _encoding, done) {
          hashes.sha1.update(chunk)
          hashes.sha256.update(chunk)
          hashes.sha512.update(chunk)
          done(null, chunk)
        }
      })
      const body = Readable.fromWeb(response.body as WebReadableStream<Uint8Array>)
      await pipeline(body, hasher, Fs.createWriteStream(file), { signal })
      return { sha1: hashes.sha1.digest(), sha256: hashes.sha256.digest(), sha512: hashes.sha512.digest() }
    },
    catch: causeText
  }).pipe(
    Effect.timeoutFail({ duration: timeouts.body, onTimeout: () => `download not finished within ${Duration.format(timeouts.body)}` })
  )

/** sha256 of a local file, streamed. */
export const hashFile = (file: string): Effect.Effect<string, string> =>
  Effect.tryPromise({
    try: async () => {
      const hash = Crypto.createHash("sha256")
      for await (const chunk of Fs.createReadStream(file)) hash.update(chunk as Buffer)
      return hash.digest("hex")
    },
    catch: causeText
  })
