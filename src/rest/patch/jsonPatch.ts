/**
 * JSON Patch (https://www.rfc-editor.org/rfc/rfc6902) over plain JSON values, as FHIR's patch interaction
 * accepts it with `application/json-patch+json` (https://hl7.org/fhir/R4/http.html#patch).
 * The whole patch document is checked before anything is applied, and the input is never changed.
 * A decimal keeps its text where it goes; a value the patch sets has the text the patch gives it.
 */
import { Either } from "effect"
import { lexicalOf, markTree, setLexical, spliceLexical } from "../../json/lexical.ts"
import { copyJson, hasMember, isJsonObject, jsonEqual, member, removeMember, setMember } from "./json.ts"
import { arrayIndex, formatPointer, parsePointer } from "./jsonPointer.ts"
import { malformedPatch, type PatchProblem, tooCostlyPatch, unappliablePatch } from "../../store/PatchProblem.ts"

/**
 * Values (members, array items, primitives) the `copy` operations of one patch may duplicate in all. A copy
 * of the whole document into itself doubles it, so a few dozen would otherwise exhaust the memory.
 */
export const maxCopiedValues = 1_000_000

/** The values in `value`, counted up to just past `budget`. */
const valuesIn = (value: unknown, budget: number): number => {
  let count = 0
  const stack: Array<unknown> = [value]
  while (stack.length > 0 && count <= budget) {
    const current = stack.pop()
    count++
    if (Array.isArray(current)) for (const item of current) stack.push(item)
    else if (isJsonObject(current)) for (const key in current) stack.push(current[key])
  }
  return count
}

interface Target {
  readonly text: string
  readonly tokens: ReadonlyArray<string>
}

type Operation =
  | {
    readonly op: "add" | "replace" | "test"
    readonly index: number
    readonly path: Target
    readonly value: unknown
    /** The value's text, when it is a decimal JavaScript would write otherwise. */
    readonly lexeme: string | undefined
  }
  | { readonly op: "remove"; readonly index: number; readonly path: Target }
  | { readonly op: "move" | "copy"; readonly index: number; readonly path: Target; readonly from: Target }

const operationNames = ["add", "remove", "replace", "move", "copy", "test"] as const

const pointerMember = (operation: Record<string, unknown>, name: "path" | "from"): Either.Either<Target, string> => {
  const text = member(operation, name)
  if (typeof text !== "string") return Either.left(`"${name}" must be a string holding a JSON Pointer`)
  return Either.map(parsePointer(text), (tokens) => ({ text, tokens }))
}

const parseOperation = (raw: unknown, index: number): Either.Either<Operation, string> =>
  Either.gen(function*() {
    if (!isJsonObject(raw)) return yield* Either.left("must be an object")
    const op = member(raw, "op")
    const name = operationNames.find((known) => known === op)
    if (name === undefined) {
      return yield* Either.left(`"op" must be one of ${operationNames.join(", ")} (found ${JSON.stringify(op)})`)
    }
    const path = yield* pointerMember(raw, "path")
    switch (name) {
      case "remove":
        return { op: name, index, path }
      case "move":
      case "copy":
        return { op: name, index, path, from: yield* pointerMember(raw, "from") }
      default:
        if (!hasMember(raw, "value")) return yield* Either.left(`"${name}" needs a "value"`)
        return { op: name, index, path, value: raw["value"], lexeme: lexicalOf(raw, "value") }
    }
  })

const parseOperations = (operations: unknown): Either.Either<ReadonlyArray<Operation>, PatchProblem> => {
  if (!Array.isArray(operations)) {
    return Either.left(malformedPatch("a JSON Patch document must be an array of operations"))
  }
  return Either.all(
    operations.map((raw: unknown, index) =>
      Either.mapLeft(parseOperation(raw, index), (reason) => malformedPatch(`JSON Patch operation ${index}: ${reason}`))
    )
  )
}

/** The value at a pointer, or why there is none. */
const valueAt = (document: unknown, tokens: ReadonlyArray<string>): Either.Either<unknown, string> => {
  let current = document
  for (let depth = 0; depth < tokens.length; depth++) {
    const token = tokens[depth]!
    const missing = () => Either.left(`path ${formatPointer(tokens.slice(0, depth + 1))} does not exist`)
    if (Array.isArray(current)) {
      const position = arrayIndex(token)
      if (position === undefined || position >= current.length) return missing()
      current = current[position]
    } else if (isJsonObject(current) && hasMember(current, token)) {
      current = current[token]
    } else {
      return missing()
    }
  }
  return Either.right(current)
}

type Container = { readonly array: Array<unknown>; readonly key: string } | {
  readonly object: Record<string, unknown>
  readonly key: string
}

const containerOf = (document: unknown, tokens: ReadonlyArray<string>): Either.Either<Container, string> =>
  Either.flatMap(valueAt(document, tokens.slice(0, -1)), (parent): Either.Either<Container, string> => {
    const key = tokens[tokens.length - 1]!
    if (Array.isArray(parent)) return Either.right({ array: parent, key })
    if (isJsonObject(parent)) return Either.right({ object: parent, key })
    return Either.left(`path ${formatPointer(tokens.slice(0, -1))} is neither an object nor an array`)
  })

const existingIndex = (array: ReadonlyArray<unknown>, key: string): Either.Either<number, string> => {
  const position = arrayIndex(key)
  if (position === undefined) return Either.left(`"${key}" is not an array index`)
  if (position >= array.length) {
    return Either.left(`index ${position} is out of range (the array has ${array.length} elements)`)
  }
  return Either.right(position)
}

