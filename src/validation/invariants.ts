/**
 * Invariants (ElementDefinition.constraint, https://hl7.org/fhir/R4/conformance-rules.html#constraints),
 * compiled once per catalog and checked on the elements present in a resource.
 *
 * - `ele-1` (every element has a value or children) and the narrative's `txt-1`/`txt-2` are checked by the
 *   walk and the XHTML check, not here.
 * - `per-1` (dates of different precision) and `ref-1` (local references) are written natively: they sit
 *   on every Period and Reference.
 * - Simple expressions run through `src/fhirpath/simplePath.ts`; the rest through fhirpath.js, with `x.as(T)` read as
 *   `x.ofType(T)` (fhirpath.js wants a singleton before `as`, R4 applies it to collections).
 * - An expression is not evaluated when its outcome is already known from the element names present:
 *   a disjunct `x....empty()` with `x` absent, an `x.exists() implies ...` with `x` absent, or an
 *   expression that reads none of the present names (its outcome on an empty element is computed once).
 * - An empty result is a failure, as in the reference validator. A throw is reported, never raised.
 */
import { expressionTooLarge } from "../fhirpath/expressionSize.ts"
import fhirpath from "fhirpath"
import r4 from "fhirpath/fhir-context/r4"
import type { ElementConstraint } from "../catalog/definitions.ts"
import { comparePeriod } from "./dates.ts"
import { narrativeFragments } from "./references.ts"
import { javaRegex } from "../fhirpath/regex.ts"
import { compileSimple, type SimpleInvariant, Undecided } from "../fhirpath/simplePath.ts"

export interface Scope {
  /** `%resource`: the resource that holds the element. */
  readonly resource: unknown
  /** `%rootResource`: the resource that holds a contained one, or the resource itself. */
  readonly rootResource: unknown
}

export type Outcome = "pass" | "fail" | "skipped" | { readonly error: string }

export interface Invariant {
  readonly key: string
  readonly severity: "error" | "warning"
  readonly human: string
  readonly expression: string
  /** How it is evaluated: natively, by the subset compiler (falling back to fhirpath.js), or by fhirpath.js. */
  readonly engine: "native" | "simple" | "fhirpath"
  /** `large` asks to skip costly expressions. */
  readonly check: (data: unknown, scope: Scope, large: boolean) => Outcome
  /** The same invariant by fhirpath.js alone, with no shortcut: what the tests compare `check` with. */
  readonly reference: (data: unknown, scope: Scope) => Outcome
}

/** Checked elsewhere: by the walk (ele-1) and by the narrative check (txt-1, txt-2). */
const checkedElsewhere = new Set(["ele-1", "txt-1", "txt-2"])

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

type Native = (data: unknown, scope: Scope) => boolean

/** The strings starting with '#' anywhere in a value (local references and canonicals), and the local links of narratives. */
const localReferences = (value: unknown, out: Set<string>, depth: number): void => {
  if (depth > 128) return
  if (typeof value === "string") {
    if (value.charCodeAt(0) === 35) out.add(value)
  } else if (Array.isArray(value)) {
    for (const item of value) localReferences(item, out, depth + 1)
  } else if (isObject(value)) {
    for (const key in value) {
      const child = value[key]
      // A narrative's `href="#x"` and `src="#x"` refer to x as well.
      if (key === "div") {
        if (typeof child === "string") for (const { fragment } of narrativeFragments(child)) out.add(fragment)
      } else localReferences(child, out, depth + 1)
    }
  }
}

/**
 * dom-3: each contained resource is referred to from elsewhere in the resource (by a `#id` reference or
 * canonical), or refers to its container (`#`). Read natively: the FHIRPath form walks every descendant
 * once per contained resource. Any string `#id` counts as a reference to it, and so does a narrative link.
 */
const dom3: Native = (data) => {
  if (!isObject(data) || !Array.isArray(data["contained"])) return true
  const found = new Set<string>()
  localReferences(data, found, 0)
  for (const contained of data["contained"]) {
    if (!isObject(contained) || typeof contained["id"] !== "string") continue
    if (found.has(`#${contained["id"]}`)) continue
    const inside = new Set<string>()
    localReferences(contained, inside, 0)
    if (!inside.has("#")) return false
  }
  return true
}

const natives: ReadonlyMap<string, Native> = new Map<string, Native>([
  ["dom-3|contained.where((('#'+id in (%resource.descendants().reference | %resource.descendants().as(canonical) | %resource.descendants().as(uri) | %resource.descendants().as(url))) or descendants().where(reference = '#').exists() or descendants().where(as(canonical) = '#').exists() or descendants().where(as(canonical) = '#').exists()).not()).trace('unmatched', id).empty()", dom3],
  ["per-1|start.hasValue().not() or end.hasValue().not() or (start <= end)", (data) => {
    if (!isObject(data) || typeof data["start"] !== "string" || typeof data["end"] !== "string") return true
    return comparePeriod(data["start"], data["end"]) === true
  }],
  ["ref-1|reference.startsWith('#').not() or (reference.substring(1).trace('url') in %rootResource.contained.id.trace('ids'))", (data, scope) => {
    if (!isObject(data) || typeof data["reference"] !== "string" || !data["reference"].startsWith("#")) return true
    const id = data["reference"].slice(1)
    // "#" alone refers to the containing resource (https://hl7.org/fhir/R4/references.html#contained).
    if (id === "") return true
    const contained = isObject(scope.rootResource) ? scope.rootResource["contained"] : undefined
    return Array.isArray(contained) && contained.some((resource) => isObject(resource) && resource["id"] === id)
  }]
])

