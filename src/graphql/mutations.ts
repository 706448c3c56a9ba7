/**
 * FHIR GraphQL mutations (https://hl7.org/fhir/R4/graphql.html, "Mutations"; docs/graphql.md, "Mutations"): on the
 * `Mutation` root, for every resource type, `TypeCreate(res: TypeInput!): Type`, `TypeUpdate(id: ID!, res:
 * TypeInput!): Type` and `TypeDelete(id: ID!): OperationOutcome` (the spec gives a delete no answer; GraphQL needs a
 * type, so it answers an OperationOutcome with one information issue).
 *
 * "The parameters are input types that are resources that exactly match the output types": each input type is
 * made from its output type (schema.ts), field for field, so that the two cannot drift apart: the same JSON names,
 * choice elements, `_name` fields (`ElementInput`), scalars and lists. An object type `T` has the input type
 * `TInput` (`PatientInput`, `HumanNameInput`, `PatientContactInput`), or `T_Input` where `TInput` already names an
 * output type (`Task.input` is `TaskInput`, so Task's input type is `Task_Input`). GraphQL input types cannot be
 * unions: where an output field is a `Resource` (`contained`, `Bundle.entry.resource`) the input takes the scalar
 * `ResourceInput`, any JSON object with the `resourceType` of a resource type. Every input field is optional (what
 * a resource must hold is validation's to say), and a field given `null` is left out. The one output field that is
 * not an element, a reference's `resource`, has no input.
 *
 * The resolvers only shape the resource (`resourceType` and an update's `id`, which must agree with the field) and
 * hand it to the context's `create`, `update` and `delete` (endpoint.ts), which write it as the REST API does.
 * Their failures are field errors whose `extensions.resource` is the OperationOutcome the REST API would answer.
 */
import {
  type GraphQLFieldConfig,
  GraphQLID,
  type GraphQLInputFieldConfig,
  GraphQLInputObjectType,
  type GraphQLInputType,
  GraphQLList,
  GraphQLNonNull,
  GraphQLObjectType,
  type GraphQLOutputType,
  GraphQLScalarType,
  getNamedType,
  isEnumType,
  isListType,
  isNonNullType,
  isObjectType,
  isScalarType,
  valueFromASTUntyped
} from "graphql"
import { fail, type FhirError } from "../http/FhirError.ts"
import { checkBody } from "../rest/bodyCheck.ts"
import { outcomeOf } from "../rest/respond.ts"

/** How the mutations write (GraphQL's context value): each gives the resource written, or fails with a `MutationFailure`. */
export interface MutationContext {
  /** Creates `resource` (its `resourceType` is `type`) under an id of the server's: the version written. */
  readonly create: (type: string, resource: Record<string, unknown>) => Promise<Record<string, unknown>>
  /** Updates `type/id` to `resource` (its `id` is `id`): the version written. */
  readonly update: (type: string, id: string, resource: Record<string, unknown>) => Promise<Record<string, unknown>>
  /** Deletes `type/id`: an OperationOutcome saying so. */
  readonly delete: (type: string, id: string) => Promise<Record<string, unknown>>
}

/** A mutation's failure as a field error: the message of the FHIR error, its OperationOutcome in `extensions.resource`. */
export class MutationFailure extends Error {
  readonly extensions: { readonly resource: ReturnType<typeof outcomeOf> }
  constructor(error: FhirError) {
    super(error.diagnostics)
    this.extensions = { resource: outcomeOf(error) }
  }
}

/**
 * Output fields that are not elements of the resource, by the type that has them: they have no input (nor have the
 * reverse references, whose names begin with a capital, as no element's does).
 */
const computed: Readonly<Record<string, ReadonlySet<string>>> = { Reference: new Set(["resource"]) }

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value)

/**
 * An input value as plain JSON: objects with the prototype of `{}` and without the properties given `null` (an
 * array keeps its nulls: `given: ["a", null]` with `_given` is FHIR JSON). Called after `checkBody` bounded the depth.
 */
const plain = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(plain)
  if (!isRecord(value)) return value
  // fromEntries defines each property, so that a key `__proto__` (JSON of a ResourceInput) stays a key.
  return Object.fromEntries(Object.entries(value).flatMap(([key, item]) => (item === null || item === undefined ? [] : [[key, plain(item)]])))
}

/** The resource a mutation's `res` gives, as `type` (and `id` for an update); a `MutationFailure` when it disagrees. */
export const resourceOf = (type: string, res: unknown, id?: string): Record<string, unknown> => {
  if (!isRecord(res)) throw new MutationFailure(fail("structure", "res is not a resource"))
  const refused = checkBody(res, "the resource")
  if (refused !== undefined) throw new MutationFailure(refused)
  const given = res["resourceType"]
  if (given !== undefined && given !== null && given !== type) {
    throw new MutationFailure(fail("invalid", `res holds a ${String(given)}, but ${type}${id === undefined ? "Create" : "Update"} writes a ${type}`))
  }
  const givenId = res["id"]
  if (id !== undefined && givenId !== undefined && givenId !== null && givenId !== id) {
    throw new MutationFailure(fail("invalid", `res has the id ${JSON.stringify(givenId)}, but the mutation's id is ${JSON.stringify(id)}`))
  }
  const { resourceType: _, ...rest } = plain(res) as Record<string, unknown>
  return id === undefined ? { resourceType: type, ...rest } : { resourceType: type, id, ...rest }
}

