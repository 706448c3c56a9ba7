/**
 * A search over one resource type or several (https://hl7.org/fhir/R4/search.html#searchall and
 * #compartments): `GET [base]?_type=A,B&...`, `GET [base]?...` over every type, and
 * `GET [base]/{Compartment}/{id}/*`. The query is read once per type searched by the rules of
 * `parseSearch`; a parameter must be defined on every type searched, and without types only the common
 * parameters can be used. `_type` narrows the types at system level and in a compartment's `*`; on one
 * type it stays what `criterion.ts` says (a 501). docs/search.md, "Search across types", gives the decisions.
 */
import { Either } from "effect"
import type { Catalog } from "../../catalog/Catalog.ts"
import { lookupParameter } from "./criterion.ts"
import { parseSearch, type ParseOptions } from "./parseSearch.ts"
import { unknownType } from "./problems.ts"
import { resultCodes } from "./result.ts"
import { commonTypes, isCommonCode, parameterType, type Problem, type ResultParams, type SearchRequest } from "./SearchRequest.ts"

export interface SearchScope {
  /** The types searched; undefined for every type. */
  readonly types: ReadonlyArray<string> | undefined
  /** Whether `_type` may narrow the types: at system level and in a compartment's `*`. */
  readonly typeParameter: boolean
  /** The compartment searched, for messages about `_type`. */
  readonly compartment?: string
}

export interface ScopedSearch {
  /** The types searched, after `_type`; undefined for every type (only common parameters are read). */
  readonly types: ReadonlyArray<string> | undefined
  /** One request per type searched; for every type, one read against a stand-in type (common parameters only). */
  readonly requests: ReadonlyArray<SearchRequest>
  readonly result: ResultParams
  /** With `lenient`, the parameters set aside, each once. */
  readonly ignored: ReadonlyArray<Problem>
}

const listed = (types: ReadonlyArray<string>): string =>
  types.length <= 6 ? types.join(", ") : `${types.slice(0, 6).join(", ")} and ${types.length - 6} more`

/** `shown` names the parameter in the message when it is not the key itself (a code inside `_sort`). */
export const notOnEveryType = (parameter: string, value: string, missing: ReadonlyArray<string>, shown = parameter): Problem => ({
  parameter,
  value,
  expected: "a search parameter of every type searched",
  message: `Search parameter '${shown}' is not defined on every type searched: not on ${listed(missing)}`,
  status: 400,
  canSetAside: true
})

export const notAcrossTypes = (parameter: string, value: string, shown = parameter): Problem => ({
  parameter,
  value,
  expected: `one of ${Object.keys(commonTypes).join(", ")}`,
  message: `Search parameter '${shown}' cannot be used across all resource types: name the types with _type, or use one of ${Object.keys(commonTypes).join(", ")}`,
  status: 400,
  canSetAside: true
})

export const notInCompartment = (type: string, compartment: string): Problem => ({
  parameter: "_type",
  value: type,
  expected: `a resource type of the ${compartment} compartment`,
  message: `The resource type '${type}' is not in the ${compartment} compartment`,
  status: 400,
  canSetAside: false
})

/** The code a criterion key starts with: `name` of `name:exact`, `subject` of `subject.name`. */
const leadingCode = (key: string): string => /^[^:.]*/.exec(key)?.[0] ?? key

/** Every problem once, by its message. */
const distinct = (problems: ReadonlyArray<Problem>): Array<Problem> => {
  const seen = new Set<string>()
  const out: Array<Problem> = []
  for (const problem of problems) {
    if (seen.has(problem.message)) continue
    seen.add(problem.message)
    out.push(problem)
  }
  return out
}

