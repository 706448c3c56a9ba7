/**
 * The common shapes of R4's SearchParameter expressions as plain functions over the JSON, giving what
 * fhirpath.js gives with `resolveInternalTypes: false` (https://hl7.org/fhirpath/N1/#path-selection): nodes
 * that carry their data, FHIR type, property name and parent, typed from the same R4 model fhirpath.js uses.
 *
 * Compiled: a path of element names from the resource, or from a type name that the resource is
 * (`Observation.code`, `Resource.id`, `name`); choice elements (`Observation.value` reads `valueQuantity`,
 * typed `Quantity`); `ofType(T)` (what `as T` becomes, see expressions.ts), with FHIR's type hierarchy;
 * `where(refIs('T'))` (what `where(resolve() is T)` becomes); `where(element='text')`; `extension('url')`;
 * `[n]`; parentheses. Anything else does not compile, and is left to fhirpath.js.
 *
 * A value the compiled function cannot read exactly as fhirpath.js would (an equality on a non-string)
 * throws `Unsupported`: the caller then evaluates that resource with fhirpath.js.
 */
import r4 from "fhirpath/fhir-context/r4"
import type { FhirNode } from "./nodes.ts"

/**
 * The type a reference names: its text (`Type/id`, an absolute URL ending in `Type/id`) or `Reference.type`;
 * what `resolve() is Type` reads here, as nothing is fetched.
 */
export const referencedType = (reference: unknown): string | undefined => {
  if (typeof reference !== "object" || reference === null) return undefined
  const json = reference as Readonly<Record<string, unknown>>
  const text = json["reference"]
  if (typeof text === "string") {
    const match = /(?:^|\/)([A-Z][A-Za-z]+)\/[A-Za-z0-9\-.]{1,64}(?:\/_history\/[^/]+)?$/.exec(text)
    if (match !== null) return match[1]
  }
  return typeof json["type"] === "string" ? json["type"] : undefined
}

/** A value met at run time that the compiled function does not read the way fhirpath.js does. */
export class Unsupported extends Error {}

class PathNode implements FhirNode {
  constructor(
    readonly data: unknown,
    readonly _data: unknown,
    readonly path: string | null,
    readonly fhirNodeDataType: string | null,
    readonly propName: string | undefined,
    readonly parentResNode: PathNode | null
  ) {}
}

const field = (data: unknown, key: string): unknown =>
  typeof data === "object" && data !== null ? (data as Readonly<Record<string, unknown>>)[key] : undefined

const resourceTypeOf = (data: unknown): string | undefined => {
  const type = field(data, "resourceType")
  if (!type) return undefined
  if (typeof type !== "string") throw new Unsupported("a resourceType that is not text")
  return type
}

/** A node as fhirpath.js makes it: a resource starts its own path. */
const node = (data: unknown, _data: unknown, parent: PathNode | null, path: string | null, type: string | null, propName: string | undefined) => {
  const resourceType = resourceTypeOf(data)
  return resourceType === undefined
    ? new PathNode(data, _data ?? null, path, type, propName, parent)
    : new PathNode(data, _data ?? null, resourceType, resourceType, propName, parent)
}

const isSome = (value: unknown) => value !== undefined && value !== null

interface Field {
  readonly key: string
  /** The key of the primitive's id and extensions (`_birthDate`). */
  readonly extraKey: string
  readonly path: string | null
  readonly type: string | null
}

interface Fields {
  /** One for a plain element, one per type for a choice element, tried in order. */
  readonly fields: ReadonlyArray<Field>
  readonly choice: boolean
}

