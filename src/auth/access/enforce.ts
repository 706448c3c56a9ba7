/**
 * The checks every FHIR interaction makes of the caller's access (Access.ts) before it answers, and the
 * answers to what is refused (docs/smart.md, "Scopes"): a permission the token does not grant on the type at
 * all is a 403 with an OperationOutcome `forbidden` naming scopes that would grant it; a resource outside
 * what a restricted grant allows is one the caller cannot see (404, as if it did not exist) or cannot
 * write (403, nothing written).
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Effect } from "effect"
import type { Catalog } from "../../catalog/Catalog.ts"
import { fail, type FhirError } from "../../http/FhirError.ts"
import type { MatchRestriction } from "../../search/plan/query.ts"
import type { Permission } from "../scopes.ts"
import { type Access, patientCompartment, patientTypes, type Rule } from "./Access.ts"
import { accessCondition, ruleCondition } from "./conditions.ts"

const verbs: Record<Permission, string> = { c: "create", r: "read", u: "update", d: "delete", s: "search" }
const doing: Record<Permission, string> = { c: "creating", r: "reading", u: "updating", d: "deleting", s: "searching" }
const v1Words: Record<Permission, string> = { c: "write", r: "read", u: "write", d: "write", s: "read" }

/** The 403 of `permission` on `type`, which the caller's token does not grant at all. */
export const forbidden = (access: Access, catalog: Catalog, type: string, permission: Permission): FhirError => {
  const principal = access.principal
  if (principal._tag !== "Authorized") {
    return fail("forbidden", `the caller is not known by a token, so ${doing[permission]} ${type} is not allowed`, 403)
  }
  const contexts = principal.patient !== undefined && patientTypes(catalog)?.has(type) === true ? ["patient", "user", "system"] : ["user", "system"]
  const examples = contexts.map((context) => `${context}/${type}.${permission}`).join(", ")
  const noPatient = principal.patient === undefined && principal.scopes.some((scope) => scope.startsWith("patient/"))
    ? " (patient/ scopes grant nothing here: the token names no patient)"
    : ""
  return fail(
    "forbidden",
    `the token's scopes do not allow ${doing[permission]} ${type}${noPatient}: that needs a scope such as ${examples} (SMART v1: .${v1Words[permission]} or .*)`,
    403
  )
}

/** The rule of `permission` on `type` when the token grants it at all; the 403 when it does not. */
export const granted = (access: Access, catalog: Catalog, type: string, permission: Permission): Effect.Effect<Rule, FhirError> => {
  const rule = access.rule(catalog, type, permission)
  return rule._tag === "None" ? Effect.fail(forbidden(access, catalog, type, permission)) : Effect.succeed(rule)
}

/** Where the current version of a resource stands against a rule. */
export type Standing = "absent" | "allowed" | "outside"

/**
 * Whether the current, undeleted resource `type/id` meets `rule`: `absent` when there is none (never written,
 * or deleted: then the index no longer tells whose it was), `allowed`, or `outside`. One statement; none for `All`.
 */
export const standing = (sql: SqlClient.SqlClient, catalog: Catalog, type: string, id: string, rule: Rule): Effect.Effect<Standing | undefined, SqlError> =>
  rule._tag === "All" ? Effect.succeed(undefined) : Effect.gen(function*() {
    const condition = ruleCondition(sql, catalog, type, rule, yield* Clock.currentTimeMillis)!
    const [row] = yield* sql<{ readonly allowed: number | string | boolean }>`
      SELECT CASE WHEN ${condition} THEN 1 ELSE 0 END AS allowed FROM resources r WHERE r.type = ${type} AND r.id = ${id} AND NOT r.deleted`
    if (row === undefined) return "absent"
    return row.allowed === 1 || row.allowed === "1" || row.allowed === true ? "allowed" : "outside"
  })

/** The 404 a caller gets for a resource its access does not reach: the same as for one that does not exist. */
export const unseen = (type: string, id: string): FhirError => fail("not-found", `${type}/${id} is not known`)

/**
 * Fails with the 404 of `unseen` when `rule` restricts and the resource is not a current one it allows: a
 * read, vread or history under a restriction sees neither resources outside it nor deleted ones.
 */
export const seen = (sql: SqlClient.SqlClient, catalog: Catalog, type: string, id: string, rule: Rule): Effect.Effect<void, FhirError | SqlError> =>
  rule._tag === "All"
    ? Effect.void
    : Effect.flatMap(standing(sql, catalog, type, id, rule), (found) => (found === "allowed" ? Effect.void : Effect.fail(unseen(type, id))))

