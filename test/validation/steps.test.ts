/** Validation in steps: the same issues and references as at once, with the invariants spread over several steps. */
import { Effect } from "effect"
import { describe, expect } from "vitest"
import { Pacer, paced } from "../../src/db/EventLoop.ts"
import { validateForWrite, validateForWriteSteps } from "../../src/validation/Validator.ts"
import { catalogTests } from "./support.ts"

const withCatalog = catalogTests()

const bundle = (entries: number) => ({
  resourceType: "Bundle",
  type: "collection",
  entry: Array.from({ length: entries }, (_, i) => ({
    fullUrl: `http://example.org/fhir/Patient/p${i}`,
    resource: {
      resourceType: "Patient",
      id: `p${i}`,
      active: true,
      name: [{ family: `F${i}`, given: ["A"] }],
      ...(i % 500 === 7 ? { gender: "unknown-code", contact: [{}] } : { gender: "female" }),
      managingOrganization: { reference: "Organization/o1" }
    }
  }))
})

describe("validateForWriteSteps", () => {
  withCatalog("gives validateForWrite's issues and references, over many steps for a large Bundle", (c) => {
    const resource = bundle(3000)
    const whole = validateForWrite(resource, c)
    expect(whole.issues.length).toBeGreaterThan(0)
    expect(whole.references.length).toBe(3000)
    const steps = validateForWriteSteps(resource, c)
    let count = 0
    let step = steps.next()
    for (; !step.done; step = steps.next()) count++
    expect(step.value).toEqual(whole)
    expect(count).toBeGreaterThan(100)
  })

  withCatalog("paced, it gives the event loop back while the invariants are evaluated", async (c) => {
    const resource = bundle(3000)
    let turns = 0
    const counting = setInterval(() => turns++, 0)
    const validation = await Effect.runPromise(paced(new Pacer(500), validateForWriteSteps(resource, c)))
    clearInterval(counting)
    expect(validation).toEqual(validateForWrite(resource, c))
    expect(turns).toBeGreaterThan(0)
  })
})
