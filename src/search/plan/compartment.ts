/**
 * Compartments as a condition on `r` (https://hl7.org/fhir/R4/compartmentdefinition.html and
 * https://hl7.org/fhir/R4/search.html#compartments): membership is read from `search_compartment`
 * (migration 0005, rows written with the other index rows), so a compartment search, `$everything`
 * and a patient-scoped restriction all cost one index lookup on (compartment, target_id, type).
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Statement } from "@effect/sql"
import type { Catalog, CompartmentDef } from "../../catalog/Catalog.ts"

/** The compartments a client can search in: those whose definition says `search: true`. */
export const searchableCompartment = (catalog: Catalog, code: string): CompartmentDef | undefined => {
  const definition = catalog.compartment(code)
  return definition?.search === true && catalog.isResourceType(code) ? definition : undefined
}

/** The resource types a compartment holds: those its definition links to it, and the focal type itself. */
export const compartmentTypes = (catalog: Catalog, definition: CompartmentDef): ReadonlyArray<string> => {
  const types = new Set([...definition.resources.keys()].filter((type) => catalog.isResourceType(type)))
  if (catalog.isResourceType(definition.code)) types.add(definition.code)
  return [...types].sort()
}

/**
 * The condition "`r` is in compartment `compartment/id`", optionally only for `types`. Written as an
 * uncorrelated `IN`, so the database can start from the compartment's rows or check candidates against them.
 */
export const compartmentCondition = (
  sql: SqlClient.SqlClient,
  compartment: string,
  id: string,
  types?: ReadonlyArray<string>
): Statement.Fragment => {
  const conditions: Array<Statement.Fragment> = [sql`c.compartment = ${compartment}`, sql`c.target_id = ${id}`]
  if (types !== undefined) conditions.push(types.length === 1 ? sql`c.type = ${types[0]!}` : sql.in("c.type", types))
  return sql`r.rkey IN (SELECT c.rkey FROM search_compartment c WHERE ${sql.and(conditions)})`
}
