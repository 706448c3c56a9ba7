/**
 * The GraphQL schema of the installed FHIR types (FHIR R4 GraphQL, https://hl7.org/fhir/R4/graphql.html): an
 * object type for every resource type and every complex data type they reach, read from the StructureDefinitions'
 * snapshots, so that a package that adds or changes a type changes the schema with the next catalog.
 *
 * - Elements are fields under their JSON names: a choice element under each of its types (`valueQuantity`,
 *   `valueString`...), a repeating element as a list.
 * - A primitive is a scalar (`boolean` Boolean; `integer`, `positiveInt`, `unsignedInt` Int; `decimal` Float; every
 *   other primitive String), with a field `_name` of type `Element` (its `id` and `extension`), as FHIR JSON writes it.
 * - A backbone element is a type named after its path (`Patient.contact` is `PatientContact`); an element that
 *   repeats another's definition (`contentReference`) has that element's type.
 * - A `Resource` (`contained`, `Bundle.entry.resource`) is the union of the resource types, told apart by their
 *   `resourceType`; every resource type has a `resourceType` field.
 * - FHIR GraphQL's data-flattening directives (`@flatten`, `@first`, `@singleton`, `@slice`) are declared next to
 *   GraphQL's own; what they need while a query resolves is done by the repeating fields' resolver (directives.ts).
 *
 * Fields resolve to the properties of the resource's JSON of the same name (GraphQL's default), which is why the
 * names are the JSON names. A schema is built once per catalog (`schemaOf`); what a query reads comes with it, as
 * its context (`GraphQLContext`). Its `Mutation` root takes these types as inputs (mutations.ts).
 */
import {
  GraphQLBoolean,
  type GraphQLFieldConfig,
  type GraphQLFieldConfigMap,
  type GraphQLFieldResolver,
  GraphQLFloat,
  GraphQLID,
  GraphQLInt,
  GraphQLList,
  GraphQLNonNull,
  GraphQLObjectType,
  type GraphQLOutputType,
  type GraphQLScalarType,
  GraphQLSchema,
  GraphQLString,
  GraphQLUnionType,
  specifiedDirectives
} from "graphql"
import type { Catalog } from "../catalog/Catalog.ts"
import type { ElementDefinition, StructureDefinition } from "../catalog/definitions.ts"
import { fhirDirectives, recordSlice, type SliceKeys, takesFirst } from "./directives.ts"
import { listArguments, selectItems } from "./listFilters.ts"
import { type MutationContext, mutationType } from "./mutations.ts"
import { searchFields, type Searching } from "./searchFields.ts"

/**
 * What a query is executed with (GraphQL's context value): how the query root's `Type(id: ...)` fields read a
 * resource, as the caller may (a refusal or an unknown resource is an error of that field), and how searches
 * (searchFields.ts) read a page of matches; how mutations write.
 */
export interface GraphQLContext extends Searching, MutationContext {
  readonly read: (type: string, id: string) => Promise<Record<string, unknown>>
  /** The resource a reference (`Reference.reference`) points at, as the caller may read it (references.ts). */
  readonly resolve: (reference: string) => Promise<Record<string, unknown>>
  /** The slice names `@slice` gives the lists of this query, for the reshaping of its result (directives.ts). */
  readonly slices: SliceKeys
}

/** The scalar of a FHIR primitive type (or of the FHIRPath system types an element's `id` and `value` use). */
const scalarOf = (code: string): GraphQLScalarType => {
  switch (code) {
    case "boolean":
    case "http://hl7.org/fhirpath/System.Boolean":
      return GraphQLBoolean
    case "integer":
    case "positiveInt":
    case "unsignedInt":
    case "http://hl7.org/fhirpath/System.Integer":
      return GraphQLInt
    case "decimal":
    case "http://hl7.org/fhirpath/System.Decimal":
      return GraphQLFloat
    default:
      return GraphQLString
  }
}

const pascal = (text: string): string => text.charAt(0).toUpperCase() + text.slice(1)

