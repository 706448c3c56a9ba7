/**
 * Compiles SearchParameter, CompartmentDefinition, OperationDefinition and ValueSet resources: each reader
 * gives the plain data the catalog keeps (JSON, so that it can be stored), and each constructor the
 * definition over that data and the resource's source.
 */
import type {
  CompartmentDef,
  OperationDef,
  OperationParameterDef,
  SearchParameterDef,
  SearchParamType,
  ValueSetDef,
  ValueSetInclude
} from "./definitions.ts"
import { bool, int, type Json, object, objects, str, strings } from "./json.ts"
import { readBinding } from "./readStructure.ts"
import type { Source } from "./source.ts"

const searchTypes = new Set(["number", "date", "string", "token", "reference", "composite", "quantity", "uri", "special"])

const isSearchType = (value: string | undefined): value is SearchParamType => value !== undefined && searchTypes.has(value)

const header = (json: Json) => ({ version: str(json, "version"), name: str(json, "name") })

const missing = (resourceType: string, field: string) => `${resourceType}.${field} is missing`

export type SearchParameterData = Omit<SearchParameterDef, "resource">

export const readSearchParameter = (json: Json): SearchParameterData | string => {
  const url = str(json, "url")
  const code = str(json, "code")
  const base = strings(json, "base")
  const type = str(json, "type")
  if (url === undefined || url === "") return missing("SearchParameter", "url")
  if (code === undefined || code === "") return missing("SearchParameter", "code")
  if (base.length === 0) return missing("SearchParameter", "base")
  if (!isSearchType(type)) return `SearchParameter.type ${JSON.stringify(type)} is not a search parameter type`
  const components: Array<{ definition: string; expression: string }> = []
  for (const component of objects(json, "component")) {
    const definition = str(component, "definition")
    const expression = str(component, "expression")
    if (definition === undefined || expression === undefined) return "SearchParameter.component needs definition and expression"
    components.push({ definition, expression })
  }
  if (type === "composite" && components.length === 0) return "a composite SearchParameter has no components"
  return {
    url,
    ...header(json),
    code,
    base,
    type,
    expression: str(json, "expression"),
    target: strings(json, "target"),
    modifiers: strings(json, "modifier"),
    comparators: strings(json, "comparator"),
    multipleOr: bool(json, "multipleOr") ?? true,
    multipleAnd: bool(json, "multipleAnd") ?? true,
    chain: strings(json, "chain"),
    components
  }
}

export type CompartmentData = Omit<CompartmentDef, "resource" | "resources"> & {
  readonly resources: ReadonlyArray<readonly [string, ReadonlyArray<string>]>
}

export const readCompartmentDefinition = (json: Json): CompartmentData | string => {
  const url = str(json, "url")
  const code = str(json, "code")
  if (url === undefined || url === "") return missing("CompartmentDefinition", "url")
  if (code === undefined || code === "") return missing("CompartmentDefinition", "code")
  const resources = new Map<string, ReadonlyArray<string>>()
  for (const entry of objects(json, "resource")) {
    const type = str(entry, "code")
    const params = strings(entry, "param")
    if (type !== undefined && params.length > 0) resources.set(type, params)
  }
  return { url, ...header(json), code, search: bool(json, "search") ?? false, resources: [...resources] }
}

const readParameter = (json: Json): OperationParameterDef | string => {
  const name = str(json, "name")
  const use = str(json, "use")
  const min = int(json, "min")
  const max = str(json, "max")
  if (name === undefined) return missing("OperationDefinition.parameter", "name")
  if (use !== "in" && use !== "out") return `OperationDefinition.parameter ${name} has no use in or out`
  if (min === undefined || max === undefined) return `OperationDefinition.parameter ${name} needs min and max`
  const part: Array<OperationParameterDef> = []
  for (const item of objects(json, "part")) {
    const read = readParameter(item)
    if (typeof read === "string") return read
    part.push(read)
  }
  return {
    name,
    use,
    min,
    max,
    type: str(json, "type"),
    searchType: str(json, "searchType"),
    targetProfile: strings(json, "targetProfile"),
    binding: readBinding(object(json, "binding")),
    part
  }
}

export type OperationData = Omit<OperationDef, "resource">

