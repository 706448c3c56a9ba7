/**
 * Under `--smart`, a Subscription is matched with the grant of the token that last created or updated it
 * (docs/subscriptions.md, "Under --smart"): its notifications carry only resources that token could read. The
 * grant (client, user, scopes, patient context) is kept beside the Subscription in `svc_subscription_grants`,
 * written in the write's own transaction. The server's own writes (a status it sets) leave it as it is.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import type { Authorized, Principal } from "../http/Principal.ts"

/** What of a caller is kept: enough to know again what it may read. */
interface KeptGrant {
  readonly clientId: string
  readonly user?: string
  readonly scopes: ReadonlyArray<string>
  readonly patient?: string
  readonly fhirUser?: string
}

/** Keeps the grant of `principal` for Subscription `id`, when the write was made under a token. */
export const recordGrant = (sql: SqlClient.SqlClient, id: string, principal: Principal | undefined): Effect.Effect<void, SqlError> => {
  if (principal?._tag !== "Authorized") return Effect.void
  const kept: KeptGrant = {
    clientId: principal.clientId,
    scopes: principal.scopes,
    ...(principal.user === undefined ? {} : { user: principal.user }),
    ...(principal.patient === undefined ? {} : { patient: principal.patient }),
    ...(principal.fhirUser === undefined ? {} : { fhirUser: principal.fhirUser })
  }
  return Effect.asVoid(sql`
    INSERT INTO svc_subscription_grants (id, principal) VALUES (${id}, ${JSON.stringify(kept)})
    ON CONFLICT (id) DO UPDATE SET principal = excluded.principal`)
}

/** The caller a kept grant stands for (its address unknown: the subscriber is not calling). */
export const principalOf = (text: string): Authorized => {
  const kept = JSON.parse(text) as KeptGrant
  return {
    _tag: "Authorized",
    address: "subscription",
    clientId: kept.clientId,
    user: kept.user,
    scopes: kept.scopes,
    patient: kept.patient,
    fhirUser: kept.fhirUser
  }
}
