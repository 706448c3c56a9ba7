/**
 * FHIR GraphQL's data-flattening directives (https://hl7.org/fhir/R4/graphql.html, "Data Flattening Directives";
 * docs/graphql.md): `@flatten`, `@first`, `@singleton` and `@slice(path: ...)`. They are declared in the schema so
 * that a query using them validates; GraphQL then executes the query as written, and the result is reshaped as the
 * directives ask (`reshape`), walking the operation's selections alongside the data. Two things are only known
 * while the query resolves, from the source JSON, and are done there by the repeating fields' resolver (schema.ts):
 * `@first` keeps one element, so that nothing is resolved under the others, and `@slice` evaluates its FHIRPath on
 * each element and records the names it gives (`recordSlice`). A query that uses none of the four directives is
 * answered as GraphQL executed it.
 */
import fhirpath from "fhirpath"
import r4 from "fhirpath/fhir-context/r4"
import {
  BREAK,
  type DirectiveNode,
  DirectiveLocation,
  type DocumentNode,
  type ExecutionResult,
  type FieldNode,
  type FragmentDefinitionNode,
  getDirectiveValues,
  getOperationAST,
  GraphQLDirective,
  GraphQLError,
  GraphQLIncludeDirective,
  GraphQLNonNull,
  type GraphQLResolveInfo,
  GraphQLSkipDirective,
  GraphQLString,
  Kind,
  type OperationDefinitionNode,
  responsePathAsArray,
  type SelectionNode,
  type SelectionSetNode,
  valueFromASTUntyped,
  visit
} from "graphql"
import { expressionTooLarge } from "../fhirpath/expressionSize.ts"

const flattenDirective = new GraphQLDirective({
  name: "flatten",
  description: "The field is left out of the output; its children take its place, as lists when it repeats (FHIR GraphQL)",
  locations: [DirectiveLocation.FIELD]
})

const firstDirective = new GraphQLDirective({
  name: "first",
  description: "Only the first element of the field's list (FHIR GraphQL)",
  locations: [DirectiveLocation.FIELD]
})

const singletonDirective = new GraphQLDirective({
  name: "singleton",
  description: "Under a repeating @flatten: one value, not a list; an error when there are several (FHIR GraphQL)",
  locations: [DirectiveLocation.FIELD]
})

const sliceDirective = new GraphQLDirective({
  name: "slice",
  description: "Each element of the list names its outputs with '.' and the value of the FHIRPath `path` on it ($index: its index) (FHIR GraphQL)",
  locations: [DirectiveLocation.FIELD],
  args: { path: { type: new GraphQLNonNull(GraphQLString), description: "A FHIRPath expression, evaluated on each element" } }
})

/** The data-flattening directives, declared in the schema next to GraphQL's own (`@skip`, `@include`...). */
export const fhirDirectives: ReadonlyArray<GraphQLDirective> = [flattenDirective, firstDirective, singletonDirective, sliceDirective]

const fhirNames: ReadonlySet<string> = new Set(fhirDirectives.map((directive) => directive.name))

/** The slice names of each sliced list of one query, by the list field's response path (`Patient.name`). */
export type SliceKeys = Map<string, ReadonlyArray<string>>

const named = (nodes: ReadonlyArray<{ readonly directives?: ReadonlyArray<DirectiveNode> | undefined }>, name: string): boolean =>
  nodes.some((node) => node.directives?.some((directive) => directive.name.value === name) === true)

/** Whether the field being resolved carries `@first` (on any of its nodes GraphQL executes). */
export const takesFirst = (info: GraphQLResolveInfo): boolean => named(info.fieldNodes, "first")

/** Ends each element's values in the one evaluation of a slice's path over the whole list. */
const endMark = "\u0000svc-slice-end\u0000"

type Evaluate = (resource: unknown, variables: Record<string, unknown>) => ReadonlyArray<unknown>

const compiledPaths = new Map<string, Evaluate>()

/** Why `path` is not a FHIRPath expression (the engine's own message, its columns those of `path`). */
const parseError = (path: string): string => {
  try {
    fhirpath.compile(path, r4)
    return "it cannot be evaluated on its own"
  } catch (error) {
    return error instanceof Error ? error.message : String(error)
  }
}

/**
 * A slice's `path`, compiled to run once over a whole list: `select((path).combine(%end))` gives each element's
 * values followed by the end mark, with `$index` the element's index, as FHIRPath's `select` has it. With `base`,
 * the elements' path in their type (`HumanName.given`), the path reads a choice element by its name (`value`).
 */
