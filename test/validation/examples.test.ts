/**
 * A report over every resource of hl7.fhir.r4.examples@4.0.1: how many are accepted, and each rejected
 * one with its first error. Every rejection found is a defect of the published resource, listed here with
 * what is wrong; the test fails on a rejection that is not listed (a validator bug until shown otherwise).
 */
import { expect } from "vitest"
import { isValid, validateResource } from "../../src/validation/Validator.ts"
import { loadR4Examples } from "../support/r4Examples.ts"
import { defects, withoutBase } from "../support/r4ExampleDefects.ts"
import { catalogTests, errors } from "./support.ts"

const withCatalog = catalogTests()

withCatalog("reports which R4 examples are accepted, and why the others are not", async (c) => {
  const examples = await loadR4Examples("R4 examples report")
  if (examples === undefined) return
  let accepted = 0
  const unexplained: Array<string> = []
  const started = performance.now()
  for (const { file, resource } of examples) {
    const issues = validateResource(resource, c, { examples: true })
    if (isValid(issues)) {
      accepted++
      continue
    }
    const first = errors(issues)[0]!
    const reason = defects[file] ?? (withoutBase.test(file) ? "published without a base" : undefined)
    console.log(`  rejected ${file}: ${first.expression}: ${first.diagnostics.slice(0, 160)}${reason === undefined ? "" : ` [${reason}]`}`)
    if (reason === undefined) unexplained.push(`${file}: ${first.expression}: ${first.diagnostics}`)
  }
  const elapsed = performance.now() - started
  console.log(`R4 examples: ${accepted} of ${examples.length} accepted, ${((elapsed * 1000) / examples.length).toFixed(0)} µs per resource`)
  expect(unexplained).toEqual([])
  expect(accepted).toBeGreaterThan(examples.length - 40)
}, 600_000)
