/**
 * Compartment search (https://hl7.org/fhir/R4/search.html#compartments): `GET [base]/{Compartment}/{id}/{type}`
 * and `GET [base]/{Compartment}/{id}/*` (and `POST .../_search`) for every CompartmentDefinition of the
 * catalog that allows search. The query is read as on the type (or as across the compartment's types for
 * `*`), and the matches are kept to the members of the compartment (search/plan/compartment.ts). The focal
 * resource need not exist: an unknown id has no members, and the answer is an empty searchset.
 */
import type { Statement } from "@effect/sql"
import type * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Either } from "effect"
import type { Catalog } from "../catalog/Catalog.ts"
import type { SearchScope } from "../search/parse/parseScope.ts"
import { compartmentCondition, compartmentTypes, searchableCompartment } from "../search/plan/compartment.ts"
import { compartmentGranted } from "../auth/access/enforce.ts"
import { fail, type FhirError } from "../http/FhirError.ts"
import type { FhirRequest } from "./FhirRequest.ts"
import { search } from "./search.ts"

/** What a compartment search reads: the scope (a type, or the compartment's types for `*`), the condition, the path. */
export interface CompartmentSearch {
  readonly scope: string | SearchScope
  readonly condition: (sql: SqlClient.SqlClient) => Statement.Fragment
  readonly path: string
}

/** `{compartment}/{id}/{target}`, `target` a resource type of the compartment or `*`, or why it cannot be searched. */
export const resolveCompartment = (catalog: Catalog, compartment: string, id: string, target: string): Either.Either<CompartmentSearch, FhirError> => {
  const definition = searchableCompartment(catalog, compartment)
  if (definition === undefined) {
    const known = catalog.compartments.filter((c) => searchableCompartment(catalog, c.code) !== undefined).map((c) => c.code).sort()
    return Either.left(fail("not-found", `${compartment} is not a compartment this server searches (it searches ${known.join(", ") || "none"})`))
  }
  const types = compartmentTypes(catalog, definition)
  const path = `${compartment}/${encodeURIComponent(id)}/${target}`
  if (target === "*") {
    return Either.right({ scope: { types, typeParameter: true, compartment }, condition: (sql) => compartmentCondition(sql, compartment, id), path })
  }
  if (!catalog.isResourceType(target)) return Either.left(fail("not-found", `${target} is not a resource type this server knows`))
  if (!types.includes(target)) return Either.left(fail("invalid", `${target} is not in the ${compartment} compartment; its types are ${types.join(", ")}`, 400))
  return Either.right({ scope: target, condition: (sql) => compartmentCondition(sql, compartment, id, [target]), path })
}

/** The types a resolved compartment search reads. */
export const searchedTypes = (scope: string | SearchScope): ReadonlyArray<string> => (typeof scope === "string" ? [scope] : scope.types ?? [])

/** `[base]/{compartment}/{id}/{target}?params`; a patient-scoped token searches its own patient's compartment only. */
export const compartmentSearch = (request: FhirRequest, compartment: string, id: string, target: string, params: URLSearchParams) =>
  Effect.flatMap(resolveCompartment(request.catalog, compartment, id, target), ({ scope, condition, path }) =>
    Effect.zipRight(
      compartmentGranted(request.access, request.catalog, compartment, id, searchedTypes(scope)),
      search(request, scope, params, { condition, path })
    ))