const compileSlicePath = (path: string, base: string | undefined): Evaluate => {
  const cacheKey = `${base ?? ""}\u0000${path}`
  const known = compiledPaths.get(cacheKey)
  if (known !== undefined) return known
  const large = expressionTooLarge(path)
  if (large !== undefined) throw new Error(`@slice(path: ${JSON.stringify(path)}): ${large}`)
  let compiled: Evaluate
  try {
    const expression = `select((${path}).combine(%svcSliceEnd))`
    compiled = fhirpath.compile(base === undefined ? expression : { base, expression }, r4) as Evaluate
  } catch {
    throw new Error(`@slice(path: ${JSON.stringify(path)}) is not a FHIRPath expression: ${parseError(path)}`)
  }
  if (compiledPaths.size >= 256) compiledPaths.clear()
  compiledPaths.set(cacheKey, compiled)
  return compiled
}

/** Each element's slice name: its one value as text, or "" when it has none. Several values, or one not a primitive, are errors. */
const sliceNames = (path: string, base: string | undefined, elements: ReadonlyArray<unknown>): ReadonlyArray<string> => {
  const evaluate = compileSlicePath(path, base)
  let values: ReadonlyArray<unknown>
  try {
    values = evaluate([...elements], { svcSliceEnd: endMark })
  } catch (error) {
    throw new Error(`@slice(path: ${JSON.stringify(path)}) could not be evaluated: ${error instanceof Error ? error.message : String(error)}`)
  }
  const names: Array<string> = []
  let current: Array<unknown> = []
  for (const value of values) {
    if (value !== endMark) {
      current.push(value)
      continue
    }
    const index = names.length
    if (current.length > 1) throw new Error(`@slice(path: ${JSON.stringify(path)}) gives ${current.length} values for element ${index}; it may give one at most`)
    const [only] = current
    if (only !== undefined && typeof only !== "string" && typeof only !== "number" && typeof only !== "boolean") {
      throw new Error(`@slice(path: ${JSON.stringify(path)}) gives element ${index} a value that is not a primitive`)
    }
    names.push(only === undefined ? "" : String(only))
    current = []
  }
  if (names.length !== elements.length) throw new Error(`@slice(path: ${JSON.stringify(path)}) could not be evaluated on each element`)
  return names
}

/**
 * When the field being resolved carries `@slice`, the slice names of its `elements` (of the FHIR element `base`,
 * when known: `Patient.name`), kept under its response path.
 */
export const recordSlice = (info: GraphQLResolveInfo, elements: ReadonlyArray<unknown>, slices: SliceKeys, base?: string): void => {
  if (!named(info.fieldNodes, "slice")) return
  for (const node of info.fieldNodes) {
    const path = getDirectiveValues(sliceDirective, node, info.variableValues)?.["path"]
    if (typeof path === "string") {
      slices.set(responsePathAsArray(info.path).join("."), sliceNames(path, base, elements))
      return
    }
  }
}

const usesByDocument = new WeakMap<DocumentNode, boolean>()

/** Whether `document` uses any of the data-flattening directives (found once per document: documents are kept, prepared.ts). */
const usesFhirDirectives = (document: DocumentNode): boolean => {
  const known = usesByDocument.get(document)
  if (known !== undefined) return known
  const found = findsFhirDirectives(document)
  usesByDocument.set(document, found)
  return found
}

const findsFhirDirectives = (document: DocumentNode): boolean => {
  let found = false
  visit(document, {
    Directive(node) {
      if (!fhirNames.has(node.name.value)) return undefined
      found = true
      return BREAK
    }
  })
  return found
}

type Json = Record<string, unknown>

const isObject = (value: unknown): value is Json => typeof value === "object" && value !== null && !Array.isArray(value)

/**
 * Where the fields of one object go: under a repeating `@flatten` (`collecting`) each field's values are gathered
 * into a list, its nulls left out; `suffix` is what the `@slice`s above add to each output name.
 */
interface Place {
  readonly collecting: boolean
  readonly suffix: string
  /** Under a `@flatten`: a field without a value is left out, not null. */
  readonly flattened: boolean
}

/**
 * One output name of an object being built: GraphQL's value as it is (`plain`), the values gathered (`list`), or
 * the one value `@singleton` asks for (`one`).
 */
interface Entry {
  readonly mode: "plain" | "list" | "one"
  readonly values: Array<unknown>
}

type Path = ReadonlyArray<string | number>

