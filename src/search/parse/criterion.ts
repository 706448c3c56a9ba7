/**
 * One search criterion read from `key=value`: a parameter of the type (with its modifier and values),
 * a chain `param[:Type].rest` (https://hl7.org/fhir/R4/search.html#chaining) or a reverse chain
 * `_has:Type:param:rest` (https://hl7.org/fhir/R4/search.html#has). A chain reads `rest` against its
 * target type by the same rules, so an unreadable value behind a chain is refused like any other (rule 4),
 * and every problem names the key as the client wrote it.
 */
import type { Catalog, SearchParameterDef } from "../../catalog/Catalog.ts"
import { splitUnescaped } from "./escape.ts"
import { pointsAtAnything, readModifier } from "./modifiers.ts"
import { badChain, maxAlternatives, tooManyAlternatives, unknownParameter, unsupported } from "./problems.ts"
import { resultCodes } from "./result.ts"
import { type Clause, type Criterion, isCommonCode, type Parameter, type Problem, type Value } from "./SearchRequest.ts"
import { readValue } from "./values.ts"

/** Defined by R4 but not supported in a criterion: a 501, never set aside. (`_filter` is read by parseSearch.) */
export const unsupportedCodes: ReadonlySet<string> = new Set(["_query", "_contained", "_containedType", "_type"])

/** Chains and `_has` nest at most this deep. */
export const maxDepth = 8

/** The parameter `code` of `type`: its definition, or one of the common parameters. */
export const lookupParameter = (catalog: Catalog, type: string, code: string): Parameter | undefined =>
  code === "_id" ? "_id" : catalog.searchParameter(type, code) ?? (isCommonCode(code) ? code : undefined)

/** The types a reference parameter can point at: every resource type for Reference(Any). */
export const targetTypes = (catalog: Catalog, param: SearchParameterDef): ReadonlyArray<string> =>
  pointsAtAnything(param, catalog) ? catalog.resourceTypes.filter((type) => type !== "Parameters") : param.target.filter((type) => catalog.isResourceType(type))

/** The code a criterion key starts with: `name` of `name:exact`, `subject` of `subject:Patient.name`, `_has`. */
const leadingCode = (key: string): string => /^[^:.]*/.exec(key)?.[0] ?? key

/** Whether `key` can be read against `type`: its leading code is a parameter of the type (or `_has`). */
const defines = (catalog: Catalog, type: string, key: string): boolean => {
  const code = leadingCode(key)
  if (code !== "_has") return lookupParameter(catalog, type, code) !== undefined
  const [, sourceType = "", sourceCode = ""] = key.split(":")
  const param = catalog.searchParameter(sourceType, sourceCode)
  return param !== undefined && param.type === "reference" && targetTypes(catalog, param).includes(type)
}

export const isProblems = (read: Criterion | ReadonlyArray<Problem>): read is ReadonlyArray<Problem> => Array.isArray(read)

/** Whether the criterion has no value to match (`a=,`): it is left out, as an empty value is. */
export const isEmpty = (criterion: Criterion): boolean =>
  !("kind" in criterion) ? criterion.values.length === 0
  : criterion.kind === "has" ? isEmpty(criterion.inner)
  : criterion.targets.every((target) => isEmpty(target.inner))

export interface CriterionContext {
  readonly catalog: Catalog
  /** The whole key as the client wrote it: what problems name. */
  readonly fullKey: string
  readonly depth: number
}

export const readCriterion = (
  type: string,
  key: string,
  value: string,
  ctx: CriterionContext
): Criterion | ReadonlyArray<Problem> => {
  if (ctx.depth > maxDepth) return [badChain(ctx.fullKey, value, `chains and _has nest at most ${maxDepth} deep`)]
  if (key.startsWith("_has:") || key === "_has") return readHas(type, key, value, ctx)
  const dot = key.indexOf(".")
  if (dot > 0 && /^[^:]+(?::[A-Za-z]+)?$/.test(key.slice(0, dot))) return readChain(type, key, value, ctx)
  return readClause(type, key, value, ctx)
}

