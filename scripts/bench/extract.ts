/**
 * Resources per second of `extractIndex` over the Synthea bundles with the R4 catalog, after one warm-up
 * pass (which compiles the expressions). `node --import tsx scripts/bench/extract.ts`
 */
import { performance } from "node:perf_hooks"
import { build } from "../../src/catalog/Catalog.ts"
import { extractIndexReport } from "../../src/search/extract/extractIndex.ts"
import { loadR4Conformance } from "../../test/support/r4Examples.ts"
import { loadSynthea } from "../../test/support/synthea.ts"

const conformance = await loadR4Conformance()
if (conformance === undefined) throw new Error("the R4 catalog could not be had")
const catalog = build(conformance, 1)
const resources = loadSynthea().flatMap(({ bundle }) => bundle.entry.map((entry) => entry.resource))
for (const round of ["warm-up", "1", "2", "3"]) {
  const start = performance.now()
  let rows = 0
  let skipped = 0
  for (const resource of resources) {
    const report = extractIndexReport(resource, catalog)
    rows += report.rows.length
    skipped += report.skipped.length
  }
  const seconds = (performance.now() - start) / 1000
  console.log(`${round}: ${resources.length} resources, ${rows} rows, ${skipped} skipped, ${Math.round(resources.length / seconds)} resources/s`)
}
