/**
 * One pass over a resource's JSON against the compiled definitions
 * (https://hl7.org/fhir/R4/validation.html): unknown elements, JSON types, cardinality (choices and slices
 * included), primitive formats, fixed and pattern values, bindings, extensions, contained and nested
 * resources, and the profiles in meta.profile. Invariants are collected on the way and evaluated after
 * the walk, once the size of the resource is known. Bounded in depth and in the number of issues.
 */
import { isObject } from "../catalog/json.ts"
import { checkBinding, codeInSystemProblem } from "./codes.ts"
import { contextPath, type Owner } from "./contexts.ts"
import { checkExtension, extensionDefinition, fixedWithExtensions } from "./extensions.ts"
import type { Children, CompiledStructure, ElementNode, TypeChoice } from "./compile.ts"
import type { Invariant, Scope } from "./invariants.ts"
import type { Issue, Severity } from "./Issue.ts"
import { containedTypes, entryTargets, type FoundReference } from "./referencePolicy.ts"
import { regexes } from "./primitives.ts"
import type { Registry } from "./registry.ts"
import { resourceRules, typeRules } from "./rules.ts"
import { assignSlices, type SliceItem } from "./slicing.ts"
import { equalsFixed, matchesPattern } from "./values.ts"
import { checkXhtml } from "./xhtml.ts"

export const maxDepth = 100
export const maxIssues = 500
/** Beyond this many elements, invariants that walk whole subtrees (descendants()) are not evaluated. */
export const largeResource = 50_000

export interface Deferred {
  readonly invariant: Invariant
  readonly data: unknown
  readonly scope: Scope
  readonly path: string
}

/** How many values an object has for an element, over its JSON names and their `_name` parts. */
const countOf = (value: Record<string, unknown>, node: ElementNode): number => {
  let count = 0
  for (const type of node.types) {
    const v = value[type.jsonName]
    const e = value[type.extensionName]
    count += Array.isArray(v) ? v.length : Array.isArray(e) ? e.length : v !== undefined || e !== undefined ? 1 : 0
  }
  return count
}

const idPattern = new RegExp(`^(?:${regexes["id"]})$`)

const describe = (value: unknown): string =>
  value === null ? "null" : Array.isArray(value) ? "an array" : typeof value === "object" ? "an object" : `${typeof value} ${JSON.stringify(value)?.slice(0, 40)}`

const abstractResources = new Set(["Resource", "DomainResource"])


const boundTypes = new Set(["code", "string", "uri", "Coding", "CodeableConcept"])

class TooManyIssues extends Error {}

/** Why a key is not allowed: not an element at all, or a type that a choice element does not take here. */
const unrecognized = (key: string, children: Children): string => {
  const name = key.charCodeAt(0) === 95 ? key.slice(1) : key
  const choice = children.list.find((node) =>
    node.choice && name.length > node.name.length && name.startsWith(node.name) && /[A-Z]/.test(name.charAt(node.name.length)))
  if (choice === undefined) return `Unrecognized property '${key}'`
  const allowed = choice.types.map((type) => type.code).join(", ")
  return `Unrecognized property '${key}': ${choice.path} takes ${allowed === "" ? "no type" : allowed} here`
}

export class Walk {
  readonly issues: Array<Issue> = []
  /** Every `Reference.reference` met, for the reference policy (referencePolicy.ts). */
  readonly references: Array<FoundReference> = []
  /** While inside a Bundle resource: the fullUrls and `Type/id` of its entries, which its references may name. */
  private bundleTargets: ReadonlySet<string> | undefined
  private readonly seen = new Set<string>()
  private readonly deferred: Array<Deferred> = []
  private owner: Owner | undefined
  /** The object `owner` describes: what fhirpath extension contexts are evaluated against. */
  private ownerValue: Record<string, unknown> | undefined
  private elements = 0
  private errors = 0
  private others = 0
  private tooDeep = false
  private root = ""

  /** Extension urls accepted without a definition (`validation.allowed_extension_domains`). */
  readonly allowedExtensionDomains: ReadonlyArray<string>

