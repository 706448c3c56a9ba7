/**
 * One pass over a resource's JSON against the compiled definitions
 * (https://hl7.org/fhir/R4/validation.html): unknown elements, JSON types, cardinality (choices and slices
 * included), primitive formats, fixed and pattern values, bindings, extensions, contained and nested
 * resources, and the profiles in meta.profile. Invariants are collected on the way and evaluated after
 * the walk, once the size of the resource is known. Bounded in depth and in the number of issues.
 */
import { isObject } from "../catalog/json.ts"
import { canonicalResourceRules, canonicalResourceTypes } from "./canonical.ts"
import { checkBinding } from "./codes.ts"
import { structureDefinitionConstraints } from "./constraints.ts"
import { contextPath, type Owner } from "./contexts.ts"
import { checkExtension, extensionDefinition, fixedWithExtensions } from "./extensions.ts"
import type { Children, CompiledStructure, ElementNode, TypeChoice } from "./compile.ts"
import type { Invariant, Scope } from "./invariants.ts"
import type { Issue, Severity } from "./Issue.ts"
import { containedTypes, entryTargets, type FoundReference } from "./referencePolicy.ts"
import type { Destination } from "./references.ts"
import { checkValue, isResourceId, regexes } from "./primitives.ts"
import { exampleUrlProblem, isExampleUrl } from "./exampleUrls.ts"
import { isDefiningUrl } from "./uris.ts"
import type { QuestionnaireLookup } from "./questionnaire/find.ts"
import {
  aggregationOf, aggregationProblem, canonicalTargetProblem, checkReference, duplicateContainedIds, internalUrlProblem, narrativeLinkProblems,
  targetProfileProblem
} from "./references.ts"
import type { Registry } from "./registry.ts"
import { resourceRules, typeRules } from "./rules.ts"
import { assignSlices, type SliceItem } from "./slicing.ts"
import { discriminatorPathProblem } from "./structureDefinition.ts"
import { equalsFixed, matchesPattern } from "./values.ts"
import { vitalSignsProfile } from "./vitalSigns.ts"
import { checkXhtml } from "./xhtml.ts"

export const maxDepth = 100
export const maxIssues = 500
/** Beyond this many elements, invariants that walk whole subtrees (descendants()) are not evaluated. */
export const largeResource = 50_000

export interface WalkOptions {
  /** `ignore`: contained resources are not validated (nor is dom-3, which asks that they be referred to). */
  readonly contained?: "check" | "ignore" | undefined
  /** Extension urls accepted without a definition (`validation.allowed_extension_domains`). */
  readonly allowedExtensionDomains?: ReadonlyArray<string> | undefined
  /** Validating examples: extensions on the example domains (example.org, acme.com) need no definition. */
  readonly examples?: boolean | undefined
  /** The time of the check (epoch milliseconds), from the caller's clock; without it no date is "far ahead". */
  readonly now?: number | undefined
  /** How the findings of the vital signs profile R4 implies by an Observation's code count (`validation.vital_signs`). */
  readonly vitalSigns?: "error" | "warning" | undefined
  /** `false`: the targets of references are not checked against target profiles (the walks that make that check). */
  readonly referenceTargets?: boolean | undefined
}

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