/** `param[:Type].rest` on `type`. */
const readChain = (type: string, key: string, value: string, ctx: CriterionContext): Criterion | ReadonlyArray<Problem> => {
  const { catalog, fullKey } = ctx
  const dot = key.indexOf(".")
  const head = key.slice(0, dot)
  const rest = key.slice(dot + 1)
  const [code = "", typeModifier, ...extra] = head.split(":")
  const param = catalog.searchParameter(type, code)
  if (param === undefined || param.type !== "reference") {
    return [badChain(fullKey, value, param === undefined
      ? `'${code}' is not a search parameter of ${type}`
      : `'${code}' of ${type} is a ${param.type} parameter; only reference parameters can be chained`)]
  }
  if (extra.length > 0 || rest === "") return [badChain(fullKey, value, `a chain is written ${code}[:Type].parameter`)]
  const possible = targetTypes(catalog, param)
  let targets: ReadonlyArray<string>
  if (typeModifier !== undefined) {
    if (!possible.includes(typeModifier)) {
      return [badChain(fullKey, value, `${type}.${code} cannot refer to '${typeModifier}'; it refers to ${possible.join(", ")}`)]
    }
    targets = [typeModifier]
  } else {
    targets = possible.filter((target) => defines(catalog, target, rest))
    if (targets.length === 0) {
      return [badChain(fullKey, value, `'${leadingCode(rest)}' is not a search parameter of ${possible.length > 12 ? "any type" : possible.join(", ")} that ${type}.${code} refers to`)]
    }
    if (targets.length > 1) {
      return [badChain(fullKey, value, `${type}.${code} refers to several types with the parameter '${leadingCode(rest)}' (${targets.join(", ")}): name one, as ${code}:${targets[0]}.${rest}`)]
    }
  }
  const read: Array<{ readonly type: string; readonly inner: Criterion }> = []
  for (const target of targets) {
    const inner = readCriterion(target, rest, value, { ...ctx, depth: ctx.depth + 1 })
    if (isProblems(inner)) return inner
    read.push({ type: target, inner })
  }
  return { kind: "chain", key: fullKey, param, targets: read }
}

/** `_has:Source:param:rest` on `type`. */
const readHas = (type: string, key: string, value: string, ctx: CriterionContext): Criterion | ReadonlyArray<Problem> => {
  const { catalog, fullKey } = ctx
  const [, sourceType = "", code = "", ...restParts] = key.split(":")
  const rest = restParts.join(":")
  const form = "_has:Type:parameter:criterion, Type's reference parameter pointing at"
  if (!catalog.isResourceType(sourceType) || code === "" || rest === "") {
    return [badChain(fullKey, value, `${form} ${type}`)]
  }
  const param = catalog.searchParameter(sourceType, code)
  if (param === undefined || param.type !== "reference") {
    return [badChain(fullKey, value, `'${code}' is not a reference parameter of ${sourceType}`)]
  }
  if (!targetTypes(catalog, param).includes(type)) {
    return [badChain(fullKey, value, `${sourceType}.${code} cannot refer to ${type}`)]
  }
  const inner = readCriterion(sourceType, rest, value, { ...ctx, depth: ctx.depth + 1 })
  if (isProblems(inner)) return inner
  return { kind: "has", key: fullKey, sourceType, param, inner }
}

/** A parameter of `type` with its modifier and values. */
const readClause = (type: string, key: string, value: string, ctx: CriterionContext): Clause | ReadonlyArray<Problem> => {
  const { catalog, fullKey } = ctx
  const colon = key.indexOf(":")
  const code = colon < 0 ? key : key.slice(0, colon)
  const modifierText = colon < 0 ? undefined : key.slice(colon + 1)
  if (unsupportedCodes.has(code)) return [unsupported(fullKey, value, `The parameter '${code}'`)]
  const param = resultCodes.has(code) && ctx.depth > 0 ? undefined : lookupParameter(catalog, type, code)
  if (param === undefined) return [unknownParameter(fullKey, value, type)]
  const modifier = modifierText === undefined ? undefined : readModifier(fullKey, value, modifierText, param, catalog)
  if (modifier !== undefined && "message" in modifier) return [modifier]
  const alternatives = splitUnescaped(value, ",")
  if (alternatives.length > maxAlternatives) return [tooManyAlternatives(fullKey, alternatives.length)]
  const values: Array<Value> = []
  const problems: Array<Problem> = []
  for (const alternative of alternatives) {
    if (alternative === "") continue
    const read = readValue({ key: fullKey, param, modifier, catalog }, alternative)
    if ("message" in read) problems.push(read)
    else values.push(read)
  }
  if (problems.length > 0) return problems
  const exclude = modifier?.kind === "not" || modifier?.kind === "not-in"
  return { code, param, ...(modifier === undefined ? {} : { modifier }), exclude, values }
}
