/**
 * Local links in a narrative (https://hl7.org/fhir/R4/narrative.html#id): `<a href="#x">` and
 * `<img src="#x">` point at an element or contained resource of the resource (or, in a Bundle, at an
 * entry). They count as references for dom-3 (https://hl7.org/fhir/R4/domainresource.html#invs), as the
 * HL7 reference validator counts them. One `indexOf` pass over the text; nothing for a div without `#`.
 */
import type { Catalog } from "../catalog/Catalog.ts"

const linkAttribute = /\s(href|src)\s*=\s*(["'])#([^"']*)\2/g

/** The `#x` targets (with their `#`) of the links and images of a narrative div, and whether each is an image. */
export const narrativeFragments = (div: string): ReadonlyArray<{ readonly fragment: string; readonly image: boolean }> => {
  if (div.indexOf("#") < 0) return []
  const found: Array<{ fragment: string; image: boolean }> = []
  for (const match of div.matchAll(linkAttribute)) {
    if (match[3] !== "") found.push({ fragment: `#${match[3]}`, image: match[1] === "src" })
  }
  return found
}

/** The resource type a reference's URL names (`Type/id`, `.../Type/id`, with or without `/_history/v`). */
export const typeInReference = (reference: string, isResourceType: (type: string) => boolean): string | undefined => {
  const parts = reference.split("/")
  if (parts.length < 2) return undefined
  const candidate = parts.length === 2
    ? parts[0]!
    : parts.length >= 4 && parts[parts.length - 2] === "_history" ? parts[parts.length - 4]! : parts[parts.length - 2]!
  return isResourceType(candidate) ? candidate : undefined
}

type Report = (severity: "error" | "warning", code: string, expression: string, diagnostics: string) => void

/**
 * A Reference (https://hl7.org/fhir/R4/references.html#Reference): its `reference` is a URL (no whitespace);
 * its `type`, when given, is one of the types the element allows and the type its URL names; with neither
 * `reference` nor `identifier`, it should have a `display`.
 */
export const checkReference = (
  value: Record<string, unknown>,
  targetTypes: ReadonlyArray<string>,
  path: string,
  isResourceType: (type: string) => boolean,
  report: Report
): void => {
  const reference = value["reference"]
  if (typeof reference !== "string") {
    const identifier = value["identifier"]
    const identified = typeof identifier === "object" && identifier !== null && ("system" in identifier || "value" in identifier)
    if (!identified && typeof value["display"] !== "string") {
      report("warning", "structure", path, "A Reference with neither a reference nor an identifier should have a display")
    }
    return
  }
  if (/\s/.test(reference)) report("error", "invalid", path, `The reference '${reference}' is not a valid reference: it holds whitespace`)
  const type = value["type"]
  if (typeof type !== "string") return
  // Reference.type is a type's name or its StructureDefinition's url.
  const name = type.startsWith("http://hl7.org/fhir/StructureDefinition/") ? type.slice(40) : type
  if (targetTypes.length > 0 && !targetTypes.includes(name) && !targetTypes.includes("Resource")) {
    report("error", "structure", path, `The type '${type}' is not a valid target for this element (must be one of ${targetTypes.join(", ")})`)
  }
  const named = typeInReference(reference, isResourceType)
  if (named !== undefined && named !== name) {
    report("error", "structure", path, `Reference.type is '${type}', but the reference ${reference} names a ${named}`)
  }
}

/**
 * A canonical reference to a conformance resource the server holds must name one of the types its element
 * allows (https://hl7.org/fhir/R4/references.html#canonical): `QuestionnaireResponse.questionnaire` naming a
 * ValueSet is wrong (an error). A CodeSystem's url where a ValueSet goes is a warning. Undefined when the url
 * names a resource of an allowed type, or none the catalog knows.
 */
export const canonicalTargetProblem = (
  catalog: Catalog,
  url: string,
  targetTypes: ReadonlyArray<string>
): { readonly severity: "error" | "warning"; readonly diagnostics: string } | undefined => {
  if (targetTypes.length === 0 || targetTypes.includes("Resource") || url.startsWith("#")) return undefined
  const bare = url.includes("|") ? url.slice(0, url.indexOf("|")) : url
  const found: Array<string> = []
  if (catalog.structureDefinition(bare)?.url === bare) found.push("StructureDefinition")
  if (catalog.valueSet(bare) !== undefined) found.push("ValueSet")
  if (catalog.codeSystem(bare) !== undefined) found.push("CodeSystem")
  if (catalog.searchParameterByUrl(bare) !== undefined) found.push("SearchParameter")
  if (found.length === 0 || found.some((type) => targetTypes.includes(type))) return undefined
  const diagnostics = `The canonical URL '${url}' refers to a ${found.join(" and a ")}, where only ${targetTypes.join(", ")} is allowed`
  // A code system's url where a value set goes is read by much tooling as all its codes (R4 itself binds
  // ExplanationOfBenefit.item.priority so): a warning.
  const codesOfSystem = targetTypes.includes("ValueSet") && found.length === 1 && found[0] === "CodeSystem"
  return { severity: codesOfSystem ? "warning" : "error", diagnostics }
}

const anchorAttribute = /\s(id|name)\s*=\s*(["'])([^"']*)\2/g

/** Every `id` in a value (of resources and elements), and the `id` and `name` anchors of its narratives. */
const collectTargets = (value: unknown, out: Set<string>, depth: number): void => {
  if (depth > 128) return
  if (Array.isArray(value)) {
    for (const item of value) collectTargets(item, out, depth + 1)
  } else if (typeof value === "object" && value !== null) {
    const record = value as Record<string, unknown>
    for (const key in record) {
      const child = record[key]
      if (key === "id" && typeof child === "string") out.add(child)
      else if (key === "div" && typeof child === "string") {
        for (const match of child.matchAll(anchorAttribute)) out.add(match[3]!)
      } else if (typeof child === "object" && child !== null) collectTargets(child, out, depth + 1)
    }
  }
}

const targetCache = new WeakMap<object, ReadonlySet<string>>()

/** What a narrative's `#x` may point at in a resource (or Bundle): its ids and narrative anchors. */
export const fragmentTargets = (container: Record<string, unknown>): ReadonlySet<string> => {
  let targets = targetCache.get(container)
  if (targets === undefined) {
    const found = new Set<string>()
    collectTargets(container, found, 0)
    targets = found
    targetCache.set(container, targets)
  }
  return targets
}

/**
 * The local links of a narrative that point at nothing (https://hl7.org/fhir/R4/narrative.html#id): a link
 * `#x` must name an id in the resource (an element, a contained resource, an anchor of the narrative) or, in
 * a Bundle, anywhere in the Bundle.
 */
export const unresolvedFragments = (
  div: string,
  resource: Record<string, unknown>,
  bundle: Record<string, unknown> | undefined
): ReadonlyArray<{ readonly fragment: string; readonly image: boolean }> => {
  const links = narrativeFragments(div)
  if (links.length === 0) return links
  return links.filter(({ fragment }) => {
    const id = fragment.slice(1)
    return !fragmentTargets(resource).has(id) && (bundle === undefined || !fragmentTargets(bundle).has(id))
  })
}

/** The contained resources whose id an earlier contained resource already has (https://hl7.org/fhir/R4/references.html#contained). */
export const duplicateContainedIds = (contained: ReadonlyArray<unknown>): ReadonlyArray<{ readonly index: number; readonly id: string }> => {
  const seen = new Set<string>()
  const duplicates: Array<{ index: number; id: string }> = []
  contained.forEach((item, index) => {
    const id = typeof item === "object" && item !== null ? (item as Record<string, unknown>)["id"] : undefined
    if (typeof id !== "string") return
    if (seen.has(id)) duplicates.push({ index, id })
    seen.add(id)
  })
  return duplicates
}
