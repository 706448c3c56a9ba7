/**
 * The literal references a resource holds (`Reference.reference`, https://hl7.org/fhir/R4/references.html),
 * found through the types of its elements as the catalog's StructureDefinitions give them (the same models
 * the XML format is written with), so that an element named `reference` of another type
 * (`DetectedIssue.reference`, a uri) is not taken for one. Contained resources, extensions (`valueReference`)
 * and the extensions of primitives (`_birthDate`) are walked too. In the order they appear in the JSON.
 */
import type { Catalog } from "../catalog/Catalog.ts"
import { modelsFor, type TypeModel, type XmlModels } from "../rest/xml/XmlModel.ts"

export interface LiteralReference {
  /** The reference as written: `Patient/1`, `#c1`, an absolute URL. */
  readonly reference: string
  /** Where it is, with indexes: `Composition.section[0].entry[2]`. */
  readonly expression: string
  /** The element it is the value of, without indexes: `Composition.section.entry`. */
  readonly element: string
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const resourceCodes = new Set(["Resource", "DomainResource"])

const walkObject = (
  models: XmlModels,
  model: TypeModel,
  value: Record<string, unknown>,
  expression: string,
  found: Array<LiteralReference>
): void => {
  for (const key of Object.keys(value)) {
    if (key === "resourceType") continue
    const child = value[key]
    const items: ReadonlyArray<unknown> = Array.isArray(child) ? child : [child]
    const at = (index: number) => Array.isArray(child) ? `${expression}.${key}[${index}]` : `${expression}.${key}`
    if (key.startsWith("_")) {
      // The id and extensions of a primitive.
      const element = models.forType("Element")
      if (element !== undefined) items.forEach((item, i) => isRecord(item) && walkObject(models, element, item, at(i), found))
      continue
    }
    const lookup = model.byName.get(key)
    if (lookup === undefined || lookup.type.kind === "primitive" || lookup.type.kind === "xhtml") continue
    items.forEach((item, i) => {
      if (!isRecord(item)) return
      const code = lookup.type.code
      if (code === "Reference" && typeof item["reference"] === "string") {
        found.push({ reference: item["reference"], expression: at(i), element: lookup.element.path })
      }
      const type = resourceCodes.has(code) && typeof item["resourceType"] === "string" ? models.forType(item["resourceType"]) : lookup.type.model()
      if (type !== undefined) walkObject(models, type, item, at(i), found)
    })
  }
}

/** Every literal reference of `resource`, in the order of its JSON; none when the catalog does not know its type. */
export const literalReferences = (catalog: Catalog, resource: Record<string, unknown>): ReadonlyArray<LiteralReference> => {
  const type = resource["resourceType"]
  if (typeof type !== "string") return []
  const models = modelsFor(catalog)
  const model = models.forType(type)
  const found: Array<LiteralReference> = []
  if (model !== undefined) walkObject(models, model, resource, type, found)
  return found
}