/** The reshaping of one executed operation: its fragments, variables and slice names, and the errors it finds. */
const reshaper = (document: DocumentNode, variables: Json, slices: SliceKeys) => {
  const fragments = new Map<string, FragmentDefinitionNode>()
  for (const definition of document.definitions) {
    if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments.set(definition.name.value, definition)
  }
  const errors: Array<GraphQLError> = []
  // What was reported once already: a misplaced directive once per field node, a clash once per output name.
  const reported = new Map<unknown, Set<string>>()
  const fail = (message: string, path: Path, once: unknown): void => {
    const messages = reported.get(once) ?? new Set<string>()
    if (messages.has(message)) return
    reported.set(once, messages.add(message))
    errors.push(new GraphQLError(message, { path: [...path] }))
  }

  /** Whether GraphQL executed a selection: its `@skip` and `@include`, as GraphQL reads them. */
  const included = (node: SelectionNode): boolean => {
    if (node.directives === undefined || node.directives.length === 0) return true
    try {
      if (getDirectiveValues(GraphQLSkipDirective, node, variables)?.["if"] === true) return false
      return getDirectiveValues(GraphQLIncludeDirective, node, variables)?.["if"] !== false
    } catch {
      return true
    }
  }

  /**
   * Whether a fragment's type condition holds for `data`. Only a resource of the `Resource` union can be of
   * another type than its field's, and the data says which only when the query selects its `__typename` (or its
   * `resourceType`); without them, every fragment is taken to hold.
   */
  const applies = (typeName: string | undefined, data: Json): boolean => {
    const type = typeof data["__typename"] === "string" ? data["__typename"] : data["resourceType"]
    return typeName === undefined || typeof type !== "string" || typeName === type || typeName === "Resource"
  }

  /** The fields of `selections` by response key (alias, or name), as GraphQL collects them for `data`. */
  const collect = (selections: ReadonlyArray<SelectionSetNode>, data: Json, fields = new Map<string, Array<FieldNode>>(), seen = new Set<string>()) => {
    for (const set of selections) {
      for (const selection of set.selections) {
        if (!included(selection)) continue
        if (selection.kind === Kind.FIELD) {
          const key = selection.alias?.value ?? selection.name.value
          const nodes = fields.get(key)
          if (nodes === undefined) fields.set(key, [selection])
          else nodes.push(selection)
        } else if (selection.kind === Kind.INLINE_FRAGMENT) {
          if (applies(selection.typeCondition?.name.value, data)) collect([selection.selectionSet], data, fields, seen)
        } else {
          const fragment = fragments.get(selection.name.value)
          if (fragment === undefined || seen.has(fragment.name.value) || !applies(fragment.typeCondition.name.value, data)) continue
          seen.add(fragment.name.value)
          collect([fragment.selectionSet], data, fields, seen)
        }
      }
    }
    return fields
  }

  const put = (out: Map<string, Entry>, name: string, mode: Entry["mode"], value: unknown, path: Path): void => {
    const entry = out.get(name)
    if (entry === undefined) {
      out.set(name, { mode, values: [value] })
    } else if (entry.mode !== mode || mode === "plain") {
      fail(`Two fields give the output name "${name}" (after @flatten); give one of them an alias`, [...path, name], [...path, name].join("."))
      out.set(name, { mode: "plain", values: [null, null] })
    } else {
      entry.values.push(value)
    }
  }

  /** The output of one object: its fields reshaped, in the order they first give a value. */
  const object = (selections: ReadonlyArray<SelectionSetNode>, data: Json, source: Path, path: Path): Json => {
    const out = new Map<string, Entry>()
    into(selections, data, source, out, path, { collecting: false, suffix: "", flattened: false })
    // Without a prototype, as GraphQL's own results: an output name is never an Object property.
    const result: Json = Object.create(null)
    for (const [name, entry] of out) {
      if (entry.mode === "list") result[name] = entry.values
      else if (entry.values.length === 1) result[name] = entry.values[0]
      else {
        if (entry.mode === "one") errors.push(new GraphQLError(`@singleton: "${name}" has ${entry.values.length} values`, { path: [...path, name] }))
        result[name] = null
      }
    }
    return result
  }

  /** A value of GraphQL's result reshaped: an object by its selections, a list element by element. */
  const value = (nodes: ReadonlyArray<FieldNode>, data: unknown, source: Path, path: Path): unknown => {
    if (Array.isArray(data)) return data.map((item, index) => value(nodes, item, [...source, index], [...path, index]))
    if (!isObject(data)) return data
    return object(subSelections(nodes), data, source, path)
  }

  const subSelections = (nodes: ReadonlyArray<FieldNode>): ReadonlyArray<SelectionSetNode> =>
    nodes.flatMap((node) => (node.selectionSet === undefined ? [] : [node.selectionSet]))

  /** The fields of `data` put into `out` (an object's own, or those a `@flatten` below it puts in its place). */
  const into = (selections: ReadonlyArray<SelectionSetNode>, data: Json, source: Path, out: Map<string, Entry>, path: Path, place: Place): void => {
    for (const [key, nodes] of collect(selections, data)) {
      if (key in data) field(nodes, key, data[key], [...source, key], out, path, place)
    }
  }

  /** The slice names of a field's elements (recorded as it resolved), or undefined when it has no `@slice`. */
  const sliced = (nodes: ReadonlyArray<FieldNode>, key: string, data: unknown, source: Path, path: Path): ReadonlyArray<string> | undefined => {
    if (!named(nodes, "slice") || data === null) return undefined
    const names = Array.isArray(data) ? slices.get(source.join(".")) : undefined
    if (names === undefined) fail(`@slice on "${key}": only a repeating field can be sliced`, [...path, key], nodes[0])
    return names
  }

  /** One field of `data` (its response key `key`) put into `out` as its directives ask. */
  const field = (nodes: ReadonlyArray<FieldNode>, key: string, data: unknown, source: Path, out: Map<string, Entry>, path: Path, place: Place): void => {
    const list = Array.isArray(data)
    const first = named(nodes, "first")
    const elements: ReadonlyArray<unknown> = list ? (first ? data.slice(0, 1) : data) : data === null ? [] : [data]
    const names = sliced(nodes, key, data, source, path)
    const suffix = (index: number): string => {
      const name = names?.[index] ?? ""
      return name === "" ? place.suffix : `${place.suffix}.${name}`
    }
    const gathers = place.collecting || (list && !first)
    const at = (index: number): Path => (list ? [...source, index] : source)
    if (named(nodes, "flatten")) {
      const selections = subSelections(nodes)
      if (selections.length > 0) {
        elements.forEach((element, index) => {
          if (isObject(element)) into(selections, element, at(index), out, path, { collecting: gathers, suffix: suffix(index), flattened: true })
        })
        return
      }
      // Given as if it had no @flatten.
      fail(`@flatten on "${key}": only a field with a selection of fields can be flattened`, [...path, key], nodes[0])
    }
    const singleton = named(nodes, "singleton")
    if (!place.collecting && names === undefined && !(singleton && list)) {
      // GraphQL's own value (its first element's, with @first); under a @flatten, left out when it is null.
      const name = key + place.suffix
      const own = list && first ? value(nodes, elements[0] ?? null, at(0), [...path, name]) : value(nodes, data, source, [...path, name])
      if (own !== null || !place.flattened) put(out, name, "plain", own, path)
      return
    }
    const mode = singleton ? "one" : gathers ? "list" : "plain"
    if (elements.length === 0 && mode === "one" && !place.flattened) put(out, key + place.suffix, "plain", null, path)
    elements.forEach((element, index) => {
      if (element === null || element === undefined) return
      const name = key + suffix(index)
      const count = out.get(name)?.values.length ?? 0
      put(out, name, mode, value(nodes, element, at(index), mode === "list" ? [...path, name, count] : [...path, name]), path)
    })
  }

  return { object, errors }
}