/** Whether a type code is a primitive: FHIR's primitives begin with a lower-case letter; the FHIRPath types are URLs. */
const isPrimitive = (catalog: Catalog, code: string): boolean =>
  code.startsWith("http://hl7.org/fhirpath/") || catalog.structureDefinitionForType(code)?.kind === "primitive-type" || /^[a-z]/.test(code)

/** The JSON names of an element: `value[x]` of types Quantity and string is `valueQuantity` and `valueString`. */
const jsonNames = (name: string, codes: ReadonlyArray<string>): ReadonlyArray<{ readonly json: string; readonly code: string | undefined }> => {
  if (!name.endsWith("[x]")) return [{ json: name, code: codes.length === 1 ? codes[0] : undefined }]
  const base = name.slice(0, -3)
  return codes.map((code) => ({ json: base + pascal(code), code }))
}

/** The name of the type of a backbone element at `path`: `Patient.contact` → `PatientContact`. */
export const backboneName = (path: string): string => path.split(".").map(pascal).join("")

/** The children of the element at `path` in a snapshot: those one segment below it, slices left out. */
const childrenOf = (elements: ReadonlyArray<ElementDefinition>, path: string): ReadonlyArray<ElementDefinition> =>
  elements.filter((element) => element.sliceName === undefined && element.path.startsWith(`${path}.`) && !element.path.slice(path.length + 1).includes("."))

const repeats = (element: ElementDefinition): boolean => element.max !== undefined && element.max !== "0" && element.max !== "1"

/** The type a reference names: `Reference.type`, or the type in its literal reference (`Type/id`, `[url]/Type/id[/_history/v]`). */
const referencedType = (reference: Record<string, unknown>): string | undefined => {
  if (typeof reference["type"] === "string") return reference["type"]
  const text = reference["reference"]
  if (typeof text !== "string") return undefined
  return /(?:^|\/)([A-Z][A-Za-z]*)\/[A-Za-z0-9\-.]{1,64}(?:\/_history\/[^/]+)?$/.exec(text)?.[1]
}

/**
 * The resolver of a repeating element (`path`, its `json` name): its JSON array, as GraphQL's default resolver
 * reads it, less the items its arguments leave out (listFilters.ts). A field with directives on it has `@first`
 * taken here (nothing is resolved under the other elements) and the names of its `@slice` recorded (directives.ts).
 */
const listResolver = (json: string, path: string): GraphQLFieldResolver<unknown, unknown, Record<string, unknown>> => (source, args, context, info) => {
  const value = (source as Record<string, unknown>)[json]
  if (!Array.isArray(value)) return value
  const selected = Object.keys(args).length === 0 ? value : selectItems(value, args)
  if (!info.fieldNodes.some((node) => (node.directives?.length ?? 0) > 0)) return selected
  const elements = takesFirst(info) ? selected.slice(0, 1) : selected
  recordSlice(info, elements, (context as GraphQLContext).slices, path)
  return elements
}

