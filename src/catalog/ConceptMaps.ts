/** Compiles a ConceptMap (https://hl7.org/fhir/R4/conceptmap.html); its groups are read on first use. */
import type { ConceptMapDef, ConceptMapGroup, ConceptMapOtherElement } from "./definitions.ts"
import { type Json, object, objects, str } from "./json.ts"
import type { Source } from "./source.ts"

export type ConceptMapData = Omit<ConceptMapDef, "resource" | "groups">

export const readConceptMap = (json: Json): ConceptMapData | string => {
  const url = str(json, "url")
  if (url === undefined || url === "") return "ConceptMap.url is missing"
  return {
    url,
    version: str(json, "version"),
    name: str(json, "name"),
    source: str(json, "sourceUri") ?? str(json, "sourceCanonical"),
    target: str(json, "targetUri") ?? str(json, "targetCanonical"),
    systems: objects(json, "group").map((group) => ({ source: str(group, "source"), target: str(group, "target") }))
  }
}

const otherElements = (json: Json, key: string): ReadonlyArray<ConceptMapOtherElement> =>
  objects(json, key).flatMap((item) => {
    const property = str(item, "property")
    const value = str(item, "value")
    return property === undefined || value === undefined ? [] : [{ property, system: str(item, "system"), value, display: str(item, "display") }]
  })

const readGroups = (json: Json): ReadonlyArray<ConceptMapGroup> =>
  objects(json, "group").map((group) => {
    const unmapped = object(group, "unmapped")
    const mode = unmapped === undefined ? undefined : str(unmapped, "mode")
    return {
      source: str(group, "source"),
      sourceVersion: str(group, "sourceVersion"),
      target: str(group, "target"),
      targetVersion: str(group, "targetVersion"),
      element: objects(group, "element").map((element) => ({
        code: str(element, "code"),
        display: str(element, "display"),
        target: objects(element, "target").map((target) => ({
          code: str(target, "code"),
          display: str(target, "display"),
          // 1..1 in R4; a map without it says nothing narrower than that the codes correspond.
          equivalence: str(target, "equivalence") ?? "equivalent",
          comment: str(target, "comment"),
          dependsOn: otherElements(target, "dependsOn"),
          product: otherElements(target, "product")
        }))
      })),
      unmapped: unmapped === undefined || mode === undefined
        ? undefined
        : { mode, code: str(unmapped, "code"), display: str(unmapped, "display"), url: str(unmapped, "url") }
    }
  })

// Every field named, so that a field left out of stored JSON (undefined) is present again.
export const conceptMapDef = (data: ConceptMapData, source: Source): ConceptMapDef => ({
  url: data.url,
  version: data.version,
  name: data.name,
  get resource() {
    return source.json()
  },
  source: data.source,
  target: data.target,
  systems: data.systems.map((systems) => ({ source: systems.source, target: systems.target })),
  get groups() {
    return source.derived("groups", readGroups)
  }
})
