/**
 * What validation costs per resource, measured in the bench process: `validateForWrite` (what every write
 * runs) over the Synthea resources with the R4 catalog, a first pass that compiles what it meets, then a
 * measured pass. Figures in microseconds of wall time per resource, overall and for the costliest types.
 */
import { performance } from "node:perf_hooks"
import { build } from "../../src/catalog/Catalog.ts"
import { validateForWrite } from "../../src/validation/Validator.ts"
import { loadR4Conformance } from "../../test/support/r4Examples.ts"
import { loadSynthea, syntheaValidateOptions } from "../../test/support/synthea.ts"

export interface ValidationFigures {
  readonly resources: number
  readonly firstPassMicros: number
  readonly micros: number
  readonly byType: ReadonlyArray<{ readonly type: string; readonly count: number; readonly micros: number }>
}

export const measureValidation = async (bundles: number): Promise<ValidationFigures | undefined> => {
  const conformance = await loadR4Conformance()
  if (conformance === undefined) return undefined
  const catalog = build(conformance, 1)
  const resources = loadSynthea().slice(0, bundles).flatMap(({ bundle }) => bundle.entry.map((entry) => entry.resource))
  const first = performance.now()
  for (const resource of resources) validateForWrite(resource, catalog, syntheaValidateOptions)
  const firstPassMicros = ((performance.now() - first) * 1000) / resources.length
  const byType = new Map<string, { count: number; micros: number }>()
  const started = performance.now()
  for (const resource of resources) {
    const at = performance.now()
    validateForWrite(resource, catalog, syntheaValidateOptions)
    const entry = byType.get(resource.resourceType) ?? { count: 0, micros: 0 }
    entry.count++
    entry.micros += (performance.now() - at) * 1000
    byType.set(resource.resourceType, entry)
  }
  const micros = ((performance.now() - started) * 1000) / resources.length
  return {
    resources: resources.length,
    firstPassMicros,
    micros,
    byType: [...byType].map(([type, { count, micros: total }]) => ({ type, count, micros: total / count })).sort((a, b) => b.micros - a.micros)
  }
}

export const formatValidation = (figures: ValidationFigures): string =>
  `Validation (validateForWrite, in the bench process): ${figures.micros.toFixed(1)} µs per resource over ${figures.resources} Synthea resources ` +
  `(first pass, compiling included: ${figures.firstPassMicros.toFixed(1)} µs); costliest types: ` +
  figures.byType.slice(0, 4).map((t) => `${t.type} ${t.micros.toFixed(0)} µs`).join(", ")
