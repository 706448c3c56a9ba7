/**
 * References and local links (https://hl7.org/fhir/R4/references.html):
 * - a Reference: no whitespace, `type` allowed and agreeing with the URL, a display when nothing else; a
 *   conditional reference `Type?query` has a query a search can read (https://hl7.org/fhir/R4/http.html#trules);
 * - its target, once found contained or in the Bundle (walk.ts, bundle.ts): against the element's target
 *   profiles, and where the profile's aggregation modes allow it to be
 *   (https://hl7.org/fhir/R4/elementdefinition-definitions.html#ElementDefinition.type.aggregation);
 * - canonicals naming a held conformance resource of an allowed type;
 * - `#x` links: in a narrative (`<a href="#x">`, `<img src="#x">`, https://hl7.org/fhir/R4/narrative.html#id),
 *   in uris, urls and canonicals, and `fullUrl#x` into a document's entries: they name exactly one thing.
 *   Narrative links count as references for dom-3 (https://hl7.org/fhir/R4/domainresource.html#invs), as the
 *   HL7 reference validator counts them. Nothing is collected for a div without `#`.
 */
import type { Catalog } from "../catalog/Catalog.ts"
import { isObject } from "../catalog/json.ts"

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

const parameterName = /^[_a-zA-Z][_a-zA-Z0-9.:-]*$/

const decoded = (text: string): string => {
  try {
    return decodeURIComponent(text.replace(/\+/g, " "))
  } catch {
    return text
  }
}

/**
 * Whether a conditional reference `Type?query` (https://hl7.org/fhir/R4/http.html#trules: a transaction
 * resolves it by a search) has a query a search can read: one or more `name=value` pairs joined by `&`,
 * names of letters, digits, `_ . : -`, values without `=`. True too when the part before `?` is no resource
 * type: then it is not a conditional reference.
 */