/**
 * Published R4 expressions that say something other than their own text, as R4B corrected them:
 * que-12 reads "more than one enableWhen" but counts from three.
 */
const corrections: ReadonlyMap<string, string> = new Map([
  ["que-12|enableWhen.count() > 2 implies enableBehavior.exists()", "enableWhen.count() > 1 implies enableBehavior.exists()"]
])

/**
 * String functions as the reference validator evaluates them: of nothing they are false, not empty (so
 * that `fullUrl.contains('/_history/').not()` holds for an entry without a fullUrl).
 */
const stringFunction = (test: (value: string, argument: string) => boolean) => ({
  fn: (input: ReadonlyArray<unknown>, argument: unknown): ReadonlyArray<boolean> => {
    const wanted = Array.isArray(argument) ? argument[0] : argument
    if (input.length === 0 || typeof wanted !== "string" || wanted === "") return [false]
    if (input.length > 1 || typeof input[0] !== "string") throw new Error("a string function takes a single string")
    return [test(input[0], wanted)]
  },
  arity: { 1: ["String" as const] }
})

const invocations = {
  contains: stringFunction((value, part) => value.includes(part)),
  startsWith: stringFunction((value, prefix) => value.startsWith(prefix)),
  endsWith: stringFunction((value, suffix) => value.endsWith(suffix)),
  matches: stringFunction((value, pattern) => javaRegex(pattern).test(value))
}

const options = { traceFn: () => undefined, userInvocationTable: invocations }

type Evaluator = (data: unknown, vars: Record<string, unknown>) => ReadonlyArray<unknown>

const compileFhirPath = (expression: string, base: string | undefined): Evaluator => {
  const tooLarge = expressionTooLarge(expression)
  if (tooLarge !== undefined) throw new Error(tooLarge)
  const path = base === undefined ? expression : { base, expression }
  const compiled: (data: unknown, vars: Record<string, unknown>) => ReadonlyArray<unknown> = fhirpath.compile(path, r4, options)
  return compiled
}

/** `x.as(T)` to `x.ofType(T)`, which also takes a collection. */
const rewrite = (expression: string): string => expression.replace(/\.as\(([A-Za-z]+)\)/g, ".ofType($1)")

const truthy = (result: ReadonlyArray<unknown>): boolean => {
  if (result.length === 0) return false
  if (result.length === 1 && typeof result[0] === "boolean") return result[0]
  return true
}

// `x.empty()` after a chain of navigation and filters, `x.exists()` before `implies`.
const arg = "\\((?:[^()]|\\((?:[^()]|\\([^()]*\\))*\\))*\\)"
const step = `(?:\\.[A-Za-z_]\\w*|\\.(?:where|select|ofType|as|first|last|distinct|trace)${arg})`
const emptyDisjunct = new RegExp(`^\\(?\\s*([a-z_]\\w*)${step}*\\.(?:empty\\(\\)|exists\\(\\)\\.not\\(\\))\\s*\\)?$`)
const existsAntecedent = new RegExp(`^\\(?\\s*([a-z_]\\w*)${step}*\\.exists\\(\\)\\s*\\)?$`)

/** Splits at a keyword outside parentheses and quotes. */
const splitTop = (expression: string, keyword: string): ReadonlyArray<string> => {
  const parts: Array<string> = []
  let depth = 0
  let quote = false
  let start = 0
  const word = ` ${keyword} `
  for (let i = 0; i < expression.length; i++) {
    const c = expression[i]
    if (c === "'") quote = !quote
    else if (quote) continue
    else if (c === "(") depth++
    else if (c === ")") depth--
    else if (depth === 0 && expression.startsWith(word, i)) {
      parts.push(expression.slice(start, i).trim())
      start = i + word.length
      i += word.length - 1
    }
  }
  parts.push(expression.slice(start).trim())
  return parts
}

/** Names whose absence makes the expression true. */
const guardsOf = (expression: string): ReadonlyArray<string> => {
  const guards: Array<string> = []
  const implications = splitTop(expression, "implies")
  if (implications.length === 2) {
    const antecedent = existsAntecedent.exec(implications[0]!)
    if (antecedent !== null) guards.push(antecedent[1]!)
  }
  if (implications.length === 1) {
    for (const disjunct of splitTop(expression, "or")) {
      const match = emptyDisjunct.exec(disjunct)
      if (match !== null) guards.push(match[1]!)
    }
  }
  return guards
}

