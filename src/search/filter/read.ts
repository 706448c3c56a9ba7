/**
 * A `_filter` syntax tree read against the catalog into a `FilterExpr`: every comparison becomes the
 * criterion plain search would read (a parameter with a prefix or modifier, a chain), or a `compare` where
 * plain search has no way to say it. https://hl7.org/fhir/R4/search_filter.html; docs/search.md
 * ("_filter") gives the mapping. A parameter the type does not have and a value that cannot be read for
 * its parameter's type are 400s naming `_filter`, the expression and the position (spec Search rule 4).
 */
import type { Catalog, SearchParameterDef } from "../../catalog/Catalog.ts"
import { lookupParameter, maxDepth, targetTypes, unsupportedCodes } from "../parse/criterion.ts"
import { filterProblem, filterUnreadable } from "../parse/problems.ts"
import {
  type Clause,
  type Criterion,
  type FilterExpr,
  type FilterOperator,
  type Modifier,
  type Parameter,
  parameterType,
  type Problem,
  type Value
} from "../parse/SearchRequest.ts"
import { unescape } from "../parse/escape.ts"
import { readValue } from "../parse/values.ts"
import { type FilterSyntax, type FilterValue, isSyntaxProblem, parseFilter, type PathStep } from "./parse.ts"

type Read = FilterExpr | ReadonlyArray<Problem>
const tooLarge = "a smaller expression"
const isProblems = (read: Read): read is ReadonlyArray<Problem> => Array.isArray(read)

interface Context {
  readonly catalog: Catalog
  /** The whole `_filter` text: what every problem names. */
  readonly expression: string
  readonly depth: number
  /** Comparisons still to be read: a path through references with several targets reads its rest once per target. */
  readonly budget: { left: number }
}

/** Comparisons one `_filter` may read into, over every target of its paths. */
export const maxReadComparisons = 1000

/** `_filter=text` on `type`: the expression, or every problem found in it. */
export const readFilter = (type: string, text: string, catalog: Catalog): Read => {
  const syntax = parseFilter(text)
  if (isSyntaxProblem(syntax)) return [syntax]
  const read = translate(type, syntax, { catalog, expression: text, depth: 0, budget: { left: maxReadComparisons } })
  if (isProblems(read) && read.some((problem) => problem.expected === tooLarge)) return read.filter((problem) => problem.expected === tooLarge).slice(0, 1)
  return read
}

const translate = (type: string, syntax: FilterSyntax, ctx: Context): Read => {
  switch (syntax.kind) {
    case "and":
    case "or": {
      const operands: Array<FilterExpr> = []
      const problems: Array<Problem> = []
      for (const operand of syntax.operands) {
        const read = translate(type, operand, ctx)
        if (isProblems(read)) problems.push(...read)
        else operands.push(read)
      }
      return problems.length > 0 ? problems : { kind: syntax.kind, operands }
    }
    case "not": {
      const operand = translate(type, syntax.operand, ctx)
      return isProblems(operand) ? operand : { kind: "not", operand }
    }
    case "compare":
      return readPath(type, syntax.path, syntax, ctx)
  }
}

type Comparison = Extract<FilterSyntax, { readonly kind: "compare" }>

/** The operators each kind of parameter takes (R4's table of operators by type, `_id` as an id). */
const operatorsFor: Readonly<Record<string, ReadonlyArray<FilterOperator>>> = {
  string: ["eq", "ne", "co", "sw", "ew", "gt", "lt", "ge", "le", "pr"],
  token: ["eq", "ne", "ss", "sb", "in", "ni", "pr"],
  id: ["eq", "ne"],
  uri: ["eq", "ne", "ss", "sb", "pr"],
  reference: ["re", "pr"],
  date: ["eq", "ne", "gt", "lt", "ge", "le", "sa", "eb", "ap", "co", "po", "pr"],
  number: ["eq", "ne", "gt", "lt", "ge", "le", "sa", "eb", "ap", "co", "pr"],
  quantity: ["eq", "ne", "gt", "lt", "ge", "le", "sa", "eb", "ap", "pr"],
  composite: ["eq", "ne", "pr"],
  special: ["eq", "pr"],
  // Read from the stored resource, not the index: words that must all occur, and List membership.
  _text: ["co"],
  _content: ["co"],
  _list: ["eq", "ne"]
}