export const readOperationDefinition = (json: Json): OperationData | string => {
  const url = str(json, "url")
  const code = str(json, "code")
  const kind = str(json, "kind")
  const system = bool(json, "system")
  const type = bool(json, "type")
  const instance = bool(json, "instance")
  if (url === undefined || url === "") return missing("OperationDefinition", "url")
  if (code === undefined || code === "") return missing("OperationDefinition", "code")
  if (kind !== "operation" && kind !== "query") return `OperationDefinition.kind ${JSON.stringify(kind)} is not operation or query`
  if (system === undefined || type === undefined || instance === undefined) {
    return "OperationDefinition needs system, type and instance"
  }
  const parameters: Array<OperationParameterDef> = []
  for (const item of objects(json, "parameter")) {
    const read = readParameter(item)
    if (typeof read === "string") return read
    parameters.push(read)
  }
  return {
    url,
    ...header(json),
    code,
    kind,
    system,
    type,
    instance,
    resourceTypes: strings(json, "resource"),
    affectsState: bool(json, "affectsState"),
    parameters
  }
}

const readInclude = (json: Json): ValueSetInclude => {
  const concept: Array<{ code: string; display: string | undefined }> = []
  for (const item of objects(json, "concept")) {
    const code = str(item, "code")
    if (code !== undefined) concept.push({ code, display: str(item, "display") })
  }
  const filter: Array<{ property: string; op: string; value: string }> = []
  for (const item of objects(json, "filter")) {
    const property = str(item, "property")
    const op = str(item, "op")
    const value = str(item, "value")
    if (property !== undefined && op !== undefined && value !== undefined) filter.push({ property, op, value })
  }
  return { system: str(json, "system"), version: str(json, "version"), concept, filter, valueSet: strings(json, "valueSet") }
}

export type ValueSetData = Omit<ValueSetDef, "resource" | "compose">

export const readValueSet = (json: Json): ValueSetData | string => {
  const url = str(json, "url")
  if (url === undefined || url === "") return missing("ValueSet", "url")
  return { url, ...header(json), hasExpansion: object(json, "expansion") !== undefined }
}

const readCompose = (json: Json): ValueSetDef["compose"] => {
  const composeJson = object(json, "compose")
  return composeJson === undefined
    ? undefined
    : { include: objects(composeJson, "include").map(readInclude), exclude: objects(composeJson, "exclude").map(readInclude) }
}

// The constructors name every field, so that a field left out of stored JSON (undefined) is present again.

export const searchParameterDef = (data: SearchParameterData, source: Source): SearchParameterDef => ({
  url: data.url,
  version: data.version,
  name: data.name,
  get resource() {
    return source.json()
  },
  code: data.code,
  base: data.base,
  type: data.type,
  expression: data.expression,
  target: data.target,
  modifiers: data.modifiers,
  comparators: data.comparators,
  multipleOr: data.multipleOr,
  multipleAnd: data.multipleAnd,
  chain: data.chain,
  components: data.components
})

export const compartmentDef = (data: CompartmentData, source: Source): CompartmentDef => ({
  url: data.url,
  version: data.version,
  name: data.name,
  get resource() {
    return source.json()
  },
  code: data.code,
  search: data.search,
  resources: new Map(data.resources)
})

const operationParameter = (data: OperationParameterDef): OperationParameterDef => ({
  name: data.name,
  use: data.use,
  min: data.min,
  max: data.max,
  type: data.type,
  searchType: data.searchType,
  targetProfile: data.targetProfile,
  binding: data.binding === undefined ? undefined : { strength: data.binding.strength, valueSet: data.binding.valueSet },
  part: data.part.map(operationParameter)
})

export const operationDef = (data: OperationData, source: Source): OperationDef => ({
  url: data.url,
  version: data.version,
  name: data.name,
  get resource() {
    return source.json()
  },
  code: data.code,
  kind: data.kind,
  system: data.system,
  type: data.type,
  instance: data.instance,
  resourceTypes: data.resourceTypes,
  affectsState: data.affectsState,
  parameters: data.parameters.map(operationParameter)
})

export const valueSetDef = (data: ValueSetData, source: Source): ValueSetDef => ({
  url: data.url,
  version: data.version,
  name: data.name,
  get resource() {
    return source.json()
  },
  get compose() {
    return source.derived("compose", readCompose)
  },
  hasExpansion: data.hasExpansion
})
