/**
 * What the body check (src/rest/bodyCheck.ts: nesting depth and the characters FHIR text may not hold)
 * costs on the write path: each Synthea patient Bundle as a client would send it, parsed as a request body
 * is, then checked; the check's time next to JSON.parse's. `node --import tsx scripts/body-check-bench.ts`
 */
import { performance } from "node:perf_hooks"
import { checkBody } from "../src/rest/bodyCheck.ts"
import { loadSynthea } from "../test/support/synthea.ts"

const texts = loadSynthea().map(({ text }) => text)
const bytes = texts.reduce((sum, text) => sum + Buffer.byteLength(text), 0)
const bodies = texts.map((text) => JSON.parse(text) as unknown)

for (const round of ["first", "2", "3", "4", "5"]) {
  let parse = 0
  for (const text of texts) {
    const start = performance.now()
    JSON.parse(text)
    parse += performance.now() - start
  }
  let check = 0
  for (const body of bodies) {
    const start = performance.now()
    if (checkBody(body, "the resource") !== undefined) throw new Error("a Synthea Bundle was refused")
    check += performance.now() - start
  }
  const mib = bytes / 1024 / 1024
  console.log(
    `${round}: ${texts.length} Bundles, ${mib.toFixed(1)} MiB: JSON.parse ${parse.toFixed(0)} ms (${(mib / parse * 1000).toFixed(0)} MiB/s), ` +
      `check ${check.toFixed(0)} ms (${(mib / check * 1000).toFixed(0)} MiB/s, ${(check / parse * 100).toFixed(0)}% of the parse)`
  )
}