/** A path: its last name is compared; each name before it is a reference parameter the path goes through. */
const readPath = (type: string, steps: ReadonlyArray<PathStep>, comparison: Comparison, ctx: Context): Read => {
  const [step, ...rest] = steps
  if (step === undefined) return []
  if (ctx.depth > maxDepth) return [problem(ctx, step.at, `paths go through at most ${maxDepth} references`)]
  const next = rest[0]
  if (next === undefined && step.filter === undefined) {
    if (step.type !== undefined) return [problem(ctx, step.at, `'${step.name}:${step.type}' names a target type, so a path must go on after it`)]
    return readComparison(type, step, comparison, ctx)
  }
  const param = ctx.catalog.searchParameter(type, step.name)
  if (param === undefined || param.type !== "reference") {
    return [problem(ctx, step.at, param === undefined
      ? `'${step.name}' is not a search parameter of ${type}`
      : `'${step.name}' of ${type} is a ${param.type} parameter; only reference parameters are followed by '.' or '['`)]
  }
  const targets = pickTargets(type, param, step, next, ctx)
  if ("problems" in targets) return targets.problems
  if (next === undefined) {
    // `param[filter] pr true|false`: whether the resource refers to a target that meets the filter.
    if (comparison.operator !== "pr") {
      return [problem(ctx, comparison.operatorAt, "a path with a filter in brackets goes on with '.parameter', or ends in 'pr true' or 'pr false'")]
    }
    const present = readBoolean(comparison.value)
    if (present === undefined) return [unreadable(ctx, comparison.value, step.name, "true or false")]
  }
  const read: Array<{ readonly type: string; readonly inner: FilterExpr }> = []
  for (const target of targets) {
    const inner: Array<FilterExpr> = []
    const deeper = { ...ctx, depth: ctx.depth + 1 }
    if (step.filter !== undefined) {
      const filter = translate(target, step.filter, deeper)
      if (isProblems(filter)) return filter
      inner.push(filter)
    }
    if (rest.length > 0) {
      const tail = readPath(target, rest, comparison, deeper)
      if (isProblems(tail)) return tail
      inner.push(tail)
    }
    read.push({ type: target, inner: inner.length === 1 ? inner[0]! : { kind: "and", operands: inner } })
  }
  const chain = chainOf(param, read, steps)
  return next === undefined && readBoolean(comparison.value) === false ? { kind: "not", operand: chain } : chain
}

/** A chain whose every target reads as a plain criterion is the chain plain search has; otherwise a filter chain. */
const chainOf = (param: SearchParameterDef, targets: ReadonlyArray<{ readonly type: string; readonly inner: FilterExpr }>, steps: ReadonlyArray<PathStep>): FilterExpr => {
  const criteria: Array<{ readonly type: string; readonly inner: Criterion }> = []
  for (const target of targets) {
    if (target.inner.kind !== "test") return { kind: "chain", param, targets }
    criteria.push({ type: target.type, inner: target.inner.criterion })
  }
  const key = steps.map((step) => (step.type === undefined ? step.name : `${step.name}:${step.type}`)).join(".")
  return { kind: "test", criterion: { kind: "chain", key, param, targets: criteria } }
}

/** The names a filter compares at its own level: what its target type must define. */
const leadingNames = (syntax: FilterSyntax): ReadonlyArray<string> => {
  switch (syntax.kind) {
    case "and":
    case "or":
      return syntax.operands.flatMap(leadingNames)
    case "not":
      return leadingNames(syntax.operand)
    case "compare":
      return syntax.path[0] === undefined ? [] : [syntax.path[0].name]
  }
}

/**
 * The target types of `param` the path reads: the one `:Type` names, else every target defining the next
 * name and the names of the bracketed filter. Several are ORed: the R4 grammar has no way to pick one.
 */
