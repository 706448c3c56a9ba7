/**
 * What a CodeSystem concept says of itself (https://hl7.org/fhir/R4/codesystem.html#properties and
 * https://hl7.org/fhir/R4/codesystem-concept-properties.html): its property values, whether it is abstract
 * (not for use: `notSelectable`, or `abstract`, true) or inactive (`inactive` true, or a `status` of
 * `retired` or `inactive`), its designations, and its hierarchy. A `deprecated` concept (a `status` of
 * `deprecated`, a `deprecated` or `deprecationDate` property) stays active, as R4 says: it may still be used.
 */
import type { CodeSystemDef, ConceptDef } from "../catalog/definitions.ts"
import { isObject, type Json, objects, str } from "../catalog/json.ts"

const valueKeys = ["valueCode", "valueString", "valueBoolean", "valueInteger", "valueDecimal", "valueDateTime"] as const

/** The values of one property of a concept, as text (a Coding by its code). */
export const propertyValues = (concept: ConceptDef, property: string): ReadonlyArray<string> => {
  switch (property) {
    case "parent":
      return concept.parents
    case "child":
      return concept.children
    case "display":
      return concept.display === undefined ? [] : [concept.display]
    case "inactive":
      if (!objects(concept.json, "property").some((item) => str(item, "code") === "inactive")) return [String(isInactive(concept.json))]
      break
  }
  const out: Array<string> = []
  for (const item of objects(concept.json, "property")) {
    if (str(item, "code") !== property) continue
    const value = valueOf(item)
    if (value !== undefined) out.push(value)
  }
  return out
}

const valueOf = (item: Json): string | undefined => {
  for (const key of valueKeys) {
    const value = item[key]
    if (value !== undefined && value !== null && typeof value !== "object") return String(value)
  }
  const coding = item["valueCoding"]
  return isObject(coding) && typeof coding["code"] === "string" ? coding["code"] : undefined
}

const booleanProperty = (json: Json, name: string): boolean =>
  objects(json, "property").some((item) => str(item, "code") === name && (item["valueBoolean"] === true || item["valueString"] === "true" || item["valueCode"] === "true"))

/** Not for use in data: only a grouper of the codes below it. */
export const isAbstract = (json: Json): boolean => booleanProperty(json, "notSelectable") || booleanProperty(json, "abstract")

const inactiveStatuses: ReadonlySet<string> = new Set(["retired", "inactive"])

/** No longer active (R4: "not a valid concept any more"). */
export const isInactive = (json: Json): boolean =>
  booleanProperty(json, "inactive") ||
  objects(json, "property").some((item) => str(item, "code") === "status" && inactiveStatuses.has(String(item["valueCode"] ?? item["valueString"] ?? "")))

/** The designations of a concept or of a value set's concept, each with a `value`. */
export const designationsOf = (json: Json): ReadonlyArray<Json> => objects(json, "designation").filter((d) => typeof d["value"] === "string")

/** A code and every code below it (`down`) or above it (`up`) in a CodeSystem's hierarchy. */
export const closure = (system: CodeSystemDef, code: string, direction: "down" | "up"): ReadonlySet<string> => {
  const seen = new Set<string>()
  const start = system.concept(code)
  if (start === undefined) return seen
  const queue = [start.code]
  while (queue.length > 0) {
    const next = queue.pop()!
    if (seen.has(next)) continue
    seen.add(next)
    const concept = system.concept(next)
    if (concept !== undefined) queue.push(...(direction === "down" ? concept.children : concept.parents))
  }
  return seen
}
