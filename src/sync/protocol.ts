/**
 * The messages of the `/sync` protocol, version 1 (docs/sync.md): what the connection layer (SyncSockets.ts)
 * reads from a client and what the live-query engine (LiveQueries.ts) and the connection send back.
 */

/** The sub-protocol name a client may ask for. */
export const protocolName = "svc.sync.v1"

/** A client's name for a query: 1-64 of A-Za-z0-9-_. */
export const queryIdPattern = /^[A-Za-z0-9\-_.]{1,64}$/

export type ClientMessage =
  | { readonly type: "auth"; readonly token: string }
  | { readonly type: "subscribe"; readonly id: string; readonly query: string; readonly since?: number }
  | { readonly type: "unsubscribe"; readonly id: string }
  | { readonly type: "ping"; readonly nonce?: string }

/** What entered, changed and left one query's result in one commit. */
export interface QueryChanges {
  readonly entered: ReadonlyArray<unknown>
  readonly changed: ReadonlyArray<unknown>
  /** `Type/id` of each resource that left. */
  readonly left: ReadonlyArray<string>
}

export type ServerMessage =
  | { readonly type: "result"; readonly id: string; readonly commitTs: number; readonly resources: ReadonlyArray<unknown>; readonly total: number }
  | { readonly type: "changes"; readonly commitTs: number; readonly queries: Readonly<Record<string, QueryChanges>> }
  | { readonly type: "caughtUp"; readonly id: string; readonly commitTs: number }
  | { readonly type: "reload"; readonly ids: ReadonlyArray<string>; readonly reason: string }
  | { readonly type: "QueryFailed"; readonly id: string; readonly code: string; readonly outcome: unknown; readonly retryAfter?: number }
  | { readonly type: "authorized"; readonly expiresIn?: number }
  | { readonly type: "unsubscribed"; readonly id: string }
  | { readonly type: "closed"; readonly id: string; readonly code: string; readonly reason: string }
  | { readonly type: "pong"; readonly nonce?: string; readonly commitTs: number }
  | { readonly type: "heartbeat"; readonly commitTs: number }
  | { readonly type: "error"; readonly code: string; readonly message: string }
