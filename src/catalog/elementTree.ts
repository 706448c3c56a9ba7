/**
 * The elements of a type as they appear in its JSON form, read from the StructureDefinition snapshot, with
 * what `_summary` and `_elements` ask of them: whether an element is in the summary
 * (https://hl7.org/fhir/R4/elementdefinition-definitions.html#ElementDefinition.isSummary) and whether it
 * is mandatory (min >= 1).
 */
import type { StructureDefinition } from "./definitions.ts"

export interface ElementNode {
  /** The element's name without `[x]`: `value` for each of `valueQuantity`, `valueString`... */
  readonly base: string
  readonly summary: boolean
  readonly mandatory: boolean
  /** The elements of a backbone element defined in the same snapshot; empty for a data type, which is kept whole. */
  readonly children: ReadonlyMap<string, ElementNode>
}

/** The elements directly under the type's root, by JSON name (a choice element under each concrete name). */
export type ElementTree = ReadonlyMap<string, ElementNode>

const capitalize = (code: string): string => code.charAt(0).toUpperCase() + code.slice(1)

/** `value[x]` of types Quantity and string is `valueQuantity` and `valueString`; any other element keeps its name. */
const jsonNames = (name: string, types: ReadonlyArray<{ readonly code: string }>): ReadonlyArray<string> => {
  if (!name.endsWith("[x]")) return [name]
  const base = name.slice(0, -3)
  return types.length === 0 ? [base] : types.map((type) => base + capitalize(type.code))
}

export const elementTree = (sd: StructureDefinition): ElementTree => {
  const elements = (sd.snapshot?.element ?? []).filter((element) => element.sliceName === undefined)
  const root = elements[0]?.path ?? sd.type
  const nodes = new Map<string, { base: string; summary: boolean; mandatory: boolean; children: Map<string, ElementNode> }>()
  nodes.set(root, { base: root, summary: true, mandatory: true, children: new Map() })
  for (const element of elements) {
    if (element.path === root || nodes.has(element.path)) continue
    const name = element.path.slice(element.path.lastIndexOf(".") + 1)
    nodes.set(element.path, {
      base: name.endsWith("[x]") ? name.slice(0, -3) : name,
      summary: element.json["isSummary"] === true,
      mandatory: (element.min ?? 0) >= 1,
      children: new Map()
    })
  }
  for (const element of elements) {
    const node = nodes.get(element.path)
    if (node === undefined || element.path === root) continue
    // `Observation.component.referenceRange` is written as a reference to `#Observation.referenceRange`.
    const reference = element.contentReference?.startsWith("#") ? nodes.get(element.contentReference.slice(1)) : undefined
    if (reference !== undefined) node.children = reference.children
    const parent = nodes.get(element.path.slice(0, element.path.lastIndexOf(".")))
    if (parent === undefined) continue
    const name = element.path.slice(element.path.lastIndexOf(".") + 1)
    for (const jsonName of jsonNames(name, element.type)) parent.children.set(jsonName, node)
  }
  return nodes.get(root)!.children
}