/** Where the element `name` of a node at `parentPath` is read, as fhirpath.js's makeChildResNodes finds it with the R4 model. */
const fieldsOf = (parentPath: string | null, name: string): Fields => {
  if (parentPath === null) return { fields: [{ key: name, extraKey: `_${name}`, path: null, type: null }], choice: false }
  const childPath = r4.pathsDefinedElsewhere[`${parentPath}.${name}`] ?? `${parentPath}.${name}`
  const typed = (path: string, key: string): Field => ({
    key,
    extraKey: `_${key}`,
    type: r4.path2Type[path] ?? null,
    path: r4.path2TypeWithoutElements[path] ?? path
  })
  const choices = r4.choiceTypePaths[childPath]
  if (choices !== undefined) return { fields: choices.map((choice) => typed(childPath + choice, name + choice)), choice: true }
  return { fields: [typed(name === "extension" ? "Extension" : childPath, name)], choice: false }
}

type Children = (parent: PathNode, out: Array<PathNode>) => void

/** The children named `name` of a node; what a parent path reads is worked out once per path and expression. */
const childrenNamed = (name: string): Children => {
  const byPath = new Map<string | null, Fields>()
  return (parent, out) => {
    let fields = byPath.get(parent.path)
    if (fields === undefined) {
      fields = fieldsOf(parent.path, name)
      // Paths come from the model, or from the resourceType of contained data: keep the map small.
      if (byPath.size < 64) byPath.set(parent.path, fields)
    }
    const data = parent.data
    // fhirpath.js reads a name on whatever holds the value: a decimal object, a string's `length`, a boolean's `valueOf`.
    if (typeof data === "number" ? name !== "extension" : (typeof data === "string" || typeof data === "boolean") && name in Object(data)) {
      throw new Unsupported(`${name} of a ${typeof data}`)
    }
    let found: Field | undefined
    let value: unknown
    let extra: unknown
    for (const f of fields.fields) {
      value = field(data, f.key)
      extra = field(data, f.extraKey)
      if (value !== undefined || extra !== undefined) {
        found = f
        break
      }
    }
    if (found === undefined) {
      // A primitive's own children (its extensions) are in its `_` sibling; not so for a choice element.
      if (fields.choice) return
      found = fields.fields[0]
      if (found === undefined) return
      value = field(parent._data, name)
    }
    if (!isSome(value) && !isSome(extra)) return
    if (Array.isArray(value)) {
      const extras = Array.isArray(extra) ? extra : undefined
      for (let i = 0; i < value.length; i++) out.push(node(value[i], extras?.[i], parent, found.path, found.type, name))
      for (let i = value.length; i < (extras?.length ?? 0); i++) out.push(node(null, extras?.[i], parent, found.path, found.type, name))
      return
    }
    if (!isSome(value) && Array.isArray(extra)) {
      for (const item of extra) out.push(node(null, item, parent, found.path, found.type, name))
      return
    }
    out.push(node(value, extra, parent, found.path, found.type, name))
  }
}

/** The type names of the model (fhirpath.js keeps them beside the maps its typings declare). */
const availableTypes: ReadonlySet<unknown> =
  "availableTypes" in r4 && r4.availableTypes instanceof Set ? r4.availableTypes : new Set<unknown>()

const systemTypes = new Set(["Boolean", "String", "Integer", "Long", "Decimal", "Date", "DateTime", "Time", "Quantity"])

/** fhir2SystemAutomaticConversion of fhirpath.js: the System type a FHIR primitive converts to. */
const toSystem: Readonly<Record<string, string>> = {
  boolean: "Boolean", string: "String", uri: "String", code: "String", oid: "String", id: "String", uuid: "String",
  markdown: "String", base64Binary: "String", integer: "Integer", unsignedInt: "Integer", positiveInt: "Integer",
  integer64: "Long", decimal: "Decimal", date: "DateTime", dateTime: "DateTime", instant: "DateTime", time: "Time",
  Quantity: "Quantity"
}

const isType = (type: string, ancestor: string): boolean => {
  for (let t: string | undefined = type; t !== undefined; t = r4.type2Parent[t]) if (t === ancestor) return true
  return false
}