  constructor(readonly registry: Registry, options?: { readonly allowedExtensionDomains?: ReadonlyArray<string> | undefined }) {
    this.allowedExtensionDomains = options?.allowedExtensionDomains ?? []
  }

  report(severity: Severity, code: string, expression: string, diagnostics: string): void {
    const key = `${severity}|${code}|${expression}|${diagnostics}`
    if (this.seen.has(key)) return
    this.seen.add(key)
    const serious = severity === "error" || severity === "fatal"
    if (serious ? this.errors >= maxIssues : this.others >= maxIssues) {
      if (serious) {
        this.issues.push({ severity: "error", code: "too-costly", expression, diagnostics: `More than ${maxIssues} errors: validation stopped here` })
        throw new TooManyIssues()
      }
      if (this.others === maxIssues) {
        this.issues.push({ severity: "information", code: "too-costly", expression, diagnostics: `More than ${maxIssues} warnings: the rest are left out` })
        this.others++
      }
      return
    }
    if (serious) this.errors++
    else this.others++
    this.issues.push({ severity, code, expression, diagnostics })
  }

  /** The invariants the walk met, with the element each applies to (for tests and diagnostics). */
  get collected(): ReadonlyArray<Deferred> {
    return this.deferred
  }

  /** Walks a top-level resource, then evaluates the invariants collected. */
  run(resource: unknown, path: string, profiles: ReadonlyArray<string>): void {
    const steps = this.steps(resource, path, profiles)
    while (!steps.next().done) { /* every step at once */ }
  }

  /**
   * `run` in steps: the walk in one, then the invariants a few at a time, each step yielding the work it
   * did (units of about 2 µs: a resource's invariants can take longer than its walk), so that a caller may
   * let other work in between (src/store/EventLoop.ts).
   */
  *steps(resource: unknown, path: string, profiles: ReadonlyArray<string>): Generator<number, void, undefined> {
    this.root = path !== "" ? path : isObject(resource) && typeof resource["resourceType"] === "string" ? resource["resourceType"] : ""
    try {
      this.resource(resource, path, undefined, 0, undefined, profiles)
      yield Math.ceil(this.elements / 4)
      yield* this.evaluateInvariants()
    } catch (error) {
      if (!(error instanceof TooManyIssues)) throw error
    }
  }

  private *evaluateInvariants(): Generator<number, void, undefined> {
    if (this.tooDeep) return
    const large = this.elements > largeResource
    let skipped = 0
    let evaluated = 0
    for (const { invariant, data, scope, path } of this.deferred) {
      if ((++evaluated & 15) === 0) yield 8
      const outcome = invariant.check(data, scope, large)
      if (outcome === "pass") continue
      if (outcome === "skipped") skipped++
      else if (outcome === "fail") this.report(invariant.severity, "invariant", path, `Constraint failed: ${invariant.key}: '${invariant.human}'`)
      else this.report("warning", "invariant", path, outcome.error)
    }
    if (skipped > 0) {
      this.report("information", "too-costly", this.root, `${skipped} invariants that read whole subtrees were not evaluated: the resource has more than ${largeResource} elements`)
    }
  }

  private defer(invariants: ReadonlyArray<Invariant>, data: unknown, scope: Scope, path: string, skip?: ReadonlyArray<Invariant>): void {
    for (const invariant of invariants) {
      if (skip !== undefined && skip.some((other) => other.key === invariant.key)) continue
      this.deferred.push({ invariant, data, scope, path })
    }
  }

