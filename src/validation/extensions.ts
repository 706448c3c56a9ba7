/**
 * Extensions (https://hl7.org/fhir/R4/extensibility.html): which definition an extension is checked
 * against, and the rules about the extension as a whole that its definition's elements do not state.
 *
 * - The url: absolute at the top (a relative url names a part of a complex extension and must be one its
 *   definition defines); without a `|version`; known to the server, unless it starts with one of the
 *   allowed domains (`validation.allowed_extension_domains`) or is one of the urls the HL7 reference
 *   validator accepts without a definition (below). Cross-version urls (`http://hl7.org/fhir/X.Y/...`)
 *   cannot be interpreted without the other version's definitions: a warning.
 * - Placement: a modifier extension only in `modifierExtension`, any other only in `extension`
 *   (https://hl7.org/fhir/R4/extensibility.html#modifierExtension).
 * - Shape: a simple extension (its definition allows a value) has a value, not sub-extensions.
 * - Context (https://hl7.org/fhir/R4/defining-extensions.html#context): the extension is used where its
 *   definition's contexts allow it, as the reference validator reads them (see `contextProblem`).
 * - Status: an extension whose definition is deprecated, withdrawn or retired is reported (information).
 */
import { isExampleUrl } from "./exampleUrls.ts"
import fhirpath from "fhirpath"
import r4 from "fhirpath/fhir-context/r4"
import { isObject } from "../catalog/json.ts"
import type { CompiledStructure, ElementNode } from "./compile.ts"
import type { Owner } from "./contexts.ts"
import { contextPath } from "./contexts.ts"
import type { Scope } from "./invariants.ts"
import type { Severity } from "./Issue.ts"
import type { Registry } from "./registry.ts"
import { canonicalResourceTypes } from "./canonical.ts"
import { fhirVersionProblems } from "./structureDefinition.ts"

/** Where an extension is used: the element holding it (its description and its JSON) and the resource. */
export interface Site {
  readonly owner: Owner | undefined
  readonly ownerValue: Record<string, unknown> | undefined
  readonly scope: Scope
}

export interface ExtensionReporter {
  readonly registry: Registry
  readonly report: (severity: Severity, code: string, expression: string, diagnostics: string) => void
}

/**
 * Urls the reference validator accepts without a definition: the FHIR tooling and build extensions, DICOM's
 * (nema.org), R5 extensions it knows by itself, and, when validating examples (`examples`), the domains
 * of the FHIR specification's examples (example.org, acme.com), as the R4 examples need.
 */
const acceptedPrefixes = [
  "http://hl7.org/fhir/tools/StructureDefinition/",
  "http://hl7.org/fhir/build/StructureDefinition/"
]
const exampleParts = ["example.org", "acme.com"]
const acceptedUrls = new Set([
  "http://hl7.org/fhir/StructureDefinition/structuredefinition-expression",
  "http://hl7.org/fhir/StructureDefinition/codesystem-properties-mode",
  "http://hl7.org/fhir/StructureDefinition/elementdefinition-type-must-support",
  "http://hl7.org/fhir/StructureDefinition/instance-name",
  "http://hl7.org/fhir/StructureDefinition/instance-description",
  "http://hl7.org/fhir/StructureDefinition/definition",
  "http://hl7.org/fhir/StructureDefinition/structuredefinition-conformance-derivedFrom",
  "http://hl7.org/fhir/StructureDefinition/structuredefinition-fmm-support",
  "http://hl7.org/fhir/StructureDefinition/elementdefinition-bindingName"
])

/** Whether an extension url without a definition is accepted (not checked). */
export const acceptedUnknown = (url: string, allowedDomains: ReadonlyArray<string>, examples = false): boolean => {
  if (acceptedUrls.has(url)) return true
  for (const prefix of acceptedPrefixes) if (url.startsWith(prefix)) return true
  if (url.includes("nema.org")) return true
  if (examples) for (const part of exampleParts) if (url.includes(part)) return true
  for (const domain of allowedDomains) if (domain !== "" && url.startsWith(domain)) return true
  return false
}

/**
 * HL7's own extension namespace: besides R4's, HL7 publishes extensions here in its extensions package
 * (hl7.fhir.uv.extensions), which the reference validator loads by default and this server only has when
 * installed. An unknown url here is a warning.
 */
const coreNamespace = "http://hl7.org/fhir/StructureDefinition/"

const crossVersion = /^http:\/\/hl7\.org\/fhir\/(\d\.\d)\/StructureDefinition\/extension-(.+)$/
/** The FHIR versions whose elements cross-version extension urls name (https://hl7.org/fhir/versions.html#extensions). */
const fhirVersions = new Set(["1.0", "1.4", "3.0", "4.0", "4.3", "5.0", "6.0"])

