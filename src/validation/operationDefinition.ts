/**
 * Rules of OperationDefinition (https://hl7.org/fhir/R4/operationdefinition.html) that the HL7 reference
 * validator checks beyond the invariants:
 * - `base` does not lead, through the operations the server knows, back to the operation itself;
 * - `inputProfile` and `outputProfile` name a known profile on Parameters, and that profile and the declared
 *   parameters of the same use agree: each parameter slice of the profile (told by its fixed `name`) is a
 *   declared parameter and each declared parameter is a slice; a slice's cardinality, types (value[x] and
 *   resource, unless excluded) and target profiles are the parameter's (`type`, or the
 *   operationdefinition-allowed-type extension, and `targetProfile`).
 * The profile is read from its snapshot; a profile the catalog holds without one is not compared.
 */
import type { OperationDef, StructureDefinition, ElementDefinition } from "../catalog/Catalog.ts"
import { isObject, type Json } from "../catalog/json.ts"
import type { Reporter, Rule } from "./Reporter.ts"

const list = (value: unknown): ReadonlyArray<unknown> => (Array.isArray(value) ? value : [])
const text = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined)

const allowedTypeExtension = "http://hl7.org/fhir/StructureDefinition/operationdefinition-allowed-type"

/** The operations the catalog holds by url, computed once per catalog. */
const operationsByUrl = new WeakMap<object, ReadonlyMap<string, OperationDef>>()

const operationByUrl = (reporter: Reporter, url: string): OperationDef | undefined => {
  const catalog = reporter.registry.catalog
  let byUrl = operationsByUrl.get(catalog)
  if (byUrl === undefined) {
    const map = new Map<string, OperationDef>()
    for (const operation of catalog.operations) {
      if (!map.has(operation.url)) map.set(operation.url, operation)
      if (operation.version !== undefined) map.set(`${operation.url}|${operation.version}`, operation)
    }
    byUrl = map
    operationsByUrl.set(catalog, byUrl)
  }
  return byUrl.get(url) ?? (url.includes("|") ? byUrl.get(url.slice(0, url.indexOf("|"))) : undefined)
}

const unversioned = (url: string): string => (url.includes("|") ? url.slice(0, url.indexOf("|")) : url)

/** The chain of bases, followed through the operations the catalog holds, names the operation's own url. */
const circularBase = (value: Json, path: string, reporter: Reporter): void => {
  const url = text(value["url"])
  let base = text(value["base"])
  if (url === undefined || base === undefined) return
  let last = url
  const seen = new Set<string>()
  while (base !== undefined && !seen.has(unversioned(base))) {
    const operation = operationByUrl(reporter, base)
    if (unversioned(base) === url || operation?.url === url) {
      reporter.report("error", "unknown", path, `The definition of the operation is circular: it depends on itself (url = '${url}', from '${last}')`)
      return
    }
    if (operation === undefined) return
    seen.add(unversioned(base))
    last = base
    base = text(operation.resource["base"])
  }
}

/** The direct children of the element at `index` in a snapshot: `name` is the last part of their path. */
const childrenOf = (elements: ReadonlyArray<ElementDefinition>, index: number): Map<string, ElementDefinition> => {
  const parent = elements[index]!
  const prefix = `${parent.path}.`
  const children = new Map<string, ElementDefinition>()
  for (let i = index + 1; i < elements.length; i++) {
    const element = elements[i]!
    if (!element.path.startsWith(prefix)) break
    const rest = element.path.slice(prefix.length)
    if (rest.includes(".") || element.sliceName !== undefined) continue
    const name = rest.endsWith("[x]") ? rest.slice(0, -3) : rest
    if (!children.has(name)) children.set(name, element)
  }
  return children
}

const primitive = (value: unknown): string | undefined =>
  typeof value === "string" || typeof value === "number" || typeof value === "boolean" ? String(value) : undefined

const sortedList = (values: ReadonlyArray<string>): string => {
  if (values.length === 0) return "(none)"
  const sorted = [...values].sort()
  return sorted.length === 1 ? sorted[0]! : `${sorted.slice(0, -1).join(",")} and ${sorted[sorted.length - 1]}`
}

const parseMax = (max: unknown): number | undefined => {
  if (max === "*") return Number.POSITIVE_INFINITY
  if (typeof max !== "string" || !/^[0-9]+$/.test(max)) return undefined
  return Number(max)
}

/** Whether the value[x] or resource element of a slice can be used: not excluded, and neither other child is required. */
const used = (focus: ElementDefinition, others: ReadonlyArray<ElementDefinition | undefined>): boolean =>
  focus.max !== "0" && others.every((other) => (other?.min ?? 0) === 0)

