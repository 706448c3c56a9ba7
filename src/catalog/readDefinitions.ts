/** Compiles SearchParameter, CompartmentDefinition, OperationDefinition and ValueSet resources. */
import type {
  CompartmentDef,
  OperationDef,
  OperationParameterDef,
  SearchParameterDef,
  SearchParamType,
  ValueSetDef,
  ValueSetInclude
} from "./definitions.ts"
import { bool, int, type Json, lazy, object, objects, str, strings } from "./json.ts"
import { readBinding } from "./readStructure.ts"

const searchTypes = new Set(["number", "date", "string", "token", "reference", "composite", "quantity", "uri", "special"])

const isSearchType = (value: string | undefined): value is SearchParamType => value !== undefined && searchTypes.has(value)

const header = (json: Json) => ({ version: str(json, "version"), name: str(json, "name"), resource: json })

const missing = (resourceType: string, field: string) => `${resourceType}.${field} is missing`

export const readSearchParameter = (json: Json): SearchParameterDef | string => {
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

export const readCompartmentDefinition = (json: Json): CompartmentDef | string => {
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
  return { url, ...header(json), code, search: bool(json, "search") ?? false, resources }
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

export const readOperationDefinition = (json: Json): OperationDef | string => {
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

export const readValueSet = (json: Json): ValueSetDef | string => {
  const url = str(json, "url")
  if (url === undefined || url === "") return missing("ValueSet", "url")
  const composeJson = object(json, "compose")
  const compose = lazy(() =>
    composeJson === undefined
      ? undefined
      : { include: objects(composeJson, "include").map(readInclude), exclude: objects(composeJson, "exclude").map(readInclude) }
  )
  return {
    url,
    ...header(json),
    get compose() {
      return compose()
    },
    hasExpansion: object(json, "expansion") !== undefined
  }
}
