/**
 * The bounded queue of messages for one `/sync` client (docs/sync.md, "Consistency"): what was handed to the
 * socket and not yet written out to the network counts as unsent. The engine's messages (`result`, `changes`,
 * `caughtUp`) are taken while fewer than `maxMessages` and `maxBytes` are unsent; the first one that does not
 * fit is refused, and so is every one after it, until the client has read everything queued: then `onCaughtUp`
 * is called once, for the connection to send `reload` and have the results sent afresh. Nothing is dropped
 * without the client being told.
 *
 * Answers to the client's own messages and the messages that say a query is no longer held (`QueryFailed`,
 * `closed`, `unsubscribed`, `pong`, `error`, `reload`, `heartbeat`) are always queued, so that the client's view
 * of what it holds stays right; a client that lets even those pile up past `hardMessages` or `hardBytes`
 * does not read at all, and `onStuck` is called (the connection closes it).
 */
import type { ServerMessage } from "./protocol.ts"

export interface OutboxBounds {
  readonly maxMessages: number
  readonly maxBytes: number
  readonly hardMessages: number
  readonly hardBytes: number
}

/** 256 messages or 4 MiB of the engine's, whichever first; twice that in all. */
export const defaultBounds: OutboxBounds = {
  maxMessages: 256,
  maxBytes: 4 * 1024 * 1024,
  hardMessages: 512,
  hardBytes: 8 * 1024 * 1024
}

/** Hands a message's text to the socket; `written` is called once it left (or the socket closed). */
export type Write = (text: string, written: () => void) => void

export interface Outbox {
  /** Queues a message; false when the engine's message was refused (the connection fell behind). */
  readonly offer: (message: ServerMessage) => boolean
  /** Whether the engine's messages are taken (false from the first refusal until `resume`). */
  readonly taking: () => boolean
  /** Takes the engine's messages again: the connection is about to send `reload`. */
  readonly resume: () => void
  /** Messages handed to the socket and not yet written out. */
  readonly unsent: () => number
  /** Bytes of every message queued since the start (metering reads a subscribe's share). */
  readonly bytes: () => number
}

/** Messages that hold a query's data, refused when the client falls behind. */
const isData = (message: ServerMessage): boolean =>
  message.type === "result" || message.type === "changes" || message.type === "caughtUp"

export const make = (options: {
  readonly write: Write
  readonly bounds?: OutboxBounds
  readonly onCaughtUp: () => void
  readonly onStuck: () => void
}): Outbox => {
  const bounds = options.bounds ?? defaultBounds
  let unsentMessages = 0
  let unsentBytes = 0
  let queuedBytes = 0
  // taking: messages go out; behind: refused until the queue is read; caughtUp: read, reload due.
  let state: "taking" | "behind" | "caughtUp" = "taking"

  const caughtUp = () => {
    state = "caughtUp"
    options.onCaughtUp()
  }

  const push = (text: string) => {
    const bytes = Buffer.byteLength(text)
    unsentMessages++
    unsentBytes += bytes
    queuedBytes += bytes
    options.write(text, () => {
      unsentMessages--
      unsentBytes -= bytes
      if (unsentMessages === 0 && state === "behind") caughtUp()
    })
  }

  const offer = (message: ServerMessage): boolean => {
    const text = JSON.stringify(message)
    if (isData(message)) {
      if (state !== "taking") return false
      // A message alone always goes, however large: refusing it would make its reload refused as well.
      if (unsentMessages > 0 && (unsentMessages + 1 > bounds.maxMessages || unsentBytes + Buffer.byteLength(text) > bounds.maxBytes)) {
        state = "behind"
        return false
      }
      push(text)
      return true
    }
    push(text)
    if (unsentMessages > bounds.hardMessages || unsentBytes > bounds.hardBytes) options.onStuck()
    return true
  }

  return {
    offer,
    taking: () => state === "taking",
    resume: () => {
      state = "taking"
    },
    unsent: () => unsentMessages,
    bytes: () => queuedBytes
  }
}
