/**
 * `_summary` and `_elements`: a subset of a resource for search matches and reads
 * (https://hl7.org/fhir/R4/search.html#summary, #elements), marked with the SUBSETTED tag so that it is not
 * taken for the whole resource (https://hl7.org/fhir/R4/resource.html#tag). The element sets come from the
 * catalog's element tree, computed once per type and catalog generation.
 */
import { Either } from "effect"
import type { Catalog, ElementNode, ElementTree } from "../catalog/Catalog.ts"
import { parseJson, stringifyJson } from "../json/Json.ts"
import { carryLexical, carryLexicalItems } from "../json/lexical.ts"

/** `summary` is `_summary=true`; `text` and `data` are their `_summary` namesakes; `elements` is `_elements`. */
export type Shape =
  | { readonly kind: "summary" | "text" | "data" }
  | { readonly kind: "elements"; readonly names: ReadonlySet<string> }

export const subsettedTag = { system: "http://terminology.hl7.org/CodeSystem/v3-ObservationValue", code: "SUBSETTED" } as const

/**
 * The shape asked for, or undefined for the whole resource (no parameter, `_summary=false`, `_summary=count`,
 * whose matches are not returned at all); Left with the reason when `_elements` comes with another summary.
 */
export const shapeFor = (summary: string | undefined, elements: ReadonlyArray<string> | undefined): Either.Either<Shape | undefined, string> => {
  const summaryShape = summary === "true" ? "summary" : summary === "text" || summary === "data" ? summary : undefined
  if (elements !== undefined && summaryShape !== undefined) {
    return Either.left(`_elements cannot be combined with _summary=${summary}: ask for one of them`)
  }
  if (summaryShape !== undefined) return Either.right({ kind: summaryShape })
  if (elements !== undefined && summary !== "count") return Either.right({ kind: "elements", names: new Set(elements) })
  return Either.right(undefined)
}

type JsonObject = Record<string, unknown>

const isObject = (value: unknown): value is JsonObject => typeof value === "object" && value !== null && !Array.isArray(value)

/** `_birthDate` carries the extensions of `birthDate` and goes wherever it goes. */
const elementName = (key: string): string => (key.startsWith("_") ? key.slice(1) : key)

const inSummary = (node: ElementNode): boolean => node.summary || node.mandatory

/** The summary elements of a backbone element, recursively; a data type (no children) is kept whole. */
const summaryOf = (value: unknown, children: ElementTree): unknown => {
  if (children.size === 0) return value
  if (Array.isArray(value)) {
    const items: Array<unknown> = []
    const from: Array<number> = []
    value.forEach((item, index) => {
      const kept = summaryOf(item, children)
      if (kept === undefined) return
      items.push(kept)
      from.push(index)
    })
    return items.length === 0 ? undefined : carryLexicalItems(value, items, from)
  }
  if (!isObject(value)) return value
  const out: JsonObject = {}
  for (const [key, item] of Object.entries(value)) {
    const node = children.get(elementName(key))
    if (node === undefined || !inSummary(node)) continue
    const kept = summaryOf(item, node.children)
    if (kept !== undefined) out[key] = kept
  }
  return Object.keys(out).length === 0 ? undefined : carryLexical(value, out)
}

/** Whether a top-level element stays in the shape; `id`, `meta` and `resourceType` always do. */
const keepsTopLevel = (shape: Shape, name: string, node: ElementNode | undefined): boolean => {
  if (name === "resourceType" || name === "id" || name === "meta") return true
  switch (shape.kind) {
    case "summary":
      return node !== undefined && inSummary(node)
    case "text":
      return name === "text" || node?.mandatory === true
    case "data":
      return name !== "text"
    case "elements":
      // `_elements=value` and `_elements=value[x]` keep `valueQuantity`; a name no element has keeps nothing.
      return node?.mandatory === true || shape.names.has(name) ||
        (node !== undefined && (shape.names.has(node.base) || shape.names.has(`${node.base}[x]`)))
  }
}

const withSubsettedTag = (meta: unknown): JsonObject => {
  const base = isObject(meta) ? meta : {}
  const tags = Array.isArray(base["tag"]) ? base["tag"] : []
  const present = tags.some((tag) => isObject(tag) && tag["system"] === subsettedTag.system && tag["code"] === subsettedTag.code)
  return present ? base : { ...base, tag: [...tags, { ...subsettedTag }] }
}

/** The resource in `shape`, its top-level elements in their stored order, tagged SUBSETTED. */
export const shapeResource = (resource: JsonObject, tree: ElementTree | undefined, shape: Shape): JsonObject => {
  const elements: ElementTree = tree ?? new Map()
  const out: JsonObject = {}
  for (const [key, value] of Object.entries(resource)) {
    const name = elementName(key)
    const node = elements.get(name)
    if (key === "meta") out[key] = withSubsettedTag(value)
    else if (!keepsTopLevel(shape, name, node)) continue
    else {
      const kept = shape.kind === "summary" && node !== undefined ? summaryOf(value, node.children) : value
      if (kept !== undefined) out[key] = kept
    }
  }
  if ("meta" in out) return carryLexical(resource, out)
  // A resource stored without meta gets one after its id.
  const { resourceType, id, ...rest } = out
  return carryLexical(resource, { resourceType, ...(id === undefined ? {} : { id }), meta: withSubsettedTag(undefined), ...rest })
}

/** Stored JSON text in `shape`, or the text as it is when no shape is asked for. */
export const shapeText = (content: string, type: string, catalog: Catalog, shape: Shape | undefined): string =>
  shape === undefined ? content : stringifyJson(shapeResource(parseJson(content) as JsonObject, catalog.elementTree(type), shape))

/**
 * `_summary` and `_elements` of a read (`GET [base]/{type}/{id}?_summary=true`), where `count` has no meaning.
 * Empty values are ignored and the last `_summary` counts, as in a search.
 */
export const shapeOfQuery = (params: URLSearchParams): Either.Either<Shape | undefined, string> => {
  const summary = params.getAll("_summary").filter((value) => value !== "").at(-1)
  if (summary !== undefined && summary !== "true" && summary !== "text" && summary !== "data" && summary !== "false") {
    return Either.left(`The value '${summary}' of _summary cannot be read: expected true, text, data or false`)
  }
  const names = params.getAll("_elements").flatMap((value) => value.split(",")).map((name) => name.trim()).filter((name) => name !== "")
  return shapeFor(summary, names.length === 0 ? undefined : names)
}
