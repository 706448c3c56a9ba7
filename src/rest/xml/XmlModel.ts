/**
 * The shape of each FHIR type as the XML and JSON formats need it, read from the StructureDefinition
 * snapshots of the catalog: element order, which elements repeat, which are attributes (`representation`
 * `xmlAttr`), the element name of each choice type, and the JSON type of each primitive.
 * https://hl7.org/fhir/R4/xml.html and https://hl7.org/fhir/R4/json.html
 */
import type { Catalog, ElementDefinition, StructureDefinition } from "../../catalog/Catalog.ts"

export type JsonKind = "boolean" | "number" | "string"

export interface TypeRef {
  /** The FHIR type code: `Quantity`, `string`, `Resource`, `xhtml`, `BackboneElement`, ... */
  readonly code: string
  /** The element name in XML and the property name in JSON: `valueQuantity` for `value[x]`. */
  readonly name: string
  /** `_name`: where JSON keeps the id and extensions of a primitive. */
  readonly extraName: string
  readonly kind: "primitive" | "complex" | "resource" | "xhtml"
  readonly json: JsonKind
  readonly model: () => TypeModel
}

export interface ElementModel {
  /** E.g. `Patient.contact.name`, for messages. */
  readonly path: string
  readonly repeats: boolean
  readonly attribute: boolean
  readonly types: ReadonlyArray<TypeRef>
}

export interface ChildLookup {
  readonly element: ElementModel
  readonly index: number
  readonly type: TypeRef
}

export interface TypeModel {
  readonly path: string
  readonly elements: ReadonlyArray<ElementModel>
  readonly byName: ReadonlyMap<string, ChildLookup>
}

export interface XmlModels {
  readonly forType: (type: string) => TypeModel | undefined
}

const numberTypes = new Set(["integer", "positiveInt", "unsignedInt", "decimal", "integer64"])
const systemKinds: Readonly<Record<string, JsonKind>> = {
  "http://hl7.org/fhirpath/System.Boolean": "boolean",
  "http://hl7.org/fhirpath/System.Integer": "number",
  "http://hl7.org/fhirpath/System.Decimal": "number"
}

const emptyModel = (path: string): TypeModel => ({ path, elements: [], byName: new Map() })

const representsAsAttribute = (element: ElementDefinition): boolean => {
  const representation = element.json["representation"]
  return Array.isArray(representation) && representation.includes("xmlAttr")
}

const make = (catalog: Catalog): XmlModels => {
  const models = new Map<string, TypeModel>()
  const childIndexes = new Map<StructureDefinition, ReadonlyMap<string, ReadonlyArray<ElementDefinition>>>()

  /** The direct children of every path of a snapshot, in snapshot order; slices are left out. */
  const childrenOf = (sd: StructureDefinition, path: string): ReadonlyArray<ElementDefinition> => {
    let index = childIndexes.get(sd)
    if (index === undefined) {
      const built = new Map<string, Array<ElementDefinition>>()
      for (const element of sd.snapshot?.element ?? []) {
        if (element.sliceName !== undefined) continue
        const dot = element.path.lastIndexOf(".")
        if (dot === -1) continue
        const parent = element.path.slice(0, dot)
        const list = built.get(parent)
        if (list === undefined) built.set(parent, [element])
        else list.push(element)
      }
      index = built
      childIndexes.set(sd, index)
    }
    return index.get(path) ?? []
  }

  const typeRef = (code: string, name: string, inline: (() => TypeModel) | undefined): TypeRef => {
    const system = code.startsWith("http://hl7.org/fhirpath/System.")
    const sd = system ? undefined : catalog.structureDefinitionForType(code)
    const kind = code === "xhtml"
      ? "xhtml"
      : system || sd?.kind === "primitive-type"
      ? "primitive"
      : sd?.kind === "resource"
      ? "resource"
      : "complex"
    const json: JsonKind = system
      ? systemKinds[code] ?? "string"
      : code === "boolean"
      ? "boolean"
      : numberTypes.has(code)
      ? "number"
      : "string"
    let known: TypeModel | undefined
    const model = () => known ??= inline?.() ?? forType(code) ?? emptyModel(code)
    return { code, name, extraName: "_" + name, kind, json, model }
  }

  /** The model of the elements under `path` of `sd`, e.g. a BackboneElement or a whole type. */
  const modelAt = (sd: StructureDefinition, path: string): TypeModel => {
    const key = `${sd.url}#${path}`
    const known = models.get(key)
    if (known !== undefined) return known
    const elements: Array<ElementModel> = []
    const byName = new Map<string, ChildLookup>()
    const model: TypeModel = { path, elements, byName }
    models.set(key, model)
    for (const definition of childrenOf(sd, path)) {
      const last = definition.path.slice(definition.path.lastIndexOf(".") + 1)
      const choice = last.endsWith("[x]")
      const base = choice ? last.slice(0, -3) : last
      const reference = definition.contentReference
      const inline = reference !== undefined
        ? () => modelAt(sd, reference.slice(reference.indexOf("#") + 1))
        : childrenOf(sd, definition.path).length > 0
        ? () => modelAt(sd, definition.path)
        : undefined
      const codes = definition.type.length === 0 ? ["Element"] : definition.type.map((t) => t.code)
      const types = codes.map((code) =>
        typeRef(code, choice ? base + code.charAt(0).toUpperCase() + code.slice(1) : base, inline)
      )
      const element: ElementModel = {
        path: `${path}.${base}`,
        repeats: definition.max !== undefined && definition.max !== "0" && definition.max !== "1",
        attribute: representsAsAttribute(definition),
        types
      }
      for (const type of types) byName.set(type.name, { element, index: elements.length, type })
      elements.push(element)
    }
    return model
  }

  const byType = new Map<string, TypeModel | undefined>()
  const forType = (type: string): TypeModel | undefined => {
    if (byType.has(type)) return byType.get(type)
    const sd = catalog.structureDefinitionForType(type)
    const root = sd?.snapshot?.element[0]?.path
    const model = sd === undefined || root === undefined ? undefined : modelAt(sd, root)
    // Only names the catalog defines are remembered, so that names from requests cannot grow the map.
    if (sd !== undefined) byType.set(type, model)
    return model
  }

  return { forType }
}

// Keyed by the catalog, an immutable snapshot: the models live exactly as long as the catalog they describe.
const byCatalog = new WeakMap<Catalog, XmlModels>()

export const modelsFor = (catalog: Catalog): XmlModels => {
  let models = byCatalog.get(catalog)
  if (models === undefined) {
    models = make(catalog)
    byCatalog.set(catalog, models)
  }
  return models
}
