/**
 * What a code system's concept says of itself (https://hl7.org/fhir/R4/codesystem.html#defined-props):
 * its status, whether it is abstract, its displays and designations; and how the server holds a code
 * system named by url and version. Shared by validation and the terminology operations.
 */
import type { Catalog } from "../catalog/Catalog.ts"
import type { CodeSystemDef, ConceptDef } from "../catalog/definitions.ts"
import { isObject, type Json } from "../catalog/json.ts"

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

/** Whether the concept is inactive: `inactive` true, or a status of inactive or retired. */
export const isInactive = (concept: ConceptDef): boolean => {
  const status = conceptStatus(concept)
  return status === "inactive" || status === "retired"
}

/** Whether the concept is abstract: `notSelectable` (or `abstract`, as some code systems name it) true. */
export const isAbstract = (concept: ConceptDef): boolean => {
  const properties = concept.json["property"]
  return Array.isArray(properties) && properties.some((property) =>
    isObject(property) && (property["code"] === "notSelectable" || property["code"] === "abstract") && property["valueBoolean"] === true)
}

export interface Designation {
  readonly value: string
  readonly language: string | undefined
  readonly use: Json | undefined
}

/** The concept's designations as written. */
export const designationsOf = (concept: ConceptDef): ReadonlyArray<Designation> => {
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
  ...designationsOf(concept).map((designation) => ({ value: designation.value, language: designation.language }))
]

const primary = (language: string): string => language.split("-")[0]!.toLowerCase()

/**
 * The display to show for a concept in `language`: a designation in that language (exactly, else one of
 * the same primary language: `de` for `de-CH`), else the concept's display.
 */
export const displayIn = (concept: ConceptDef, language: string | undefined): string | undefined => {
  if (language !== undefined) {
    const designations = designationsOf(concept).filter((designation) => designation.language !== undefined)
    const exact = designations.find((designation) => designation.language!.toLowerCase() === language.toLowerCase())
    const near = exact ?? designations.find((designation) => primary(designation.language!) === primary(language))
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
