/**
 * Compartment search (https://hl7.org/fhir/R4/search.html#compartments): `GET [base]/{Compartment}/{id}/{type}`
 * and `GET [base]/{Compartment}/{id}/*` (and `POST .../_search`) for every CompartmentDefinition of the
 * catalog that allows search. The query is read as on the type (or as across the compartment's types for
 * `*`), and the matches are kept to the members of the compartment (search/plan/compartment.ts). The focal
 * resource need not exist: an unknown id has no members, and the answer is an empty searchset.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import { compartmentCondition, compartmentTypes, searchableCompartment } from "../search/plan/compartment.ts"
import { fail } from "./FhirError.ts"
import type { FhirRequest } from "./FhirRequest.ts"
import { search } from "./search.ts"

/** `[base]/{compartment}/{id}/{target}?params`, `target` a resource type of the compartment or `*`. */
export const compartmentSearch = (request: FhirRequest, compartment: string, id: string, target: string, params: URLSearchParams) =>
  Effect.gen(function*() {
    const { catalog } = request
    const definition = searchableCompartment(catalog, compartment)
    if (definition === undefined) {
      const known = catalog.compartments.filter((c) => searchableCompartment(catalog, c.code) !== undefined).map((c) => c.code).sort()
      return yield* fail("not-found", `${compartment} is not a compartment this server searches (it searches ${known.join(", ") || "none"})`)
    }
    const types = compartmentTypes(catalog, definition)
    const path = `${compartment}/${encodeURIComponent(id)}/${target}`
    if (target === "*") {
      const condition = (sql: SqlClient.SqlClient) => compartmentCondition(sql, compartment, id)
      return yield* search(request, { types, typeParameter: true, compartment }, params, { condition, path })
    }
    if (!catalog.isResourceType(target)) return yield* fail("not-found", `${target} is not a resource type this server knows`)
    if (!types.includes(target)) return yield* fail("invalid", `${target} is not in the ${compartment} compartment; its types are ${types.join(", ")}`, 400)
    const condition = (sql: SqlClient.SqlClient) => compartmentCondition(sql, compartment, id, [target])
    return yield* search(request, target, params, { condition, path })
  })