export const isSearchQuery = (reference: string, isResourceType: (type: string) => boolean): boolean => {
  const mark = reference.indexOf("?")
  if (mark < 0 || !isResourceType(reference.slice(0, mark))) return true
  let pairs = 0
  for (const pair of reference.slice(mark + 1).split("&")) {
    if (pair === "") continue
    const equals = pair.indexOf("=")
    if (equals < 0) return false
    const name = decoded(pair.slice(0, equals))
    if (name === "") continue
    if (!parameterName.test(name) || /[=&]/.test(decoded(pair.slice(equals + 1)))) return false
    pairs++
  }
  return pairs > 0
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
  if (reference.includes("?") && !isSearchQuery(reference, isResourceType)) {
    report("error", "invalid", path, `The query part of the conditional reference '${reference}' is not a valid search: it is [type]?name=value(&name=value)*`)
  }
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

const tagPattern = /<([A-Za-z][A-Za-z0-9]*)(\s[^>]*)?>/g
const anchorAttribute = /\s(id|name)\s*=\s*(["'])([^"']*)\2/g

/** What `#x` may name in a value: counts of each id (of resources, of elements, `id` in narratives), and of each `<a name>` anchor. */
interface Targets {
  readonly ids: Map<string, number>
  readonly anchors: Map<string, number>
}

const bump = (map: Map<string, number>, key: string, by = 1): void => {
  map.set(key, (map.get(key) ?? 0) + by)
}

/** Every `id` in a value (of resources and elements), and the `id` attributes and `<a name>` anchors of its narratives. */
const collectTargets = (value: unknown, out: Targets, depth: number): void => {
  if (depth > 128) return
  if (Array.isArray(value)) {
    for (const item of value) collectTargets(item, out, depth + 1)
  } else if (typeof value === "object" && value !== null) {
    const record = value as Record<string, unknown>
    for (const key in record) {
      const child = record[key]
      if (key === "id" && typeof child === "string") bump(out.ids, child)
      else if (key === "div" && typeof child === "string") {
        for (const tag of child.matchAll(tagPattern)) {
          const attributes = tag[2]
          if (attributes === undefined) continue
          for (const match of attributes.matchAll(anchorAttribute)) {
            if (match[1] === "id") bump(out.ids, match[3]!)
            else if (tag[1]!.toLowerCase() === "a") bump(out.anchors, match[3]!)
          }
        }
      } else if (typeof child === "object" && child !== null) {
        collectTargets(child, out, depth + 1)
        // Two contained resources with one id are an error of their own (duplicateContainedIds): counted once here.
        if (key === "contained" && Array.isArray(child) && child.length > 1) {
          for (const { id } of duplicateContainedIds(child)) bump(out.ids, id, -1)
        }
      }
    }
  }
}

const targetCache = new WeakMap<object, Targets>()

/** What a `#x` may point at in a resource (or Bundle), computed once per object. */
const targetsOf = (container: Record<string, unknown>): Targets => {
  let targets = targetCache.get(container)
  if (targets === undefined) {
    targets = { ids: new Map(), anchors: new Map() }
    collectTargets(container, targets, 0)
    targetCache.set(container, targets)
  }
  return targets
}

/** How many things `#id` names in a value: ids of resources and elements and of narrative elements, and, unless `images`, `<a name>` anchors. */
export const fragmentCount = (container: Record<string, unknown>, id: string, images = false): number => {
  const targets = targetsOf(container)
  return (targets.ids.get(id) ?? 0) + (images ? 0 : targets.anchors.get(id) ?? 0)
}

export interface LinkProblem {
  readonly severity: "error" | "warning"
  readonly diagnostics: string
}

/**
 * The local links of a narrative that point at nothing or at several things
 * (https://hl7.org/fhir/R4/narrative.html#id). A hyperlink `#x` names an id in the resource (an element, a
 * contained resource, an `id` or `<a name>` of the narrative) or, when the resource has none, anywhere in the
 * Bundle around it; naming nothing is an error, as the HL7 reference validator has it (R4's own v3 code
 * systems and value sets, which link to anchors they lack, are refused for it), naming several a warning. An
 * image `#x` names an id of the resource itself (its contained Binary, say): nothing and several are errors.
 */
export const narrativeLinkProblems = (
  div: string,
  resource: Record<string, unknown>,
  bundle: Record<string, unknown> | undefined
): ReadonlyArray<LinkProblem> => {
  const links = narrativeFragments(div)
  if (links.length === 0) return []
  const problems: Array<LinkProblem> = []
  for (const { fragment, image } of links) {
    const id = fragment.slice(1)
    let count = fragmentCount(resource, id, image)
    if (count === 0 && !image && bundle !== undefined) count = fragmentCount(bundle, id)
    if (count === 0) {
      problems.push({
        severity: "error",
        diagnostics: `The narrative's ${image ? "image" : "link"} '${fragment}' points at nothing: no element, contained resource or anchor has the id '${id}'`
      })
    } else if (count > 1) {
      problems.push({
        severity: image ? "error" : "warning",
        diagnostics: `The narrative's ${image ? "image" : "link"} '${fragment}' points at ${count} things with the id '${id}': it is ambiguous`
      })
    }
  }
  return problems
}

/**
 * A uri, url or canonical `#x` (https://hl7.org/fhir/R4/references.html#contained) names an id in the
 * resource (a contained resource, an element, a narrative anchor) or in the Bundle around it. One that names
 * nothing: an error for a canonical, information for Meta.source (servers write their own there), a warning
 * for other uris and urls. (ValueSet.compose.include.system `#x` is refused as not absolute elsewhere.)
 */
export const internalUrlProblem = (
  value: string,
  code: string,
  elementPath: string,
  resource: Record<string, unknown>,
  bundle: Record<string, unknown> | undefined
): { readonly severity: "error" | "warning" | "information"; readonly diagnostics: string } | undefined => {
  if (value.length < 2 || !value.startsWith("#")) return undefined
  // A local system in a ValueSet's compose is refused as not absolute (terminologyResources.ts).
  if (elementPath === "ValueSet.compose.include.system" || elementPath === "ValueSet.compose.exclude.system") return undefined
  const id = value.slice(1)
  if (fragmentCount(resource, id) > 0 || (bundle !== undefined && fragmentCount(bundle, id) > 0)) return undefined
  if (code === "canonical") return { severity: "error", diagnostics: `The URL '${value}' is not valid: nothing in the resource has the id '${id}'` }
  const source = elementPath === "Meta.source" || elementPath.endsWith(".meta.source")
  return {
    severity: source ? "information" : "warning",
    diagnostics: `The URL '${value}' looks like a link inside the resource, but nothing in it has the id '${id}'`
  }
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

const noModes: ReadonlyArray<string> = []
const aggregationCache = new WeakMap<object, ReadonlyArray<string>>()

/**
 * The aggregation modes a profile gives an element's Reference type (`contained`, `referenced`, `bundled`:
 * https://hl7.org/fhir/R4/elementdefinition-definitions.html#ElementDefinition.type.aggregation), empty when
 * it gives none. Read once per element definition.
 */
export const aggregationOf = (definition: Record<string, unknown>): ReadonlyArray<string> => {
  let modes = aggregationCache.get(definition)
  if (modes === undefined) {
    modes = noModes
    const types = definition["type"]
    if (Array.isArray(types)) {
      for (const type of types) {
        if (!isObject(type) || type["code"] !== "Reference" || !Array.isArray(type["aggregation"])) continue
        modes = type["aggregation"].filter((mode): mode is string => typeof mode === "string")
      }
    }
    aggregationCache.set(definition, modes)
  }
  return modes
}

/** Where a reference was found to point: a contained resource, an entry of the Bundle around it, or neither. */
export type Destination = "contained" | "bundled" | "elsewhere"

/**
 * What the aggregation modes of the element say of where its reference points
 * (https://hl7.org/fhir/R4/profiling.html, ElementDefinition.type.aggregation): a contained target needs
 * `contained`, an entry of the Bundle `bundled` or `referenced`, and a reference that points at neither
 * (not resolved here) needs `referenced`. Errors; undefined when the modes allow it or there are none.
 */
export const aggregationProblem = (modes: ReadonlyArray<string>, destination: Destination, reference: string): string | undefined => {
  if (modes.length === 0) return undefined
  if (destination === "elsewhere") {
    return modes.includes("referenced")
      ? undefined
      : `The reference ${reference} is found neither contained in the resource nor in the Bundle, where the aggregation mode(s) of this element (${modes.join(", ")}) do not allow a reference elsewhere`
  }
  if (destination === "contained" ? modes.includes("contained") : modes.includes("bundled") || modes.includes("referenced")) return undefined
  return `The reference ${reference} points at a ${destination === "contained" ? "contained resource" : "Bundle entry"}, which the aggregation mode(s) of this element (${modes.join(", ")}) do not allow`
}

/** Profiles of FHIR itself: the reference validator does not ask a target to match one of these. */
const coreProfile = (url: string): boolean => url.startsWith("http://hl7.org/fhir/StructureDefinition/")

/**
 * A target a reference resolves to (a contained resource, a Bundle entry) against the element's target
 * profiles (https://hl7.org/fhir/R4/elementdefinition-definitions.html#ElementDefinition.type.targetProfile):
 * of the profiles for the target's type, it should meet exactly one. None met, when one of them is not a
 * profile of FHIR itself: an error with what each profile found; several met: a warning. `problemsAgainst`
 * gives the errors of the target against one profile. Nothing is walked when a single profile, or only
 * FHIR's own, are for the target's type (the walk of the target itself already checks those).
 */
export const targetProfileProblem = (
  reference: string,
  target: Record<string, unknown>,
  targetProfiles: ReadonlyArray<string>,
  typeOf: (url: string) => string | undefined,
  problemsAgainst: (url: string) => ReadonlyArray<string>
): { readonly severity: "error" | "warning"; readonly diagnostics: string } | undefined => {
  const type = target["resourceType"]
  if (targetProfiles.length === 0 || typeof type !== "string") return undefined
  const candidates = targetProfiles.filter((url) => typeOf(url) === type)
  const allCore = candidates.every(coreProfile)
  if (candidates.length === 0 || (candidates.length === 1 && allCore)) return undefined
  const failed: Array<string> = []
  const met: Array<string> = []
  for (const url of candidates) {
    const problems = problemsAgainst(url)
    if (problems.length === 0) met.push(url)
    else failed.push(`${url}: ${problems.slice(0, 3).join("; ")}${problems.length > 3 ? "; ..." : ""}`)
  }
  if (met.length > 1) {
    return { severity: "warning", diagnostics: `The target of ${reference} matches several of the profiles it may have: ${met.join(", ")}` }
  }
  if (met.length === 0 && !allCore) {
    return { severity: "error", diagnostics: `The target of ${reference} matches none of the profiles it may have (${candidates.join(", ")}): ${failed.join(" | ")}` }
  }
  return undefined
}

const narrativeLink = "http://hl7.org/fhir/StructureDefinition/narrativeLink"

/** Members whose urls name rather than point at another entry: systems, profiles, an extension's url, endpoints. */
const notLinks = new Set(["system", "profile", "fullUrl", "address", "endpoint", "div", "data"])

/** The strings `url#x` in a value, with where they are and whether a narrativeLink extension holds them. */
const fragmentUrls = (
  value: unknown,
  path: string,
  inExtension: boolean,
  nlLink: boolean,
  out: Array<{ readonly value: string; readonly at: string; readonly nlLink: boolean }>,
  depth: number
): void => {
  if (depth > 64) return
  if (typeof value === "string") {
    const hash = value.indexOf("#")
    if (hash > 0 && hash < value.length - 1) out.push({ value, at: path, nlLink })
  } else if (Array.isArray(value)) {
    value.forEach((item, i) => fragmentUrls(item, `${path}[${i}]`, inExtension, nlLink, out, depth + 1))
  } else if (isObject(value)) {
    // A Bundle inside an entry has its own links.
    if (depth > 0 && value["resourceType"] === "Bundle") return
    const link = inExtension && value["url"] === narrativeLink
    for (const key in value) {
      if (notLinks.has(key) || (inExtension && key === "url")) continue
      fragmentUrls(value[key], `${path}.${key}`, key === "extension" || key === "modifierExtension", nlLink || link, out, depth + 1)
    }
  }
}

/**
 * The links of a document's (message's) entries to a part of another entry, `fullUrl#id`
 * (https://hl7.org/fhir/R4/bundle.html#references, https://hl7.org/fhir/R4/documents.html): the entry
 * with that fullUrl must have exactly one id `id` (of an element, a contained resource, a narrative
 * element). Several: an error. None: information, an error for the url of a narrativeLink extension.
 */
export const entryFragmentProblems = (
  entries: ReadonlyArray<{ readonly index: number; readonly fullUrl: string | undefined; readonly resource: Record<string, unknown> | undefined }>,
  path: string
): ReadonlyArray<{ readonly severity: "error" | "information"; readonly code: string; readonly expression: string; readonly diagnostics: string }> => {
  const byUrl = new Map<string, Array<Record<string, unknown> | undefined>>()
  for (const entry of entries) {
    if (entry.fullUrl === undefined) continue
    const known = byUrl.get(entry.fullUrl)
    if (known === undefined) byUrl.set(entry.fullUrl, [entry.resource])
    else known.push(entry.resource)
  }
  const problems: Array<{ severity: "error" | "information"; code: string; expression: string; diagnostics: string }> = []
  for (const entry of entries) {
    if (entry.resource === undefined) continue
    const links: Array<{ readonly value: string; readonly at: string; readonly nlLink: boolean }> = []
    fragmentUrls(entry.resource, `${path}.entry[${entry.index}].resource`, false, false, links, 0)
    for (const { value, at, nlLink } of links) {
      const hash = value.indexOf("#")
      const matches = byUrl.get(value.slice(0, hash))
      const target = matches?.length === 1 ? matches[0] : undefined
      if (target === undefined) continue
      const fragment = value.slice(hash + 1)
      const count = fragmentCount(target, fragment)
      if (count === 0) {
        problems.push({
          severity: nlLink ? "error" : "information",
          code: "not-found",
          expression: at,
          diagnostics: `Can't find '#${fragment}' in the entry ${value.slice(0, hash)} of the Bundle: nothing there has the id '${fragment}'`
        })
      } else if (count > 1) {
        problems.push({
          severity: "error",
          code: "invalid",
          expression: at,
          diagnostics: `Found ${count} matches for the fragment '${fragment}' in the entry ${value.slice(0, hash)} of the Bundle: the link is ambiguous`
        })
      }
    }
  }
  return problems
}