const compare = (
  reporter: Reporter, at: string, use: string, name: string, slice: ElementDefinition,
  children: ReadonlyMap<string, ElementDefinition>, param: Json, profileUrl: string
): void => {
  const minParam = param["min"]
  if (typeof minParam === "number" && minParam !== (slice.min ?? 0)) {
    reporter.report("error", "unknown", at,
      `The parameter '${name}' has a min of ${slice.min ?? 0} in the '${use}' profile ${profileUrl}, different from ${minParam}, its min in the operation definition`)
  }
  const maxParam = parseMax(param["max"])
  const maxProfile = parseMax(slice.max)
  if (maxParam !== undefined && maxProfile !== undefined && maxParam !== maxProfile) {
    reporter.report("error", "unknown", at,
      `The parameter '${name}' has a max of ${slice.max ?? ""} in the '${use}' profile ${profileUrl}, different from ${String(param["max"])}, its max in the operation definition`)
  }
  const allowedTypes: Array<string> = []
  const typeExtensions = list(param["extension"]).filter((e): e is Json => isObject(e) && e["url"] === allowedTypeExtension)
  if (typeExtensions.length > 0) {
    for (const e of typeExtensions) {
      const code = text(e["valueUri"]) ?? text(e["valueCode"]) ?? text(e["valueString"])
      if (code !== undefined) allowedTypes.push(code)
    }
  } else if (typeof param["type"] === "string") {
    allowedTypes.push(param["type"])
  }
  const allowedTargets = list(param["targetProfile"]).filter((t): t is string => typeof t === "string")
  const profileTypes: Array<string> = []
  const profileTargets: Array<string> = []
  const value = children.get("value")
  const resource = children.get("resource")
  const part = children.get("part")
  const collect = (element: ElementDefinition): void => {
    for (const type of element.type) {
      profileTypes.push(type.code)
      profileTargets.push(...type.targetProfile)
      if (!allowedTypes.includes(type.code)) {
        reporter.report("error", "invalid", at,
          `The type '${type.code}' is allowed for the parameter '${name}' in the '${use}' profile ${profileUrl} but not by the parameter in the operation definition: ${sortedList(allowedTypes)}`)
      }
    }
  }
  if (value !== undefined && used(value, [resource, part])) collect(value)
  if (resource !== undefined && used(resource, [value, part])) collect(resource)
  for (const type of allowedTypes) {
    if (!profileTypes.includes(type)) {
      reporter.report("error", "invalid", at,
        `The type '${type}' is allowed for the parameter '${name}' in the operation definition but not in the '${use}' profile ${profileUrl} (its types: ${sortedList(profileTypes)})`)
    }
  }
  for (const target of allowedTargets) {
    if (!profileTargets.includes(target)) {
      reporter.report("error", "invalid", at,
        `The target profile '${target}' is listed for the parameter '${name}' in the operation definition but not allowed in the '${use}' profile (its target profiles: ${sortedList(profileTargets)})`)
    }
  }
  // A parameter of type Element may hold several types, and opd-3 keeps it from listing target profiles.
  if (typeof param["type"] === "string" && param["type"] !== "Element") {
    for (const target of profileTargets) {
      if (!allowedTargets.includes(target)) {
        reporter.report("error", "invalid", at,
          `The target profile '${target}' is allowed for the parameter '${name}' in the '${use}' profile ${profileUrl} but is not listed for it in the operation definition: ${sortedList(allowedTargets)}`)
      }
    }
  }
}

const profileAgainstParameters = (value: Json, path: string, field: "inputProfile" | "outputProfile", use: "in" | "out", reporter: Reporter): void => {
  const url = text(value[field])
  if (url === undefined) return
  const at = `${path}.${field}`
  const profile: StructureDefinition | undefined = reporter.registry.catalog.structureDefinition(url)
  if (profile === undefined) {
    reporter.report("error", "unknown", at, `The '${use}' profile '${url}' can not be resolved`)
    return
  }
  if (profile.type !== "Parameters") {
    reporter.report("error", "invalid", at, `The '${use}' profile '${url}' is not a profile on the Parameters resource`)
    return
  }
  const elements = profile.snapshot?.element
  if (elements === undefined) return
  const profileUrl = profile.version === undefined ? profile.url : `${profile.url}|${profile.version}`
  const params = list(value["parameter"])
  const matched = new Set<number>()
  elements.forEach((element, index) => {
    if (element.path !== "Parameters.parameter" || element.sliceName === undefined) return
    const children = childrenOf(elements, index)
    const nameElement = children.get("name")
    if (nameElement === undefined) {
      reporter.report("error", "unknown", at, `The slice '${element.sliceName}' of the '${use}' profile has no element for the parameter name`)
      return
    }
    const name = primitive(nameElement.fixed ?? nameElement.pattern)
    if (name === undefined) {
      reporter.report("error", "unknown", at, `The parameter name of the slice '${element.sliceName}' of the '${use}' profile is not fixed`)
      return
    }
    const i = params.findIndex((p) => isObject(p) && p["name"] === name && p["use"] === use)
    if (i < 0) {
      reporter.report("warning", "unknown", at,
        `The '${use}' profile ${profileUrl} defines a parameter '${name}' that is not among the parameters of the operation definition`)
      return
    }
    matched.add(i)
    compare(reporter, `${path}.parameter[${i}]`, use, name, element, children, params[i] as Json, profileUrl)
  })
  params.forEach((param, i) => {
    if (!isObject(param) || matched.has(i) || param["use"] !== use) return
    reporter.report("warning", "unknown", `${path}.parameter[${i}]`,
      `The '${use}' profile has no parameter '${String(param["name"] ?? "")}', which is among the parameters of the operation definition`)
  })
}

const operationDefinition: Rule = (value, path, reporter) => {
  circularBase(value, path, reporter)
  profileAgainstParameters(value, path, "inputProfile", "in", reporter)
  profileAgainstParameters(value, path, "outputProfile", "out", reporter)
}

export const operationDefinitionRules: ReadonlyArray<readonly [string, Rule]> = [["OperationDefinition", operationDefinition]]