const pickTargets = (
  type: string,
  param: SearchParameterDef,
  step: PathStep,
  next: PathStep | undefined,
  ctx: Context
): ReadonlyArray<string> | { readonly problems: ReadonlyArray<Problem> } => {
  const { catalog } = ctx
  const possible = targetTypes(catalog, param)
  if (step.type !== undefined) {
    if (!possible.includes(step.type)) {
      return { problems: [problem(ctx, step.at, `${type}.${step.name} cannot refer to '${step.type}'; it refers to ${possible.join(", ")}`)] }
    }
    return [step.type]
  }
  const names = [...(next === undefined ? [] : [next.name]), ...(step.filter === undefined ? [] : leadingNames(step.filter))]
  const targets = possible.filter((target) => names.every((name) => lookupParameter(catalog, target, name) !== undefined))
  if (targets.length > 0) return targets
  const among = possible.length > 12 ? "any type" : possible.join(", ")
  return { problems: [problem(ctx, next?.at ?? step.at, `no type that ${type}.${step.name} refers to (${among}) has the search parameter${names.length > 1 ? "s" : ""} ${names.map((n) => `'${n}'`).join(", ")}`)] }
}

const problem = (ctx: Context, at: number, why: string): Problem =>
  filterProblem(ctx.expression, at, "search parameters of the type, through reference parameters, with the operators their types take", why)

const unreadable = (ctx: Context, value: FilterValue, code: string, expected: string): Problem =>
  filterUnreadable(ctx.expression, value.at, code, value.text, expected)

const readBoolean = (value: FilterValue): boolean | undefined => {
  const text = value.text.toLowerCase()
  return text === "true" ? true : text === "false" ? false : undefined
}

/** What a value must look like for each type, inside `_filter` (where the operator is the prefix). */
const expectedValue: Readonly<Record<string, string>> = {
  date: "a date, dateTime or instant (YYYY, YYYY-MM, YYYY-MM-DD or YYYY-MM-DDThh:mm[:ss[.fff]][Z|+hh:mm|-hh:mm]), without a prefix",
  number: "a decimal number, without a prefix",
  quantity: "number or number|system|code, without a prefix"
}

/** `loinc`, `snomed`, `rxnorm` and `ucum` stand for their systems in a `_filter` value (R4, notes on tokens). */
const systemAliases: Readonly<Record<string, string>> = {
  loinc: "http://loinc.org",
  snomed: "http://snomed.info/sct",
  rxnorm: "http://www.nlm.nih.gov/research/umls/rxnorm",
  ucum: "http://unitsofmeasure.org"
}

const withSystemAlias = (text: string, kind: string): string => {
  if (kind === "token") {
    const alias = /^([a-z]+)\|/i.exec(text)
    const system = alias === null ? undefined : systemAliases[alias[1]!.toLowerCase()]
    return system === undefined ? text : `${system}${text.slice(alias![1]!.length)}`
  }
  if (kind === "quantity") {
    const alias = /^([^|]*)\|([a-z]+)\|/i.exec(text)
    const system = alias === null ? undefined : systemAliases[alias[2]!.toLowerCase()]
    return system === undefined ? text : `${alias![1]}|${system}${text.slice(alias![0].length - 1)}`
  }
  return text
}