/** The text kept for the number at a pointer, if any. */
const lexemeAt = (document: unknown, tokens: ReadonlyArray<string>): string | undefined => {
  if (tokens.length === 0) return undefined
  const container = containerOf(document, tokens)
  if (Either.isLeft(container)) return undefined
  if ("object" in container.right) return lexicalOf(container.right.object, container.right.key)
  const position = arrayIndex(container.right.key)
  return position === undefined ? undefined : lexicalOf(container.right.array, position)
}

const add = (document: unknown, tokens: ReadonlyArray<string>, value: unknown, lexeme: string | undefined): Either.Either<unknown, string> => {
  if (tokens.length === 0) return Either.right(value)
  return Either.flatMap(containerOf(document, tokens), (container) => {
    if ("object" in container) {
      setMember(container.object, container.key, value)
      setLexical(container.object, container.key, lexeme)
      return Either.right(document)
    }
    const { array, key } = container
    const position = key === "-" ? array.length : arrayIndex(key)
    if (position === undefined) return Either.left(`"${key}" is not an array index`)
    if (position > array.length) {
      return Either.left(`index ${position} is out of range (the array has ${array.length} elements)`)
    }
    spliceLexical(array, position, 0, [lexeme])
    array.splice(position, 0, value)
    return Either.right(document)
  })
}

const remove = (document: unknown, tokens: ReadonlyArray<string>): Either.Either<unknown, string> => {
  if (tokens.length === 0) return Either.left("the whole document cannot be removed")
  return Either.flatMap(containerOf(document, tokens), (container) => {
    if ("array" in container) {
      return Either.map(existingIndex(container.array, container.key), (position) => {
        spliceLexical(container.array, position, 1, [])
        container.array.splice(position, 1)
        return document
      })
    }
    if (!hasMember(container.object, container.key)) return Either.left(`path ${formatPointer(tokens)} does not exist`)
    removeMember(container.object, container.key)
    setLexical(container.object, container.key, undefined)
    return Either.right(document)
  })
}

/** RFC 6902 4.3: a remove and an add at the same place, done as one assignment (two splices moved the rest of a long array twice). */
const replace = (document: unknown, tokens: ReadonlyArray<string>, value: unknown, lexeme: string | undefined): Either.Either<unknown, string> =>
  Either.flatMap(valueAt(document, tokens), () =>
    Either.flatMap(containerOf(document, tokens), (container) => {
      if ("object" in container) {
        setMember(container.object, container.key, value)
        setLexical(container.object, container.key, lexeme)
        return Either.right(document)
      }
      return Either.map(existingIndex(container.array, container.key), (position) => {
        container.array[position] = value
        setLexical(container.array, position, lexeme)
        return document
      })
    }))

const shown = (value: unknown): string => {
  const text = JSON.stringify(value)
  return text.length > 120 ? `${text.slice(0, 117)}...` : text
}

const isInside = (inner: ReadonlyArray<string>, outer: ReadonlyArray<string>): boolean =>
  inner.length > outer.length && outer.every((token, i) => inner[i] === token)

const apply = (document: unknown, operation: Operation): Either.Either<unknown, string> => {
  const tokens = operation.path.tokens
  switch (operation.op) {
    case "add":
      return add(document, tokens, copyJson(operation.value), operation.lexeme)
    case "remove":
      return remove(document, tokens)
    case "replace":
      return tokens.length === 0
        ? Either.right(copyJson(operation.value))
        : replace(document, tokens, copyJson(operation.value), operation.lexeme)
    case "test":
      return Either.flatMap(valueAt(document, tokens), (actual) =>
        jsonEqual(actual, operation.value)
          ? Either.right(document)
          : Either.left(`test failed: the value is ${shown(actual)}, not ${shown(operation.value)}`))
    case "copy":
      return Either.flatMap(valueAt(document, operation.from.tokens), (value) =>
        add(document, tokens, copyJson(value), lexemeAt(document, operation.from.tokens)))
    case "move": {
      const from = operation.from.tokens
      if (isInside(tokens, from)) return Either.left(`cannot move ${operation.from.text} into one of its own children`)
      return Either.flatMap(valueAt(document, from), (value) => {
        if (operation.from.text === operation.path.text) return Either.right(document)
        const lexeme = lexemeAt(document, from)
        return Either.flatMap(remove(document, from), (rest) => add(rest, tokens, value, lexeme))
      })
    }
  }
}

const describe = (operation: Operation): string =>
  `${operation.op}${"from" in operation ? ` from ${operation.from.text}` : ""} ${operation.path.text || "\"\""}`

/** Applies an RFC 6902 patch to a copy of `doc`; fails on the first operation that cannot be applied. */
export const jsonPatch = (doc: unknown, operations: unknown): Either.Either<unknown, PatchProblem> =>
  Either.flatMap(parseOperations(operations), (parsed) => {
    let document: unknown = copyJson(doc)
    let copied = 0
    for (const operation of parsed) {
      if (operation.op === "copy") {
        const source = valueAt(document, operation.from.tokens)
        if (Either.isRight(source)) copied += valuesIn(source.right, maxCopiedValues - copied)
        if (copied > maxCopiedValues) {
          return Either.left(tooCostlyPatch(`JSON Patch operation ${operation.index} (${describe(operation)}): the copies of this patch duplicate more than ${maxCopiedValues} values`))
        }
      }
      const next = apply(document, operation)
      if (Either.isLeft(next)) {
        return Either.left(
          unappliablePatch(`JSON Patch operation ${operation.index} (${describe(operation)}): ${next.left}`)
        )
      }
      document = next.right
    }
    markTree(document)
    return Either.right(document)
  })
