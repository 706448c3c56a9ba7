/**
 * A StructureDefinition's snapshot compiled into a tree of element nodes for validation: each node knows
 * its JSON names (a choice element one per type), its cardinality, whether JSON writes it as an array
 * (from the base definition's max, which a profile cannot change), its types, binding, constraints,
 * fixed and pattern values, and its slices. The tree follows the element ids (`Patient.identifier:mrn.system`),
 * so that a slice has its own subtree.
 */
import type { ElementConstraint, ElementDefinition, ElementSlicing, StructureDefinition } from "../catalog/definitions.ts"
import { isObject, str } from "../catalog/json.ts"
import { isPrimitiveType, type PrimitiveCheck, primitiveCheck } from "./primitives.ts"

export interface TypeChoice {
  /** The FHIR type: `Quantity`, `string`, `Reference`, `Resource`, `BackboneElement`... */
  readonly code: string
  /** The key in JSON: `valueQuantity` for a choice element, the element's name otherwise. */
  readonly jsonName: string
  /** `_` and the JSON name: where a primitive's id and extensions go. */
  readonly extensionName: string
  readonly primitive: boolean
  /** The format check of a primitive type. */
  readonly check: PrimitiveCheck | undefined
  readonly profiles: ReadonlyArray<string>
  readonly targetProfiles: ReadonlyArray<string>
}

export interface Binding {
  readonly strength: string
  readonly valueSet: string
}

export interface ElementNode {
  readonly id: string
  readonly path: string
  /** The element's name without `[x]`. */
  readonly name: string
  readonly sliceName: string | undefined
  readonly min: number
  readonly max: number
  readonly array: boolean
  readonly choice: boolean
  readonly types: ReadonlyArray<TypeChoice>
  readonly binding: Binding | undefined
  readonly constraints: ReadonlyArray<ElementConstraint>
  readonly fixed: unknown
  readonly pattern: unknown
  readonly slicing: ElementSlicing | undefined
  readonly slices: ReadonlyArray<ElementNode>
  /** The child elements the snapshot defines (backbone elements, or a type a profile expands); empty when none. */
  readonly children: Children
  readonly definition: ElementDefinition
}

export interface Children {
  readonly byJsonName: ReadonlyMap<string, { readonly node: ElementNode; readonly type: TypeChoice }>
  readonly list: ReadonlyArray<ElementNode>
  /** The children with a minimum: min >= 1, or a slice with min >= 1. */
  readonly required: ReadonlyArray<ElementNode>
}

export interface CompiledStructure {
  readonly url: string
  readonly type: string
  readonly kind: StructureDefinition["kind"]
  readonly derivation: StructureDefinition["derivation"]
  readonly root: ElementNode
  /** Element by id, for slicing discriminators that look into a slice's subtree. */
  readonly byId: ReadonlyMap<string, ElementNode>
  /** Where an extension may be used (StructureDefinition.context). */
  readonly contexts: ReadonlyArray<{ readonly type: string; readonly expression: string }>
}

const fhirTypeExtension = "http://hl7.org/fhir/StructureDefinition/structuredefinition-fhir-type"

const capitalize = (code: string): string => code.charAt(0).toUpperCase() + code.slice(1)

/** `http://hl7.org/fhirpath/System.String` with the fhir-type extension `id` is an `id`, and so on. */
const typeCode = (element: ElementDefinition, index: number, code: string): string => {
  if (!code.startsWith("http://hl7.org/fhirpath/System.")) return code
  const types = element.json["type"]
  const json = Array.isArray(types) ? types[index] : undefined
  const extensions = isObject(json) && Array.isArray(json["extension"]) ? json["extension"] : []
  for (const extension of extensions) {
    if (isObject(extension) && extension["url"] === fhirTypeExtension) {
      const value = str(extension, "valueUrl") ?? str(extension, "valueUri")
      if (value !== undefined) return value
    }
  }
  return code === "http://hl7.org/fhirpath/System.String" ? "string" : code
}

const lastSegment = (path: string): string => path.slice(path.lastIndexOf(".") + 1)

const cardinality = (text: string | undefined): number =>
  text === undefined || text === "*" ? Number.POSITIVE_INFINITY : Number.isFinite(Number(text)) ? Number(text) : Number.POSITIVE_INFINITY

interface Draft {
  readonly element: ElementDefinition
  readonly id: string
  readonly children: Array<Draft>
  readonly slices: Array<Draft>
  node?: ElementNode
}

/** The element ids, derived from paths and slice names where a snapshot leaves them out. */
const idsOf = (elements: ReadonlyArray<ElementDefinition>): ReadonlyArray<string> => {
  const activeSlice = new Map<string, string>()
  return elements.map((element) => {
    if (element.id !== undefined && element.id !== "") return element.id
    if (element.sliceName !== undefined) activeSlice.set(element.path, element.sliceName)
    else activeSlice.delete(element.path)
    const segments = element.path.split(".")
    return segments
      .map((segment, i) => {
        const prefix = segments.slice(0, i + 1).join(".")
        const slice = activeSlice.get(prefix)
        return slice === undefined ? segment : `${segment}:${slice}`
      })
      .join(".")
  })
}

