/**
 * The search parameters the CapabilityStatement lists
 * (https://hl7.org/fhir/R4/capabilitystatement-definitions.html#CapabilityStatement.rest.resource.searchParam):
 * exactly those the search parser (src/search/parse) reads on a type, and the common ones it reads across
 * every type. A parameter it answers with a 501 (`_query`, `_contained`, `_type` on one type, a special
 * parameter other than `near`) or one with no expression to index is left out.
 */
import type { Catalog, SearchParameterDef, SearchParamType } from "../catalog/Catalog.ts"
import { targetTypes, unsupportedCodes } from "../search/parse/criterion.ts"
import { str } from "../catalog/json.ts"
import { commonTypes } from "../search/parse/SearchRequest.ts"

export interface SearchParamEntry {
  readonly name: string
  readonly definition?: string
  readonly type: SearchParamType
  readonly documentation?: string
}

/** Read by the search code itself, not from an indexed expression. */
const readWithoutExpression: ReadonlySet<string> = new Set(["_id", "_lastUpdated", "_content", "_text", "_list", "_filter", "_has"])

/** What the parameters the catalog may not define mean here. */
const ownDocumentation: Readonly<Record<string, string>> = {
  _id: "Logical id of the resource",
  _lastUpdated: "When the resource's current version was committed",
  _tag: "Tags in meta.tag",
  _profile: "Profiles in meta.profile",
  _security: "Security labels in meta.security",
  _source: "meta.source",
  _text: "Words of the narrative, each in any order (case-insensitive)",
  _content: "Words anywhere in the resource's text, each in any order (case-insensitive)",
  _list: "Resources that are items of the List with this id",
  _has: "Reverse chaining, `_has:Type:parameter:criterion`: resources that a Type resource matching the criterion refers to through its reference parameter",
  _filter: "A filter expression (https://hl7.org/fhir/R4/search_filter.html), ANDed with the other parameters",
  _type: "The resource types searched, comma-separated"
}

/** Whether the parser reads `param` on a type (and does not answer it with a 501). */
export const isServed = (param: SearchParameterDef): boolean =>
  !unsupportedCodes.has(param.code) &&
  (param.type !== "special" || param.code === "near" || param.code === "_filter") &&
  (param.expression !== undefined || readWithoutExpression.has(param.code))

/**
 * A definition's description for one type: R4 describes a parameter shared by several types as a list
 * (`* [Observation](observation.html): ...`), of which the type's own line is kept.
 */
const describe = (param: SearchParameterDef, type: string): string | undefined => {
  const description = str(param.resource, "description")
  if (description === undefined || description.trim() === "") return undefined
  const line = description.split(/\r?\n/).find((text) => text.startsWith(`* [${type}](`))
  const own = line === undefined ? description : line.slice(line.indexOf("):") + 2)
  return own.trim() === "" ? undefined : own.trim()
}

const fromDefinition = (param: SearchParameterDef, type: string): SearchParamEntry => {
  const documentation = describe(param, type) ?? ownDocumentation[param.code]
  return { name: param.code, definition: param.url, type: param.type, ...(documentation === undefined ? {} : { documentation }) }
}

const own = (name: string, type: SearchParamType): SearchParamEntry => ({ name, type, documentation: ownDocumentation[name]! })

/** The types some reference parameter can point at: those `_has` can be used on. */
export const referencedTypes = (catalog: Catalog): ReadonlySet<string> => {
  const targets = new Set<string>()
  for (const source of catalog.resourceTypes) {
    for (const param of catalog.searchParameters(source).values()) {
      if (param.type === "reference") for (const target of targetTypes(catalog, param)) targets.add(target)
    }
  }
  return targets
}

/**
 * A common parameter by FHIR's own definition (`Resource-id`, `DomainResource-text`) when the catalog has it:
 * the search reads the common parameters alike on every type, whichever definition the catalog would pick.
 */
const commonEntry = (catalog: Catalog, code: string, kind: SearchParamType, type: string): SearchParamEntry => {
  const name = code.slice(1)
  const param = catalog.searchParameterByUrl(`http://hl7.org/fhir/SearchParameter/Resource-${name}`) ??
    catalog.searchParameterByUrl(`http://hl7.org/fhir/SearchParameter/DomainResource-${name}`)
  return param !== undefined && param.code === code ? fromDefinition(param, type) : own(code, code === "_list" ? "special" : kind)
}

/** The parameters of `type`, sorted by name; `hasTargets`: whether some reference parameter points at it (for `_has`). */
export const searchParamsOf = (catalog: Catalog, type: string, hasTargets: boolean): ReadonlyArray<SearchParamEntry> => {
  const entries = new Map<string, SearchParamEntry>()
  for (const param of catalog.searchParameters(type).values()) {
    if (isServed(param) && !Object.hasOwn(commonTypes, param.code)) entries.set(param.code, fromDefinition(param, type))
  }
  for (const [code, kind] of Object.entries(commonTypes)) entries.set(code, commonEntry(catalog, code, kind, type))
  if (!entries.has("_filter")) entries.set("_filter", own("_filter", "special"))
  if (hasTargets) entries.set("_has", own("_has", "special"))
  return [...entries.values()].sort((a, b) => a.name.localeCompare(b.name))
}

/** The parameters of a search across every type (`GET [base]?...`): the common ones and `_type`. */
export const systemSearchParams = (catalog: Catalog): ReadonlyArray<SearchParamEntry> =>
  [...Object.entries(commonTypes).map(([code, kind]) => commonEntry(catalog, code, kind, "Resource")), own("_type", "token")]
    .sort((a, b) => a.name.localeCompare(b.name))
