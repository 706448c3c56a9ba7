/**
 * The live-query engine of `/sync` (docs/sync.md): live queries by connection, their held results, the index
 * that says which queries a commit may change, and the messages each commit gives. The connection layer
 * (SyncSockets.ts) reads the client's messages and calls it.
 */
import { Context, type Effect } from "effect"
import type { Principal } from "../http/Principal.ts"
import type { ServerMessage } from "./protocol.ts"

/** What became of a `subscribe`: held, or refused with the `QueryFailed` code the client was sent. */
export type Subscribed = { readonly _tag: "Held" } | { readonly _tag: "Failed"; readonly code: string }

/** One `/sync` connection as the engine sees it. */
export interface SyncConnection {
  /** The caller: as the front door admitted the upgrade, or as the connection's latest `auth` message named it. */
  readonly principal: Principal
  /** Queues a message for the client; false when the connection's queue is full (the connection then reloads). */
  readonly send: (message: ServerMessage) => boolean
}

export class LiveQueries extends Context.Tag("svc/sync/LiveQueries")<LiveQueries, {
  /**
   * Starts live query `id` of `connection` on `query` (`Type?params` or `Patient/<id>/Type?params`): sends its
   * `result` (with `since`, the `changes` since then and `caughtUp`, or a `result` when the log no longer reaches
   * back), or `QueryFailed` and holds nothing. A second subscribe with a held id replaces that query.
   */
  readonly subscribe: (connection: SyncConnection, id: string, query: string, since?: number) => Effect.Effect<Subscribed>
  readonly unsubscribe: (connection: SyncConnection, id: string) => Effect.Effect<void>
  /** Sends a fresh `result` for each held id (after the connection sent `reload`). */
  readonly reload: (connection: SyncConnection, ids: ReadonlyArray<string>) => Effect.Effect<void>
  /**
   * The connection's caller changed (a new token): each query is checked against it again; one it may no
   * longer search is sent `closed` `Forbidden` and dropped, and, with `fresh`, the others are sent a new `result`
   * (what the caller may see changed).
   */
  readonly reauthorize: (connection: SyncConnection, fresh: boolean) => Effect.Effect<void>
  /** Ends every query of the connection with `closed` (`code`, `reason`): its token expired or was revoked. */
  readonly closeAll: (connection: SyncConnection, code: string, reason: string) => Effect.Effect<void>
  /** Forgets every query of the connection. */
  readonly disconnect: (connection: SyncConnection) => Effect.Effect<void>
  /** How many live queries the connection holds. */
  readonly held: (connection: SyncConnection) => number
  /** The commit timestamp up to which every commit has been taken into the results (for heartbeats). */
  readonly handled: Effect.Effect<number>
  /** How many times a commit has woken a live query (searched it again) since start: what relevance saves shows here. */
  readonly woken: Effect.Effect<number>
}>() {}