const parentId = (id: string): string => id.slice(0, Math.max(0, id.lastIndexOf(".")))

export const emptyChildren: Children = { byJsonName: new Map(), list: [], required: [] }

export const compileStructure = (sd: StructureDefinition): CompiledStructure | undefined => {
  const elements = sd.snapshot?.element ?? []
  if (elements.length === 0) return undefined
  const ids = idsOf(elements)
  const drafts = new Map<string, Draft>()
  const byPath = new Map<string, Draft>()
  let root: Draft | undefined
  for (let index = 0; index < elements.length; index++) {
    const element = elements[index]!
    const id = ids[index]!
    if (drafts.has(id)) continue
    const draft: Draft = { element, id, children: [], slices: [] }
    drafts.set(id, draft)
    if (element.sliceName === undefined && !byPath.has(element.path)) byPath.set(element.path, draft)
    if (root === undefined) {
      root = draft
      continue
    }
    const segment = id.slice(id.lastIndexOf(".") + 1)
    const colon = segment.indexOf(":")
    if (colon >= 0) {
      const slicedId = `${parentId(id)}${parentId(id) === "" ? "" : "."}${segment.slice(0, colon)}`
      const resliced = segment.lastIndexOf("/") > colon ? drafts.get(id.slice(0, id.lastIndexOf("/"))) : undefined
      const sliced = resliced ?? drafts.get(slicedId)
      if (sliced !== undefined) sliced.slices.push(draft)
      continue
    }
    drafts.get(parentId(id))?.children.push(draft)
  }
  if (root === undefined) return undefined

  const target = (element: ElementDefinition): Draft | undefined => {
    const reference = element.contentReference
    if (reference === undefined || !reference.startsWith("#")) return undefined
    return drafts.get(reference.slice(1)) ?? byPath.get(reference.slice(1))
  }

  const build = (draft: Draft): ElementNode => {
    if (draft.node !== undefined) return draft.node
    const element = draft.element
    // A contentReference element (`Questionnaire.item.item`) has the types, rules and children of the one it names.
    const referenced = target(element)
    const definition = referenced?.element ?? element
    const name = lastSegment(element.path)
    const choice = name.endsWith("[x]")
    const bare = choice ? name.slice(0, -3) : name
    const types: Array<TypeChoice> = definition.type.map((type, index) => {
      const code = typeCode(definition, index, type.code)
      const jsonName = choice ? bare + capitalize(code) : bare
      return {
        code,
        jsonName,
        extensionName: `_${jsonName}`,
        primitive: isPrimitiveType(code),
        check: primitiveCheck(code),
        profiles: type.profile,
        targetProfiles: type.targetProfile
      }
    })
    const base = isObject(element.json["base"]) ? str(element.json["base"], "max") : undefined
    const baseMax = cardinality(base ?? element.max)
    const binding = definition.binding?.valueSet === undefined
      ? undefined
      : { strength: definition.binding.strength, valueSet: definition.binding.valueSet }
    let sliceNodes: ReadonlyArray<ElementNode> | undefined
    let childNodes: Children | undefined
    const children = (): Children => {
      if (childNodes !== undefined) return childNodes
      childNodes = emptyChildren
      const own = draft.children.length > 0 ? draft.children : referenced?.children ?? []
      if (own.length === 0) return childNodes
      const list = own.map(build)
      const byJsonName = new Map<string, { node: ElementNode; type: TypeChoice }>()
      for (const child of list) {
        for (const type of child.types) if (!byJsonName.has(type.jsonName)) byJsonName.set(type.jsonName, { node: child, type })
      }
      const required = list.filter((child) => child.min > 0 || child.slices.some((slice) => slice.min > 0))
      childNodes = { byJsonName, list, required }
      return childNodes
    }
    const node: ElementNode = {
      id: draft.id,
      path: element.path,
      name: bare,
      sliceName: element.sliceName,
      min: element.min ?? 0,
      max: cardinality(element.max),
      array: baseMax > 1,
      choice,
      types,
      binding,
      constraints: definition.constraint,
      fixed: element.fixed ?? definition.fixed,
      pattern: element.pattern ?? definition.pattern,
      slicing: element.slicing,
      get slices() {
        return (sliceNodes ??= draft.slices.map(build))
      },
      get children() {
        return children()
      },
      definition: element
    }
    draft.node = node
    return node
  }

  let byId: Map<string, ElementNode> | undefined
  const rootNode = build(root)
  const contextJson = sd.resource["context"]
  const contexts = (Array.isArray(contextJson) ? contextJson : []).flatMap((context) => {
    if (!isObject(context)) return []
    const type = str(context, "type")
    const expression = str(context, "expression")
    return type === undefined || expression === undefined ? [] : [{ type, expression }]
  })
  return {
    contexts,
    url: sd.url,
    type: sd.type,
    kind: sd.kind,
    derivation: sd.derivation,
    root: rootNode,
    get byId() {
      if (byId === undefined) {
        byId = new Map()
        for (const draft of drafts.values()) byId.set(draft.id, build(draft))
      }
      return byId
    }
  }
}
