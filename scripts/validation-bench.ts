/**
 * What validation costs per resource: `validateResource` over every Synthea resource with the R4 catalog,
 * a first pass (which compiles what it meets) and three more, then the mean per resource type of the last
 * pass, in wall and CPU time. `node --import tsx scripts/validation-bench.ts`
 */
import { performance } from "node:perf_hooks"
import { build } from "../src/catalog/Catalog.ts"
import { validateResource } from "../src/validation/Validator.ts"
import { loadR4Conformance } from "../test/support/r4Examples.ts"
import { loadSynthea, syntheaValidateOptions } from "../test/support/synthea.ts"

const conformance = await loadR4Conformance()
if (conformance === undefined) throw new Error("the R4 catalog could not be had")
const catalog = build(conformance, 1)
const resources = loadSynthea().flatMap(({ bundle }) => bundle.entry.map((entry) => entry.resource))

const byType = new Map<string, { count: number; micros: number }>()
for (const round of ["first (compiles)", "2", "3", "4"]) {
  const last = round === "4"
  const wall = performance.now()
  const cpu = process.cpuUsage()
  for (const resource of resources) {
    const start = last ? performance.now() : 0
    validateResource(resource, catalog, syntheaValidateOptions)
    if (last) {
      const entry = byType.get(resource.resourceType) ?? { count: 0, micros: 0 }
      entry.count++
      entry.micros += (performance.now() - start) * 1000
      byType.set(resource.resourceType, entry)
    }
  }
  const seconds = (performance.now() - wall) / 1000
  const used = process.cpuUsage(cpu)
  const cpuMicros = (used.user + used.system) / resources.length
  console.log(
    `${round}: ${resources.length} resources, ${Math.round(resources.length / seconds)} resources/s, ` +
      `${((seconds * 1e6) / resources.length).toFixed(1)} µs wall, ${cpuMicros.toFixed(1)} µs CPU per resource`
  )
}
console.log("\nlast pass by resource type (mean µs wall):")
for (const [type, { count, micros }] of [...byType].sort((a, b) => b[1].micros - a[1].micros)) {
  console.log(`  ${type.padEnd(22)} ${String(count).padStart(6)}  ${(micros / count).toFixed(1)}`)
}