  /** A resource at the top, contained (`scope` is its container's) or nested (Bundle.entry.resource). */
  resource(
    value: unknown,
    path: string,
    container: Scope | undefined,
    depth: number,
    declared: string | undefined,
    profiles: ReadonlyArray<string> = []
  ): void {
    if (!isObject(value)) {
      this.report("error", "structure", path, `A resource is a JSON object, not ${describe(value)}`)
      return
    }
    const type = value["resourceType"]
    if (typeof type !== "string") {
      this.report("error", "structure", path, "The resource has no resourceType")
      return
    }
    const structure = this.registry.catalog.isResourceType(type) ? this.registry.forType(type) : undefined
    if (structure === undefined) {
      this.report("error", "structure", path, `Unknown resource type '${type}'`)
      return
    }
    if (structure.root.children.list.length === 0) {
      // A definition without snapshot elements (a package that ships differentials only) cannot be checked against.
      this.report("information", "not-supported", path, `The StructureDefinition of ${type} has no snapshot elements: the resource was not checked against it`)
      return
    }
    if (declared !== undefined && !abstractResources.has(declared) && declared !== type) {
      this.report("error", "structure", path, `A ${declared} is expected here, not a ${type}`)
    }
    const at = path === "" ? type : path
    const scope: Scope = { resource: value, rootResource: container?.rootResource ?? value }
    const id = value["id"]
    if (typeof id === "string" && !idPattern.test(id)) {
      this.report("error", "value", `${at}.id`, `Invalid resource id '${id.slice(0, 80)}': an id is 1 to 64 letters, digits, '-' and '.'`)
    }
    const outerTargets = this.bundleTargets
    if (type === "Bundle") this.bundleTargets = entryTargets(value, outerTargets)
    // A TooManyIssues throw ends the whole walk: nothing to restore then.
    this.against(value, structure, at, scope, depth)
    this.bundleTargets = outerTargets
    const meta = value["meta"]
    const claimed = isObject(meta) && Array.isArray(meta["profile"]) ? meta["profile"] : []
    for (const url of claimed) {
      if (typeof url === "string") this.profile(value, url, at, scope, depth, "warning")
    }
    for (const url of profiles) this.profile(value, url, at, scope, depth, "error")
    resourceRules(type)?.(value, at, this)
  }

  private profile(value: Record<string, unknown>, url: string, path: string, scope: Scope, depth: number, unknown: Severity): void {
    const structure = this.registry.structure(url)
    if (structure === undefined) {
      this.report(unknown, "not-found", path, `Profile ${url} is unknown to this server: the resource was not checked against it`)
      return
    }
    if (structure.type !== value["resourceType"] || structure.kind !== "resource") {
      this.report("error", "structure", path, `Profile ${url} is for ${structure.type}, not ${String(value["resourceType"])}`)
      return
    }
    if (structure.derivation === "specialization") return
    this.against(value, structure, path, scope, depth)
  }

  private against(value: Record<string, unknown>, structure: CompiledStructure, path: string, scope: Scope, depth: number): void {
    this.object(value, structure.root.children, path, scope, depth, true, { type: structure.type, path: structure.type })
    this.defer(this.registry.invariants(structure.root, undefined), value, scope, path)
  }

  /** The members of an object against the elements it may have. */
  object(value: Record<string, unknown>, children: Children, path: string, scope: Scope, depth: number, resource: boolean, owner: Owner): void {
    if (depth > maxDepth) {
      if (!this.tooDeep) this.report("error", "too-costly", path, `The content is nested more than ${maxDepth} levels deep`)
      this.tooDeep = true
      return
    }
    const outer = this.owner
    const outerValue = this.ownerValue
    this.owner = owner
    this.ownerValue = value
    try {
      this.members(value, children, path, scope, depth, resource)
    } finally {
      this.owner = outer
      this.ownerValue = outerValue
    }
  }

  private members(value: Record<string, unknown>, children: Children, path: string, scope: Scope, depth: number, resource: boolean): void {
    let choices: Array<ElementNode> | undefined
    for (const key in value) {
      if (resource && key === "resourceType") continue
      const underscore = key.charCodeAt(0) === 95
      const name = underscore ? key.slice(1) : key
      if (underscore && Object.hasOwn(value, name)) continue
      const entry = children.byJsonName.get(name)
      if (entry === undefined || (underscore && !entry.type.primitive)) {
        this.report("error", "structure", `${path}.${key}`, unrecognized(key, children))
        continue
      }
      const node = entry.node
      const count = this.element(node, entry.type, underscore ? undefined : value[key], value[entry.type.extensionName], path, scope, depth)
      if (node.choice) {
        if (choices?.includes(node)) {
          this.report("error", "structure", `${path}.${node.name}[x]`, `${node.path}: only one of ${node.types.map((t) => t.jsonName).join(", ")} may be given`)
        }
        ;(choices ??= []).push(node)
      }
      if (count > node.max) this.report("error", "structure", `${path}.${key}`, `${node.path}: at most ${node.max} allowed, but found ${count}`)
    }
    for (const node of children.required) {
      const count = countOf(value, node)
      if (count < node.min) {
        this.report("error", "required", path, `${node.path}: minimum required = ${node.min}, but only found ${count}`)
      }
      if (count === 0) {
        for (const slice of node.slices) {
          if (slice.min > 0) this.report("error", "required", path, `${node.path}: slice '${slice.sliceName}' requires at least ${slice.min}, but found 0`)
        }
      }
    }
  }

