/** The FHIRPath Patch cases of fhir-test-cases `patch/fhir-patch-tests.xml`, converted by hand to JSON. */
import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import { readFileSync } from "node:fs"
import { fhirPathPatch } from "../../../src/rest/patch/fhirPathPatch.ts"

interface FhirPatchCase {
  readonly name: string
  readonly mode: "both" | "forwards"
  readonly input: Record<string, unknown>
  readonly patch: unknown
  readonly output?: Record<string, unknown>
  readonly error?: string
}

const cases: ReadonlyArray<FhirPatchCase> = JSON.parse(
  readFileSync(new URL("./fhirpatch-cases.json", import.meta.url), "utf8")
)

describe("FHIRPath Patch: the fhir-test-cases patch cases", () => {
  it("has all 33 cases of the file", () => expect(cases).toHaveLength(33))

  for (const testCase of cases) {
    if (testCase.error !== undefined) {
      it(`${testCase.name} fails (${testCase.error})`, () => {
        const result = fhirPathPatch(testCase.input, testCase.patch)
        if (Either.isRight(result)) throw new Error(`expected a failure, got ${JSON.stringify(result.right)}`)
        expect(result.left.code).toBe("processing")
      })
    } else {
      it(`${testCase.name} gives the expected resource`, () => {
        expect(fhirPathPatch(testCase.input, testCase.patch)).toEqual(Either.right(testCase.output))
      })
    }
  }
})