const contextual = /\$this|%(resource|rootResource|context)|\b(children|descendants|repeat|resolve|htmlChecks|conformsTo|memberOf)\(/

/** The names an expression can read, or undefined when it reads more than names (`%resource`, `descendants()`...). */
const namesRead = (expression: string): ReadonlySet<string> | undefined => {
  if (contextual.test(expression)) return undefined
  const names = new Set<string>()
  const unquoted = expression.replace(/'(?:[^'\\]|\\.)*'/g, "''")
  for (const match of unquoted.matchAll(/`([^`]+)`|[A-Za-z_][A-Za-z0-9_]*/g)) names.add(match[1] ?? match[0])
  return names
}

const isUpper = (code: number): boolean => code >= 65 && code <= 90

/** Whether an element has `name`: as itself, as `_name`, or as a choice (`valueQuantity` for `value`). */
const has = (data: Record<string, unknown>, name: string): boolean => {
  if (name in data || `_${name}` in data) return true
  for (const key in data) {
    const start = key.charCodeAt(0) === 95 ? 1 : 0
    if (key.length > name.length + start && key.startsWith(name, start) && isUpper(key.charCodeAt(name.length + start))) return true
  }
  return false
}

/** Whether an element holds one of the names. */
const hasAny = (data: Record<string, unknown>, names: ReadonlySet<string>): boolean => {
  for (const key in data) {
    const bare = key.charCodeAt(0) === 95 ? key.slice(1) : key
    if (names.has(bare)) return true
    let end = 1
    while (end < bare.length && !isUpper(bare.charCodeAt(end))) end++
    if (end < bare.length && names.has(bare.slice(0, end))) return true
  }
  return false
}

const costly = /\b(descendants|repeat|children)\(/

/**
 * An invariant ready to check, or undefined when there is nothing to evaluate. `base` is the FHIRPath base
 * of the element (none for a resource, whose JSON names its type); `modelPath` the element's path or type.
 */
export const compileInvariant = (constraint: ElementConstraint, base: string | undefined, modelPath: string): Invariant | undefined => {
  const published = constraint.expression
  if (published === undefined || published.trim() === "" || checkedElsewhere.has(constraint.key)) return undefined
  const key = constraint.key
  const expression = corrections.get(`${key}|${published}`) ?? published
  const severity = constraint.severity === "warning" ? "warning" : "error"
  const human = constraint.human ?? expression
  const native = natives.get(`${key}|${published}`)
  const simple: SimpleInvariant | undefined = native === undefined ? compileSimple(expression, modelPath) : undefined
  const guards = guardsOf(expression)
  const names = namesRead(expression)
  const expensive = costly.test(expression)
  const resolves = /\bresolve\(\)/.test(expression)
  let evaluator: Evaluator | { readonly error: string } | undefined
  const engine = (): Evaluator | { readonly error: string } => {
    if (evaluator !== undefined) return evaluator
    try {
      evaluator = compileFhirPath(rewrite(expression), base)
    } catch (error) {
      evaluator = { error: `${key} cannot be compiled: ${error instanceof Error ? error.message : String(error)}` }
    }
    return evaluator
  }
  const run = (data: unknown, scope: Scope): Outcome => {
    const compiled = engine()
    if ("error" in compiled) return { error: compiled.error }
    try {
      return truthy(compiled(data, { resource: scope.resource, rootResource: scope.rootResource })) ? "pass" : "fail"
    } catch (error) {
      return { error: `${key} could not be evaluated: ${error instanceof Error ? error.message : String(error)}` }
    }
  }
  let onEmpty: Outcome | undefined
  const outcomeOnEmpty = (data: unknown): Outcome => {
    if (onEmpty !== undefined) return onEmpty
    const blank: Record<string, unknown> = isObject(data) && typeof data["resourceType"] === "string" ? { resourceType: data["resourceType"] } : {}
    const scope = { resource: blank, rootResource: blank }
    onEmpty = fast(blank, scope) ?? run(blank, scope)
    return onEmpty
  }
  const fast = (data: unknown, scope: Scope): Outcome | undefined => {
    if (simple === undefined) return undefined
    try {
      return simple(data, scope) === true ? "pass" : "fail"
    } catch (error) {
      return error instanceof Undecided ? undefined : { error: `${key} could not be evaluated: ${String(error)}` }
    }
  }
  const check = (data: unknown, scope: Scope, large: boolean): Outcome => {
    if (native !== undefined) return native(data, scope) ? "pass" : "fail"
    // resolve() needs the resource a reference points at, which validation does not fetch (ctm-1).
    if (resolves) return "pass"
    if (isObject(data)) {
      for (const guard of guards) if (!has(data, guard)) return "pass"
      if (names !== undefined && !hasAny(data, names)) return outcomeOnEmpty(data)
    }
    const quick = fast(data, scope)
    if (quick !== undefined) return quick
    if (large && expensive) return "skipped"
    return run(data, scope)
  }
  const engineName = native !== undefined ? "native" : simple !== undefined ? "simple" : "fhirpath"
  return { key, severity, human, expression, engine: engineName, check, reference: run }
}