const absolute = (url: string): boolean => url.includes(":")

/** The sub-extension urls a complex extension's definition defines (`Extension.extension.url` fixed values). */
const subExtensionCache = new WeakMap<CompiledStructure, ReadonlySet<string>>()
const subExtensionUrls = (structure: CompiledStructure): ReadonlySet<string> => {
  let urls = subExtensionCache.get(structure)
  if (urls === undefined) {
    const found = new Set<string>()
    for (const node of structure.byId.values()) {
      if (node.path === "Extension.extension.url" && typeof node.fixed === "string") found.add(node.fixed)
    }
    urls = found
    subExtensionCache.set(structure, urls)
  }
  return urls
}

/**
 * The definition an extension without a profile on its element is checked against, found by its url,
 * after the checks on the url; undefined when there is none (the value is then checked as an Extension of no particular definition).
 */
export const extensionDefinition = (
  reporter: ExtensionReporter,
  value: Record<string, unknown>,
  path: string,
  node: ElementNode,
  site: Site,
  allowedDomains: ReadonlyArray<string>,
  examples = false
): CompiledStructure | undefined => {
  const owner = site.owner
  const url = value["url"]
  // A missing or empty url is reported by Extension.url's cardinality and the string format.
  if (typeof url !== "string" || url === "") return undefined
  if (!absolute(url)) {
    const parent = owner?.type === "Extension" && owner.url !== undefined && absolute(owner.url) ? reporter.registry.structure(owner.url) : undefined
    if (owner?.type !== "Extension") {
      reporter.report("error", "invalid", path, `Extension.url must be an absolute URL, not '${url.slice(0, 200)}' (only the parts of a complex extension have relative urls)`)
    } else if (parent !== undefined && parent.type === "Extension" && !subExtensionUrls(parent).has(url)) {
      reporter.report("error", "invalid", path, `The sub-extension url '${url.slice(0, 200)}' is not defined by the extension ${parent.url}`)
    }
    return undefined
  }
  const bar = url.indexOf("|")
  const unversioned = bar < 0 ? url : url.slice(0, bar)
  let structure = reporter.registry.structure(unversioned)
  if (bar >= 0) {
    if (structure !== undefined) {
      reporter.report("error", "invalid", path, `An extension url must not name a version: '${url.slice(0, 200)}' was checked against the extension ${unversioned}`)
    } else if ((structure = reporter.registry.structure(url)) !== undefined) {
      reporter.report("error", "invalid", path, `An extension url must not name a version: '${url.slice(0, 200)}'`)
    } else {
      reporter.report("warning", "invalid", path, `An extension url must not name a version, and '${url.slice(0, 200)}' is not known with or without it`)
    }
  }
  if (structure === undefined) {
    // A definition without a snapshot (differential only) cannot check the content, but states its contexts.
    const sd = reporter.registry.catalog.structureDefinition(unversioned)
    if (sd !== undefined) {
      if (sd.type === "Extension") checkContext(reporter, sd.url, sd.resource, value, path, node.name === "modifierExtension", site)
      reporter.report("information", "not-supported", path, `The definition of the extension ${url} has no snapshot: its content was not checked`)
      return undefined
    }
  }
  if (structure !== undefined) {
    if (structure.type !== "Extension") {
      reporter.report("error", "extension", path, `${url} is a ${structure.type} definition, not an extension`)
      return undefined
    }
    checkExtension(reporter, structure, value, path, node, site)
    return structure
  }
  const version = crossVersion.exec(unversioned)
  if (version !== null) {
    if (!fhirVersions.has(version[1]!)) {
      reporter.report("error", "invalid", path, `The cross-version extension url ${url} names an unknown FHIR version '${version[1]}'`)
    } else {
      reporter.report("warning", "extension", path, `The cross-version extension ${url} (element ${version[2]} of FHIR ${version[1]}) cannot be interpreted here: it was not checked`)
    }
    return undefined
  }
  if (acceptedUnknown(unversioned, allowedDomains, examples)) return undefined
  if (unversioned.startsWith(coreNamespace)) {
    reporter.report("warning", "extension", path, `Unknown extension ${url}: HL7 defines further extensions in this namespace (hl7.fhir.uv.extensions), which the server does not have; it was not checked`)
  } else {
    reporter.report("error", "extension", path, `Unknown extension ${url}: the server has no definition for it, so it is not allowed here (validation.allowed_extension_domains lists the domains accepted without one)`)
    if (isExampleUrl(unversioned)) {
      reporter.report("error", "invalid", `${path}.url`, `Example URLs are not allowed in this context (${url}): an extension url on an example domain (validation.allowed_extension_domains or validation.allow_example_urls accepts them)`)
    }
  }
  return undefined
}