  /** One element of an object: its value (an array for a repeating element) and its `_name` part. */
  private element(node: ElementNode, type: TypeChoice, value: unknown, extension: unknown, parent: string, scope: Scope, depth: number): number {
    const path = node.choice ? `${parent}.${node.name}.ofType(${type.code})` : `${parent}.${node.name}`
    if (node.max === 0) {
      this.report("error", "structure", path, `${node.path} is not allowed here (max 0)`)
      return 1
    }
    if (!type.primitive && extension !== undefined) {
      this.report("error", "structure", `${parent}._${type.jsonName}`, `Unrecognized property '_${type.jsonName}': ${type.code} is not a primitive type`)
      extension = undefined
    }
    if (!node.array) {
      if (Array.isArray(value) || Array.isArray(extension)) {
        this.report("error", "structure", path, `${node.path} has at most one value: it cannot be a JSON array`)
        return 1
      }
      this.item(node, type, value, extension, path, scope, depth)
      return 1
    }
    if ((value !== undefined && !Array.isArray(value)) || (extension !== undefined && extension !== null && !Array.isArray(extension))) {
      this.report("error", "structure", path, `${node.path} repeats: it must be a JSON array, not ${describe(Array.isArray(value) ? extension : value)}`)
      return 1
    }
    const values: ReadonlyArray<unknown> = Array.isArray(value) ? value : []
    const extensions: ReadonlyArray<unknown> = Array.isArray(extension) ? extension : []
    if ((Array.isArray(value) && value.length === 0) || (Array.isArray(extension) && extension.length === 0)) {
      this.report("error", "structure", path, "Array cannot be empty - the property should not be present if it has no values")
      return 0
    }
    if (values.length > 0 && extensions.length > 0 && values.length !== extensions.length) {
      this.report("error", "structure", path, `'${type.jsonName}' and '_${type.jsonName}' must have the same number of items`)
    }
    const length = Math.max(values.length, extensions.length)
    let targets: ReadonlyArray<ElementNode> | undefined
    if (node.slices.length > 0) targets = this.slices(node, type, values, path, scope)
    for (let i = 0; i < length; i++) {
      this.item(targets?.[i] ?? node, type, values[i], extensions[i], `${path}[${i}]`, scope, depth)
    }
    return length
  }

  /** Assigns items to slices, checks the slices' cardinality and closed slicing; the node for each item. */
  private slices(node: ElementNode, type: TypeChoice, values: ReadonlyArray<unknown>, path: string, scope: Scope): ReadonlyArray<ElementNode> | undefined {
    const items: Array<SliceItem> = values.map((value) => ({
      value,
      type: isObject(value) && typeof value["resourceType"] === "string" ? value["resourceType"] : type.code
    }))
    const assignment = assignSlices(node, items, (value, profile) => this.conforms(value, profile, scope))
    if (assignment === undefined) return undefined
    const slices = node.slices
    const counts = slices.map(() => 0)
    assignment.forEach((index, i) => {
      if (index >= 0) counts[index]!++
      else if (node.slicing?.rules === "closed") {
        this.report("error", "structure", `${path}[${i}]`, `${node.path}: this item matches none of the slices, and the slicing is closed`)
      }
    })
    slices.forEach((slice, index) => {
      const count = counts[index]!
      if (count < slice.min) this.report("error", "required", path, `${node.path}: slice '${slice.sliceName}' requires at least ${slice.min}, but found ${count}`)
      if (count > slice.max) this.report("error", "structure", path, `${node.path}: slice '${slice.sliceName}' allows at most ${slice.max}, but found ${count}`)
    })
    return assignment.map((index) => (index >= 0 ? slices[index]! : node))
  }

