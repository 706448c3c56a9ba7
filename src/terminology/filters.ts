/**
 * The filters of a value set's include or exclude over a CodeSystem the server holds
 * (https://hl7.org/fhir/R4/valueset-definitions.html#ValueSet.compose.include.filter, the operators of
 * https://hl7.org/fhir/R4/valueset-filter-operator.html). On the concept itself (`concept`, or `code`):
 * `=`, `is-a`, `descendent-of`, `is-not-a`, `generalizes`, `in`, `not-in`, `regex` over the hierarchy and
 * the codes; on a property (any the concepts carry, with `parent`, `child`, `display` and `inactive` read
 * from the concept): `=`, `in`, `not-in`, `regex`, `exists`. Anything else is unsupported, and said so.
 */
import type { CodeSystemDef, ConceptDef, ValueSetFilter } from "../catalog/definitions.ts"
import { closure, propertyValues } from "./concepts.ts"
import { filterRegex, matchesWhole } from "./filterRegex.ts"

export type FilterResult =
  | { readonly codes: ReadonlySet<string> }
  | { readonly problem: string; readonly kind: "unsupported-filter" | "invalid-filter" }

const isConcept = (property: string): boolean => property === "concept" || property === "code"

const hierarchical: ReadonlySet<string> = new Set(["is-a", "descendent-of", "is-not-a", "generalizes"])

const select = (concepts: ReadonlyArray<ConceptDef>, keep: (concept: ConceptDef) => boolean): ReadonlySet<string> => {
  const out = new Set<string>()
  for (const concept of concepts) if (keep(concept)) out.add(concept.code)
  return out
}

const listOf = (value: string): ReadonlySet<string> => new Set(value.split(",").map((v) => v.trim()).filter((v) => v !== ""))

/** The codes of `system` that `filter` selects, or why it cannot be applied. */
export const filterCodes = (system: CodeSystemDef, filter: ValueSetFilter): FilterResult => {
  const { property, op, value } = filter
  const all = system.concepts()
  const unsupported = (): FilterResult => ({
    kind: "unsupported-filter",
    problem: `the filter '${property} ${op} ${value}' on ${system.url} is not supported (${hierarchical.has(op) ? `${op} follows the concept hierarchy: its property is 'concept'` : `the operator '${op}'`})`
  })
  if (isConcept(property)) {
    switch (op) {
      case "is-a":
        return { codes: closure(system, value, "down") }
      case "descendent-of": {
        const below = new Set(closure(system, value, "down"))
        const self = system.concept(value)
        if (self !== undefined) below.delete(self.code)
        return { codes: below }
      }
      case "is-not-a": {
        const below = closure(system, value, "down")
        return { codes: select(all, (c) => !below.has(c.code)) }
      }
      case "generalizes":
        return { codes: closure(system, value, "up") }
      case "=": {
        const concept = system.concept(value)
        return { codes: new Set(concept === undefined ? [] : [concept.code]) }
      }
      case "in":
      case "not-in": {
        const listed = new Set([...listOf(value)].flatMap((code) => {
          const concept = system.concept(code)
          return concept === undefined ? [] : [concept.code]
        }))
        return { codes: op === "in" ? listed : select(all, (c) => !listed.has(c.code)) }
      }
      case "regex": {
        const pattern = filterRegex(value)
        if ("problem" in pattern) return { kind: "invalid-filter", problem: pattern.problem }
        return { codes: select(all, (c) => matchesWhole(pattern, c.code)) }
      }
      default:
        return unsupported()
    }
  }
  switch (op) {
    case "=":
      return { codes: select(all, (c) => propertyValues(c, property).includes(value)) }
    case "in":
    case "not-in": {
      const wanted = listOf(value)
      const has = (c: ConceptDef) => propertyValues(c, property).some((v) => wanted.has(v))
      return { codes: select(all, op === "in" ? has : (c) => !has(c)) }
    }
    case "regex": {
      const pattern = filterRegex(value)
      if ("problem" in pattern) return { kind: "invalid-filter", problem: pattern.problem }
      return { codes: select(all, (c) => propertyValues(c, property).some((v) => matchesWhole(pattern, v))) }
    }
    case "exists": {
      if (value !== "true" && value !== "false") return { kind: "invalid-filter", problem: `the filter '${property} exists ${value}' takes true or false` }
      const wanted = value === "true"
      return { codes: select(all, (c) => (propertyValues(c, property).length > 0) === wanted) }
    }
    default:
      return unsupported()
  }
}
