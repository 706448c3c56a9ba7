/**
 * Subscription criteria read by search's parser (refused with a 400 naming the parameter), and the index that
 * narrows which Subscriptions a change is tested against: it may return too many, never too few.
 */
import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import type { Catalog } from "../../src/catalog/Catalog.ts"
import { readCriteria, subscriptionProblem } from "../../src/subscriptions/criteria.ts"
import { anchorOf, CriteriaIndex } from "../../src/subscriptions/criteriaIndex.ts"
import { loadCatalog } from "../search/extract/catalog.ts"

const catalog = await loadCatalog()
const describeR4 = catalog === undefined ? describe.skip : describe

const read = (text: unknown) => readCriteria(catalog as Catalog, text)
const refusal = (text: unknown): string => {
  const read1 = read(text)
  if (Either.isRight(read1)) throw new Error(`${String(text)} was read`)
  expect(read1.left.status).toBe(400)
  return read1.left.diagnostics
}

const observation = (code: string, subject = "Patient/p1", system = "http://loinc.org") => ({
  resourceType: "Observation",
  id: "o1",
  status: "final",
  code: { coding: [{ system, code }] },
  subject: { reference: subject }
})

describeR4("Subscription criteria", () => {
  it("reads a search on a type, AND of repeated parameters, OR of commas", () => {
    const criteria = read("Observation?code=http://loinc.org|1234-5,http://loinc.org|9999-9&status=final&status=amended")
    expect(Either.isRight(criteria)).toBe(true)
    if (Either.isRight(criteria)) {
      expect(criteria.right.type).toBe("Observation")
      expect(criteria.right.search.clauses.map((c) => [c.code, c.values.length])).toEqual([["code", 2], ["status", 1], ["status", 1]])
    }
    expect(Either.isRight(read("Patient"))).toBe(true)
    expect(Either.isRight(read("Observation?patient.name=smith"))).toBe(true)
    expect(Either.isRight(read("Patient?_has:Observation:patient:code=1234-5"))).toBe(true)
  })

  it("refuses what cannot be read, naming the parameter and the value", () => {
    expect(refusal("Observation?date=not-a-date")).toMatch(/not-a-date.*date|date.*not-a-date/)
    expect(refusal("Observation?value-quantity=abc")).toMatch(/value-quantity/)
    expect(refusal("Observation?no-such-param=1")).toMatch(/no-such-param/)
    expect(refusal("Observation?subject.birthdate=yesterday")).toMatch(/birthdate/)
    expect(refusal("Observation?code:missing=perhaps")).toMatch(/missing/)
    // Each alternative of a comma list is read on its own.
    expect(refusal("Observation?date=2020-01-01,nope")).toMatch(/nope/)
  })

  it("refuses result parameters, unknown types, missing and malformed criteria", () => {
    expect(refusal("Observation?code=1234-5&_count=10")).toMatch(/_count/)
    expect(refusal("Observation?_include=Observation:subject")).toMatch(/_include/)
    expect(refusal("NoSuchType?x=1")).toMatch(/NoSuchType/)
    expect(refusal(undefined)).toMatch(/required/)
    expect(refusal("")).toMatch(/required/)
    expect(refusal("http://example.org/fhir/Observation?code=1")).toMatch(/not a search on a resource type/)
  })

  it("refuses a channel type the server does not deliver; accepts what only fails a notification", () => {
    const base = { resourceType: "Subscription", status: "active", reason: "test", criteria: "Observation?code=1234-5" }
    expect(subscriptionProblem(catalog as Catalog, { ...base, channel: { type: "email", endpoint: "mailto:a@example.org" } })?.diagnostics).toMatch(/email/)
    expect(subscriptionProblem(catalog as Catalog, { ...base, channel: { type: "rest-hook" } })).toBeUndefined()
    expect(subscriptionProblem(catalog as Catalog, { ...base, channel: { type: "websocket" } })).toBeUndefined()
    expect(subscriptionProblem(catalog as Catalog, { ...base, channel: { type: "rest-hook", header: ["Host: x"] } })).toBeUndefined()
  })
})

describeR4("The criteria index", () => {
  const criteria = (text: string) => Either.getOrThrow(read(text))

  it("files a Subscription under the token or reference clause with the fewest values", () => {
    expect(anchorOf(criteria("Observation?status=final,amended&code=1234-5"))).toEqual({ code: "code", keys: ["code\u00001234-5"] })
    expect(anchorOf(criteria("Observation?subject=Patient/P1"))).toEqual({ code: "subject", keys: ["subject\u0000p1"] })
    // Modifiers, :not, strings and chains leave it to every change of the type.
    expect(anchorOf(criteria("Observation?code:not=1234-5"))).toBeUndefined()
    expect(anchorOf(criteria("Observation?code:text=glucose"))).toBeUndefined()
    expect(anchorOf(criteria("Patient?name=smith"))).toBeUndefined()
    expect(anchorOf(criteria("Observation?patient.name=smith"))).toBeUndefined()
  })

  it("returns the Subscriptions a change could match, and only those", () => {
    const index = new CriteriaIndex()
    for (let n = 0; n < 10_000; n++) index.add(`unrelated-${n}`, criteria(`Observation?code=http://loinc.org|nothing-${n}`))
    index.add("by-code", criteria("Observation?code=http://loinc.org|1234-5"))
    index.add("by-code-any-system", criteria("Observation?code=1234-5&status=final"))
    index.add("by-subject", criteria("Observation?subject=Patient/p1"))
    index.add("every-observation", criteria("Observation?status=final"))
    index.add("patients", criteria("Patient?name=smith"))
    const of = (resource: Record<string, unknown>) => [...index.candidates("Observation", resource, catalog as Catalog)].sort()
    expect(of(observation("1234-5"))).toEqual(["by-code", "by-code-any-system", "by-subject", "every-observation"])
    expect(of(observation("0000-0", "Patient/p2"))).toEqual(["every-observation"])
    expect(of(observation("nothing-17", "Patient/p2"))).toEqual(["every-observation", "unrelated-17"])
    // Another system with the same code: the index leaves the system to the exact test.
    expect(of(observation("1234-5", "Patient/p2", "http://example.org/codes"))).toEqual(["by-code", "by-code-any-system", "every-observation"])
    expect(index.watches("Patient")).toBe(true)
    expect(index.watches("Encounter")).toBe(false)
    index.remove("every-observation")
    for (let n = 0; n < 10_000; n++) index.remove(`unrelated-${n}`)
    expect(of(observation("0000-0", "Patient/p2"))).toEqual([])
    expect(index.size).toBe(4)
  })
})
