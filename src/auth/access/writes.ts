/**
 * The caller's access checked by the write commands (src/store/commands.ts), inside the Writer's transaction,
 * so that a refusal writes nothing (docs/smart.md, "Scopes", "Writes"): the permission on the type first (403
 * when not granted), then, under a restricted grant, the resource as it is before the write (an update,
 * patch or delete may change only a resource the grant allows) and as the write leaves it (read back
 * through the same index a search reads, so a created or changed resource must land inside the grant).
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Effect } from "effect"
import type { Catalog } from "../../catalog/Catalog.ts"
import type { FhirError } from "../../http/FhirError.ts"
import type { Permission } from "../scopes.ts"
import type { Access, Rule } from "./Access.ts"
import { ruleCondition } from "./conditions.ts"
import { granted, outside, standing } from "./enforce.ts"

/** A restricted rule a write must keep to, with the permission it is for. */
export interface WriteRule {
  readonly permission: Permission
  readonly rule: Rule & { readonly _tag: "Some" }
}

/**
 * The rule of `permission` on `type` for a write: the 403 when the token does not grant it; undefined when
 * nothing restricts it (no access to check, or a grant of the whole type).
 */
export const writeRule = (access: Access | undefined, catalog: Catalog, type: string, permission: Permission): Effect.Effect<WriteRule | undefined, FhirError> =>
  access === undefined || access.wholly(permission)
    ? Effect.succeed(undefined)
    : Effect.map(granted(access, catalog, type, permission), (rule) => (rule._tag === "Some" ? { permission, rule } : undefined))

/** The 403 when the current resource `type/id` exists and is outside `rule`; nothing when it does not exist (the command says so). */
export const before = (sql: SqlClient.SqlClient, catalog: Catalog, type: string, id: string, rule: WriteRule | undefined): Effect.Effect<void, FhirError | SqlError> =>
  rule === undefined
    ? Effect.void
    : Effect.flatMap(standing(sql, catalog, type, id, rule.rule), (found) =>
      found === "outside" ? Effect.fail(outside(type, id, rule.permission, rule.rule)) : Effect.void)

/**
 * The 403 when the resource just written under row key `rkey` (its version and index rows inserted) is outside
 * any of `rules`: the transaction then fails and nothing is written.
 */
export const after = (
  sql: SqlClient.SqlClient,
  catalog: Catalog,
  type: string,
  id: string,
  rkey: number,
  rules: ReadonlyArray<WriteRule | undefined>
): Effect.Effect<void, FhirError | SqlError> =>
  Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    for (const rule of rules) {
      if (rule === undefined) continue
      const [row] = yield* sql<{ readonly rkey: number | string }>`
        SELECT r.rkey FROM resources r WHERE r.rkey = ${rkey} AND ${ruleCondition(sql, catalog, type, rule.rule, now)!}`
      if (row === undefined) return yield* outside(type, id, rule.permission, rule.rule)
    }
  })
