/**
 * FHIRPath Patch (https://hl7.org/fhir/R4/fhirpatch.html), the patch format FHIR's patch interaction
 * accepts as a Parameters resource (https://hl7.org/fhir/R4/http.html#patch). Paths are evaluated by the
 * fhirpath engine with the R4 model on a working copy, which is then changed in place; the input is never
 * changed.
 */
import { Either } from "effect"
import { clearCompanion, holdsAny, insertItem, itemCount, moveItem, removeItem, setItem } from "./elementSlots.ts"
import { type FhirPatchOperation, readFhirPatch } from "./fhirPatchDocument.ts"
import { type Failure, listAt, processing, select, type SelectedNode, slotOf } from "./fhirSelect.ts"
import { valueFor } from "./fhirValue.ts"
import { copyJson, isJsonObject, type JsonObject } from "./json.ts"
import { markTree } from "../../json/lexical.ts"
import { malformedPatch, type PatchProblem, unappliablePatch } from "../../store/PatchProblem.ts"

type Outcome = Either.Either<void, Failure>

const onlyElement = (resource: JsonObject, operation: FhirPatchOperation): Either.Either<SelectedNode, Failure> =>
  Either.flatMap(select(resource, operation.path), (nodes) => {
    if (nodes.length === 1) return Either.right(nodes[0]!)
    return Either.left(processing(
      nodes.length === 0
        ? "no element found at the path"
        : `the path selects ${nodes.length} elements; ${operation.type} needs exactly one`
    ))
  })

const modelled = <A>(result: Either.Either<A, string>): Either.Either<A, Failure> => Either.mapLeft(result, processing)

const add = (resource: JsonObject, operation: Extract<FhirPatchOperation, { type: "add" }>): Outcome =>
  Either.gen(function*() {
    const target = yield* onlyElement(resource, operation)
    const container = target.data
    if (!isJsonObject(container) || target.path === null) {
      return yield* Either.left(processing("the path selects a primitive value, which cannot hold elements"))
    }
    const { element, json, extra, lexeme } = yield* modelled(valueFor(target.path, operation.name, operation.value))
    if (element.repeating) {
      insertItem(container, element.key, itemCount(container, element.key), json, extra, lexeme)
    } else if (holdsAny(container, element.alternatives)) {
      return yield* Either.left(processing(`${operation.name} is already present and does not repeat; use replace`))
    } else {
      setItem(container, element.key, undefined, json, extra, lexeme)
    }
  })

const insert = (resource: JsonObject, operation: Extract<FhirPatchOperation, { type: "insert" }>): Outcome =>
  Either.gen(function*() {
    const list = yield* listAt(resource, operation.path)
    if (operation.index > list.length) {
      return yield* Either.left(processing(`index ${operation.index} is out of range (the list has ${list.length} items)`))
    }
    const { element, json, extra, lexeme } = yield* modelled(valueFor(list.scope, list.name, operation.value))
    if (!element.repeating) return yield* Either.left(processing(`${list.name} does not repeat`))
    insertItem(list.container, element.key, operation.index, json, extra, lexeme)
  })

/** FHIR JSON has no empty objects: an element left empty by a delete goes too, up to the resource. */
const prune = (node: SelectedNode | null, container: JsonObject): Outcome =>
  Either.gen(function*() {
    let current = node
    let emptied = container
    while (current !== null && current.parentResNode !== null && Object.keys(emptied).length === 0) {
      const slot = yield* slotOf(current)
      if (emptied !== current.data) {
        clearCompanion(slot.container, slot.key, slot.index)
        return
      }
      removeItem(slot.container, slot.key, slot.index)
      current = current.parentResNode
      emptied = slot.container
    }
  })

const remove = (resource: JsonObject, operation: FhirPatchOperation): Outcome =>
  Either.gen(function*() {
    const nodes = yield* select(resource, operation.path)
    if (nodes.length === 0) return
    if (nodes.length > 1) {
      return yield* Either.left(processing(`the path selects ${nodes.length} elements; delete removes only one`))
    }
    const slot = yield* slotOf(nodes[0]!)
    removeItem(slot.container, slot.key, slot.index)
    yield* prune(slot.node.parentResNode, slot.container)
  })

const replace = (resource: JsonObject, operation: Extract<FhirPatchOperation, { type: "replace" }>): Outcome =>
  Either.gen(function*() {
    const slot = yield* slotOf(yield* onlyElement(resource, operation))
    const scope = slot.node.parentResNode?.path
    if (typeof scope !== "string") return yield* Either.left(processing("the FHIR model does not describe this element"))
    const { element, json, extra, lexeme } = yield* modelled(valueFor(scope, slot.key, operation.value))
    if (element.key === slot.key) {
      setItem(slot.container, slot.key, slot.index, json, extra, lexeme)
    } else {
      removeItem(slot.container, slot.key, undefined)
      setItem(slot.container, element.key, undefined, json, extra, lexeme)
    }
  })

const move = (resource: JsonObject, operation: Extract<FhirPatchOperation, { type: "move" }>): Outcome =>
  Either.gen(function*() {
    const list = yield* listAt(resource, operation.path)
    for (const [name, position] of [["source", operation.source], ["destination", operation.destination]] as const) {
      if (position >= list.length) {
        return yield* Either.left(processing(`${name} ${position} is out of range (the list has ${list.length} items)`))
      }
    }
    moveItem(list.container, list.name, operation.source, operation.destination)
  })

const applyOperation = (resource: JsonObject, operation: FhirPatchOperation): Outcome => {
  switch (operation.type) {
    case "add":
      return add(resource, operation)
    case "insert":
      return insert(resource, operation)
    case "delete":
      return remove(resource, operation)
    case "replace":
      return replace(resource, operation)
    case "move":
      return move(resource, operation)
  }
}

/** Applies a FHIRPath Patch to a copy of `resource`; fails on the first operation that cannot be applied. */
export const fhirPathPatch = (
  resource: Record<string, unknown>,
  parameters: unknown
): Either.Either<Record<string, unknown>, PatchProblem> => {
  const operations = readFhirPatch(parameters)
  if (Either.isLeft(operations)) return Either.left(malformedPatch(operations.left))
  const working = copyJson(resource)
  for (const operation of operations.right) {
    const outcome = applyOperation(working, operation)
    if (Either.isLeft(outcome)) {
      const { code, reason } = outcome.left
      const message = `FHIRPath Patch operation ${operation.number} (${operation.type} ${operation.path}): ${reason}`
      return Either.left(code === "invalid" ? malformedPatch(message) : unappliablePatch(message))
    }
  }
  markTree(working)
  return Either.right(working)
}