/** The 403 of a write whose resource is outside what the token's grants of `permission` on its type allow. */
export const outside = (type: string, id: string | undefined, permission: Permission, rule: Rule): FhirError => {
  const scopes = rule._tag === "Some" ? rule.grants.map((grant) => grant.scope).join(", ") : ""
  const what = id === undefined ? `the ${type}` : `${type}/${id}`
  return fail(
    "forbidden",
    `${what} is outside what the token may ${verbs[permission]}: its scopes (${scopes}) allow only resources in the launch patient's compartment or matching their query`,
    403
  )
}

/**
 * The restriction under which a conditional interaction (or a Bundle's conditional reference) looks up its
 * match: the resources of `type` that `permission` reaches, and what a chain in the condition may reach
 * (those the caller may search). Undefined when nothing is restricted; the 403 when nothing is granted.
 */
export const matchRestriction = (
  sql: SqlClient.SqlClient,
  access: Access,
  catalog: Catalog,
  type: string,
  permission: Permission
): Effect.Effect<MatchRestriction | undefined, FhirError> =>
  Effect.flatMap(granted(access, catalog, type, permission), (rule) =>
    Effect.map(Clock.currentTimeMillis, (now) => {
      if (rule._tag === "All" && access.wholly("s")) return undefined
      return {
        matches: ruleCondition(sql, catalog, type, rule, now),
        reach: (reached: string) => accessCondition(sql, access, catalog, [reached], "s", now)
      }
    }))

/**
 * The 403 of a search the token may not make at all: on a type it may not search, or across types naming in
 * `_type` one it may not search. Across types without `_type` the search keeps to the types it may search.
 */
export const searchGranted = (
  access: Access,
  catalog: Catalog,
  scope: string | { readonly typeParameter: boolean },
  params: URLSearchParams
): Effect.Effect<void, FhirError> => {
  if (access.wholly("s")) return Effect.void
  if (typeof scope === "string") return Effect.asVoid(granted(access, catalog, scope, "s"))
  if (!scope.typeParameter) return Effect.void
  for (const value of params.getAll("_type")) {
    for (const type of value.split(",").map((name) => name.trim())) {
      if (catalog.isResourceType(type) && access.rule(catalog, type, "s")._tag === "None") return Effect.fail(forbidden(access, catalog, type, "s"))
    }
  }
  return Effect.void
}

/**
 * The 403 of a compartment search in another patient's compartment (`Patient/x/Observation`) by a token
 * whose grants on the types searched reach its own patient's compartment only.
 */
export const compartmentGranted = (
  access: Access,
  catalog: Catalog,
  compartment: string,
  id: string,
  types: ReadonlyArray<string>
): Effect.Effect<void, FhirError> => {
  const patient = access.principal._tag === "Authorized" ? access.principal.patient : undefined
  if (compartment !== patientCompartment || patient === undefined || id === patient || access.wholly("s")) return Effect.void
  const ownOnly = types.every((type) => {
    const rule = access.rule(catalog, type, "s")
    return rule._tag === "None" || (rule._tag === "Some" && rule.grants.every((grant) => grant.patient === patient))
  })
  return ownOnly
    ? Effect.fail(fail("forbidden", `the token's scopes allow searching the ${patientCompartment} compartment of ${patientCompartment}/${patient} only, not of ${patientCompartment}/${id}`, 403))
    : Effect.void
}

/**
 * The 403 of an operation without rules of its own (docs/smart.md, "Scopes", "Operations") for a caller not
 * granted every permission wholly on its type (at system level: on every type); undefined when it may run.
 */
export const operationGranted = (access: Access, catalog: Catalog, name: string, type: string | undefined): FhirError | undefined => {
  const permissions: ReadonlyArray<Permission> = ["c", "r", "u", "d", "s"]
  const whole = permissions.every((permission) => access.wholly(permission) || (type !== undefined && access.rule(catalog, type, permission)._tag === "All"))
  if (whole) return undefined
  const scope = type === undefined ? "user/*.cruds or system/*.cruds" : `user/${type}.cruds or system/${type}.cruds`
  return fail("forbidden", `$${name} needs every permission on ${type ?? "every type"}, without restriction: a scope such as ${scope}`, 403)
}
