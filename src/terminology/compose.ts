/**
 * A ValueSet's `compose` (https://hl7.org/fhir/R4/valueset-definitions.html#ValueSet.compose) as the
 * expansion reads it, from the resource's JSON: the catalog's own reading leaves out the designations a
 * value set gives its concepts and `compose.inactive`, which an expansion needs.
 */
import type { ValueSetFilter } from "../catalog/definitions.ts"
import { bool, type Json, object, objects, str, strings } from "../catalog/json.ts"
import { designationsOf } from "./concepts.ts"

export interface ComposeConcept {
  readonly code: string
  readonly display: string | undefined
  readonly designations: ReadonlyArray<Json>
}

export interface ComposeInclude {
  readonly system: string | undefined
  readonly version: string | undefined
  readonly concepts: ReadonlyArray<ComposeConcept>
  readonly filters: ReadonlyArray<ValueSetFilter>
  readonly valueSets: ReadonlyArray<string>
}

export interface Compose {
  readonly include: ReadonlyArray<ComposeInclude>
  readonly exclude: ReadonlyArray<ComposeInclude>
  /** `compose.inactive`: false leaves inactive codes out; absent or true keeps them. */
  readonly inactive: boolean | undefined
}

const readInclude = (json: Json): ComposeInclude => ({
  system: str(json, "system"),
  version: str(json, "version"),
  concepts: objects(json, "concept").flatMap((item) => {
    const code = str(item, "code")
    return code === undefined ? [] : [{ code, display: str(item, "display"), designations: designationsOf(item) }]
  }),
  filters: objects(json, "filter").flatMap((item) => {
    const property = str(item, "property")
    const op = str(item, "op")
    const value = str(item, "value")
    return property === undefined || op === undefined || value === undefined ? [] : [{ property, op, value }]
  }),
  valueSets: strings(json, "valueSet")
})

/** The compose of a ValueSet resource, or undefined when it has none. */
export const readCompose = (valueSet: Json): Compose | undefined => {
  const compose = object(valueSet, "compose")
  if (compose === undefined) return undefined
  return {
    include: objects(compose, "include").map(readInclude),
    exclude: objects(compose, "exclude").map(readInclude),
    inactive: bool(compose, "inactive")
  }
}