  /** Whether a value meets a profile (for profile discriminators): no error when checked against it alone. */
  private conforms(value: unknown, url: string, scope: Scope): boolean {
    const structure = this.registry.structure(url)
    if (structure === undefined) return false
    const probe = new Walk(this.registry, this)
    try {
      if (structure.kind === "resource") probe.resource(value, "", scope, 0, undefined, [url])
      else if (isObject(value)) probe.object(value, structure.root.children, "", scope, 0, false, { type: structure.type, path: structure.type })
      else return false
    } catch (error) {
      if (error instanceof TooManyIssues) return false
      throw error
    }
    return !probe.issues.some((issue) => issue.severity === "error" || issue.severity === "fatal")
  }

  private item(node: ElementNode, type: TypeChoice, value: unknown, extension: unknown, path: string, scope: Scope, depth: number): void {
    this.elements++
    // A slice's type may name a profile (an extension slice names its extension's definition).
    const chosen = node.types.find((t) => t.code === type.code) ?? type
    const code = chosen.code
    if (chosen.primitive) {
      this.primitive(node, chosen, value, extension, path, scope, depth)
      return
    }
    if (value === null || value === undefined) {
      this.report("error", "structure", path, "null is not allowed here")
      return
    }
    if (abstractResources.has(code) || this.registry.catalog.isResourceType(code)) {
      const contained = node.name === "contained"
      this.resource(value, path, contained ? scope : undefined, depth + 1, code)
      return
    }
    this.complex(node, chosen, value, path, scope, depth + 1)
  }

  private primitive(node: ElementNode, type: TypeChoice, value: unknown, extension: unknown, path: string, scope: Scope, depth: number): void {
    const code = type.code
    const hasValue = value !== undefined && value !== null
    if (hasValue) {
      const problem = type.check?.(value)
      if (problem !== undefined) this.report("error", "value", path, problem)
      else if (code === "xhtml" && typeof value === "string") {
        for (const problem of checkXhtml(value)) this.report("error", "value", path, problem)
      }
    }
    if (extension !== undefined && extension !== null) {
      if (!isObject(extension)) {
        this.report("error", "structure", path, `The extensions of a primitive are a JSON object, not ${describe(extension)}`)
      } else {
        this.object(extension, this.registry.primitiveParts(code), path, scope, depth + 1, false, { type: code, path: contextPath(node), url: this.extensionUrl(node) })
        if (!hasValue && !Array.isArray(extension["extension"])) {
          this.report("error", "invariant", path, "Constraint failed: ele-1: 'All FHIR elements must have a @value or children'")
        }
      }
    } else if (!hasValue) {
      this.report("error", "structure", path, "null is not allowed here: a primitive needs a value or extensions")
    }
    if (node.binding !== undefined && boundTypes.has(code)) this.binding(node, code, hasValue ? value : undefined, path)
    if (hasValue) this.fixedAndPattern(node, value, path)
    if (node.fixed !== undefined && isObject(extension) && Array.isArray(extension["extension"])) {
      this.report("error", "value", path, fixedWithExtensions(node))
    }
  }

  private complex(node: ElementNode, type: TypeChoice, value: unknown, path: string, scope: Scope, depth: number): void {
    if (!isObject(value)) {
      this.report("error", "structure", path, `A ${type.code} is a JSON object, not ${describe(value)}`)
      return
    }
    let children = node.children
    let typeRoot: ElementNode | undefined
    let base = type.code
    if (children.list.length === 0) {
      const resolved = this.typeDefinition(node, type, value, path, scope)
      if (resolved === undefined) return
      typeRoot = resolved.root
      base = resolved.type
      children = typeRoot.children
    } else if (type.code !== "BackboneElement" && type.code !== "Element") {
      typeRoot = this.registry.forType(type.code)?.root
    }
    const url = type.code === "Extension" ? (typeof value["url"] === "string" ? value["url"] : undefined) : this.extensionUrl(node)
    this.object(value, children, path, scope, depth, false, { type: base, path: contextPath(node), url })
    let meaningful = false
    for (const key in value) {
      if (key !== "id") {
        meaningful = true
        break
      }
    }
    if (!meaningful) this.report("error", "invariant", path, "Constraint failed: ele-1: 'All FHIR elements must have a @value or children'")
    if (node.binding !== undefined && boundTypes.has(type.code)) this.binding(node, type.code, value, path)
    if (type.code === "Coding") this.coding(value, path)
    if (type.code === "Reference" && typeof value["reference"] === "string") this.reference(type, value["reference"], path, scope)
    typeRules(type.code)?.(value, path, this)
    this.fixedAndPattern(node, value, path)
    const own = this.registry.invariants(node, node.path)
    if (own.length > 0) this.defer(own, value, scope, path)
    if (typeRoot !== undefined && typeRoot !== node) {
      const inherited = this.registry.invariants(typeRoot, base)
      if (inherited.length > 0) this.defer(inherited, value, scope, path, own)
    }
  }

