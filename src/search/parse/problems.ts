/** The problems a search can be refused with, worded once (docs/search.md quotes them). */
import type { Problem } from "./SearchRequest.ts"

export const maxAlternatives = 1000
/** The most parameters one search reads (each occurrence of a repeated one counts; `_format`, `_pretty` and empty values do not). */
export const maxParameters = 100
/** The most comma-separated alternatives all the parameters of one search list together. */
export const maxSearchAlternatives = 5000

export const unreadable = (parameter: string, value: string, expected: string): Problem => ({
  parameter,
  value,
  expected,
  message: `The value '${value}' of search parameter '${parameter}' cannot be read: expected ${expected}`,
  status: 400,
  canSetAside: true
})

export const unknownParameter = (parameter: string, value: string, type: string): Problem => ({
  parameter,
  value,
  expected: `a search parameter of ${type}`,
  message: `Unknown search parameter '${parameter}' for resource type ${type}`,
  status: 400,
  canSetAside: true
})

export const unknownModifier = (parameter: string, value: string, modifier: string, allowed: ReadonlyArray<string>): Problem => ({
  parameter,
  value,
  expected: allowed.length === 0 ? "no modifier" : `one of ${allowed.map((m) => `:${m}`).join(" ")}`,
  message: `The modifier ':${modifier}' does not apply to search parameter '${parameter.split(":")[0]}'` +
    (allowed.length === 0 ? ", which takes no modifier" : `; it takes ${allowed.map((m) => `:${m}`).join(" ")}`),
  status: 400,
  canSetAside: true
})

export const cannotExpand = (parameter: string, value: string, reason: string): Problem => ({
  parameter,
  value,
  expected: "a ValueSet or code this server can expand",
  message: `The value '${value}' of search parameter '${parameter}' cannot be used: ${reason}`,
  status: 400,
  canSetAside: true
})

export const tooManyAlternatives = (parameter: string, count: number): Problem => ({
  parameter,
  value: `(${count} alternatives)`,
  expected: `at most ${maxAlternatives} comma-separated alternatives`,
  message: `Search parameter '${parameter}' lists ${count} alternatives; at most ${maxAlternatives} are allowed`,
  status: 400,
  canSetAside: true
})

export const forbiddenText = (why: string): Problem => ({
  parameter: "(query)",
  value: "",
  expected: "text FHIR can hold",
  message: `The search cannot be read: ${why}`,
  status: 400,
  canSetAside: false
})

export const tooManyParameters = (count: number): Problem => ({
  parameter: "(query)",
  value: `(${count} parameters)`,
  expected: `at most ${maxParameters} parameters`,
  message: `The search has ${count} parameters; at most ${maxParameters} are allowed`,
  status: 400,
  canSetAside: false
})

export const tooManySearchAlternatives = (count: number): Problem => ({
  parameter: "(query)",
  value: `(${count} alternatives)`,
  expected: `at most ${maxSearchAlternatives} alternatives in all`,
  message: `The search's parameters list ${count} comma-separated alternatives in all; at most ${maxSearchAlternatives} are allowed`,
  status: 400,
  canSetAside: false
})

export const bareIdForAnyTarget = (parameter: string, value: string): Problem => ({
  parameter,
  value,
  expected: "a reference as Type/id",
  message: `Search parameter '${parameter}' can refer to any resource type: give the reference as Type/id, not the bare id '${value}'`,
  status: 400,
  canSetAside: false
})

export const revincludeWildcard = (parameter: string): Problem => ({
  parameter,
  value: "*",
  expected: "Type:parameter[:targetType]",
  message: `${parameter}=* is not supported: name the resource type and its reference parameter, as ${parameter}=Type:parameter`,
  status: 400,
  canSetAside: false
})

export const badChain = (parameter: string, value: string, why: string): Problem => ({
  parameter,
  value,
  expected: "a chain or _has naming reference parameters and types that exist",
  message: `Search parameter '${parameter}' cannot be used: ${why}`,
  status: 400,
  canSetAside: true
})

export const unsupported = (parameter: string, value: string, what: string): Problem => ({
  parameter,
  value,
  expected: "a parameter this server supports",
  message: `${what} is not supported yet (search parameter '${parameter}')`,
  status: 501,
  canSetAside: false
})

export const unknownType = (type: string): Problem => ({
  parameter: "",
  value: type,
  expected: "a resource type",
  message: `Unknown resource type '${type}'`,
  status: 400,
  canSetAside: false
})

/** Where `_filter` problems point: the character at `at` (0-based) as a 1-based position. */
const position = (at: number) => `at position ${at + 1}`

/** `_filter` text that does not follow the grammar. */
export const filterSyntax = (expression: string, at: number, expected: string, found: string): Problem => ({
  parameter: "_filter",
  value: expression,
  expected,
  message: `The _filter expression '${expression}' cannot be read ${position(at)}: expected ${expected}, found ${found}`,
  status: 400,
  canSetAside: true
})

export const filterTooLarge = (expression: string, why: string): Problem => ({
  parameter: "_filter",
  value: expression,
  expected: "a smaller expression",
  message: `The _filter expression '${expression}' is too large: ${why}`,
  status: 400,
  canSetAside: true
})

/** A comparison of `_filter` that cannot be used: an unknown parameter, an operator that does not apply, a bad path. */
export const filterProblem = (expression: string, at: number, expected: string, why: string, status: 400 | 501 = 400): Problem => ({
  parameter: "_filter",
  value: expression,
  expected,
  message: `The _filter expression '${expression}' cannot be used ${position(at)}: ${why}`,
  status,
  canSetAside: status === 400
})

/** A value inside `_filter` that cannot be read for its parameter's type (spec Search rule 4). */
export const filterUnreadable = (expression: string, at: number, code: string, value: string, expected: string): Problem => ({
  parameter: "_filter",
  value: expression,
  expected,
  message: `The value '${value}' of search parameter '${code}' in _filter '${expression}' ${position(at)} cannot be read: expected ${expected}`,
  status: 400,
  canSetAside: true
})