/** The types `_type` names (each occurrence a comma list; several occurrences are ANDed), with the problems. */
const readTypes = (values: ReadonlyArray<string>, scope: SearchScope, catalog: Catalog) => {
  const problems: Array<Problem> = []
  let types: Set<string> | undefined
  for (const value of values) {
    const named = new Set(value.split(",").map((name) => name.trim()).filter((name) => name !== ""))
    for (const type of named) {
      if (!catalog.isResourceType(type)) problems.push({ ...unknownType(type), parameter: "_type" })
      else if (scope.types !== undefined && !scope.types.includes(type)) problems.push(notInCompartment(type, scope.compartment ?? "searched"))
    }
    types = types === undefined ? named : new Set([...types].filter((type) => named.has(type)))
  }
  return { types: [...(types ?? [])].sort(), problems }
}

/** The problem of one criterion or `_sort` key on the types searched, if any; `shown` names it in messages. */
const scopeProblem = (catalog: Catalog, types: ReadonlyArray<string> | undefined, key: string, code: string, value: string, shown: string): Problem | undefined => {
  if (code === "_has" && types !== undefined) return undefined // each type reads it, and says what does not fit
  if (types === undefined) return isCommonCode(code) ? undefined : notAcrossTypes(key, value, shown)
  const missing = types.filter((type) => lookupParameter(catalog, type, code) === undefined)
  if (missing.length > 0) return notOnEveryType(key, value, missing, shown)
  const kinds = new Set(types.map((type) => parameterType(lookupParameter(catalog, type, code)!)))
  return kinds.size > 1 ? { ...notOnEveryType(key, value, [], shown), message: `Search parameter '${shown}' is not of one type on every type searched` } : undefined
}

export const parseScoped = (
  scope: SearchScope,
  query: URLSearchParams,
  catalog: Catalog,
  options: ParseOptions
): Either.Either<ScopedSearch, ReadonlyArray<Problem>> => {
  if (!scope.typeParameter && scope.types?.length === 1) {
    return Either.map(parseSearch(scope.types[0]!, query, catalog, options), (request) =>
      ({ types: [request.type], requests: [request], result: request.result, ignored: request.ignored }))
  }
  const refused: Array<Problem> = []
  const ignored: Array<Problem> = []
  const refuse = (problem: Problem) => (options.lenient && problem.canSetAside ? ignored : refused).push(problem)

  let types = scope.types
  if (scope.typeParameter) {
    const values = query.getAll("_type").filter((value) => value !== "")
    if (values.length > 0) {
      const read = readTypes(values, scope, catalog)
      read.problems.forEach(refuse)
      if (read.problems.length === 0) types = read.types
    }
  }

  // What the types searched cannot all read is refused (or set aside) here, once, not once per type.
  const rest = new URLSearchParams()
  for (const [key, value] of query) {
    if (key === "_type" && scope.typeParameter) continue
    const code = key.split(":")[0]!
    let problem: Problem | undefined
    if (value !== "" && code === "_sort") {
      const codes = value.split(",").map((k) => k.trim().replace(/^-/, "")).filter((k) => k !== "")
      problem = codes.map((sortCode) => scopeProblem(catalog, types, key, sortCode, value, `${sortCode}' of '${key}`)).find((p) => p !== undefined)
    } else if (value !== "" && !resultCodes.has(code) && code !== "_format" && code !== "_pretty") {
      problem = scopeProblem(catalog, types, key, leadingCode(key), value, key)
    }
    if (problem === undefined) rest.append(key, value)
    else refuse(problem)
  }

  // Every type is read against a stand-in: only common parameters are left, which read alike on every type.
  const standIn = catalog.isResourceType("Patient") ? "Patient" : catalog.resourceTypes[0] ?? "Patient"
  const readAs = types === undefined || types.length === 0 ? [standIn] : types
  const requests: Array<SearchRequest> = []
  for (const type of readAs) {
    const parsed = parseSearch(type, rest, catalog, options)
    if (Either.isLeft(parsed)) refused.push(...parsed.left)
    else requests.push(parsed.right)
  }
  if (refused.length > 0) return Either.left(distinct(refused))
  const first = requests[0]!
  return Either.right({
    types,
    requests: types?.length === 0 ? [] : requests,
    result: first.result,
    ignored: distinct([...ignored, ...requests.flatMap((request) => request.ignored)])
  })
}