  /** For the value of an extension, the extension's url (what an `extension` context names). */
  private extensionUrl(node: ElementNode): string | undefined {
    return node.name === "value" && this.owner?.type === "Extension" ? this.owner.url : undefined
  }

  /** The definition a complex value is checked against: its type's profile, its extension's definition (extensions.ts), or its type. */
  private typeDefinition(node: ElementNode, type: TypeChoice, value: Record<string, unknown>, path: string, scope: Scope): CompiledStructure | undefined {
    const site = type.code === "Extension" ? { owner: this.owner, ownerValue: this.ownerValue, scope } : undefined
    for (const profile of type.profiles) {
      const structure = this.registry.structure(profile)
      if (structure !== undefined) {
        if (structure.type === "Extension" && site !== undefined) checkExtension(this, structure, value, path, node, site)
        return structure
      }
    }
    if (site !== undefined) {
      const structure = extensionDefinition(this, value, path, node, site, this.allowedExtensionDomains)
      if (structure !== undefined) return structure
    }
    const structure = this.registry.forType(type.code)
    if (structure === undefined) this.report("information", "not-supported", path, `The type ${type.code} is not known here: the value was not checked`)
    return structure
  }

  private binding(node: ElementNode, code: string, value: unknown, path: string): void {
    const binding = node.binding!
    if (binding.strength !== "required" && binding.strength !== "extensible") return
    const problem = checkBinding(this.registry.membership(binding.valueSet), binding, code, value)
    if (problem !== undefined) this.report(problem.severity, "code-invalid", path + problem.at, problem.diagnostics)
  }

  private reference(type: TypeChoice, reference: string, path: string, scope: Scope): void {
    const targetTypes = type.targetProfiles.map((url) => this.registry.structure(url)?.type ?? url.slice(url.lastIndexOf("/") + 1))
    // `#id` names a resource contained in the top resource that holds this one.
    const found = { expression: path, reference, targetTypes, contained: containedTypes(scope.rootResource) }
    this.references.push(this.bundleTargets === undefined ? found : { ...found, local: this.bundleTargets })
  }

  private coding(value: Record<string, unknown>, path: string): void {
    const system = value["system"]
    const code = value["code"]
    if (typeof system !== "string" || typeof code !== "string") return
    const version = value["version"]
    const problem = codeInSystemProblem(this.registry.catalog, system, code, typeof version === "string" ? version : undefined)
    // Outside a required binding (checked on its own) an unknown code is a warning: published data such as
    // Synthea's carries a few, and R4 asks servers to hold such codes to bindings, not to every system.
    if (problem !== undefined) this.report("warning", "code-invalid", `${path}.code`, problem)
  }

  private fixedAndPattern(node: ElementNode, value: unknown, path: string): void {
    if (node.fixed !== undefined && !equalsFixed(value, node.fixed)) {
      this.report("error", "value", path, `The value must be exactly ${JSON.stringify(node.fixed).slice(0, 200)} (${node.path} is fixed)`)
    }
    if (node.pattern !== undefined && !matchesPattern(value, node.pattern)) {
      this.report("error", "value", path, `The value must match the pattern ${JSON.stringify(node.pattern).slice(0, 200)} (${node.path})`)
    }
  }
}
