import { beforeAll, describe, expect, it } from "vitest"
import { build, type Catalog } from "../../src/catalog/Catalog.ts"
import { loadR4Conformance } from "../support/r4Examples.ts"

let catalog: Catalog | undefined

beforeAll(async () => {
  const resources = await loadR4Conformance()
  catalog = resources === undefined ? undefined : build(resources, 1)
}, 300_000)

describe("the element tree of an R4 resource type", () => {
  it("names each choice of value[x], with summary and mandatory flags from the snapshot", (context) => {
    if (catalog === undefined) return context.skip()
    const observation = catalog.elementTree("Observation")!
    expect(observation.get("valueQuantity")).toMatchObject({ base: "value", summary: true, mandatory: false })
    expect(observation.get("valueString")).toBe(observation.get("valueQuantity"))
    expect(observation.has("value[x]")).toBe(false)
    expect(observation.get("status")).toMatchObject({ summary: true, mandatory: true })
    expect(observation.get("category")).toMatchObject({ summary: false, mandatory: false })
    expect(observation.get("code")!.children.size).toBe(0)
  })

  it("gives backbone elements their children, a content reference those of the element it names", (context) => {
    if (catalog === undefined) return context.skip()
    const observation = catalog.elementTree("Observation")!
    const component = observation.get("component")!
    expect([...component.children.keys()]).toContain("valueQuantity")
    expect(component.children.get("code")).toMatchObject({ summary: true, mandatory: true })
    expect(component.children.get("referenceRange")!.children).toBe(observation.get("referenceRange")!.children)
  })

  it("is computed once per type and catalog, and only for known types", (context) => {
    if (catalog === undefined) return context.skip()
    expect(catalog.elementTree("Patient")).toBe(catalog.elementTree("Patient"))
    expect(catalog.elementTree("NoSuchType")).toBeUndefined()
  })
})
