/**
 * A hint on Parameters resources (https://hl7.org/fhir/R4/parameters.html), as the HL7 reference validator
 * gives it: a parameter named like a parameter of an operation of the core specification
 * (https://hl7.org/fhir/R4/operationslist.html) is probably meant as that parameter, so a value or resource of
 * another type than the core operations give it is worth a look. Only the top-level parameters are judged,
 * and only by their names (the operation a Parameters resource is for is not known from the resource alone),
 * so these are information issues. The names and their types come from the core OperationDefinitions the
 * catalog holds (those whose url is under http://hl7.org/fhir/OperationDefinition/), computed once per catalog.
 */
import type { Catalog } from "../catalog/Catalog.ts"
import { isObject, type Json } from "../catalog/json.ts"
import { canonicalResourceTypes } from "./canonical.ts"
import type { Rule } from "./Reporter.ts"

interface Expected {
  /** The data types a value may have. */
  readonly values: ReadonlyArray<string>
  /** The resource types a resource may have (`Resource` for any). */
  readonly resources: ReadonlyArray<string>
  /** Some core operation has the parameter with parts only (no type). */
  readonly parts: boolean
}

const corePrefix = "http://hl7.org/fhir/OperationDefinition/"

const tables = new WeakMap<Catalog, ReadonlyMap<string, Expected>>()

const table = (catalog: Catalog): ReadonlyMap<string, Expected> => {
  const known = tables.get(catalog)
  if (known !== undefined) return known
  const types = new Map<string, Set<string>>()
  const parted = new Set<string>()
  for (const operation of catalog.operations) {
    if (!operation.url.startsWith(corePrefix)) continue
    for (const parameter of operation.parameters) {
      const set = types.get(parameter.name) ?? new Set<string>()
      types.set(parameter.name, set)
      if (parameter.type === undefined) parted.add(parameter.name)
      else set.add(parameter.type)
    }
  }
  const result = new Map<string, Expected>()
  for (const [name, set] of types) {
    // A parameter of any type (R4 writes `Any`) or of no type at all in every operation: nothing to compare with.
    if (set.has("Any") || set.has("Element") || set.size === 0) continue
    const all = [...set].sort()
    const isResource = (type: string): boolean => type === "Resource" || type === "DomainResource" || catalog.isResourceType(type)
    result.set(name, { values: all.filter((t) => !isResource(t)), resources: all.filter(isResource), parts: parted.has(name) })
  }
  tables.set(catalog, result)
  return result
}

const primitiveTypes = new Set([
  "boolean", "integer", "string", "decimal", "uri", "url", "canonical", "base64Binary", "instant", "date", "dateTime",
  "time", "code", "oid", "id", "markdown", "unsignedInt", "positiveInt", "uuid"
])

/** The type of a parameter's value[x], from its JSON property name. */
const valueType = (parameter: Json): string | undefined => {
  for (const key of Object.keys(parameter)) {
    if (!key.startsWith("value") || key.length <= 5) continue
    const suffix = key.slice(5)
    const lower = suffix.charAt(0).toLowerCase() + suffix.slice(1)
    return primitiveTypes.has(lower) ? lower : suffix
  }
  return undefined
}

const matchesResource = (allowed: string, type: string, catalog: Catalog): boolean =>
  allowed === type ||
  ((allowed === "Resource" || allowed === "DomainResource") && catalog.isResourceType(type)) ||
  (allowed === "CanonicalResource" && canonicalResourceTypes.has(type))

const or = (types: ReadonlyArray<string>): string =>
  types.length <= 1 ? (types[0] ?? "") : `${types.slice(0, -1).join(", ")} or ${types[types.length - 1]}`

const preface = (name: string): string =>
  `The parameter '${name}' has the name of a parameter of at least one operation of the core specification`

const parameters: Rule = (value, path, reporter) => {
  const params = value["parameter"]
  if (!Array.isArray(params)) return
  const catalog = reporter.registry.catalog
  const expected = table(catalog)
  params.forEach((parameter, i) => {
    if (!isObject(parameter) || typeof parameter["name"] !== "string") return
    const name = parameter["name"]
    const rule = expected.get(name)
    if (rule === undefined) return
    const at = `${path}.parameter[${i}]`
    const type = valueType(parameter)
    const resource = parameter["resource"]
    const resourceType = isObject(resource) && typeof resource["resourceType"] === "string" ? resource["resourceType"] : undefined
    const all = [...rule.values, ...rule.resources]
    const hint = (text: string): void => reporter.report("information", "business-rule", at, `${preface(name)}. ${text} Check that this is correct`)
    if (type === undefined && resourceType === undefined) {
      if (rule.parts && Array.isArray(parameter["part"])) return
      if (rule.resources.length === 0) hint("There it has a value, but this parameter has none.")
      else if (rule.values.length === 0) hint("There it has a resource, but this parameter has none.")
      else hint(`There its type or resource type is ${or(all)}, but this parameter has neither a value nor a resource.`)
      return
    }
    if (type !== undefined) {
      if (rule.values.length === 0) hint(`There it has a resource (${or(rule.resources)}), but this parameter has a value of type ${type} instead.`)
      else if (!rule.values.includes(type)) {
        hint(`There ${rule.values.length === 1 ? "its type is" : "its types are"} ${or(rule.values)}, but this parameter has a value of type ${type}.`)
      }
      return
    }
    if (resourceType !== undefined && !rule.resources.some((allowed) => matchesResource(allowed, resourceType, catalog))) {
      if (rule.resources.length === 0) hint(`There it has a value of type ${or(rule.values)}, but this parameter has a resource of type ${resourceType}.`)
      else if (rule.values.length === 0) {
        hint(`There ${rule.resources.length === 1 ? "its resource type is" : "its resource types are"} ${or(rule.resources)}, but this parameter has a resource of type ${resourceType}.`)
      } else hint(`There its type or resource type is ${or(all)}, but this parameter has a resource of type ${resourceType}.`)
    }
  })
}

export const parametersRules: ReadonlyArray<readonly [string, Rule]> = [["Parameters", parameters]]
