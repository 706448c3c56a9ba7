/**
 * What the FHIR R4 model bundled with the fhirpath engine says about an element: its JSON key, type,
 * cardinality and choice types. A scope is a ResourceNode path: a type name (`HumanName`) or, for a
 * backbone element, its element path (`Patient.contact`).
 */
import { Either } from "effect"
import type { Model } from "fhirpath"
import r4 from "fhirpath/fhir-context/r4"

export const r4Model: Model = r4

export interface ElementInfo {
  /** The JSON key: the element name, with the type appended for a choice element (`deceasedBoolean`). */
  readonly key: string
  /** Every key that fills the same element: the other types of a choice, or just `key`. */
  readonly alternatives: ReadonlyArray<string>
  readonly type: string
  readonly scope: string
  readonly repeating: boolean
}

const primitiveTypes = new Set([
  "base64Binary", "boolean", "canonical", "code", "date", "dateTime", "decimal", "id", "instant", "integer",
  "markdown", "oid", "positiveInt", "string", "time", "unsignedInt", "uri", "url", "uuid", "xhtml"
])

export const isPrimitiveType = (type: string): boolean => type.startsWith("System.") || primitiveTypes.has(type)

const isBackbone = (type: string): boolean => type === "BackboneElement" || type === "Element"

const modelPath = (scope: string, name: string): string => {
  const path = `${scope}.${name}`
  return r4Model.pathsDefinedElsewhere[path] ?? path
}

/** The choice element a name belongs to, whether given as `deceased` or as `deceasedBoolean`. */
const choiceOf = (scope: string, name: string) => {
  const plain = r4Model.choiceTypePaths[modelPath(scope, name)]
  if (plain !== undefined) return { base: name, types: plain, suffix: undefined }
  for (let i = 1; i < name.length; i++) {
    if (name[i]! < "A" || name[i]! > "Z") continue
    const base = name.slice(0, i)
    const types = r4Model.choiceTypePaths[modelPath(scope, base)]
    if (types?.includes(name.slice(i))) return { base, types, suffix: name.slice(i) }
  }
  return undefined
}

const upperFirst = (text: string): string => text.charAt(0).toUpperCase() + text.slice(1)

/** The element `name` under `scope`; for a choice element, `valueType` (as in `value[x]`) picks the type. */
export const elementOf = (
  scope: string,
  name: string,
  valueType: string | undefined
): Either.Either<ElementInfo, string> => {
  if (isPrimitiveType(scope)) return elementOf("Element", name, valueType)
  const choice = choiceOf(scope, name)
  let key = name
  let alternatives: ReadonlyArray<string> = [name]
  if (choice !== undefined) {
    const chosen = valueType === undefined ? choice.suffix : upperFirst(valueType)
    if (chosen === undefined || !choice.types.includes(chosen)) {
      return Either.left(`${scope}.${choice.base}[x] cannot hold a value of type ${valueType ?? "unknown"}`)
    }
    key = choice.base + chosen
    alternatives = choice.types.map((type) => choice.base + type)
  }
  const path = modelPath(scope, key)
  const type = r4Model.path2Type[path]
  if (type === undefined) return Either.left(`${scope} has no element ${name}`)
  return Either.right({
    key,
    alternatives,
    type,
    scope: isBackbone(type) ? path : type,
    repeating: r4Model.path2Repeating[path] === true
  })
}

const descendsFrom = (type: string, ancestor: string): boolean => {
  for (let current: string | undefined = type; current !== undefined; current = r4Model.type2Parent[current]) {
    if (current === ancestor) return true
  }
  return false
}

const jsonKindOf = (type: string): "boolean" | "number" | "string" => {
  if (type === "boolean" || type === "System.Boolean") return "boolean"
  if (["integer", "decimal", "positiveInt", "unsignedInt", "System.Integer", "System.Decimal"].includes(type)) {
    return "number"
  }
  return "string"
}

/**
 * Whether a value of `valueType` (undefined: assembled from parts) fits the element. Primitives are
 * matched by their JSON kind only, so that a string may fill a code or the narrative's xhtml.
 */
export const checkValueType = (
  element: ElementInfo,
  valueType: string | undefined,
  json: unknown
): Either.Either<void, string> => {
  const expected = element.type
  if (isPrimitiveType(expected)) {
    if (valueType === undefined || !isPrimitiveType(valueType) || typeof json !== jsonKindOf(expected)) {
      return Either.left(`${element.key} needs a ${expected} value, not ${valueType ?? "a value made of parts"}`)
    }
    return Either.void
  }
  if (valueType === undefined) return Either.void
  if (isBackbone(expected) || isPrimitiveType(valueType) || !descendsFrom(valueType, expected)) {
    return Either.left(`${element.key} needs ${isBackbone(expected) ? "a value made of parts" : `a value of type ${expected}`}, not ${valueType}`)
  }
  return Either.void
}
