/**
 * The index values of one resource for every search parameter of its type.
 * https://hl7.org/fhir/R4/search.html — each parameter's FHIRPath expression is run as a compiled path
 * (`src/fhirpath/compiledPath.ts`) or with HL7's engine (fhirpath.js), which give the same elements, and each resulting
 * element turned into rows by the parameter type (see `values.ts`).
 * Bad data never throws: a value that cannot be read is skipped and counted. The compartments the resource
 * is in follow from its reference rows (`compartments.ts`).
 */
import { Effect } from "effect"
import type { Catalog } from "../../catalog/Catalog.ts"
import { type Pacer, yieldToEventLoop } from "../../db/EventLoop.ts"
import { compartmentRows } from "./compartments.ts"
import type { CompositeRow, IndexRow, SkippedValue } from "./IndexRow.ts"
import { type FhirNode, typed } from "../../fhirpath/nodes.ts"
import { type Engine, planFor, type ParameterPlan, type TypePlan } from "./plan.ts"
import { rowsOf, type ValueContext } from "./values.ts"

export type * from "./IndexRow.ts"
export type { Engine } from "./plan.ts"

export interface Extraction {
  readonly rows: ReadonlyArray<IndexRow>
  /** Values that were present but could not be indexed (a malformed date, an expression that failed). */
  readonly skipped: ReadonlyArray<SkippedValue>
}

/** Where one extraction stands: the rows so far, what was skipped, and what each parameter step reads. */
interface Extracting {
  readonly plan: TypePlan
  readonly resource: Readonly<Record<string, unknown>>
  readonly rows: Array<IndexRow>
  readonly skipped: Array<SkippedValue>
  readonly ctx: ValueContext
}

const start = (resource: Readonly<Record<string, unknown>>, catalog: Catalog, engine: Engine): Extracting | undefined => {
  const type = resource["resourceType"]
  const plan = typeof type === "string" ? planFor(catalog, type, engine) : undefined
  if (plan === undefined) return undefined
  const skipped: Array<SkippedValue> = []
  const ctx: ValueContext = { codeSystem: plan.codeSystem, canonical: plan.canonical, skip: (code, reason) => skipped.push({ code, reason }) }
  return { plan, resource, rows: [], skipped, ctx }
}

/** Adds the rows of one parameter; stops early once it has more than `room` (the caller refuses the resource). */
const extractParameter = (state: Extracting, parameter: ParameterPlan, room = Infinity): void => {
  const { plan, resource, rows, ctx } = state
  if (parameter.keys !== undefined && !parameter.keys.some((key) => resource[key] !== undefined)) return
  let results: ReadonlyArray<unknown>
  try {
    results = parameter.evaluate(resource)
  } catch (error) {
    ctx.skip(parameter.param.code, `expression failed: ${String(error)}`)
    return
  }
  const own: Array<IndexRow> = []
  for (const result of results) {
    if (own.length > room) break
    const value = typed(result)
    if (value === undefined) continue
    if (parameter.param.type === "composite") composite(plan, parameter, value.node, own, ctx)
    else for (const row of rowsOf(parameter.param.type, parameter.param.code, value, ctx)) own.push(row)
  }
  // The branches of a union are evaluated one by one (see compileBranches): drop the rows they share.
  if (parameter.union && own.length > 1) {
    const seen = new Set<string>()
    for (const row of own) {
      const key = JSON.stringify(row)
      if (!seen.has(key)) {
        seen.add(key)
        rows.push(row)
      }
    }
  } else for (const row of own) rows.push(row)
}

const finish = (state: Extracting, catalog: Catalog): Extraction => {
  for (const row of compartmentRows(catalog, state.resource["resourceType"] as string, state.resource["id"], state.rows)) state.rows.push(row)
  return { rows: state.rows, skipped: state.skipped }
}

/** The rows of `resource`, with what was skipped; no rows for a resource type the catalog does not know. */
export const extractIndexReport = (
  resource: Readonly<Record<string, unknown>>,
  catalog: Catalog,
  engine: Engine = "compiled"
): Extraction => {
  const state = start(resource, catalog, engine)
  if (state === undefined) return { rows: [], skipped: [] }
  for (const parameter of state.plan.parameters) extractParameter(state, parameter)
  return finish(state, catalog)
}

