/**
 * Every resource of hl7.fhir.r4.examples@4.0.1, validated as the reference validator validates a
 * specification's examples (extensions on the example domains need no definition). Both ways: an example
 * not listed in test/support/r4ExampleDefects.ts is accepted (a rejection is a validator bug until shown
 * otherwise), and each listed one is refused, with errors that show its listed reason.
 */
import { expect } from "vitest"
import { isValid, validateResource } from "../../src/validation/Validator.ts"
import { loadR4Examples } from "../support/r4Examples.ts"
import { type Defect, defects, withoutBase, withoutBaseDefect } from "../support/r4ExampleDefects.ts"
import { catalogTests, errors } from "./support.ts"

const withCatalog = catalogTests()

withCatalog("accepts every R4 example but the listed defects, and refuses each of those for its listed reason", async (c) => {
  const examples = await loadR4Examples("R4 examples report")
  if (examples === undefined) return
  let accepted = 0
  const unexplained: Array<string> = []
  const notRefused: Array<string> = []
  const seen = new Set<string>()
  const started = performance.now()
  for (const { file, resource } of examples) {
    const issues = validateResource(resource, c, { examples: true })
    const defect: Defect | undefined = defects[file] ?? (withoutBase.test(file) ? withoutBaseDefect : undefined)
    if (defect !== undefined) seen.add(file)
    if (isValid(issues)) {
      accepted++
      if (defect !== undefined) notRefused.push(`${file}: accepted, but listed as a defect (${defect.reason})`)
      continue
    }
    const texts = errors(issues).map((issue) => `${issue.expression}: ${issue.diagnostics}`)
    if (defect === undefined) {
      unexplained.push(`${file}: ${texts[0]}`)
      continue
    }
    const missing = defect.errors.filter((error) => !texts.some((text) => text.includes(error)))
    if (missing.length > 0) notRefused.push(`${file}: refused, but without an error saying ${missing.map((m) => `'${m}'`).join(", ")} (${defect.reason}); first error: ${texts[0]}`)
  }
  const elapsed = performance.now() - started
  console.log(`R4 examples: ${accepted} of ${examples.length} accepted, ${((elapsed * 1000) / examples.length).toFixed(0)} µs per resource`)
  expect(unexplained).toEqual([])
  expect(notRefused).toEqual([])
  // Every listed defect names an example of the package.
  expect(Object.keys(defects).filter((file) => !seen.has(file))).toEqual([])
}, 600_000)
