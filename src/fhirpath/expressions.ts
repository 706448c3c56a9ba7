/**
 * The SearchParameter expressions of R4, compiled to run on resources: with HL7's engine (fhirpath.js) or,
 * for the shapes compiledPath.ts knows, as plain functions.
 *
 * - Which branches of a union over many resource types apply to one type is search's to tell
 *   (src/search/extract/plan.ts); those are compiled here, once per catalog.
 * - `resolve()` cannot fetch here. R4 only uses it as `resolve() is Type` (`subject.where(resolve() is
 *   Patient)`), which is rewritten to `refIs('Type')`: true when the reference text (`Type/id`, an absolute
 *   URL ending in `Type/id`) or `Reference.type` names that type; a contained `#id` reference reads false.
 * - `x as T` / `x.as(T)` demand a single x in fhirpath.js, but R4 applies them to repeating elements
 *   (`Observation.component.value as Quantity`): they become `x.ofType(T)`, as R5 writes them.
 */
import fhirpath from "fhirpath"
import r4 from "fhirpath/fhir-context/r4"
import type { UserInvocationTable } from "fhirpath"
import { baseRoot, type Compiled, compilePath, referencedType, Unsupported } from "./compiledPath.ts"
import { expressionTooLarge } from "./expressionSize.ts"

export type Evaluate = (resource: unknown) => ReadonlyArray<unknown>

/**
 * How expressions run: `compiled` turns the shapes compiledPath.ts knows into plain functions and leaves
 * the rest to fhirpath.js; `fhirpath` runs them all through fhirpath.js, to compare against.
 */
export type Engine = "compiled" | "fhirpath"

const invocations: UserInvocationTable = {
  refIs: {
    fn: (references: ReadonlyArray<unknown>, type: string) => [references.some((reference) => referencedType(reference) === type)],
    arity: { 1: ["String"] }
  }
}

const options = { resolveInternalTypes: false, userInvocationTable: invocations }

/**
 * Compiles an expression, relative to `base` (an element path) when given; undefined when fhirpath.js cannot
 * parse it or it is too large to run safely (expressionSize.ts). With the `compiled` engine a compiled path runs instead when there is one, and fhirpath.js for
 * a resource whose values it does not read exactly (see `Unsupported`).
 */
export const compile = (expression: string, base?: string, engine: Engine = "fhirpath"): Evaluate | undefined => {
  if (expressionTooLarge(expression) !== undefined) return undefined
  const text = base === undefined ? expression : rewrite(expression)
  let fallback: Evaluate
  try {
    fallback = fhirpath.compile(base === undefined ? text : { base, expression: text }, r4, options)
  } catch {
    return undefined
  }
  const compiled = engine === "compiled" ? compileUnion(text, base) : undefined
  if (compiled === undefined) return fallback
  return (resource) => {
    try {
      return compiled(resource)
    } catch (error) {
      if (error instanceof Unsupported) return fallback(resource)
      throw error
    }
  }
}

/**
 * The branches of a union compiled one by one. FHIRPath's `|` drops repeated values, which only matters
 * when there are two or more: then fhirpath.js decides (`Unsupported`).
 */
const compileUnion = (text: string, base: string | undefined): Compiled | undefined => {
  const root = base === undefined ? undefined : baseRoot(base)
  const branches = splitUnion(text)
  const compiled: Array<Compiled> = []
  for (const branch of branches) {
    const path = compilePath(branch, root)
    if (path === undefined) return undefined
    compiled.push(path)
  }
  const [only] = compiled
  if (compiled.length === 1 && only !== undefined) return only
  return (data) => {
    const nodes = compiled.flatMap((path) => path(data))
    if (nodes.length > 1) throw new Unsupported("a union of several values")
    return nodes
  }
}

/** Whether the compiled engine runs `expression` (relative to `base`) without fhirpath.js. */
export const isCompiled = (expression: string, base?: string): boolean =>
  compileUnion(base === undefined ? expression : rewrite(expression), base) !== undefined

/** Splits at the `|` that are outside parentheses, brackets and quotes. */
export const splitUnion = (expression: string): ReadonlyArray<string> => {
  const branches: Array<string> = []
  let depth = 0
  let quote: string | undefined
  let start = 0
  for (let i = 0; i < expression.length; i++) {
    const c = expression[i]
    if (quote !== undefined) {
      if (c === "\\") i++
      else if (c === quote) quote = undefined
    } else if (c === "'" || c === "`" || c === '"') quote = c
    else if (c === "(" || c === "[") depth++
    else if (c === ")" || c === "]") depth--
    else if (c === "|" && depth === 0) {
      branches.push(expression.slice(start, i).trim())
      start = i + 1
    }
  }
  branches.push(expression.slice(start).trim())
  return branches.filter((branch) => branch !== "")
}

/** `resolve() is T` to `refIs('T')`; `(x as T)` and `x.as(T)` to `x.ofType(T)`, which also takes a collection. */
export const rewrite = (expression: string): string =>
  expression
    .replace(/resolve\(\)\s+is\s+([A-Za-z]+)/g, "refIs('$1')")
    .replace(/\(([^()|]+?)\s+as\s+([A-Za-z]+)\)/g, "($1.ofType($2))")
    .replace(/\.as\(([A-Za-z]+)\)/g, ".ofType($1)")

/**
 * The branches of a union compiled one by one, their results concatenated. FHIRPath's `|` removes
 * duplicates by comparing every pair, which costs seconds on a ValueSet of a few thousand codes; a
 * duplicate index row changes no search result.
 */
export const compileBranches = (branches: ReadonlyArray<string>, engine: Engine = "fhirpath"): Evaluate | undefined => {
  const compiled: Array<Evaluate> = []
  for (const branch of branches) {
    const evaluate = compile(branch, undefined, engine)
    if (evaluate === undefined) return undefined
    compiled.push(evaluate)
  }
  const [only] = compiled
  if (compiled.length === 1 && only !== undefined) return only
  return (resource) => compiled.flatMap((evaluate) => evaluate(resource))
}
