/**
 * Field arguments that select a part of a repeating element (FHIR R4 graphql.html, "Field Arguments: List
 * Navigation"): `name(use: official)` keeps the items whose sub-element `use` has that value,
 * `name(fhirpath: "family.exists()")` those for which the FHIRPath expression is true, and `entry(_offset: 5,
 * _count: 5)` a window of the list (applied after the filters). A search's matches take `fhirpath` too
 * (`PatientList(fhirpath: ...)`), evaluated on each match of the page.
 *
 * An expression is compiled once per query and bounded as every expression the server runs is
 * (src/fhirpath/expressionSize.ts); one that cannot be compiled or run is an error of its field.
 */
import fhirpath from "fhirpath"
import r4 from "fhirpath/fhir-context/r4"
import { expressionTooLarge } from "../fhirpath/expressionSize.ts"

/** The arguments of a repeating element's field: the values of its sub-elements, and the three below. */
export const listArguments = ["fhirpath", "_offset", "_count"] as const

type Evaluator = (node: unknown) => ReadonlyArray<unknown>

const compiled = new Map<string, Evaluator>()

/** The expression compiled (kept for later queries while there are at most 256 of them), or the reason it cannot be. */
export const compileExpression = (expression: string): Evaluator => {
  const known = compiled.get(expression)
  if (known !== undefined) return known
  const tooLarge = expressionTooLarge(expression)
  if (tooLarge !== undefined) throw new Error(`fhirpath: ${tooLarge}`)
  let evaluate: Evaluator
  try {
    const run = fhirpath.compile(expression, r4, { traceFn: () => undefined }) as unknown as (node: unknown) => ReadonlyArray<unknown>
    evaluate = (node) => run(node)
  } catch (error) {
    throw new Error(`fhirpath: ${JSON.stringify(expression)} cannot be read: ${error instanceof Error ? error.message : String(error)}`)
  }
  if (compiled.size >= 256) compiled.clear()
  compiled.set(expression, evaluate)
  return evaluate
}

/** Whether the expression is true of `node` (a single `true`); an expression that fails to run is an error. */
const holds = (evaluate: Evaluator, node: unknown, expression: string): boolean => {
  let result: ReadonlyArray<unknown>
  try {
    result = evaluate(node)
  } catch (error) {
    throw new Error(`fhirpath: ${JSON.stringify(expression)} failed: ${error instanceof Error ? error.message : String(error)}`)
  }
  return result.length === 1 && result[0] === true
}

/** Whether a sub-element's value (or one of its values, when it repeats) is `wanted`, compared as text. */
const hasValue = (value: unknown, wanted: string): boolean =>
  Array.isArray(value) ? value.some((item) => hasValue(item, wanted)) : value !== undefined && value !== null && typeof value !== "object" && String(value) === wanted

/** The items that pass an expression `fhirpath` (undefined: all). */
export const whereTrue = <A>(items: ReadonlyArray<A>, expression: string | undefined | null): ReadonlyArray<A> => {
  if (expression === undefined || expression === null) return items
  const evaluate = compileExpression(expression)
  return items.filter((item) => holds(evaluate, item, expression))
}

/**
 * The part of a repeating element's items the arguments select: those whose sub-elements have the values
 * given, then those `fhirpath` is true of, then `_offset` and `_count` of what is left.
 */
export const selectItems = (items: ReadonlyArray<unknown>, args: Readonly<Record<string, unknown>>): ReadonlyArray<unknown> => {
  let kept = items
  for (const [name, wanted] of Object.entries(args)) {
    if (wanted === undefined || wanted === null || (listArguments as ReadonlyArray<string>).includes(name)) continue
    kept = kept.filter((item) => typeof item === "object" && item !== null && hasValue((item as Record<string, unknown>)[name], String(wanted)))
  }
  kept = whereTrue(kept, args["fhirpath"] as string | undefined)
  const offset = typeof args["_offset"] === "number" ? args["_offset"] : 0
  const count = typeof args["_count"] === "number" ? args["_count"] : undefined
  if (offset < 0) throw new Error("_offset is a non-negative integer")
  if (count !== undefined && count < 0) throw new Error("_count is a non-negative integer")
  return count === undefined ? kept.slice(offset) : kept.slice(offset, offset + count)
}
