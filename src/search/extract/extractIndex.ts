/**
 * The index values of one resource for every search parameter of its type.
 * https://hl7.org/fhir/R4/search.html — each parameter's FHIRPath expression is run as a compiled path
 * (`compiledPath.ts`) or with HL7's engine (fhirpath.js), which give the same elements, and each resulting
 * element turned into rows by the parameter type (see `values.ts`).
 * Bad data never throws: a value that cannot be read is skipped and counted. The compartments the resource
 * is in follow from its reference rows (`compartments.ts`).
 */
import type { Catalog } from "../../catalog/Catalog.ts"
import { compartmentRows } from "./compartments.ts"
import type { CompositeRow, IndexRow, SkippedValue } from "./IndexRow.ts"
import { type FhirNode, typed } from "./nodes.ts"
import { type Engine, planFor, type ParameterPlan, type TypePlan } from "./plan.ts"
import { rowsOf, type ValueContext } from "./values.ts"

export type * from "./IndexRow.ts"
export type { Engine } from "./plan.ts"

export interface Extraction {
  readonly rows: ReadonlyArray<IndexRow>
  /** Values that were present but could not be indexed (a malformed date, an expression that failed). */
  readonly skipped: ReadonlyArray<SkippedValue>
}

/** The rows of `resource`, with what was skipped; no rows for a resource type the catalog does not know. */
export const extractIndexReport = (
  resource: Readonly<Record<string, unknown>>,
  catalog: Catalog,
  engine: Engine = "compiled"
): Extraction => {
  const type = resource["resourceType"]
  const plan = typeof type === "string" ? planFor(catalog, type, engine) : undefined
  if (plan === undefined) return { rows: [], skipped: [] }
  const rows: Array<IndexRow> = []
  const skipped: Array<SkippedValue> = []
  const ctx: ValueContext = { codeSystem: plan.codeSystem, canonical: plan.canonical, skip: (code, reason) => skipped.push({ code, reason }) }
  for (const parameter of plan.parameters) {
    if (parameter.keys !== undefined && !parameter.keys.some((key) => resource[key] !== undefined)) continue
    let results: ReadonlyArray<unknown>
    try {
      results = parameter.evaluate(resource)
    } catch (error) {
      ctx.skip(parameter.param.code, `expression failed: ${String(error)}`)
      continue
    }
    const own: Array<IndexRow> = []
    for (const result of results) {
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
  for (const row of compartmentRows(catalog, type as string, resource["id"], rows)) rows.push(row)
  return { rows, skipped }
}

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