/** The System type fhirpath.js reads from a value the model does not type. */
const systemTypeOf = (data: unknown): string => {
  if (typeof data === "number") return Number.isInteger(data) ? "Integer" : "Decimal"
  if (typeof data === "bigint") return "Long"
  const name = typeof data
  return name[0]!.toUpperCase() + name.slice(1)
}

/** `node is name` (`convertible`: `ofType(name)`), name without a namespace, as fhirpath.js's TypeInfo decides. */
const nodeIs = (n: PathNode, name: string, convertible: boolean): boolean => {
  const type = n.fhirNodeDataType
  if (type === null) return systemTypeOf(n.data) === name
  if (type.startsWith("System.")) return type.slice(7) === name
  if (convertible && toSystem[type] === name) return true
  return isType(type, name)
}

type Step = (nodes: ReadonlyArray<PathNode>) => ReadonlyArray<PathNode>

const childStep = (name: string): Step => {
  const children = childrenNamed(name)
  return (nodes) => {
    const out: Array<PathNode> = []
    for (const n of nodes) {
      // fhirpath.js takes a resource for its own type name at every step (a contained `{resourceType: name}`).
      if (resourceTypeOf(n.data) === name) out.push(n)
      else children(n, out)
    }
    return out
  }
}

/** The first name of a path: the root when the root is of that type (`Observation`, `Resource`), else its child. */
const headStep = (name: string): Step => {
  const children = childrenNamed(name)
  return (nodes) => {
    const out: Array<PathNode> = []
    for (const n of nodes) {
      if (resourceTypeOf(n.data) === name || nodeIs(n, name, false)) out.push(n)
      else children(n, out)
    }
    return out
  }
}

const ofTypeStep = (name: string): Step => (nodes) => nodes.filter((n) => nodeIs(n, name, true))

const refIsStep = (type: string): Step => (nodes) => nodes.filter((n) => referencedType(n.data) === type)

const stringTypes = new Set(["string", "code", "id", "uri", "url", "canonical", "oid", "uuid", "markdown", "System.String"])

/** `where(name = 'value')`: one child, equal to the text. Other than text, fhirpath.js may convert: not compiled. */
const whereEqualStep = (name: string, value: string): Step => {
  const children = childrenNamed(name)
  return (nodes) => nodes.filter((n) => {
    const kids: Array<PathNode> = []
    children(n, kids)
    if (kids.length !== 1) return false
    const kid = kids[0]!
    if (typeof kid.data !== "string" || !stringTypes.has(kid.fhirNodeDataType ?? "")) {
      if (kid.data === undefined || kid.data === null) return false
      throw new Unsupported(`${name} of type ${kid.fhirNodeDataType}`)
    }
    return kid.data === value
  })
}

const extensionStep = (url: string): Step => (nodes) => {
  const out: Array<PathNode> = []
  if (url === "") return out
  for (const n of nodes) {
    const extensions = field(n.data, "extension") || field(n._data, "extension")
    if (!extensions) continue
    if (!Array.isArray(extensions)) throw new Unsupported("extension is not a list")
    for (const extension of extensions) {
      if (extension === null || extension === undefined) throw new Unsupported("an empty extension")
      if (field(extension, "url") === url) out.push(node(extension, null, n, "Extension", "Extension", "extension"))
    }
  }
  return out
}

const indexStep = (index: number): Step => (nodes) => (index < nodes.length ? [nodes[index]!] : [])

const identifier = /^[A-Za-z_][A-Za-z0-9_]*/
const quoted = "'([^'\\\\]*)'"
const ofTypeCall = /^ofType\(([A-Za-z]+)\)/
const refIsCall = new RegExp(`^where\\(refIs\\(${quoted}\\)\\)`)
const whereEqualCall = new RegExp(`^where\\(([a-z][A-Za-z0-9_]*)\\s*=\\s*${quoted}\\)`)
const extensionCall = new RegExp(`^extension\\(${quoted}\\)`)

