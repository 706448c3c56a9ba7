/**
 * The bearer tokens of `/sync` connections under `--smart` (docs/sync.md, "Connecting"): the token of an
 * `auth` message is verified as the front door verifies an Authorization header, and the token in force is
 * checked again while the connection is open, so that its live queries close when it expires or is revoked.
 * Made by the authorization layer (src/auth/Smart.ts); absent without `--smart`.
 */
import { Context, type Effect } from "effect"
import type { Authorized } from "../http/Principal.ts"

/** Why a token is not taken: `TokenExpired`, `TokenRevoked`, or `Unauthorized` for any other reason. */
export interface TokenRefused {
  readonly code: "TokenExpired" | "TokenRevoked" | "Unauthorized"
  readonly reason: string
}

export class SyncTokens extends Context.Tag("svc/sync/SyncTokens")<SyncTokens, {
  /** The caller `token` names now, for a connection from `address`, or why it is not taken. */
  readonly verify: (token: string, address: string) => Effect.Effect<Authorized, TokenRefused>
}>() {}
