/**
 * A search query string read into a `SearchRequest`, or the problems that refuse it.
 * https://hl7.org/fhir/R4/search.html and the "Search rules" of the interface spec (rules 1-4, 6, 8);
 * `_filter` is read by ../filter/read.ts.
 * docs/search.md gives the decisions taken here.
 */
import { Either } from "effect"
import type { Catalog } from "../../catalog/Catalog.ts"
import { isEmpty, isProblems, lookupParameter, readCriterion } from "./criterion.ts"
import { readFilter } from "../filter/read.ts"
import { splitUnescaped } from "./escape.ts"
import { forbiddenText, maxParameters, maxSearchAlternatives, tooManyParameters, tooManySearchAlternatives, unknownModifier, unknownType } from "./problems.ts"
import { paramsProblem, urlTextProblem } from "../../validation/fhirText.ts"
import { emptyResult, readResult, resultCodes } from "./result.ts"
import type { ChainClause, Clause, FilterExpr, HasClause, Parameter, Problem, SearchRequest } from "./SearchRequest.ts"

const isFilterProblems = (read: FilterExpr | ReadonlyArray<Problem>): read is ReadonlyArray<Problem> => Array.isArray(read)

export type * from "./SearchRequest.ts"

export interface ParseOptions {
  /** `Prefer: handling=lenient`: set unreadable and unknown parameters aside instead of refusing the search. */
  readonly lenient: boolean
}

/** Parameters about the response format, read by the HTTP edge and not by search. */
const formatCodes: ReadonlySet<string> = new Set(["_format", "_pretty"])

const entriesOf = (query: URLSearchParams | string): Array<[string, string]> =>
  [...(typeof query === "string" ? new URLSearchParams(query.startsWith("?") ? query.slice(1) : query) : query).entries()]

export const parseSearch = (
  type: string,
  query: URLSearchParams | string,
  catalog: Catalog,
  options: ParseOptions
): Either.Either<SearchRequest, ReadonlyArray<Problem>> => {
  if (!catalog.isResourceType(type)) return Either.left([unknownType(type)])
  // Text FHIR cannot hold is never a value to look for (and Postgres cannot hold NUL): refused even when lenient.
  const unreadableText = (typeof query === "string" ? urlTextProblem(query) : undefined) ?? paramsProblem(entriesOf(query))
  if (unreadableText !== undefined) return Either.left([forbiddenText(unreadableText)])
  const entries = entriesOf(query).filter(([key, value]) => value !== "" && !formatCodes.has(key))
  // Each parameter is a condition of the one statement a page is: bounded, so that a long query is a 400, not a statement the database refuses.
  if (entries.length > maxParameters) return Either.left([tooManyParameters(entries.length)])
  const alternatives = entries.reduce((sum, [key, value]) => {
    const code = key.split(":")[0]!
    return resultCodes.has(code) || code === "_filter" ? sum : sum + splitUnescaped(value, ",").length
  }, 0)
  if (alternatives > maxSearchAlternatives) return Either.left([tooManySearchAlternatives(alternatives)])
  const lookup = (code: string): Parameter | undefined => lookupParameter(catalog, type, code)

  const clauses: Array<Clause> = []
  const links: Array<ChainClause | HasClause> = []
  const filters: Array<FilterExpr> = []
  const refused: Array<Problem> = []
  const ignored: Array<Problem> = []
  const result = emptyResult()
  // The whole occurrence is set aside or refused; a problem that cannot be set aside refuses even when lenient.
  const refuse = (problems: ReadonlyArray<Problem>) => {
    for (const problem of problems) (options.lenient && problem.canSetAside ? ignored : refused).push(problem)
  }

  // R4: a parameter with an empty value is ignored.
  for (const [key, value] of entries) {
    const colon = key.indexOf(":")
    const code = colon < 0 ? key : key.slice(0, colon)
    const modifierText = colon < 0 ? undefined : key.slice(colon + 1)
    if (code === "_filter") {
      // Each `_filter` is one expression, ANDed with the rest; any problem in it refuses (or sets aside) it whole.
      const read = modifierText === undefined ? readFilter(type, value, catalog) : [unknownModifier(key, value, modifierText, [])]
      if (isFilterProblems(read)) refuse(read)
      else filters.push(read)
      continue
    }
    if (resultCodes.has(code)) {
      const problem = readResult(result, code, modifierText, key, value, type, catalog, lookup)
      if (problem !== undefined) refuse([problem])
      continue
    }
    const read = readCriterion(type, key, value, { catalog, fullKey: key, depth: 0 })
    if (isProblems(read)) refuse(read)
    else if (isEmpty(read)) continue
    else if ("kind" in read) links.push(read)
    else clauses.push(read)
  }

  if (refused.length > 0) return Either.left(refused)
  return Either.right({
    type,
    clauses,
    links,
    filters,
    result: {
      sort: result.sort,
      count: result.count,
      include: result.include,
      revinclude: result.revinclude,
      ...(result.offset === undefined ? {} : { offset: result.offset }),
      ...(result.cursor === undefined ? {} : { cursor: result.cursor }),
      ...(result.total === undefined ? {} : { total: result.total }),
      ...(result.summary === undefined ? {} : { summary: result.summary }),
      ...(result.elements === undefined ? {} : { elements: result.elements })
    },
    ignored
  })
}