const modifierOf = (node: ElementNode): boolean => node.definition.json["isModifier"] === true

/** Checks of an extension whose definition is known: placement, context, status and shape. */
export const checkExtension = (
  reporter: ExtensionReporter,
  structure: CompiledStructure,
  value: Record<string, unknown>,
  path: string,
  node: ElementNode,
  site: Site
): void => {
  const asModifier = node.name === "modifierExtension"
  const url = structure.url
  if (modifierOf(node) !== asModifier) {
    reporter.report("error", "structure", path, asModifier
      ? `The element ${node.path} holds modifier extensions, but its definition does not mark it as a modifier`
      : `The element ${node.path} holds extensions, but its definition marks it as a modifier`)
  }
  const definedAsModifier = modifierOf(structure.root)
  if (asModifier && !definedAsModifier) {
    reporter.report("error", "structure", path, `The extension ${url} is not a modifier extension: it must be used in 'extension', not 'modifierExtension'`)
  } else if (!asModifier && definedAsModifier) {
    reporter.report("error", "structure", path, `The extension ${url} is a modifier extension: it must be used in 'modifierExtension', not 'extension'`)
  }
  const sd = reporter.registry.catalog.structureDefinition(url)?.resource
  if (sd !== undefined) checkContext(reporter, url, sd, value, path, asModifier, site)
  const status = definitionStatus(reporter.registry, structure)
  if (status !== undefined) reporter.report("information", "business-rule", path, `The extension ${url} is ${status}`)
  const types = valueTypes(structure)
  if (types.length === 0) return
  let hasValue = false
  for (const key in value) {
    if (key.startsWith("value") || key.startsWith("_value")) {
      hasValue = true
      break
    }
  }
  if (hasValue) return
  if (Array.isArray(value["extension"])) {
    const valueNode = structure.root.children.list.find((child) => child.name === "value")
    if (valueNode !== undefined && valueNode.min > 0) {
      reporter.report("error", "structure", path, `The extension ${url} is a simple extension: it must have a value (${types.join(", ")}), not extensions`)
    }
  } else {
    reporter.report("error", "structure", path, `The extension ${url} is a simple extension: it must have a value (${types.join(", ")})`)
  }
}

/** The types a simple extension's value may have; none for a complex extension (value[x] max 0). */
const valueTypeCache = new WeakMap<CompiledStructure, ReadonlyArray<string>>()
const valueTypes = (structure: CompiledStructure): ReadonlyArray<string> => {
  let types = valueTypeCache.get(structure)
  if (types === undefined) {
    const valueNode = structure.root.children.list.find((child) => child.name === "value")
    types = valueNode === undefined || valueNode.max === 0 ? [] : valueNode.types.map((type) => type.code)
    valueTypeCache.set(structure, types)
  }
  return types
}

const standardsStatus = "http://hl7.org/fhir/StructureDefinition/structuredefinition-standards-status"

/** deprecated or withdrawn (its standards-status), or retired (its status); undefined otherwise. */
const statusCache = new WeakMap<CompiledStructure, string | null>()
const definitionStatus = (registry: Registry, structure: CompiledStructure): string | undefined => {
  let status = statusCache.get(structure)
  if (status === undefined) {
    status = null
    const sd = registry.catalog.structureDefinition(structure.url)?.resource
    const extensions = sd !== undefined && Array.isArray(sd["extension"]) ? sd["extension"] : []
    for (const extension of extensions) {
      if (isObject(extension) && extension["url"] === standardsStatus) {
        const code = extension["valueCode"]
        if (code === "deprecated" || code === "withdrawn") status = code
      }
    }
    if (status === null && sd?.["status"] === "retired") status = "retired"
    statusCache.set(structure, status)
  }
  return status ?? undefined
}

/** A primitive with a fixed value takes no extensions: the fixed value (a primitive) has none. */
export const fixedWithExtensions = (node: ElementNode): string =>
  `${node.path} has a fixed value, and the fixed value has no extensions: none are allowed here`

/** `Patient.active.extension[0]` is used on `Patient.active`. */
const containerPath = (path: string): string => {
  const dot = path.lastIndexOf(".")
  return dot < 0 ? path : path.slice(0, dot)
}

// ---- contexts ----