/** Builds the schema of `catalog`. */
export const buildSchema = (catalog: Catalog): GraphQLSchema => {
  const types = new Map<string, GraphQLObjectType>()
  const resourceTypes = catalog.resourceTypes.filter((type) => catalog.structureDefinitionForType(type) !== undefined)

  const resourceUnion: GraphQLUnionType = new GraphQLUnionType({
    name: "Resource",
    description: "Any resource, told apart by its resourceType",
    types: () => resourceTypes.map((type) => objectType(type)),
    resolveType: (value: unknown) => (typeof value === "object" && value !== null ? String((value as Record<string, unknown>)["resourceType"]) : undefined)
  })

  /**
   * `Reference.resource`: the resource the reference points at (FHIR GraphQL), null with an error when it cannot be
   * given, or null alone with `optional: true`.
   */
  const referenceField: GraphQLFieldConfig<Record<string, unknown>, GraphQLContext, { readonly optional?: boolean | null; readonly type?: string | null }> = {
    type: resourceUnion,
    description: "The resource this reference points at",
    args: {
      optional: { type: GraphQLBoolean, description: "A reference that cannot be resolved is null, not an error" },
      type: { type: GraphQLString, description: "Only a reference to a resource of this type is resolved; another is null" }
    },
    resolve: (reference, args, context) => {
      const target = reference["reference"]
      if (typeof args.type === "string" && referencedType(reference) !== args.type) return null
      const resolving = typeof target === "string"
        ? context.resolve(target)
        : Promise.reject(new Error("the reference has no literal reference (Reference.reference) to resolve"))
      return args.optional === true ? resolving.catch(() => null) : resolving
    }
  }

  // `Element`: what the `_name` field of a primitive holds (its id and extensions), built from its own definition.
  const elementType = (): GraphQLObjectType => objectType("Element")

  /** The output type of one type code of an element at `path` (a backbone element's own type when it has children). */
  const fieldType = (owner: StructureDefinition, element: ElementDefinition, code: string | undefined): GraphQLOutputType => {
    const elements = owner.snapshot?.element ?? []
    if (element.contentReference?.startsWith("#") === true) {
      const target = element.contentReference.slice(1)
      return backboneType(owner, elements.find((candidate) => candidate.path === target)!)
    }
    if (code === undefined) return GraphQLString
    if ((code === "BackboneElement" || code === "Element") && childrenOf(elements, element.path).length > 0) return backboneType(owner, element)
    if (code === "Resource" || code === "DomainResource") return resourceUnion
    if (isPrimitive(catalog, code)) return scalarOf(code)
    if (catalog.isResourceType(code)) return objectType(code)
    return catalog.structureDefinitionForType(code) === undefined ? GraphQLString : objectType(code)
  }

  /** The JSON names of the primitive elements directly under the element (of type `code`): what its list's items can be filtered by. */
  const primitiveChildren = (owner: StructureDefinition, element: ElementDefinition, code: string | undefined): ReadonlyArray<string> => {
    let elements = owner.snapshot?.element ?? []
    let path = element.contentReference?.startsWith("#") === true ? element.contentReference.slice(1) : element.path
    if (element.contentReference === undefined && code !== undefined && childrenOf(elements, path).length === 0) {
      const definition = catalog.structureDefinitionForType(code)
      elements = definition?.snapshot?.element ?? []
      path = elements[0]?.path ?? code
    }
    // A choice (`Extension.value[x]`) is left out: its many types would each be an argument of every such list.
    return childrenOf(elements, path).flatMap((child) => {
      const name = child.path.slice(path.length + 1)
      const childCode = child.type.length === 1 ? child.type[0]!.code : undefined
      return !name.endsWith("[x]") && childCode !== undefined && isPrimitive(catalog, childCode) && /^[_A-Za-z][_0-9A-Za-z]*$/.test(name) ? [name] : []
    })
  }

  /**
   * A repeating element's field. Of a complex type, it takes the arguments that select some of its items
   * (listFilters.ts): a value for each of its primitive sub-elements, `fhirpath`, `_offset` and `_count`.
   */
  const listField = (json: string, type: GraphQLOutputType, owner: StructureDefinition, element: ElementDefinition, code: string | undefined): GraphQLFieldConfig<unknown, unknown> => {
    if (!(type instanceof GraphQLObjectType)) return { type: new GraphQLList(type), resolve: listResolver(json, element.path) }
    const filters = primitiveChildren(owner, element, code).filter((name) => !(listArguments as ReadonlyArray<string>).includes(name))
    return {
      type: new GraphQLList(type),
      args: {
        ...Object.fromEntries(filters.map((name) => [name, { type: GraphQLString, description: `Only the items whose ${name} is this value` }])),
        fhirpath: { type: GraphQLString, description: "Only the items this FHIRPath expression is true of" },
        _offset: { type: GraphQLInt, description: "Leave out this many items (after the filters)" },
        _count: { type: GraphQLInt, description: "At most this many items (after the filters and _offset)" }
      },
      resolve: listResolver(json, element.path)
    }
  }

  /** The fields of the elements directly under `path` in `owner`'s snapshot. */
  const fieldsOf = (owner: StructureDefinition, path: string): GraphQLFieldConfigMap<unknown, unknown> => {
    const fields: Record<string, GraphQLFieldConfig<unknown, unknown>> = {}
    for (const element of childrenOf(owner.snapshot?.element ?? [], path)) {
      const name = element.path.slice(path.length + 1)
      const codes = element.type.map((type) => type.code)
      for (const { json, code } of jsonNames(name, codes)) {
        if (!/^[_A-Za-z][_0-9A-Za-z]*$/.test(json)) continue
        const type = fieldType(owner, element, code)
        fields[json] = repeats(element) ? listField(json, type, owner, element, code) : { type }
        if (code !== undefined && isPrimitive(catalog, code) && !code.startsWith("http://hl7.org/fhirpath/")) {
          fields[`_${json}`] = repeats(element) ? { type: new GraphQLList(elementType()), resolve: listResolver(`_${json}`, "Element") } : { type: elementType() }
        }
      }
    }
    return fields
  }

  const backboneType = (owner: StructureDefinition, element: ElementDefinition): GraphQLObjectType => {
    const name = backboneName(element.path)
    const known = types.get(name)
    if (known !== undefined) return known
    const made = new GraphQLObjectType({ name, fields: () => fieldsOf(owner, element.path) })
    types.set(name, made)
    return made
  }

  function objectType(code: string): GraphQLObjectType {
    const known = types.get(code)
    if (known !== undefined) return known
    const definition = catalog.structureDefinitionForType(code)!
    const resource = catalog.isResourceType(code)
    const made = new GraphQLObjectType({
      name: code,
      fields: () => ({
        ...(resource ? { resourceType: { type: GraphQLString } } : {}),
        ...fieldsOf(definition, definition.snapshot?.element[0]?.path ?? code),
        ...(code === "Reference" ? { resource: referenceField } : {}),
        ...(resource ? searching.reverse(code) : {})
      })
    })
    types.set(code, made)
    return made
  }

  const searching = searchFields(catalog, objectType)

  const query = new GraphQLObjectType({
    name: "Query",
    fields: () =>
      Object.fromEntries(resourceTypes.flatMap((type) => [
        [type, {
          type: objectType(type),
          description: `The ${type} of this id (FHIR GraphQL, instance read)`,
          args: { id: { type: new GraphQLNonNull(GraphQLID) } },
          resolve: (_root: unknown, args: { readonly id: string }, context: GraphQLContext) => context.read(type, args.id)
        }],
        [`${type}List`, searching.list(type)],
        [`${type}Connection`, searching.connection(type)]
      ]))
  })
  return new GraphQLSchema({
    query,
    mutation: mutationType(resourceTypes, objectType),
    types: [resourceUnion],
    directives: [...specifiedDirectives, ...fhirDirectives]
  })
}