/** The Mutation root type of `resourceTypes`, whose output types `objectType` gives (schema.ts). */
export const mutationType = (
  resourceTypes: ReadonlyArray<string>,
  objectType: (code: string) => GraphQLObjectType
): GraphQLObjectType => {
  const known = new Set(resourceTypes)
  const inputs = new Map<string, GraphQLInputObjectType>()

  /** Any resource as FHIR JSON, where the output type is the `Resource` union. */
  const resourceJson = (value: unknown): Record<string, unknown> => {
    if (!isRecord(value)) throw new TypeError("a resource is a JSON object")
    const type = value["resourceType"]
    if (typeof type !== "string" || !known.has(type)) {
      throw new TypeError(`a resource has the resourceType of a resource type this server knows, not ${JSON.stringify(type ?? null)}`)
    }
    return value
  }
  const resourceInput = new GraphQLScalarType({
    name: "ResourceInput",
    description: "Any resource, as FHIR JSON: an object with its resourceType (the input of a Resource field)",
    serialize: (value) => value,
    parseValue: resourceJson,
    parseLiteral: (ast, variables) => resourceJson(valueFromASTUntyped(ast, variables))
  })

  const inputOf = (type: GraphQLOutputType): GraphQLInputType => {
    if (isNonNullType(type)) return inputOf(type.ofType)
    if (isListType(type)) return new GraphQLList(inputOf(type.ofType))
    if (isScalarType(type) || isEnumType(type)) return type
    if (isObjectType(type)) return inputObject(type)
    return resourceInput
  }

  /** `TInput` of the object type `T` (`T_Input` when one of T's own fields already has a type named `TInput`). */
  const inputObject = (output: GraphQLObjectType): GraphQLInputObjectType => {
    const found = inputs.get(output.name)
    if (found !== undefined) return found
    const fields = output.getFields()
    const taken = Object.values(fields).some((field) => getNamedType(field.type).name === `${output.name}Input`)
    const made = new GraphQLInputObjectType({
      name: taken ? `${output.name}_Input` : `${output.name}Input`,
      description: `${output.name} as the input of a mutation`,
      fields: () => {
        const skipped = computed[output.name]
        const config: Record<string, GraphQLInputFieldConfig> = {}
        // A field named with a capital (`ObservationList`, a reverse reference) is a search, not an element.
        for (const [name, field] of Object.entries(fields)) {
          if (skipped?.has(name) !== true && !/^[A-Z]/.test(name)) config[name] = { type: inputOf(field.type) }
        }
        return config
      }
    })
    inputs.set(output.name, made)
    return made
  }

  const resArgument = (type: string) => ({ type: new GraphQLNonNull(inputObject(objectType(type))), description: `The ${type}, as FHIR JSON writes it` })
  const idArgument = { type: new GraphQLNonNull(GraphQLID) }

  const fieldsOf = (type: string): ReadonlyArray<readonly [string, GraphQLFieldConfig<unknown, MutationContext>]> => {
    const create: GraphQLFieldConfig<unknown, MutationContext, { readonly res: unknown }> = {
      type: objectType(type),
      description: `Creates a ${type} under an id of the server's: the version written (FHIR GraphQL, create)`,
      args: { res: resArgument(type) },
      resolve: (_root, args, context) => context.create(type, resourceOf(type, args.res))
    }
    const update: GraphQLFieldConfig<unknown, MutationContext, { readonly id: string; readonly res: unknown }> = {
      type: objectType(type),
      description: `Updates the ${type} of this id to res: the version written (FHIR GraphQL, update)`,
      args: { id: idArgument, res: resArgument(type) },
      resolve: (_root, args, context) => context.update(type, args.id, resourceOf(type, args.res, args.id))
    }
    const remove: GraphQLFieldConfig<unknown, MutationContext, { readonly id: string }> = {
      type: objectType("OperationOutcome"),
      description: `Deletes the ${type} of this id: an OperationOutcome saying so (FHIR GraphQL, delete)`,
      args: { id: idArgument },
      resolve: (_root, args, context) => context.delete(type, args.id)
    }
    return [[`${type}Create`, create], [`${type}Update`, update], ...(known.has("OperationOutcome") ? [[`${type}Delete`, remove] as const] : [])]
  }

  return new GraphQLObjectType({
    name: "Mutation",
    description: "FHIR GraphQL mutations: create, update and delete of every resource type",
    fields: () => Object.fromEntries(resourceTypes.flatMap(fieldsOf))
  })
}
