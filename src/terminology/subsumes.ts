/**
 * The subsumption of two concepts of one code system (https://hl7.org/fhir/R4/codesystem-operation-subsumes.html)
 * from its hierarchy: nested concepts and the `parent`, `child` and `subsumedBy` properties (catalog/CodeSystems.ts).
 * A hierarchy means subsumption when the code system's `hierarchyMeaning` is `is-a` or not stated; under
 * another meaning (`grouped-by`, `part-of`, `classified-with`) it does not, and the question is refused.
 */
import { Effect } from "effect"
import type { CodeSystemDef, ConceptDef } from "../catalog/definitions.ts"
import { fail, type FhirError } from "../http/FhirError.ts"
import { named } from "./concepts.ts"

export type Subsumption = "equivalent" | "subsumes" | "subsumed-by" | "not-subsumed"

/** Whether `ancestor` is above `descendant` (following parents upwards, each concept once). */
const isAbove = (codeSystem: CodeSystemDef, ancestor: ConceptDef, descendant: ConceptDef): boolean => {
  const seen = new Set<string>()
  const queue = [...descendant.parents]
  while (queue.length > 0) {
    const next = codeSystem.concept(queue.pop()!)
    if (next === undefined || seen.has(next.code)) continue
    if (next.code === ancestor.code) return true
    seen.add(next.code)
    queue.push(...next.parents)
  }
  return false
}

/** How concept A relates to concept B in `codeSystem`. */
export const subsumption = (codeSystem: CodeSystemDef, a: ConceptDef, b: ConceptDef): Effect.Effect<Subsumption, FhirError> => {
  const meaning = codeSystem.hierarchyMeaning
  if (meaning !== undefined && meaning !== "is-a") {
    return Effect.fail(fail("not-supported", `The hierarchy of the code system '${named(codeSystem)}' means '${meaning}', not is-a: it says nothing of subsumption`, 422))
  }
  if (a.code === b.code) return Effect.succeed("equivalent")
  if (isAbove(codeSystem, a, b)) return Effect.succeed("subsumes")
  if (isAbove(codeSystem, b, a)) return Effect.succeed("subsumed-by")
  return Effect.succeed("not-subsumed")
}