/** The operation's variables as GraphQL reads them: those given, and the defaults of those not given. */
const withDefaults = (operation: OperationDefinitionNode, given: Readonly<Json> | undefined): Json => {
  const values: Json = { ...given }
  for (const definition of operation.variableDefinitions ?? []) {
    const name = definition.variable.name.value
    if (values[name] === undefined && definition.defaultValue !== undefined) values[name] = valueFromASTUntyped(definition.defaultValue)
  }
  return values
}

/**
 * The result of executing `document` reshaped as its data-flattening directives ask: output names are response
 * keys (an alias, or the field's name) with the `@slice` names added; the errors it finds (a `@singleton` with
 * several values, a directive where it cannot apply) are added to the result's, each with its path in the output.
 * A document without these directives, or a result without data, is returned as it is.
 */
export const reshape = (
  document: DocumentNode,
  operationName: string | undefined,
  result: ExecutionResult,
  slices: SliceKeys,
  variables?: Readonly<Record<string, unknown>>
): ExecutionResult => {
  if (result.data === null || result.data === undefined || !usesFhirDirectives(document)) return result
  const operation = getOperationAST(document, operationName)
  if (operation === null || operation === undefined) return result
  try {
    const run = reshaper(document, withDefaults(operation, variables), slices)
    const data = run.object([operation.selectionSet], result.data, [], [])
    if (run.errors.length === 0) return { ...result, data }
    return { ...result, data, errors: [...(result.errors ?? []), ...run.errors] }
  } catch (error) {
    // Not expected; an answer all the same, never a failed request.
    return { ...result, errors: [...(result.errors ?? []), new GraphQLError(`The answer could not be flattened: ${error instanceof Error ? error.message : String(error)}`)] }
  }
}
