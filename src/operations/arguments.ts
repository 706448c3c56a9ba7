/**
 * An operation's input parameters read from its OperationDefinition (https://hl7.org/fhir/R4/operations.html,
 * https://hl7.org/fhir/R4/operationdefinition.html): from the URL's query and, on POST, from a Parameters
 * body (https://hl7.org/fhir/R4/parameters.html), into the text of each value by parameter name. A name the
 * definition does not give, a parameter given more often than its `max`, a required one missing and a value
 * of another type than the parameter's are a 400 naming the parameter. Resource parameters and values of
 * complex types (Meta, Coding, CodeableConcept, ...) come from the body only; what a module reads beyond the
 * definition (paging) it declares as extra parameters.
 */
import { Effect } from "effect"
import type { Catalog } from "../catalog/Catalog.ts"
import type { OperationParameterDef } from "../catalog/definitions.ts"
import { fail } from "../http/FhirError.ts"
import type { FhirRequest } from "../rest/FhirRequest.ts"
import { readResource } from "../rest/RequestBody.ts"

/** An input parameter: its name, FHIR type and how often it may be given (`max` "*" for no bound). */
export interface InputParameter {
  readonly name: string
  readonly type: string | undefined
  readonly min: number
  readonly max: string
}

export interface Arguments {
  /** The parameters the call may take, in the definition's order. */
  readonly accepted: ReadonlyArray<InputParameter>
  /** The values given, as text, in the order given (query first, then the body). */
  readonly values: URLSearchParams
  /** The resources given as resource parameters of a Parameters body, by name. */
  readonly resources: ReadonlyMap<string, ReadonlyArray<Record<string, unknown>>>
  /** The values of complex types given in a Parameters body (`valueMeta`, `valueCoding`, ...), by name. */
  readonly complex: ReadonlyMap<string, ReadonlyArray<ComplexValue>>
}

/** A value of a complex type: its type as its `value[x]` key names it (`Meta` for `valueMeta`), and the value. */
export interface ComplexValue {
  readonly type: string
  readonly value: Record<string, unknown>
}

/** Query parameters that ask how the answer is written, not what the operation does. */
const formatNames = new Set(["_format", "_pretty", "_summary", "_elements"])

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** The `in` parameters of the OperationDefinition at `url` (none when the catalog does not hold it). */
export const definedInputs = (catalog: Catalog, url: string | undefined): ReadonlyArray<InputParameter> => {
  if (url === undefined) return []
  const definition = catalog.operations.find((operation) => operation.url === url)
  return (definition?.parameters ?? [])
    .filter((parameter: OperationParameterDef) => parameter.use === "in")
    .map((parameter) => ({ name: parameter.name, type: parameter.type, min: parameter.min, max: parameter.max }))
}

/** The definition's parameters with a module's extra ones (an extra one of the same name replaces it). */
export const withExtras = (inputs: ReadonlyArray<InputParameter>, extras: ReadonlyArray<InputParameter>): ReadonlyArray<InputParameter> => [
  ...inputs.filter((input) => !extras.some((extra) => extra.name === input.name)),
  ...extras
]

/** A primitive FHIR type's lexical form, for the types operation parameters take (datatypes.html). */
const lexical: Readonly<Record<string, RegExp>> = {
  boolean: /^(true|false)$/,
  integer: /^(0|[-+]?[1-9][0-9]*)$/,
  positiveInt: /^\+?[1-9][0-9]*$/,
  unsignedInt: /^(0|[1-9][0-9]*)$/,
  decimal: /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$/,
  code: /^[^\s]+(\s[^\s]+)*$/,
  id: /^[A-Za-z0-9\-.]{1,64}$/,
  date: /^([0-9]([0-9]([0-9][1-9]|[1-9]0)|[1-9]00)|[1-9]000)(-(0[1-9]|1[0-2])(-(0[1-9]|[1-2][0-9]|3[0-1]))?)?$/,
  dateTime: /^([0-9]([0-9]([0-9][1-9]|[1-9]0)|[1-9]00)|[1-9]000)(-(0[1-9]|1[0-2])(-(0[1-9]|[1-2][0-9]|3[0-1])(T([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]+)?(Z|(\+|-)((0[0-9]|1[0-3]):[0-5][0-9]|14:00)))?)?)?$/,
  instant: /^([0-9]([0-9]([0-9][1-9]|[1-9]0)|[1-9]00)|[1-9]000)-(0[1-9]|1[0-2])-(0[1-9]|[1-2][0-9]|3[0-1])T([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]+)?(Z|(\+|-)((0[0-9]|1[0-3]):[0-5][0-9]|14:00))$/
}

/** Whether a text is of a primitive type (types without a lexical rule here, and complex types, are not judged). */
export const isOfType = (type: string | undefined, value: string): boolean => {
  const rule = type === undefined ? undefined : lexical[type]
  return rule === undefined || rule.test(value)
}

const resourceTypes = new Set(["Resource", "DomainResource"])

/** Parameter types that take a value of any type. */
const anyTypes = new Set(["Any", "Element", "Type", "DataType"])

/** Whether a FHIR data type is primitive: their names start in lower case (datatypes.html), complex ones in upper case. */
const isPrimitive = (type: string): boolean => /^[a-z]/.test(type)

type ParameterValue =
  | { readonly kind: "text"; readonly text: string }
  | { readonly kind: "resource"; readonly resource: Record<string, unknown> }
  | { readonly kind: "complex"; readonly complex: ComplexValue }