/** FHIRPath's literals and operator words: never element names. */
const literals = new Set(["true", "false", "and", "or", "xor", "implies", "div", "mod"])
/** Operator words that FHIRPath's grammar takes as element names after a dot (`ValueSet.expansion.contains`). */
const keywords = new Set(["in", "contains", "is", "as"])

const validType = (name: string) => systemTypes.has(name) || availableTypes.has(name)

/** The steps of a path, or undefined when the text is more than this compiler reads. */
const parse = (text: string): ReadonlyArray<Step> | undefined => {
  const steps: Array<Step> = []
  let rest = text.trim()
  let depth = 0
  let head = true
  let dot = false
  while (rest !== "") {
    if (rest.startsWith("(") && head) {
      depth++
      rest = rest.slice(1)
      continue
    }
    if (!head && !dot) {
      if (rest.startsWith(")") && depth > 0) {
        depth--
        rest = rest.slice(1)
        continue
      }
      if (rest.startsWith(".")) {
        dot = true
        rest = rest.slice(1)
        continue
      }
      const index = /^\[(\d+)\]/.exec(rest)
      if (index !== null) {
        steps.push(indexStep(Number(index[1])))
        rest = rest.slice(index[0].length)
        continue
      }
      return undefined
    }
    let match: RegExpExecArray | null
    if (!head && (match = ofTypeCall.exec(rest)) !== null) {
      if (!validType(match[1]!)) return undefined
      steps.push(ofTypeStep(match[1]!))
    } else if (!head && (match = refIsCall.exec(rest)) !== null) steps.push(refIsStep(match[1]!))
    else if (!head && (match = whereEqualCall.exec(rest)) !== null) steps.push(whereEqualStep(match[1]!, match[2]!))
    else if (!head && (match = extensionCall.exec(rest)) !== null) steps.push(extensionStep(match[1]!))
    else if ((match = identifier.exec(rest)) !== null) {
      const name = match[0]
      const after = rest.slice(name.length)
      if (after.startsWith("(") || /^\s/.test(after) || literals.has(name) || (head && keywords.has(name))) return undefined
      if (head) steps.push(headStep(name))
      else if (/^[A-Z]/.test(name)) return undefined
      else steps.push(childStep(name))
    } else return undefined
    rest = rest.slice(match[0].length)
    head = false
    dot = false
  }
  return depth === 0 && !dot && steps.length > 0 ? steps : undefined
}

export interface Root {
  /** The element path the expression is relative to (fhirpath.js's `base`), normalised; undefined: a resource. */
  readonly path?: string
  readonly type?: string
  readonly propName?: string
}

/** fhirpath.js's reading of `compile({ base, expression })`: the path and type of the node it starts from. */
export const baseRoot = (base: string): Root => {
  let path = base.replace(/\[\d*]/g, "")
  const elsewhere = Object.keys(r4.pathsDefinedElsewhere)
  for (let changed = true; changed;) {
    changed = false
    for (const prefix of elsewhere) {
      if (path.startsWith(prefix)) {
        path = r4.pathsDefinedElsewhere[prefix] + path.slice(prefix.length)
        changed = true
        break
      }
    }
  }
  path = r4.pathsDefinedElsewhere[path] ?? path
  const type: string | undefined = availableTypes.has(path) ? path : r4.path2Type[path]
  return { path: type === "BackboneElement" || type === "Element" ? path : type ?? path, type, propName: base }
}

export type Compiled = (data: unknown) => ReadonlyArray<FhirNode>

/** The expression as a function of the resource (or of the element at `root`), or undefined when not compiled. */
export const compilePath = (expression: string, root?: Root): Compiled | undefined => {
  const steps = parse(expression)
  if (steps === undefined) return undefined
  return (data) => {
    let nodes: ReadonlyArray<PathNode> =
      root?.path === undefined
        ? [node(data, null, null, null, null, undefined)]
        : [node(data, null, null, root.path, root.type ?? null, root.propName)]
    for (const step of steps) {
      if (nodes.length === 0) return nodes
      nodes = step(nodes)
    }
    return nodes
  }
}
