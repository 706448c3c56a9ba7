/**
 * What a code system's concept says of itself (https://hl7.org/fhir/R4/codesystem.html#defined-props,
 * https://hl7.org/fhir/R4/codesystem-concept-properties.html): its property values, its status, whether it is
 * abstract (not for use: `notSelectable`, or `abstract`, true) or inactive (`inactive` true, or a `status` of
 * `retired` or `inactive`; a `deprecated` concept stays active, as R4 says: it may still be used), its displays
 * and designations, its hierarchy; and how the server holds a code system named by url and version. Shared by
 * validation, the expansion engine and the terminology operations.
 */
import type { Catalog } from "../catalog/Catalog.ts"
import type { CodeSystemDef, ConceptDef } from "../catalog/definitions.ts"
import { isObject, type Json, objects, str } from "../catalog/json.ts"

/** What a code system says of a concept's status: inactive (or retired), deprecated, or nothing. */
export const conceptStatus = (concept: ConceptDef): "inactive" | "retired" | "deprecated" | undefined => {
  const properties = concept.json["property"]
  if (!Array.isArray(properties)) return undefined
  for (const property of properties) {
    if (!isObject(property)) continue
    const code = property["code"]
    if (code === "inactive" && property["valueBoolean"] === true) return "inactive"
    if (code === "status" || code === "deprecated") {
      const value = property["valueCode"]
      if (value === "retired" || value === "inactive") return value
      if (value === "deprecated" || (code === "deprecated" && property["valueDateTime"] !== undefined)) return "deprecated"
    }
  }
  return undefined
}

export interface Designation {
  readonly value: string
  readonly language: string | undefined
  readonly use: Json | undefined
}

/** The concept's designations as written. */
export const designations = (concept: ConceptDef): ReadonlyArray<Designation> => {
  const designations = concept.json["designation"]
  if (!Array.isArray(designations)) return []
  return designations.flatMap((designation): ReadonlyArray<Designation> =>
    isObject(designation) && typeof designation["value"] === "string"
      ? [{
        value: designation["value"],
        language: typeof designation["language"] === "string" ? designation["language"] : undefined,
        use: isObject(designation["use"]) ? designation["use"] : undefined
      }]
      : [])
}

/** The displays a concept accepts: its display and every designation, in any language. */
export const displaysOf = (concept: ConceptDef): ReadonlyArray<{ readonly value: string; readonly language: string | undefined }> => [
  ...(concept.display === undefined ? [] : [{ value: concept.display, language: undefined }]),
  ...designations(concept).map((designation) => ({ value: designation.value, language: designation.language }))
]

const primary = (language: string): string => language.split("-")[0]!.toLowerCase()

/**
 * The display to show for a concept in `language`: a designation in that language (exactly, else one of
 * the same primary language: `de` for `de-CH`), else the concept's display.
 */
export const displayIn = (concept: ConceptDef, language: string | undefined): string | undefined => {
  if (language !== undefined) {
    const withLanguage = designations(concept).filter((designation) => designation.language !== undefined)
    const exact = withLanguage.find((designation) => designation.language!.toLowerCase() === language.toLowerCase())
    const near = exact ?? withLanguage.find((designation) => primary(designation.language!) === primary(language))
    if (near !== undefined) return near.value
  }
  return concept.display
}

/**
 * How the server holds the code system `system` (in `version`, when given):
 * - `held`: with its concepts; `partial` when only some of them (content `fragment` or `example`);
 * - `notPresent`: known, without its concepts (content `not-present`: SNOMED CT in the R4 packages);
 * - `supplement`: the url is a supplement, which adds to another system's codes and has none of its own;
 * - `otherVersion`: held, but not in the version asked for;
 * - `valueSet`: no code system, but a value set has that url;
 * - `unknown`: not at all (LOINC, RxNorm... in the R4 packages).
 */
export type Holding =
  | { readonly _tag: "held"; readonly codeSystem: CodeSystemDef; readonly partial: boolean }
  | { readonly _tag: "notPresent"; readonly codeSystem: CodeSystemDef }
  | { readonly _tag: "supplement"; readonly codeSystem: CodeSystemDef }
  | { readonly _tag: "otherVersion"; readonly held: CodeSystemDef }
  | { readonly _tag: "valueSet" }
  | { readonly _tag: "unknown" }

export const holdingOf = (codeSystem: CodeSystemDef): Holding => {
  switch (codeSystem.content) {
    case "supplement":
      return { _tag: "supplement", codeSystem }
    case "fragment":
    case "example":
      return { _tag: "held", codeSystem, partial: true }
    case "complete":
    case undefined:
      return { _tag: "held", codeSystem, partial: false }
    default:
      return { _tag: "notPresent", codeSystem }
  }
}

export const holding = (catalog: Catalog, system: string, version: string | undefined): Holding => {
  if (version !== undefined) {
    const exact = catalog.codeSystem(`${system}|${version}`)
    if (exact !== undefined) return holdingOf(exact)
  }
  const codeSystem = catalog.codeSystem(system)
  if (codeSystem === undefined) return catalog.valueSet(system) === undefined ? { _tag: "unknown" } : { _tag: "valueSet" }
  if (version !== undefined && codeSystem.version !== undefined && codeSystem.version !== version) return { _tag: "otherVersion", held: codeSystem }
  return holdingOf(codeSystem)
}

/** `url` or `url|version` of a code system, as messages name it. */
export const named = (codeSystem: CodeSystemDef): string =>
  codeSystem.version === undefined ? codeSystem.url : `${codeSystem.url}|${codeSystem.version}`

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