/** The value of a Parameters parameter: text, a resource or a complex value; undefined when it has none. */
const parameterValue = (parameter: Record<string, unknown>): ParameterValue | undefined => {
  if (isRecord(parameter["resource"])) return { kind: "resource", resource: parameter["resource"] }
  for (const key in parameter) {
    if (!key.startsWith("value") || key.length === 5) continue
    const value = parameter[key]
    if (typeof value === "string" || typeof value === "number" || typeof value === "boolean") return { kind: "text", text: String(value) }
    if (isRecord(value)) return { kind: "complex", complex: { type: key.slice(5), value } }
  }
  return undefined
}

const article = (type: string): string => (/^[aeiou]/i.test(type) ? "an" : "a")

/**
 * Reads the call's arguments against `accepted`. `operation` names it in messages (`$everything`). `body`
 * is the POST body when the module has read it already (it may be the resource the operation acts on
 * rather than its Parameters); left out, a POST's body is read here and must be a Parameters resource.
 */
export const readArguments = (
  request: FhirRequest,
  operation: string,
  accepted: ReadonlyArray<InputParameter>,
  body?: Record<string, unknown>
) =>
  Effect.gen(function*() {
    const values = new URLSearchParams()
    for (const [name, value] of request.params) if (!formatNames.has(name)) values.append(name, value)
    const resources = new Map<string, Array<Record<string, unknown>>>()
    const complex = new Map<string, Array<ComplexValue>>()
    let parameters = body
    if (parameters === undefined && request.http.method === "POST") {
      const contentLength = Number(request.http.headers["content-length"] ?? "0")
      if (contentLength > 0 || request.http.headers["transfer-encoding"] !== undefined) {
        parameters = yield* readResource(request.http, request.maxBodyBytes, request.catalog)
        if (parameters["resourceType"] !== "Parameters") {
          return yield* fail("invalid", `${operation} takes a Parameters body, not ${String(parameters["resourceType"])}`)
        }
      }
    }
    if (parameters !== undefined) {
      for (const parameter of Array.isArray(parameters["parameter"]) ? parameters["parameter"] : []) {
        if (!isRecord(parameter) || typeof parameter["name"] !== "string") {
          return yield* fail("invalid", `Each parameter of the Parameters body of ${operation} needs a name`)
        }
        const value = parameterValue(parameter)
        const name = parameter["name"]
        if (value === undefined) return yield* fail("invalid", `The parameter '${name}' of ${operation} has no value`)
        if (value.kind === "text") values.append(name, value.text)
        else if (value.kind === "resource") resources.set(name, [...(resources.get(name) ?? []), value.resource])
        else complex.set(name, [...(complex.get(name) ?? []), value.complex])
      }
    }
    const byName = new Map(accepted.map((input) => [input.name, input]))
    const given = new Set([...values.keys(), ...resources.keys(), ...complex.keys()])
    for (const name of given) {
      const input = byName.get(name)
      if (input === undefined) {
        return yield* fail(
          "invalid",
          accepted.length === 0
            ? `Unknown parameter '${name}' for ${operation}; it takes no parameters`
            : `Unknown parameter '${name}' for ${operation}; it takes ${accepted.map((a) => a.name).join(", ")}`
        )
      }
      const count = values.getAll(name).length + (resources.get(name)?.length ?? 0) + (complex.get(name)?.length ?? 0)
      if (input.max !== "*" && count > Number(input.max)) {
        return yield* fail("invalid", `The parameter '${name}' of ${operation} is given more than once`)
      }
      const type = input.type
      if (type === undefined || anyTypes.has(type)) continue
      if (resourceTypes.has(type) || request.catalog.isResourceType(type)) {
        if (values.has(name) || complex.has(name)) return yield* fail("invalid", `The parameter '${name}' of ${operation} is a resource: it goes in a Parameters body`)
      } else if (!isPrimitive(type)) {
        // A Coding may be given in the URL in the form of a token search value, `system|code` (the module reads it).
        if ((values.has(name) && type !== "Coding") || resources.has(name)) {
          return yield* fail("invalid", `The parameter '${name}' of ${operation} is ${article(type)} ${type}: it goes in a Parameters body, as value${type}`)
        }
        const other = complex.get(name)?.find((value) => value.type !== type)
        if (other !== undefined) {
          return yield* fail("invalid", `The parameter '${name}' of ${operation} is ${article(type)} ${type} (value${type}), not ${article(other.type)} ${other.type}`)
        }
      } else {
        const complexType = complex.get(name)?.[0]?.type
        if (resources.has(name) || complexType !== undefined) {
          const what = complexType === undefined ? "a resource" : `${article(complexType)} ${complexType}`
          return yield* fail("invalid", `The parameter '${name}' of ${operation} takes ${article(type)} ${type}, not ${what}`)
        }
        for (const value of values.getAll(name)) {
          if (!isOfType(type, value)) {
            return yield* fail("invalid", `The value '${value}' of parameter '${name}' of ${operation} cannot be read: expected ${article(type)} ${type}`)
          }
        }
      }
    }
    for (const input of accepted) {
      if (input.min > 0 && !given.has(input.name)) return yield* fail("required", `${operation} needs the parameter '${input.name}'`)
    }
    return { accepted, values, resources, complex } satisfies Arguments
  })