const fhirType = "http://hl7.org/fhir/StructureDefinition/structuredefinition-fhir-type"
const regex = "http://hl7.org/fhir/StructureDefinition/regex"
/** R4 uses these on many kinds of element, beyond the contexts its definitions state. */
const anywhere = new Set([
  "http://hl7.org/fhir/StructureDefinition/structuredefinition-normative-version",
  "http://hl7.org/fhir/StructureDefinition/capabilitystatement-expectation",
  "http://hl7.org/fhir/StructureDefinition/capabilitystatement-prohibited"
])
/** Any extension may be used in the example, fixed and pattern values of an ElementDefinition. */
const anyExtensionPaths = new Set(["ElementDefinition.example.value", "ElementDefinition.pattern", "ElementDefinition.fixed"])

interface Context {
  readonly type: string
  readonly expression: string
}

/** StructureDefinition.context, as the reference validator reads it (`adjusted`), once per definition (the catalog's JSON of it). */
const contextsRead = new WeakMap<object, ReadonlyArray<Context>>()
const rawContexts = (sd: Record<string, unknown>): ReadonlyArray<Context> => {
  let contexts = contextsRead.get(sd)
  if (contexts === undefined) {
    const list = Array.isArray(sd["context"]) ? sd["context"] : []
    const stated = list.flatMap((context) => {
      if (!isObject(context) || typeof context["type"] !== "string" || typeof context["expression"] !== "string") return []
      return [{ type: context["type"], expression: context["expression"] }]
    })
    contexts = typeof sd["url"] === "string" ? adjusted(sd["url"], stated) : stated
    contextsRead.set(sd, contexts)
  }
  return contexts
}

/**
 * A definition's contexts as the reference validator reads them: the fhir-type extension belongs on
 * ElementDefinition.type (its R4 definition says ElementDefinition.type.code), regex also on
 * ElementDefinition.type, and normative-version, capabilitystatement-expectation and -prohibited anywhere.
 */
const adjusted = (url: string, stated: ReadonlyArray<Context>): ReadonlyArray<Context> => {
  let contexts = stated
  if (url === fhirType && contexts.length > 0) contexts = [{ type: "element", expression: "ElementDefinition.type" }, ...contexts.slice(1)]
  if (url === regex) contexts = [...contexts, { type: "element", expression: "ElementDefinition.type" }]
  if (anywhere.has(url) && contexts.length > 0) contexts = [{ type: "element", expression: "Element" }, ...contexts.slice(1)]
  return contexts
}

const withoutChoice = (path: string): string => path.replace("[x]", "")

/** `CapabilityStatement.rest.operation` is written as a reference to `CapabilityStatement.rest.resource.operation`. */
const sameElement = (registry: Registry, expression: string, path: string): boolean => {
  const node = registry.forType(expression.slice(0, expression.indexOf(".")))?.byId.get(expression)
  return node !== undefined && contextPath(node) === path
}

/** Whether an element context names the owner: its path, its type or a type it derives from, or the same path on a base type. */
const elementMatches = (registry: Registry, expression: string, owner: Owner): boolean => {
  if (expression === "Element" || expression === "Any") return true
  if (expression === "CanonicalResource") return canonicalResourceTypes.has(owner.path)
  const path = withoutChoice(owner.path)
  const wanted = withoutChoice(expression)
  if (wanted === path) return true
  if (!wanted.includes(".")) return registry.ancestors(owner.type).includes(wanted)
  if (sameElement(registry, expression, owner.path)) return true
  // `DomainResource.text` names `Patient.text`: the same element on a type the owner's root type derives from.
  const dot = path.indexOf(".")
  if (dot < 0) return false
  const tail = path.slice(dot)
  if (!wanted.endsWith(tail)) return false
  return registry.ancestors(path.slice(0, dot)).some((type) => type + tail === wanted)
}

/**
 * Why the extension defined by `structure` does not belong on `owner`, or undefined when it does. A context
 * matches the element's path (a contentReference element by the path it refers to), its type or a type it
 * derives from, the same element of a base type, `Element`, or for an `extension` context the url of the
 * extension it sits in (or whose value it sits on). A context naming a profile (`url#path`) is matched on
 * its path. `fhirpath` contexts are not judged. Extensions in ElementDefinition's example, fixed and pattern
 * values are allowed anywhere.
 */
