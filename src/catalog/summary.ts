/**
 * What the catalog keeps of each conformance resource from the start: plain JSON data (stored beside the
 * resource, see stored.ts) from which the definition is made again over the resource's source, without
 * parsing the resource itself.
 */
import { type CodeSystemData, readCodeSystem } from "./CodeSystems.ts"
import { type ConceptMapData, readConceptMap } from "./ConceptMaps.ts"
import type { CatalogProblem } from "./definitions.ts"
import { isObject, type Json, str } from "./json.ts"
import {
  type CompartmentData,
  type OperationData,
  readCompartmentDefinition,
  readOperationDefinition,
  readSearchParameter,
  readValueSet,
  type SearchParameterData,
  type ValueSetData
} from "./readDefinitions.ts"
import { readStructureDefinition, type StructureData } from "./readStructure.ts"

/** The resource types the catalog compiles; conformance resources of other types are not kept. */
export const catalogTypes: ReadonlyArray<string> = [
  "StructureDefinition",
  "SearchParameter",
  "CompartmentDefinition",
  "OperationDefinition",
  "CodeSystem",
  "ValueSet",
  "ConceptMap"
]

/**
 * The version of the summaries' shape and of the readers that make them: stored summaries of another
 * version are made again. Raise it with any change to what a reader keeps or how it reads it. (A type
 * added to `catalogTypes` needs no raise: its resources have no entries yet, so theirs are made at the
 * next build, as ConceptMap's were in a database of an earlier build.)
 */
export const summaryFormat = 1

export type Summary =
  | { readonly kind: "StructureDefinition"; readonly data: StructureData }
  | { readonly kind: "SearchParameter"; readonly data: SearchParameterData }
  | { readonly kind: "CompartmentDefinition"; readonly data: CompartmentData }
  | { readonly kind: "OperationDefinition"; readonly data: OperationData }
  | { readonly kind: "CodeSystem"; readonly data: CodeSystemData }
  | { readonly kind: "ValueSet"; readonly data: ValueSetData }
  | { readonly kind: "ConceptMap"; readonly data: ConceptMapData }
  /** A resource the catalog skips, and why. */
  | { readonly kind: "problem"; readonly problem: CatalogProblem }
  /** A resource of a type the catalog does not compile. */
  | { readonly kind: "other" }

const problem = (json: Json | undefined, message: string): Summary => ({
  kind: "problem",
  problem: {
    resourceType: json === undefined ? undefined : str(json, "resourceType"),
    id: json === undefined ? undefined : str(json, "id"),
    url: json === undefined ? undefined : str(json, "url"),
    message
  }
})

const of = <A>(json: Json, result: A | string, summary: (data: A) => Summary): Summary =>
  typeof result === "string" ? problem(json, result) : summary(result)

export const summarize = (json: unknown): Summary => {
  if (!isObject(json)) return problem(undefined, "not a JSON object")
  try {
    switch (json["resourceType"]) {
      case "StructureDefinition":
        return of(json, readStructureDefinition(json), (data) => ({ kind: "StructureDefinition", data }))
      case "SearchParameter":
        return of(json, readSearchParameter(json), (data) => ({ kind: "SearchParameter", data }))
      case "CompartmentDefinition":
        return of(json, readCompartmentDefinition(json), (data) => ({ kind: "CompartmentDefinition", data }))
      case "OperationDefinition":
        return of(json, readOperationDefinition(json), (data) => ({ kind: "OperationDefinition", data }))
      case "CodeSystem":
        return of(json, readCodeSystem(json), (data) => ({ kind: "CodeSystem", data }))
      case "ValueSet":
        return of(json, readValueSet(json), (data) => ({ kind: "ValueSet", data }))
      case "ConceptMap":
        return of(json, readConceptMap(json), (data) => ({ kind: "ConceptMap", data }))
      default:
        return { kind: "other" }
    }
  } catch (error) {
    return problem(json, `could not be compiled: ${String(error)}`)
  }
}