/** Whether a Reference type names target profiles other than the base types (compiled types are kept per catalog). */
const profiledTypes = new WeakMap<TypeChoice, boolean>()

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
  /** While inside a Bundle or Parameters resource: the fullUrls and `Type/id` of its resources, which its references may name. */
  private bundleTargets: ReadonlySet<string> | undefined
  /** While inside a Bundle resource: that Bundle (where a QuestionnaireResponse may find its Questionnaire). */
  bundle: Record<string, unknown> | undefined
  /** Questionnaires the caller can supply by canonical url (ValidateOptions.questionnaire). */
  questionnaires: QuestionnaireLookup | undefined
  /** The outermost Bundle being walked: a narrative's `#x` may point anywhere in it. */
  private outermostBundle: Record<string, unknown> | undefined
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
  /** The element ids met so far in the resource being walked (created on the first one). */
  private elementIds: Map<string, string> | undefined

  /** Extension urls accepted without a definition (`validation.allowed_extension_domains`). */
  readonly allowedExtensionDomains: ReadonlyArray<string>
  /** The year of the check (UTC), when the caller gave its time. */
  readonly year: number | undefined

  constructor(readonly registry: Registry, readonly options: WalkOptions = {}) {
    this.allowedExtensionDomains = options.allowedExtensionDomains ?? []
    this.year = options.now === undefined ? undefined : new Date(options.now).getUTCFullYear()
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
   * let other work in between (src/db/EventLoop.ts).
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
      if (invariant.key === "dom-3" && this.options.contained === "ignore") continue
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
    const contained = value["contained"]
    if (Array.isArray(contained) && contained.length > 1) {
      for (const { index, id } of duplicateContainedIds(contained)) {
        this.report("error", "duplicate", `${at}.contained[${index}]`, `Duplicate id for a contained resource: ${id}`)
      }
    }
    const outerTargets = this.bundleTargets
    const outerIds = this.elementIds
    this.elementIds = undefined
    const outerBundle = this.bundle
    if (type === "Bundle" || type === "Parameters") this.bundleTargets = entryTargets(value, outerTargets)
    if (type === "Bundle") {
      this.bundle = value
      this.outermostBundle ??= value
    }
    // A TooManyIssues throw ends the whole walk: nothing to restore then.
    this.against(value, structure, at, scope, depth)
    this.bundleTargets = outerTargets
    this.bundle = outerBundle
    this.elementIds = outerIds
    const meta = value["meta"]
    const claimed = isObject(meta) && Array.isArray(meta["profile"]) ? meta["profile"] : []
    for (const url of claimed) {
      if (typeof url === "string") this.profile(value, url, at, scope, depth, "warning")
    }
    for (const url of profiles) this.profile(value, url, at, scope, depth, "error")
    if (type === "Observation") {
      const implied = vitalSignsProfile(value)
      if (implied !== undefined && !claimed.includes(implied) && !profiles.includes(implied)) this.impliedProfile(value, implied, at, scope, depth)
    }
    resourceRules(type)?.(value, at, this)
    if (canonicalResourceTypes.has(type)) canonicalResourceRules(value, at, this)
    if (type === "StructureDefinition") structureDefinitionConstraints(value, at, this)
  }

  private profile(value: Record<string, unknown>, url: string, path: string, scope: Scope, depth: number, unknown: Severity): void {
    const structure = this.registry.structure(url)
    if (structure === undefined) {
      if (this.registry.catalog.structureDefinition(url) !== undefined) {
        // Validation is against snapshots; a differential alone is not expanded here.
        this.report("information", "not-supported", path, `Profile ${url} has no snapshot: the resource was not checked against it`)
      } else this.report(unknown, "not-found", path, `Profile ${url} is unknown to this server: the resource was not checked against it`)
      return
    }
    if (structure.type !== value["resourceType"] || structure.kind !== "resource") {
      this.report("error", "structure", path, `Profile ${url} is for ${structure.type}, not ${String(value["resourceType"])}`)
      return
    }
    if (structure.derivation === "specialization") return
    this.against(value, structure, path, scope, depth)
  }

  /**
   * A vital signs profile R4 requires of an Observation by its code (vitalSigns.ts). What the profile finds
   * beyond the resource's own issues is an error, as the HL7 reference validator has it; with `vitalSigns:
   * "warning"` a warning: published data (Synthea's blood pressures coded 55284-4 without 85354-9) does not
   * carry the codes the profiles fix, and a user loading it may choose not to refuse it.
   */
  private impliedProfile(value: Record<string, unknown>, url: string, path: string, scope: Scope, depth: number): void {
    const structure = this.registry.structure(url)
    if (structure === undefined || structure.type !== "Observation") return
    const probe = new Walk(this.registry, this.options)
    probe.root = this.root
    try {
      probe.against(value, structure, path, scope, depth)
      for (const _ of probe.evaluateInvariants()) { /* every step at once */ }
    } catch (error) {
      if (!(error instanceof TooManyIssues)) throw error
    }
    for (const issue of probe.issues) {
      if (this.seen.has(`${issue.severity}|${issue.code}|${issue.expression}|${issue.diagnostics}`)) continue
      const severity = (issue.severity === "error" || issue.severity === "fatal") && this.options.vitalSigns === "warning" ? "warning" : issue.severity
      this.report(severity, issue.code, issue.expression, `${issue.diagnostics} (vital signs profile ${url}, which R4 requires of this Observation by its code)`)
    }
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
      return 0
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
    const unreadable = discriminatorPathProblem(node.slicing?.discriminator ?? [])
    if (unreadable !== undefined) {
      items.forEach((_, i) => this.report("error", "processing", `${path}[${i}]`, `Slicing cannot be evaluated: ${unreadable}`))
      return undefined
    }
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
    if (node.slicing?.ordered === true) {
      // Ordered slicing: the items of each slice come after those of the slices before it; with `openAtEnd`
      // the items that fit no slice come last (https://hl7.org/fhir/R4/profiling.html#slicing).
      let highest = -1
      let unsliced = false
      for (let i = 0; i < assignment.length; i++) {
        const index = assignment[i]!
        if (index < 0) {
          unsliced = true
          continue
        }
        if (index < highest || (unsliced && node.slicing.rules === "openAtEnd")) {
          this.report("error", "structure", `${path}[${i}]`, `${node.path}: this item of slice '${slices[index]!.sliceName}' is out of order: the slicing is ordered`)
          break
        }
        highest = index
      }
    }
    slices.forEach((slice, index) => {
      const count = counts[index]!
      if (count < slice.min) this.report("error", "required", path, `${node.path}: slice '${slice.sliceName}' requires at least ${slice.min}, but found ${count}`)
      if (count > slice.max) this.report("error", "structure", path, `${node.path}: slice '${slice.sliceName}' allows at most ${slice.max}, but found ${count}`)
    })
    return assignment.map((index) => (index >= 0 ? slices[index]! : node))
  }

  /** Element ids are unique within a resource (https://hl7.org/fhir/R4/element.html: they are used for internal references). */
  private elementId(id: string, path: string): void {
    const ids = (this.elementIds ??= new Map())
    const first = ids.get(id)
    if (first === undefined) ids.set(id, path)
    else if (first !== path) this.report("error", "business-rule", path, `Duplicate id value '${id.slice(0, 80)}': ${first} has the same id`)
  }

  /** Whether a value meets a profile (for profile discriminators): no error when checked against it alone. */
  private conforms(value: unknown, url: string, scope: Scope): boolean {
    const structure = this.registry.structure(url)
    if (structure === undefined) return false
    const probe = new Walk(this.registry, this.options)
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
      if (contained && this.options.contained === "ignore") return
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
        if (isObject(scope.rootResource)) {
          for (const problem of narrativeLinkProblems(value, scope.rootResource, this.outermostBundle)) this.report(problem.severity, "invalid", path, problem.diagnostics)
        }
      } else {
        if (code === "canonical" && typeof value === "string" && type.targetProfiles.length > 0) this.canonical(type, value, path)
        if (typeof value === "string" && value.charCodeAt(0) === 35 && (code === "uri" || code === "url" || code === "canonical") && isObject(scope.rootResource)) {
          const problem = internalUrlProblem(value, code, node.path, scope.rootResource, this.outermostBundle)
          if (problem !== undefined) this.report(problem.severity, "invalid", path, problem.diagnostics)
        }
        checkValue(this, code, value, path, node.path, node.definition.json, scope.resource !== scope.rootResource, this.owner?.url)
        if ((code === "uri" || code === "url" || code === "canonical") && this.options.examples !== true && typeof value === "string" && isExampleUrl(value)) {
          const problem = exampleUrlProblem(this.registry.catalog, code, value, node.path, isDefiningUrl(node.path), this.owner?.type === "Extension" ? this.owner.url : undefined)
          if (problem !== undefined) this.report("error", "invalid", path, problem)
        }
      }
    }
    if (extension !== undefined && extension !== null) {
      if (!isObject(extension)) {
        this.report("error", "structure", path, `The extensions of a primitive are a JSON object, not ${describe(extension)}`)
      } else {
        if (typeof extension["id"] === "string") this.elementId(extension["id"], path)
        this.object(extension, this.registry.primitiveParts(code), path, scope, depth + 1, false, { type: code, path: contextPath(node), url: this.extensionUrl(node) })
        if (Array.isArray(extension["extension"]) && isResourceId(node.definition.json)) {
          this.report("error", "business-rule", path, "Extensions are not allowed on Resource.id: the id is the resource's identity on the server")
        }
        if (!hasValue && !Array.isArray(extension["extension"])) {
          this.report("error", "invariant", path, "Constraint failed: ele-1: 'All FHIR elements must have a @value or children'")
        }
      }
    } else if (!hasValue) {
      this.report("error", "structure", path, "null is not allowed here: a primitive needs a value or extensions")
    }
    if (node.binding !== undefined && boundTypes.has(code)) this.binding(node, code, hasValue ? value : undefined, path, extension)
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
    const id = value["id"]
    if (typeof id === "string") this.elementId(id, path)
    // A StructureDefinition's snapshot and differential repeat the same element ids: each is a scope of its own.
    const outerIds = this.elementIds
    const ownIdScope = node.path === "StructureDefinition.snapshot" || node.path === "StructureDefinition.differential"
    if (ownIdScope) this.elementIds = undefined
    this.object(value, children, path, scope, depth, false, { type: base, path: contextPath(node), url })
    if (ownIdScope) this.elementIds = outerIds
    let meaningful = false
    for (const key in value) {
      if (key !== "id") {
        meaningful = true
        break
      }
    }
    if (!meaningful) this.report("error", "invariant", path, "Constraint failed: ele-1: 'All FHIR elements must have a @value or children'")
    if (node.binding !== undefined && boundTypes.has(type.code)) this.binding(node, type.code, value, path)
    if (type.code === "Reference") this.reference(node, type, value, path, scope)
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
      const structure = extensionDefinition(this, value, path, node, site, this.allowedExtensionDomains, this.options.examples === true)
      if (structure !== undefined) return structure
    }
    const structure = this.registry.forType(type.code)
    if (structure === undefined) this.report("information", "not-supported", path, `The type ${type.code} is not known here: the value was not checked`)
    return structure
  }

  private binding(node: ElementNode, code: string, value: unknown, path: string, extension?: unknown): void {
    const binding = node.binding!
    if (binding.strength !== "required" && binding.strength !== "extensible") return
    const problem = checkBinding(this.registry.membership(binding.valueSet), binding, code, value, extension)
    if (problem !== undefined) this.report(problem.severity, "code-invalid", path + problem.at, problem.diagnostics)
  }

  private reference(node: ElementNode, type: TypeChoice, value: Record<string, unknown>, path: string, scope: Scope): void {
    const targetTypes = type.targetProfiles.map((url) => this.registry.structure(url)?.type ?? url.slice(url.lastIndexOf("/") + 1))
    checkReference(value, targetTypes, path, this.registry.catalog.isResourceType, (s, c, e, d) => this.report(s, c, e, d))
    const reference = value["reference"]
    if (typeof reference !== "string") return
    // `#id` names a resource contained in the top resource that holds this one.
    let found: FoundReference = { expression: path, reference, targetTypes, contained: containedTypes(scope.rootResource) }
    // Target profiles other than the base types, and aggregation modes, come with profiles: rare.
    let profiled = profiledTypes.get(type)
    if (profiled === undefined) {
      profiled = type.targetProfiles.some((url, i) => url !== `http://hl7.org/fhir/StructureDefinition/${targetTypes[i]}`)
      profiledTypes.set(type, profiled)
    }
    const aggregation = aggregationOf(node.definition.json)
    if (profiled) found = { ...found, targetProfiles: type.targetProfiles }
    if (aggregation.length > 0) found = { ...found, aggregation }
    this.references.push(this.bundleTargets === undefined ? found : { ...found, local: this.bundleTargets })
    if (profiled || aggregation.length > 0) this.localTarget(found, scope)
  }

  /**
   * A reference with target profiles or aggregation modes whose target is told without the Bundle's rules: a
   * contained resource (`#id`), a resource of the Parameters around it, or, outside any Bundle, nothing local.
   * The Bundle's references are resolved by its rule (bundle.ts), which calls `referenceTarget`.
   */
  private localTarget(found: FoundReference, scope: Scope): void {
    const reference = found.reference
    if (reference.startsWith("#")) {
      if (reference === "#") return
      const contained = isObject(scope.rootResource) && Array.isArray(scope.rootResource["contained"]) ? scope.rootResource["contained"] : []
      const target = contained.find((item) => isObject(item) && item["id"] === reference.slice(1))
      this.referenceTarget(found, isObject(target) ? target : undefined, "contained", { resource: target, rootResource: scope.rootResource })
    } else if (this.bundle === undefined) {
      const local = this.bundleTargets?.has(reference) === true
      // Outside a Bundle a `bundled` mode is not held against a reference: a transaction's entries are
      // validated one by one, their references already rewritten to the resources written.
      if (!local && found.aggregation?.includes("bundled") === true) return
      this.referenceTarget(found, undefined, local ? "bundled" : "elsewhere", scope)
    }
  }

  /** What the aggregation modes and target profiles of a reference's element say of the target it resolved to (undefined: none). */
  referenceTarget(found: FoundReference, target: Record<string, unknown> | undefined, destination: Destination, scope?: Scope): void {
    const aggregation = aggregationProblem(found.aggregation ?? [], target === undefined && destination !== "bundled" ? "elsewhere" : destination, found.reference)
    if (aggregation !== undefined) this.report("error", "structure", found.expression, aggregation)
    if (target === undefined || found.targetProfiles === undefined || this.options.referenceTargets === false) return
    const targetScope = scope ?? { resource: target, rootResource: target }
    const problem = targetProfileProblem(found.reference, target, found.targetProfiles, (url) => this.registry.structure(url)?.type, (url) => {
      const structure = this.registry.structure(url)
      if (structure === undefined || structure.kind !== "resource") return [`${url} is not a resource profile known here`]
      const probe = new Walk(this.registry, { ...this.options, referenceTargets: false })
      probe.root = structure.type
      try {
        probe.against(target, structure, structure.type, targetScope, 0)
        for (const _ of probe.evaluateInvariants()) { /* every step at once */ }
      } catch (error) {
        if (!(error instanceof TooManyIssues)) throw error
      }
      return probe.issues.filter((issue) => issue.severity === "error" || issue.severity === "fatal").map((issue) => `${issue.expression}: ${issue.diagnostics}`)
    })
    if (problem !== undefined) this.report(problem.severity, "structure", found.expression, problem.diagnostics)
  }

  /** A canonical naming a conformance resource the server holds: of a type its element allows. */
  private canonical(type: TypeChoice, url: string, path: string): void {
    const targetTypes = type.targetProfiles.map((profile) => this.registry.structure(profile)?.type ?? profile.slice(profile.lastIndexOf("/") + 1))
    const problem = canonicalTargetProblem(this.registry.catalog, url, targetTypes)
    if (problem !== undefined) this.report(problem.severity, "invalid", path, problem.diagnostics)
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
