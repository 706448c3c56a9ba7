import { performance } from "node:perf_hooks"
import { beforeAll, describe, expect, it } from "vitest"
import type { Catalog } from "../../../src/catalog/Catalog.ts"
import { extractIndexReport } from "../../../src/search/extract/extractIndex.ts"
import { asStored, loadSynthea, skipSynthea } from "../../support/synthea.ts"
import { loadCatalog } from "./catalog.ts"

let catalog: Catalog | undefined

beforeAll(async () => {
  catalog = await loadCatalog()
}, 300_000)

/** Parameters every resource of the type has values for in Synthea's output. */
const expected: Readonly<Record<string, ReadonlyArray<string>>> = {
  Patient: ["_id", "name", "family", "gender", "birthdate", "identifier"],
  Observation: ["code", "subject", "patient", "status", "date"],
  Encounter: ["subject", "patient", "date", "class"],
  Condition: ["code", "subject", "patient"],
  Procedure: ["code", "subject", "patient"]
}

describe.skipIf(skipSynthea)("extractIndex over the Synthea bundles", () => {
  it("never throws and yields rows for the expected parameters", (context) => {
    if (catalog === undefined) return context.skip()
    const resources = loadSynthea().flatMap(({ bundle }) => asStored(bundle.entry))
    let rows = 0
    let skipped = 0
    const start = performance.now()
    for (const resource of resources) {
      const report = extractIndexReport(resource, catalog)
      rows += report.rows.length
      skipped += report.skipped.length
      const codes = new Set(report.rows.map((row) => row.code))
      for (const code of expected[String(resource["resourceType"])] ?? []) {
        if (!codes.has(code)) expect.fail(`${resource["resourceType"]}/${resource["id"]} has no ${code} rows`)
      }
    }
    const seconds = (performance.now() - start) / 1000
    console.log(`extracted ${rows} rows from ${resources.length} Synthea resources in ${seconds.toFixed(2)} s ` +
      `(${Math.round(resources.length / seconds)} resources/s, first run compiles), ${skipped} values skipped`)
    expect(resources.length).toBeGreaterThan(0)
    expect(skipped).toBe(0)
  })
})
