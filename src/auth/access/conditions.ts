/**
 * A caller's access (Access.ts) as SQL: the condition on `r` (the resources table) that a resource meets when
 * the caller may reach it. A patient compartment is read from the membership index (`compartmentCondition`,
 * migration 0005); a v2 scope's query is read by search's own parser and planned as a search's WHERE
 * condition, so that it means exactly what the same query means as a search. These conditions go into the
 * statements themselves (the search plan, history, `$everything`, a write's check), never a filter on a
 * page already read: paging, `_count` and totals stay right.
 */
import type { Statement } from "@effect/sql"
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Catalog } from "../../catalog/Catalog.ts"
import { compartmentCondition } from "../../search/plan/compartment.ts"
import { whereCondition } from "../../search/plan/query.ts"
import type { SearchRestriction } from "../../search/plan/searchset.ts"
import type { Permission } from "../scopes.ts"
import { type Access, type Grant, patientCompartment, type Rule } from "./Access.ts"
import { scopeQuery } from "./scopeQuery.ts"

type Fragment = Statement.Fragment

/** The condition one grant puts on `r`, a resource of `type`. */
const grantCondition = (sql: SqlClient.SqlClient, catalog: Catalog, type: string, grant: Grant, now: number): Fragment => {
  const parts: Array<Fragment> = []
  if (grant.patient !== undefined) parts.push(compartmentCondition(sql, patientCompartment, grant.patient, [type]))
  if (grant.query.length > 0) {
    const request = scopeQuery(catalog, type, grant.query)
    parts.push(request === undefined ? sql`1 = 0` : whereCondition(sql, request, now))
  }
  return parts.length === 1 ? parts[0]! : sql.and(parts)
}

/** The condition on `r`, a resource of `type`, for a rule: undefined for `All`, never met for `None`. */
export const ruleCondition = (sql: SqlClient.SqlClient, catalog: Catalog, type: string, rule: Rule, now: number): Fragment | undefined => {
  switch (rule._tag) {
    case "All":
      return undefined
    case "None":
      return sql`1 = 0`
    case "Some": {
      const conditions = rule.grants.map((grant) => grantCondition(sql, catalog, type, grant, now))
      return conditions.length === 1 ? conditions[0]! : sql.or(conditions)
    }
  }
}

/** The patient of a rule whose every grant is that patient's compartment and nothing more; undefined otherwise. */
const compartmentOnly = (rule: Rule): string | undefined => {
  if (rule._tag !== "Some") return undefined
  const [first] = rule.grants
  return first?.patient !== undefined && rule.grants.every((grant) => grant.patient === first.patient && grant.query.length === 0) ? first.patient : undefined
}

/**
 * The condition on `r` for the resources of `types` (undefined: every type) that `permission` reaches;
 * undefined when it reaches every one of them. Types granted wholly share one `IN` list, types restricted
 * to the same patient compartment one membership lookup, and each other restricted type has its own.
 */
export const accessCondition = (
  sql: SqlClient.SqlClient,
  access: Access,
  catalog: Catalog,
  types: ReadonlyArray<string> | undefined,
  permission: Permission,
  now: number
): Fragment | undefined => {
  if (access.wholly(permission)) return undefined
  const listed = types ?? catalog.resourceTypes
  if (listed.length === 1) return ruleCondition(sql, catalog, listed[0]!, access.rule(catalog, listed[0]!, permission), now)
  const whole: Array<string> = []
  const byPatient = new Map<string, Array<string>>()
  const others: Array<Fragment> = []
  for (const type of listed) {
    const rule = access.rule(catalog, type, permission)
    if (rule._tag === "All") whole.push(type)
    else if (rule._tag === "Some") {
      const patient = compartmentOnly(rule)
      if (patient !== undefined) byPatient.set(patient, [...(byPatient.get(patient) ?? []), type])
      else others.push(sql.and([sql`r.type = ${type}`, ruleCondition(sql, catalog, type, rule, now)!]))
    }
  }
  if (whole.length === listed.length) return undefined
  const typeIn = (names: ReadonlyArray<string>) => (names.length === 1 ? sql`r.type = ${names[0]!}` : sql.in("r.type", names))
  const parts: Array<Fragment> = [
    ...(whole.length === 0 ? [] : [typeIn(whole)]),
    ...[...byPatient].map(([patient, names]) => sql.and([typeIn(names), compartmentCondition(sql, patientCompartment, patient, names)])),
    ...others
  ]
  return parts.length === 0 ? sql`1 = 0` : parts.length === 1 ? parts[0]! : sql.or(parts)
}

/**
 * What a search shows the caller: matches it may search (`s`), included resources it may read (`r`, spec
 * Search rule 9), and the resources a chain, `_has` or `_filter` path reaches, kept to those it may search.
 * Undefined when nothing is restricted.
 */
export const searchRestriction = (sql: SqlClient.SqlClient, access: Access, catalog: Catalog, now: number): SearchRestriction | undefined => {
  if (access.wholly("s") && access.wholly("r")) return undefined
  return {
    matches: (types) => accessCondition(sql, access, catalog, types, "s", now),
    included: () => accessCondition(sql, access, catalog, undefined, "r", now),
    reach: (type) => accessCondition(sql, access, catalog, [type], "s", now)
  }
}
