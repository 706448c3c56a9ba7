/**
 * The R4 validation cases of HL7's fhir-test-cases (`../shared/data/validator`, see
 * `../shared/data/README.md`), with the reference validator's verdicts. Agreement on valid (no error or
 * fatal issue) versus invalid is asked on at least 90% of them. The cases this validator disagrees on
 * are printed. Known, and kept by decision (docs/validation.md):
 * - contained-resource-bad-id-ignore: the reference run was told not to check contained resources; here a
 *   contained resource's 65-character id is an error, and so is (dom-3) a contained resource nothing refers to.
 * - pat-example-extensions: an extension this server does not know is a warning, not an error.
 */
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { expect } from "vitest"
import { isValid, validateJson } from "../../src/validation/Validator.ts"
import { catalogTests } from "./support.ts"

const withCatalog = catalogTests()

const casesDir = fileURLToPath(new URL("../../../shared/data/validator/", import.meta.url))
const present = existsSync(join(casesDir, "cases.json"))
if (!present && process.env["CI"] !== "true") console.warn("NOTICE: validator cases skipped: no ../shared/data/validator/cases.json (CI=true makes this a failure)")

interface Case {
  readonly name: string
  readonly file: string
  readonly expectValid: boolean
  readonly errors: ReadonlyArray<{ readonly text: string }>
}

withCatalog("agrees with the reference validator on at least 90% of the R4 cases", (c) => {
  if (!present && process.env["CI"] !== "true") return
  const cases: ReadonlyArray<Case> = JSON.parse(readFileSync(join(casesDir, "cases.json"), "utf8")).cases
  const mismatches: Array<string> = []
  for (const entry of cases) {
    const issues = validateJson(readFileSync(join(casesDir, entry.file), "utf8"), c)
    const valid = isValid(issues)
    if (valid === entry.expectValid) continue
    const ours = issues.filter((issue) => issue.severity === "error" || issue.severity === "fatal").slice(0, 3)
    mismatches.push(
      `${entry.name}: expected ${entry.expectValid ? "valid" : "invalid"}` +
        (valid ? ` (the reference found: ${entry.errors.map((e) => e.text).join(" | ").slice(0, 200)})` : ` (found: ${ours.map((i) => `${i.expression}: ${i.diagnostics}`).join(" | ")})`)
    )
  }
  const rate = (cases.length - mismatches.length) / cases.length
  console.log(`validator cases: ${cases.length - mismatches.length} of ${cases.length} agree (${(rate * 100).toFixed(1)}%)`)
  for (const mismatch of mismatches) console.log(`  mismatch: ${mismatch}`)
  expect(cases.length).toBe(49)
  expect(rate).toBeGreaterThanOrEqual(0.9)
})