export const contextProblem = (
  registry: Registry,
  url: string,
  contexts: ReadonlyArray<Context>,
  owner: Owner,
  modifier = false,
  fhirpathMatches: (expression: string) => boolean = () => true
): string | undefined => {
  if (contexts.length === 0) return undefined
  if (anyExtensionPaths.has(withoutChoice(owner.path))) return undefined
  for (const { type, expression } of contexts) {
    if (type === "fhirpath") {
      if (fhirpathMatches(expression)) return undefined
      continue
    }
    if (type === "extension") {
      if (owner.url === expression) return undefined
      continue
    }
    if (type !== "element") continue
    const hash = expression.indexOf("#")
    if (elementMatches(registry, hash < 0 ? expression : expression.slice(hash + 1), owner)) return undefined
  }
  const allowed = contexts.map(({ type, expression }) => (type === "element" ? expression : `${type} ${expression}`)).join(", ")
  const kind = modifier ? "modifier extension" : "extension"
  const here = owner.type === owner.path ? owner.path : `${owner.path} (${owner.type})`
  return `The ${kind} ${url} is not allowed on ${here}: its definition allows it on ${allowed}`
}

// ---- fhirpath contexts and context invariants ----

type Evaluator = (data: unknown, vars: Record<string, unknown>) => ReadonlyArray<unknown>

/** Compiled per definition (the catalog's JSON of it), so per catalog generation; null when it does not compile. */
const evaluators = new WeakMap<object, Map<string, Evaluator | null>>()
const evaluator = (sd: object, expression: string, base: string | undefined): Evaluator | undefined => {
  let byExpression = evaluators.get(sd)
  if (byExpression === undefined) evaluators.set(sd, (byExpression = new Map()))
  const key = `${base ?? ""}|${expression}`
  let compiled = byExpression.get(key)
  if (compiled === undefined) {
    try {
      compiled = fhirpath.compile(base === undefined ? expression : { base, expression }, r4, { resolveInternalTypes: false, traceFn: () => undefined }) as Evaluator
    } catch {
      compiled = null
    }
    byExpression.set(key, compiled)
  }
  return compiled ?? undefined
}

/** Whether a result of fhirpath.js (unresolved nodes) is the given JSON object, or the `_name` part of a primitive. */
const isNode = (item: unknown, target: unknown): boolean => {
  if (item === target) return true
  if (!isObject(item)) return false
  return (item as { data?: unknown }).data === target || (item as { _data?: unknown })._data === target
}

/**
 * The context check of an extension whose definition is `sd`: its contexts (`fhirpath` ones evaluated on the
 * resource: the element must be among the results) and then its context invariants, evaluated on the element.
 * A fhirpath expression that does not compile or throws is taken as allowing the use.
 */
const checkContext = (
  reporter: ExtensionReporter,
  url: string,
  sd: Record<string, unknown>,
  extension: Record<string, unknown>,
  path: string,
  modifier: boolean,
  site: Site
): void => {
  fhirVersionProblems(reporter, url, sd, path)
  const owner = site.owner
  if (owner === undefined) return
  const where = containerPath(path)
  const fhirpathMatches = (expression: string): boolean => {
    const evaluate = evaluator(sd, expression, undefined)
    const target = site.ownerValue
    if (evaluate === undefined || target === undefined) return true
    try {
      return evaluate(site.scope.resource, { resource: site.scope.resource, rootResource: site.scope.rootResource }).some((item) => isNode(item, target))
    } catch {
      return true
    }
  }
  const problem = contextProblem(reporter.registry, url, rawContexts(sd), owner, modifier, fhirpathMatches)
  if (problem !== undefined) {
    reporter.report("error", "extension", where, problem)
    return
  }
  const invariants = Array.isArray(sd["contextInvariant"]) ? sd["contextInvariant"] : []
  // On a primitive the element is its value, which the `_name` object does not hold: not judged there.
  if (invariants.length === 0 || site.ownerValue === undefined || owner.type.charAt(0) !== owner.type.charAt(0).toUpperCase()) return
  for (const invariant of invariants) {
    if (typeof invariant !== "string") continue
    const evaluate = evaluator(sd, invariant, owner.path)
    if (evaluate === undefined) continue
    let result: ReadonlyArray<unknown>
    try {
      result = evaluate(site.ownerValue, { resource: site.scope.resource, rootResource: site.scope.rootResource, extension })
    } catch {
      continue
    }
    const holds = result.length > 0 && !(result.length === 1 && unwrap(result[0]) === false)
    if (!holds) {
      reporter.report("error", "extension", where, `The extension ${url} is not allowed on ${owner.path}: its context invariant '${invariant}' does not hold there`)
    }
  }
}

const unwrap = (item: unknown): unknown => (isObject(item) && "data" in item ? (item as { data: unknown }).data : item)