/**
 * The rows of only the parameters whose codes `codes` holds (no compartment rows): what a Subscription's index
 * of token and reference values needs of a change (src/subscriptions/criteriaIndex.ts), at a fraction of the cost
 * of every parameter.
 */
export const extractParameters = (
  resource: Readonly<Record<string, unknown>>,
  catalog: Catalog,
  codes: { readonly has: (code: string) => boolean }
): ReadonlyArray<IndexRow> => {
  const state = start(resource, catalog, "compiled")
  if (state === undefined) return []
  for (const parameter of state.plan.parameters) if (codes.has(parameter.param.code)) extractParameter(state, parameter)
  return state.rows
}

/** A resource with more index rows than a write takes (`server.max_index_rows`): `rows` is how many were counted before stopping. */
export class TooManyIndexRows {
  readonly _tag = "TooManyIndexRows"
  constructor(readonly rows: number, readonly limit: number) {}
}

/**
 * `extractIndex` for a write: it yields to the event loop between parameters as `pacer` counts rows (a resource with
 * thousands of values does not hold other requests up), and stops with `TooManyIndexRows` as soon as the
 * rows pass `limit`.
 */
export const extractIndexPaced = (
  resource: Readonly<Record<string, unknown>>,
  catalog: Catalog,
  limit: number,
  pacer: Pacer
): Effect.Effect<ReadonlyArray<IndexRow>, TooManyIndexRows> =>
  Effect.suspend(() => {
    const state = start(resource, catalog, "compiled")
    if (state === undefined) return Effect.succeed([])
    const parameters = state.plan.parameters
    const step = (index: number): Effect.Effect<ReadonlyArray<IndexRow>, TooManyIndexRows> => {
      let before = state.rows.length
      for (let i = index; i < parameters.length; i++) {
        extractParameter(state, parameters[i]!, limit - state.rows.length)
        if (state.rows.length > limit) return Effect.fail(new TooManyIndexRows(state.rows.length, limit))
        const added = state.rows.length - before
        before = state.rows.length
        if (added > 0 && pacer.due(added)) return Effect.zipRight(yieldToEventLoop, Effect.suspend(() => step(i + 1)))
      }
      const { rows } = finish(state, catalog)
      return rows.length > limit ? Effect.fail(new TooManyIndexRows(rows.length, limit)) : Effect.succeed(rows)
    }
    return step(0)
  })

export const extractIndex = (resource: Readonly<Record<string, unknown>>, catalog: Catalog): ReadonlyArray<IndexRow> =>
  extractIndexReport(resource, catalog).rows

/** The full element path of a node (`Observation.component`), to compile component expressions against. */
const basePath = (node: FhirNode): string | undefined => {
  const props: Array<string> = []
  let current = node
  while (current.parentResNode !== null) {
    if (current.propName === undefined) return undefined
    props.unshift(current.propName)
    current = current.parentResNode
  }
  const root = current.fhirNodeDataType
  return root === null ? undefined : [root, ...props].join(".")
}

/** One row per combination of the components' values, all read from the same element. */
const composite = (plan: TypePlan, parameter: ParameterPlan, node: FhirNode | undefined, rows: Array<IndexRow>, ctx: ValueContext) => {
  if (node === undefined || parameter.components.length === 0) return
  const base = basePath(node)
  if (base === undefined) return
  let combinations: Array<ReadonlyArray<IndexRow>> = [[]]
  for (const component of parameter.components) {
    const evaluate = plan.component(component.expression, base)
    if (evaluate === undefined) return
    let results: ReadonlyArray<unknown>
    try {
      results = evaluate(node.data)
    } catch (error) {
      ctx.skip(parameter.param.code, `component failed: ${String(error)}`)
      return
    }
    const parts = results.flatMap((result) => {
      const value = typed(result)
      return value === undefined ? [] : rowsOf(component.type, component.code, value, ctx)
    }).filter((row) => row.kind !== "token" || row.value !== null)
    if (parts.length === 0) return
    combinations = combinations.flatMap((prefix) => parts.map((part) => [...prefix, part]))
  }
  for (const parts of combinations) {
    const row: CompositeRow = { kind: "composite", code: parameter.param.code, parts }
    rows.push(row)
  }
}
