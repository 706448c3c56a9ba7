/** Turns the `value` of a FHIRPath Patch operation into FHIR JSON for a given element, checked against the model. */
import { Either } from "effect"
import { insertItem, holdsAny, itemCount, setItem } from "./elementSlots.ts"
import { checkValueType, elementOf, type ElementInfo } from "./fhirModel.ts"
import type { NamedPart, PatchValue } from "./fhirPatchDocument.ts"
import { copyJson, type JsonObject } from "./json.ts"

export interface ElementValue {
  readonly element: ElementInfo
  readonly json: unknown
  /** The `_name` companion of a primitive value (its id and extensions), when the patch gives one. */
  readonly extra: JsonObject | undefined
  /** The text of a decimal value as the patch writes it. */
  readonly lexeme?: string | undefined
}

const assemble = (scope: string, parts: ReadonlyArray<NamedPart>): Either.Either<JsonObject, string> => {
  if (parts.length === 0) return Either.left(`a value made of parts needs at least one part`)
  const object: JsonObject = {}
  for (const part of parts) {
    const value = valueFor(scope, part.name, part.value)
    if (Either.isLeft(value)) return Either.left(value.left)
    const { element, json, extra, lexeme } = value.right
    if (element.repeating) {
      insertItem(object, element.key, itemCount(object, element.key), json, extra, lexeme)
    } else if (holdsAny(object, element.alternatives)) {
      return Either.left(`part ${part.name} is given twice, but ${element.key} does not repeat`)
    } else {
      setItem(object, element.key, undefined, json, extra, lexeme)
    }
  }
  return Either.right(object)
}

/** The value of element `name` under `scope`, copied out of the patch document. */
export const valueFor = (scope: string, name: string, value: PatchValue): Either.Either<ElementValue, string> => {
  const valueType = value.kind === "typed" ? value.type : undefined
  return Either.flatMap(elementOf(scope, name, valueType), (element) =>
    Either.flatMap(checkValueType(element, valueType, value.kind === "typed" ? value.json : undefined), () =>
      value.kind === "typed"
        ? Either.right({ element, json: copyJson(value.json), extra: value.extra && copyJson(value.extra), lexeme: value.lexeme })
        : Either.map(assemble(element.scope, value.parts), (json): ElementValue => ({ element, json, extra: undefined }))))
}