/** One comparison on a parameter of `type`. */
const readComparison = (type: string, step: PathStep, comparison: Comparison, ctx: Context): Read => {
  const { catalog } = ctx
  const code = step.name
  const { operator, value } = comparison
  if (--ctx.budget.left < 0) {
    return [filterProblem(ctx.expression, step.at, tooLarge, `its paths read into more than ${maxReadComparisons} comparisons over the types they refer to`)]
  }
  if (unsupportedCodes.has(code)) {
    return [filterProblem(ctx.expression, step.at, "a parameter this server supports", `the parameter '${code}' is not supported yet`, 501)]
  }
  const param = lookupParameter(catalog, type, code)
  if (param === undefined) return [problem(ctx, step.at, `'${code}' is not a search parameter of ${type}`)]
  const kind = param === "_id" ? "id" : parameterType(param)
  const allowed = operatorsFor[code] ?? operatorsFor[kind] ?? []
  if (!allowed.includes(operator)) {
    return [problem(ctx, comparison.operatorAt, `the operator '${operator}' does not apply to the ${kind} parameter '${code}', which takes ${allowed.join(" ")}`)]
  }
  const text = withSystemAlias(value.text, kind)
  const clause = (modifier: Modifier | undefined, valueText = text): Read => {
    const read = readValue({ key: code, param, modifier, catalog }, valueText)
    if ("message" in read) return [inFilter(ctx, value, code, kind, read, valueText)]
    return test(code, param, modifier, read)
  }
  const compare = (op: Extract<FilterExpr, { readonly kind: "compare" }>["operator"]): Read => {
    if (kind === "string") return { kind: "compare", code, param, operator: op, value: { kind: "string", value: unescape(text) } }
    const read = readValue({ key: code, param, modifier: undefined, catalog }, `eq${text}`)
    if ("message" in read) return [inFilter(ctx, value, code, kind, read, `eq${text}`)]
    if (read.kind !== "number" && read.kind !== "date") return [unreadable(ctx, value, code, expectedValue[kind] ?? kind)]
    return { kind: "compare", code, param, operator: op, value: read }
  }
  const negate = (read: Read): Read => (isProblems(read) ? read : { kind: "not", operand: read })
  const prefixed = kind === "date" || kind === "number" || kind === "quantity"
  switch (operator) {
    case "pr": {
      const present = readBoolean(value)
      if (present === undefined) return [unreadable(ctx, value, code, "true or false")]
      return test(code, param, { kind: "missing" }, { kind: "missing", missing: !present })
    }
    case "eq":
    case "ne": {
      const eq = prefixed ? clause(undefined, `eq${text}`) : kind === "string" && code !== "_list" ? compare("eq") : clause(undefined)
      return operator === "ne" ? negate(eq) : eq
    }
    case "co":
      return kind !== "string" ? compare("co") : code === "_text" || code === "_content" ? clause(undefined) : clause({ kind: "contains" })
    case "sw":
      return clause(undefined)
    case "ew":
      return compare("ew")
    case "gt":
    case "lt":
    case "ge":
    case "le":
      return kind === "string" ? compare(operator) : clause(undefined, `${operator}${text}`)
    case "sa":
    case "eb":
    case "ap":
      return clause(undefined, `${operator}${text}`)
    case "po":
      return compare("po")
    case "ss":
      // ss: the value subsumes a code of the resource (the resource's code is below it); sb the other way.
      return clause({ kind: "below" })
    case "sb":
      return clause({ kind: "above" })
    case "in":
      return clause({ kind: "in" })
    case "ni":
      return negate(clause({ kind: "in" }))
    case "re":
      return clause(undefined)
  }
}

const test = (code: string, param: Parameter, modifier: Modifier | undefined, value: Value): FilterExpr => {
  const criterion: Clause = { code, param, ...(modifier === undefined ? {} : { modifier }), exclude: false, values: [value] }
  return { kind: "test", criterion }
}

/** A problem `readValue` found, worded for `_filter`: the value as the client wrote it, the operator as the prefix. */
const inFilter = (ctx: Context, value: FilterValue, code: string, kind: string, found: Problem, read: string): Problem => {
  const expected = expectedValue[kind]
  if (expected === undefined || !found.message.startsWith("The value")) {
    return { ...filterProblem(ctx.expression, value.at, found.expected, found.message, found.status), canSetAside: found.canSetAside }
  }
  // The value reads with `eq` but not with this operator: the SearchParameter's comparators leave it out.
  if (!read.startsWith("eq") && found.expected.startsWith("a value without prefix")) {
    return problem(ctx, value.at, `the operator '${read.slice(0, 2)}' does not apply to '${code}': ${found.expected.replace("a value without prefix or with", "its SearchParameter allows")}`)
  }
  return unreadable(ctx, value, code, expected)
}
