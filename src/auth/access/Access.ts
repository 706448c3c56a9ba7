/**
 * What a caller may do on the FHIR API, read from its token's scopes (SMART App Launch 2.2,
 * https://hl7.org/fhir/smart-app-launch/scopes-and-launch-context.html; the decisions are in
 * docs/smart.md, "Scopes"). For each resource type and permission (SMART v2's `c r u d s`; v1 `read` is
 * `r s`, `write` is `c u d`) a `Rule`: granted wholly, not at all, or only for some resources:
 *
 * - `user/` and `system/` scopes grant what they name: svc keeps no per-user access lists, so the user a
 *   token acts for adds no limit of its own;
 * - `patient/` scopes grant the resources in the patient compartment of the token's launch patient
 *   (`Principal.patient`); on a type that can never be in a patient compartment (Practitioner,
 *   Organization, Medication, ...) they grant reading and searching, not writing. Without a patient in the
 *   token they grant nothing;
 * - a v2 scope's query (`patient/Observation.rs?category=laboratory`) grants only the resources it matches,
 *   and nothing on a type it cannot be read as a search of (scopeQuery.ts).
 *
 * Several scopes granting one type and permission add up: the resource is allowed when one of them allows
 * it, and when one of them allows every resource no restriction is left.
 *
 * An anonymous caller is the server without an authorization layer (no `--smart`): it may do everything.
 * A caller whose token is not resolved may do nothing.
 */
import type { Catalog } from "../../catalog/Catalog.ts"
import type { Principal } from "../../http/Principal.ts"
import { compartmentTypes } from "../../search/plan/compartment.ts"
import { type Permission, parseScope, type ResourceScope } from "../scopes.ts"
import { scopeQuery } from "./scopeQuery.ts"

/** One scope's grant on a type and permission, with what it requires of a resource. */
export interface Grant {
  /** The scope that grants it, as the token carries it. */
  readonly scope: string
  /** The patient whose compartment the resource must be in (a `patient/` scope). */
  readonly patient: string | undefined
  /** The v2 query the resource must match; empty for none. */
  readonly query: ReadonlyArray<readonly [string, string]>
}

/** What a caller may do with one permission on one type. */
export type Rule =
  | { readonly _tag: "All" }
  | { readonly _tag: "None" }
  /** Only resources that meet at least one of the grants (each of them restricted). */
  | { readonly _tag: "Some"; readonly grants: ReadonlyArray<Grant> }

export const all: Rule = { _tag: "All" }
export const none: Rule = { _tag: "None" }

export interface Access {
  readonly principal: Principal
  /** The rule for `permission` on `type`, with the catalog's compartments. */
  readonly rule: (catalog: Catalog, type: string, permission: Permission) => Rule
  /** Whether `permission` is granted wholly on every type (no rule needs looking at). */
  readonly wholly: (permission: Permission) => boolean
}

/** The compartment whose members a `patient/` scope grants. */
export const patientCompartment = "Patient"

const patientTypesByCatalog = new WeakMap<Catalog, ReadonlySet<string> | undefined>()

/** The types that can be in a patient compartment; undefined when the catalog has no Patient CompartmentDefinition. */
export const patientTypes = (catalog: Catalog): ReadonlySet<string> | undefined => {
  if (patientTypesByCatalog.has(catalog)) return patientTypesByCatalog.get(catalog)
  const definition = catalog.compartment(patientCompartment)
  const types = definition === undefined ? undefined : new Set(compartmentTypes(catalog, definition))
  patientTypesByCatalog.set(catalog, types)
  return types
}

const everything: Access = {
  principal: { _tag: "Anonymous", address: "" },
  rule: () => all,
  wholly: () => true
}

const nothing = (principal: Principal): Access => ({ principal, rule: () => none, wholly: () => false })

/** The rule of `scopes` for `permission` on `type`, for a token whose launch patient is `patient`. */
export const ruleOf = (
  scopes: ReadonlyArray<ResourceScope>,
  patient: string | undefined,
  catalog: Catalog,
  type: string,
  permission: Permission
): Rule => {
  const grants: Array<Grant> = []
  for (const scope of scopes) {
    if ((scope.type !== "*" && scope.type !== type) || !scope.permissions.has(permission)) continue
    if (scope.context !== "patient") {
      if (scope.query.length === 0) return all
      grants.push({ scope: scope.text, patient: undefined, query: scope.query })
      continue
    }
    const inCompartment = patientTypes(catalog)
    if (patient === undefined || inCompartment === undefined) continue
    if (inCompartment.has(type)) grants.push({ scope: scope.text, patient, query: scope.query })
    else if (permission === "r" || permission === "s") {
      if (scope.query.length === 0) return all
      grants.push({ scope: scope.text, patient: undefined, query: scope.query })
    }
  }
  // A query that cannot be read as a search on the type grants nothing on it.
  const readable = grants.filter((grant) => grant.query.length === 0 || scopeQuery(catalog, type, grant.query) !== undefined)
  return readable.length === 0 ? none : { _tag: "Some", grants: readable }
}

/** Whether a scope grants `permission` on every type with no restriction at all. */
const grantsWholly = (scope: ResourceScope, permission: Permission): boolean =>
  scope.type === "*" && scope.context !== "patient" && scope.query.length === 0 && scope.permissions.has(permission)

const make = (principal: Principal & { readonly _tag: "Authorized" }): Access => {
  const scopes = principal.scopes.flatMap((text) => {
    const scope = parseScope(text)
    return scope._tag === "Resource" ? [scope] : []
  })
  const wholly = new Map<Permission, boolean>()
  // Rules by catalog (a rebuilt catalog may change which types a patient compartment holds), then by "type.p".
  const rules = new WeakMap<Catalog, Map<string, Rule>>()
  return {
    principal,
    rule: (catalog, type, permission) => {
      let byKey = rules.get(catalog)
      if (byKey === undefined) {
        byKey = new Map()
        rules.set(catalog, byKey)
      }
      const key = `${type}.${permission}`
      let rule = byKey.get(key)
      if (rule === undefined) {
        rule = ruleOf(scopes, principal.patient, catalog, type, permission)
        byKey.set(key, rule)
      }
      return rule
    },
    wholly: (permission) => {
      let found = wholly.get(permission)
      if (found === undefined) {
        found = scopes.some((scope) => grantsWholly(scope, permission))
        wholly.set(permission, found)
      }
      return found
    }
  }
}

// The front door keeps one principal object per cached token: its access is read from the scopes once.
const accesses = new WeakMap<Principal, Access>()

/** What `principal` may do; computed once per principal object. */
export const accessOf = (principal: Principal): Access => {
  if (principal._tag === "Anonymous") return everything
  let access = accesses.get(principal)
  if (access === undefined) {
    access = principal._tag === "Authorized" ? make(principal) : nothing(principal)
    accesses.set(principal, access)
  }
  return access
}

/** The access of the server without an authorization layer: everything. */
export const unrestricted: Access = everything
