/**
 * Reads a FHIRPath Patch document: a Parameters resource of `operation` parameters
 * (https://hl7.org/fhir/R4/fhirpatch.html). Everything here is about the document's shape; whether it
 * applies to a resource is decided later.
 */
import { Either } from "effect"
import { isPrimitiveType } from "./fhirModel.ts"
import { lexicalOf } from "../../json/lexical.ts"
import { isJsonObject, type JsonObject, member } from "./json.ts"

/** A `value` part: one `value[x]` (its type as FHIR names it, `date` or `HumanName`), a resource, or parts. */
export type PatchValue =
  | {
    readonly kind: "typed"
    readonly type: string
    readonly json: unknown
    readonly extra: JsonObject | undefined
    /** The text of a decimal value as the patch writes it. */
    readonly lexeme?: string | undefined
  }
  | { readonly kind: "parts"; readonly parts: ReadonlyArray<NamedPart> }

export interface NamedPart {
  readonly name: string
  readonly value: PatchValue
}

interface Common {
  readonly number: number
  readonly path: string
}

export type FhirPatchOperation =
  | Common & { readonly type: "add"; readonly name: string; readonly value: PatchValue }
  | Common & { readonly type: "insert"; readonly index: number; readonly value: PatchValue }
  | Common & { readonly type: "delete" }
  | Common & { readonly type: "replace"; readonly value: PatchValue }
  | Common & { readonly type: "move"; readonly source: number; readonly destination: number }

const operationTypes = ["add", "insert", "delete", "replace", "move"] as const
const partNames = new Set(["type", "path", "name", "value", "index", "source", "destination"])

const lowerFirst = (text: string): string => text.charAt(0).toLowerCase() + text.slice(1)

/** `valueDate` holds a `date`, `valueHumanName` a `HumanName`. */
const typeOfValueKey = (key: string): string => {
  const suffix = key.slice("value".length)
  return isPrimitiveType(lowerFirst(suffix)) ? lowerFirst(suffix) : suffix
}

export const readValue = (part: JsonObject, where: string): Either.Either<PatchValue, string> => {
  const valueKeys = Object.keys(part).filter((key) => /^value[A-Z]/.test(key))
  const nested = member(part, "part")
  const resource = member(part, "resource")
  const given = valueKeys.length + (nested === undefined ? 0 : 1) + (resource === undefined ? 0 : 1)
  if (given !== 1) return Either.left(`${where} must have exactly one of value[x], resource or part (found ${given})`)
  if (valueKeys.length === 1) {
    const key = valueKeys[0]!
    const extra = member(part, `_${key}`)
    return Either.right({ kind: "typed", type: typeOfValueKey(key), json: part[key], extra: isJsonObject(extra) ? extra : undefined, lexeme: lexicalOf(part, key) })
  }
  if (resource !== undefined) {
    const resourceType = isJsonObject(resource) ? member(resource, "resourceType") : undefined
    if (typeof resourceType !== "string") return Either.left(`${where} has a resource without a resourceType`)
    return Either.right({ kind: "typed", type: resourceType, json: resource, extra: undefined })
  }
  if (!Array.isArray(nested)) return Either.left(`${where}: "part" must be an array`)
  return Either.map(
    Either.all(nested.map((child: unknown, i) => {
      const at = `${where}.part[${i}]`
      const name = isJsonObject(child) ? member(child, "name") : undefined
      if (!isJsonObject(child) || typeof name !== "string") return Either.left(`${at} must be an object with a name`)
      return Either.map(readValue(child, `${at} (${name})`), (value): NamedPart => ({ name, value }))
    })),
    (parts): PatchValue => ({ kind: "parts", parts })
  )
}

const readParts = (parts: unknown): Either.Either<ReadonlyMap<string, JsonObject>, string> => {
  if (!Array.isArray(parts)) return Either.left(`"part" must be an array`)
  const byName = new Map<string, JsonObject>()
  for (const part of parts as ReadonlyArray<unknown>) {
    const name = isJsonObject(part) ? member(part, "name") : undefined
    if (!isJsonObject(part) || typeof name !== "string") return Either.left("every part must be an object with a name")
    if (!partNames.has(name)) return Either.left(`unknown part "${name}"`)
    if (byName.has(name)) return Either.left(`part "${name}" is given twice`)
    byName.set(name, part)
  }
  return Either.right(byName)
}

const readOperation = (parameter: unknown, number: number): Either.Either<FhirPatchOperation, string> =>
  Either.gen(function*() {
    if (!isJsonObject(parameter) || member(parameter, "name") !== "operation") {
      return yield* Either.left(`must be a parameter named "operation"`)
    }
    const parts = yield* readParts(member(parameter, "part"))
    const valueOf = (name: string, key: string): unknown => {
      const part = parts.get(name)
      return part === undefined ? undefined : member(part, key)
    }
    const text = (name: string, what: string): Either.Either<string, string> => {
      const value = valueOf(name, "valueString")
      return typeof value === "string" && value !== "" ? Either.right(value) : Either.left(`needs a "${name}" part with valueString (${what})`)
    }
    const index = (name: string): Either.Either<number, string> => {
      const value = valueOf(name, "valueInteger")
      return typeof value === "number" && Number.isInteger(value) && value >= 0
        ? Either.right(value)
        : Either.left(`needs a "${name}" part with valueInteger (an integer of 0 or more)`)
    }
    const type = operationTypes.find((known) => known === valueOf("type", "valueCode"))
    if (type === undefined) {
      return yield* Either.left(`needs a "type" part with valueCode ${operationTypes.join(" | ")}`)
    }
    const path = yield* text("path", "a FHIRPath expression")
    const value = () => {
      const part = parts.get("value")
      return part === undefined ? Either.left(`${type} needs a "value" part`) : readValue(part, "the value part")
    }
    switch (type) {
      case "add": {
        return { number, path, type, name: yield* text("name", "the name of the element to add"), value: yield* value() }
      }
      case "insert":
        return { number, path, type, index: yield* index("index"), value: yield* value() }
      case "delete":
        return { number, path, type }
      case "replace":
        return { number, path, type, value: yield* value() }
      case "move":
        return { number, path, type, source: yield* index("source"), destination: yield* index("destination") }
    }
  })

/** The operations of a FHIRPath Patch document, or why it is not one (each reason names the operation). */
export const readFhirPatch = (parameters: unknown): Either.Either<ReadonlyArray<FhirPatchOperation>, string> => {
  if (!isJsonObject(parameters) || member(parameters, "resourceType") !== "Parameters") {
    return Either.left("a FHIRPath Patch document must be a Parameters resource")
  }
  const list = member(parameters, "parameter") ?? []
  if (!Array.isArray(list)) return Either.left(`Parameters.parameter must be an array`)
  return Either.all(
    list.map((parameter: unknown, number) =>
      Either.mapLeft(readOperation(parameter, number), (reason) => `FHIRPath Patch operation ${number}: ${reason}`)
    )
  )
}
