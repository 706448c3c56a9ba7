/**
 * A search query string read into a `SearchRequest`, or the problems that refuse it.
 * https://hl7.org/fhir/R4/search.html and the "Search rules" of the interface spec (rules 1-4, 6, 8).
 * docs/search.md gives the decisions taken here.
 */
import { Either } from "effect"
import type { Catalog } from "../../catalog/Catalog.ts"
import { splitUnescaped } from "./escape.ts"
import { readModifier } from "./modifiers.ts"
import { maxAlternatives, tooManyAlternatives, unknownParameter, unknownType, unsupported } from "./problems.ts"
import { emptyResult, readResult, resultCodes } from "./result.ts"
import { type Clause, isCommonCode, type Parameter, type Problem, type SearchRequest, type Value } from "./SearchRequest.ts"
import { readValue } from "./values.ts"

export type * from "./SearchRequest.ts"

export interface ParseOptions {
  /** `Prefer: handling=lenient`: set unreadable and unknown parameters aside instead of refusing the search. */
  readonly lenient: boolean
}

/** Parameters about the response format, read by the HTTP edge and not by search. */
const formatCodes: ReadonlySet<string> = new Set(["_format", "_pretty"])
/** Defined by R4 but not supported yet: a 501, never set aside. */
const unsupportedCodes: ReadonlySet<string> = new Set(["_filter", "_query", "_contained", "_containedType", "_type"])

const entriesOf = (query: URLSearchParams | string): Array<[string, string]> =>
  [...(typeof query === "string" ? new URLSearchParams(query.startsWith("?") ? query.slice(1) : query) : query).entries()]

export const parseSearch = (
  type: string,
  query: URLSearchParams | string,
  catalog: Catalog,
  options: ParseOptions
): Either.Either<SearchRequest, ReadonlyArray<Problem>> => {
  if (!catalog.isResourceType(type)) return Either.left([unknownType(type)])
  const lookup = (code: string): Parameter | undefined =>
    code === "_id" ? "_id" : catalog.searchParameter(type, code) ?? (isCommonCode(code) ? code : undefined)

  const clauses: Array<Clause> = []
  const refused: Array<Problem> = []
  const ignored: Array<Problem> = []
  const result = emptyResult()
  // The whole occurrence is set aside or refused; a problem that cannot be set aside refuses even when lenient.
  const refuse = (problems: ReadonlyArray<Problem>) => {
    for (const problem of problems) (options.lenient && problem.canSetAside ? ignored : refused).push(problem)
  }

  for (const [key, value] of entriesOf(query)) {
    // R4: a parameter with an empty value is ignored.
    if (value === "" || formatCodes.has(key)) continue
    const colon = key.indexOf(":")
    const code = colon < 0 ? key : key.slice(0, colon)
    const modifierText = colon < 0 ? undefined : key.slice(colon + 1)
    if (code === "_has") {
      refuse([unsupported(key, value, "Reverse chaining (_has)")])
      continue
    }
    if (key.includes(".")) {
      refuse([unsupported(key, value, "Chained search")])
      continue
    }
    if (unsupportedCodes.has(code)) {
      refuse([unsupported(key, value, `The parameter '${code}'`)])
      continue
    }
    if (resultCodes.has(code)) {
      const problem = readResult(result, code, modifierText, key, value, type, catalog, lookup)
      if (problem !== undefined) refuse([problem])
      continue
    }
    const param = lookup(code)
    if (param === undefined) {
      refuse([unknownParameter(key, value, type)])
      continue
    }
    const modifier = modifierText === undefined ? undefined : readModifier(key, value, modifierText, param, catalog)
    if (modifier !== undefined && "message" in modifier) {
      refuse([modifier])
      continue
    }
    const alternatives = splitUnescaped(value, ",")
    if (alternatives.length > maxAlternatives) {
      refuse([tooManyAlternatives(key, alternatives.length)])
      continue
    }
    const values: Array<Value> = []
    const problems: Array<Problem> = []
    for (const alternative of alternatives) {
      if (alternative === "") continue
      const read = readValue({ key, param, modifier, catalog }, alternative)
      if ("message" in read) problems.push(read)
      else values.push(read)
    }
    if (problems.length > 0) refuse(problems)
    else if (values.length > 0) {
      const exclude = modifier?.kind === "not" || modifier?.kind === "not-in"
      clauses.push({ code, param, ...(modifier === undefined ? {} : { modifier }), exclude, values })
    }
  }

  if (refused.length > 0) return Either.left(refused)
  return Either.right({
    type,
    clauses,
    result: {
      sort: result.sort,
      count: result.count,
      include: result.include,
      revinclude: result.revinclude,
      ...(result.offset === undefined ? {} : { offset: result.offset }),
      ...(result.total === undefined ? {} : { total: result.total }),
      ...(result.summary === undefined ? {} : { summary: result.summary }),
      ...(result.elements === undefined ? {} : { elements: result.elements })
    },
    ignored
  })
}