const schemas = new WeakMap<Catalog, GraphQLSchema>()
const instanceSchemas = new WeakMap<GraphQLSchema, Map<string, GraphQLSchema>>()

/** The schema of `catalog`, built on first use and kept while the catalog is (a new catalog has a new schema). */
export const schemaOf = (catalog: Catalog): GraphQLSchema => {
  let schema = schemas.get(catalog)
  if (schema === undefined) {
    schema = buildSchema(catalog)
    schemas.set(catalog, schema)
  }
  return schema
}

/**
 * The schema of a query on one resource of `type` (`[base]/{type}/{id}/$graphql`): the same types, with that
 * resource type as the query's root, so that `{ name { family } ObservationList(_reference: subject) { id } }`
 * asks about the resource itself. Built once per type and catalog.
 */
export const instanceSchemaOf = (catalog: Catalog, type: string): GraphQLSchema => {
  const schema = schemaOf(catalog)
  const byType = instanceSchemas.get(schema) ?? new Map<string, GraphQLSchema>()
  instanceSchemas.set(schema, byType)
  let made = byType.get(type)
  if (made === undefined) {
    made = new GraphQLSchema({ query: schema.getType(type) as GraphQLObjectType, types: Object.values(schema.getTypeMap()), directives: schema.getDirectives() })
    byType.set(type, made)
  }
  return made
}
