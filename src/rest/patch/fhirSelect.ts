/**
 * Finds what a FHIRPath expression selects, as places in the JSON tree that can be changed. The engine is
 * asked for its ResourceNodes (`resolveInternalTypes: false`): each carries its parent node, whose `data` is
 * the very object of the tree evaluated, and its property name and array index there. Primitives are
 * reached the same way, through their parent and key, since their values are copies.
 */
import { Either } from "effect"
import fhirpath from "fhirpath"
import type { Model } from "fhirpath"
import { itemCount } from "./elementSlots.ts"
import { r4Model } from "./fhirModel.ts"
import { hasMember, isJsonObject, type JsonObject } from "./json.ts"
import { expressionTooLarge } from "../../fhirpath/expressionSize.ts"

/** The fields of the engine's ResourceNode this module relies on. */
export interface SelectedNode {
  readonly data: unknown
  readonly _data: unknown
  readonly path: string | null
  readonly propName: string | null | undefined
  readonly index: number | null | undefined
  readonly fhirNodeDataType: string | null
  readonly parentResNode: SelectedNode | null
}

/** Where a selected element lives: `container[key]`, or `container[key][index]` in a list. */
export interface Slot {
  readonly node: SelectedNode
  readonly container: JsonObject
  readonly key: string
  readonly index: number | undefined
}

/** Why an operation failed: a path the engine rejects is a malformed patch; the rest depends on the resource. */
export interface Failure {
  readonly code: "invalid" | "processing"
  readonly reason: string
}

export const processing = (reason: string): Failure => ({ code: "processing", reason })

const malformed = (reason: string): Failure => ({ code: "invalid", reason })

type Evaluate = (
  resource: unknown,
  expression: string,
  environment: Record<string, unknown>,
  model: Model,
  options: { readonly resolveInternalTypes: false }
) => unknown

const evaluate = fhirpath.evaluate as unknown as Evaluate

const isSelectedNode = (value: unknown): value is SelectedNode =>
  isJsonObject(value) && "parentResNode" in value && "propName" in value && "data" in value

/**
 * `div` is a FHIRPath operator, so the engine rejects `Patient.text.div`, which FHIR's own patch tests use;
 * after a dot it can only be a member name, and is quoted as one (outside string literals).
 */
export const quoteDivMembers = (expression: string): string => {
  let out = ""
  let quote: string | undefined
  for (let i = 0; i < expression.length; i++) {
    const char = expression[i]!
    out += char
    if (quote !== undefined) {
      if (char === "\\") out += expression[++i] ?? ""
      else if (char === quote) quote = undefined
    } else if (char === "'" || char === "`") {
      quote = char
    } else if (char === "." && /^div(?![A-Za-z0-9_])/.test(expression.slice(i + 1))) {
      out += "`div`"
      i += 3
    }
  }
  return out
}

/** The nodes an expression selects in `resource` (which the engine may annotate), or why it cannot be used. */
export const select = (resource: JsonObject, expression: string): Either.Either<ReadonlyArray<SelectedNode>, Failure> => {
  const tooLarge = expressionTooLarge(expression)
  if (tooLarge !== undefined) return Either.left(malformed(tooLarge))
  let result: unknown
  try {
    result = evaluate(resource, quoteDivMembers(expression), { resource, rootResource: resource }, r4Model, { resolveInternalTypes: false })
  } catch (error) {
    return Either.left(malformed(`the path cannot be evaluated: ${error instanceof Error ? error.message : String(error)}`))
  }
  if (!Array.isArray(result)) return Either.left(malformed("the path cannot be evaluated without asynchronous functions"))
  const nodes: Array<SelectedNode> = []
  for (const item of result as ReadonlyArray<unknown>) {
    if (!isSelectedNode(item)) return Either.left(malformed("the path selects values that are not elements of the resource"))
    nodes.push(item)
  }
  return Either.right(nodes)
}

const upperFirst = (text: string): string => text.charAt(0).toUpperCase() + text.slice(1)

const holds = (container: JsonObject, key: string): boolean => hasMember(container, key) || hasMember(container, `_${key}`)

/** The slot of a selected node; the resource itself has none. */
export const slotOf = (node: SelectedNode): Either.Either<Slot, Failure> => {
  const parent = node.parentResNode
  const propName = node.propName
  if (parent === null || typeof propName !== "string") return Either.left(processing("the path selects the resource itself"))
  // The children of a primitive (its id, its extensions) live in the `_name` object beside it.
  const container = isJsonObject(parent.data) ? parent.data : isJsonObject(parent._data) ? parent._data : undefined
  if (container === undefined) return Either.left(processing("the selected element has no parent object"))
  // A choice element is selected under its plain name (`deceased`) but stored with its type (`deceasedBoolean`).
  const key = holds(container, propName) ? propName : `${propName}${upperFirst(node.fhirNodeDataType ?? "")}`
  const index = typeof node.index === "number" ? node.index : undefined
  if (!holds(container, key)) return Either.left(processing(`the selected element ${propName} was not found in its parent`))
  if (isJsonObject(node.data)) {
    const stored = container[key]
    const found = index === undefined ? stored : Array.isArray(stored) ? stored[index] : undefined
    // fhirpath.js hands a decimal over wrapped in an object holding its number.
    const decimal = typeof found === "number" && (node.data as { readonly value?: unknown })["value"] === found
    if (found !== node.data && !decimal) return Either.left(processing(`the selected element ${propName} was not found in its parent`))
  }
  return Either.right({ node, container, key, index })
}

/** A list of elements as the path of an insert or move names it. */
export interface ListSlot {
  readonly container: JsonObject
  readonly scope: string
  readonly name: string
  readonly length: number
}

const listOfSelected = (nodes: ReadonlyArray<SelectedNode>): Either.Either<ListSlot, Failure> =>
  Either.flatMap(Either.all(nodes.map(slotOf)), (slots) => {
    const first = slots[0]!
    const whole = slots.every((slot, i) =>
      slot.container === first.container && slot.key === first.key && slot.index === i
    )
    const scope = first.node.parentResNode?.path
    if (!whole || typeof scope !== "string" || slots.length !== itemCount(first.container, first.key)) {
      return Either.left(processing("the path must select a whole list (all the items of one repeating element)"))
    }
    return Either.right({ container: first.container, scope, name: first.key, length: slots.length })
  })

/** An empty list cannot be selected, so the path is split into its parent and the last name. */
const emptyList = (resource: JsonObject, expression: string): Either.Either<ListSlot, Failure> => {
  const match = /^(.+)\.([A-Za-z][A-Za-z0-9]*)$/.exec(expression)
  if (match === null) return Either.left(processing("no element found at the path"))
  return Either.flatMap(select(resource, match[1]!), (parents) => {
    const parent = parents[0]
    if (parents.length !== 1 || parent === undefined || !isJsonObject(parent.data) || typeof parent.path !== "string") {
      return Either.left(processing(`no single element found at ${match[1]}`))
    }
    return Either.right({ container: parent.data, scope: parent.path, name: match[2]!, length: 0 })
  })
}

export const listAt = (resource: JsonObject, expression: string): Either.Either<ListSlot, Failure> =>
  Either.flatMap(select(resource, expression), (nodes) =>
    nodes.length === 0 ? emptyList(resource, expression) : listOfSelected(nodes))
