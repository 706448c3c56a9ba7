/**
 * Whether a caller may bind a websocket to `Subscription/<id>` (the websocket channel of
 * https://hl7.org/fhir/R4/subscription.html). The Subscription is read as the caller would read it over REST
 * (src/rest/read.ts, docs/smart.md "Scopes"): under `--smart` the token must allow reading Subscription, and a
 * restricted grant sees only the Subscriptions it allows (any other is "not known", as a read answers 404).
 * What it finds must have a `websocket` channel. Its status does not matter: an `off` Subscription may be bound,
 * and is simply not pinged while it is off (delivery decides what is sent).
 */
import { Effect } from "effect"
import { accessOf } from "../auth/access/Access.ts"
import { forbidden, seen } from "../auth/access/enforce.ts"
import type { CatalogService } from "../catalog/CatalogService.ts"
import type { Database } from "../db/Database.ts"
import type { Principal } from "../http/Principal.ts"
import { readCurrent } from "../store/reads.ts"

/** The verdict on a `bind <id>`: bindable, or refused with the reason the client is told. */
export type Binding =
  | { readonly _tag: "Bindable" }
  | { readonly _tag: "Refused"; readonly reason: string }

const bindable: Binding = { _tag: "Bindable" }
const refused = (reason: string): Binding => ({ _tag: "Refused", reason })

const channelTypeOf = (text: string): string | undefined => {
  const resource: unknown = JSON.parse(text)
  if (typeof resource !== "object" || resource === null) return undefined
  const channel: unknown = (resource as Record<string, unknown>)["channel"]
  if (typeof channel !== "object" || channel === null) return undefined
  const type: unknown = (channel as Record<string, unknown>)["type"]
  return typeof type === "string" ? type : undefined
}

/**
 * The check of a `bind`, over the server's database and catalog. It never fails: a database that cannot be read
 * is a refusal the client may retry, and is logged.
 */
export const bindingCheck = (db: Database["Type"], catalogs: CatalogService["Type"]) =>
(principal: Principal, id: string): Effect.Effect<Binding> =>
  Effect.gen(function*() {
    const catalog = yield* catalogs.get
    const access = accessOf(principal)
    const rule = access.rule(catalog, "Subscription", "r")
    if (rule._tag === "None") return refused(`not allowed: ${forbidden(access, catalog, "Subscription", "r").diagnostics}`)
    const unknown = refused(`Subscription/${id} is not known`)
    const row = yield* db.withReader((sql) =>
      rule._tag === "All" ? readCurrent(sql, "Subscription", id) : Effect.zipRight(seen(sql, catalog, "Subscription", id, rule), readCurrent(sql, "Subscription", id))
    ).pipe(Effect.catchTag("FhirError", () => Effect.succeed(undefined)))
    if (row === undefined) return unknown
    if (row.content === null) return refused(`Subscription/${id} was deleted`)
    const type = channelTypeOf(row.content)
    if (type !== "websocket") return refused(`Subscription/${id} has ${type === undefined ? "no channel type" : `channel type ${type}`}, not websocket`)
    return bindable
  }).pipe(
    Effect.catchAllCause((cause) =>
      Effect.logWarning("a websocket bind could not read its Subscription", { subscription: id }, cause).pipe(
        Effect.as(refused(`Subscription/${id} could not be read; try again`))
      )
    )
  )
