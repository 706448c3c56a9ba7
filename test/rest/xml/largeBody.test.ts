/** A large response Bundle in XML is rendered in slices, giving the event loop back, and reads the same as one rendered whole. */
import { Effect } from "effect"
import { beforeAll, describe, expect, it } from "vitest"
import type { Catalog } from "../../../src/catalog/Catalog.ts"
import { largeBody } from "../../../src/rest/largeBody.ts"
import { toXml } from "../../../src/rest/xml/toXml.ts"
import { loadCatalog } from "./support.ts"

let catalog: Catalog | undefined
beforeAll(async () => {
  catalog = await loadCatalog()
}, 300_000)

const patient = (i: number) => ({
  resourceType: "Patient",
  id: `p${i}`,
  text: { status: "generated", div: `<div xmlns="http://www.w3.org/1999/xhtml">patient ${i} &amp; more</div>` },
  name: [{ family: `Family${i}`, given: ["A", "B"], _given: [null, { extension: [{ url: "http://example.org/x", valueString: "x" }] }] }],
  birthDate: "1970-01-01"
})

const bundle = (entries: number) => ({
  resourceType: "Bundle",
  id: "b",
  type: "searchset",
  total: entries,
  link: [{ relation: "self", url: "http://example.org/fhir/Patient" }],
  entry: Array.from({ length: entries }, (_, i) => ({ fullUrl: `http://example.org/fhir/Patient/p${i}`, resource: patient(i), search: { mode: "match" } }))
})

const body = (json: Record<string, unknown>, pretty: boolean) =>
  Effect.runPromise(Effect.flatMap(largeBody(JSON.stringify(json), { format: "xml", pretty }, catalog!), (response) =>
    Effect.sync(() => {
      const text = new TextDecoder().decode((response.body as { readonly body: Uint8Array }).body)
      return { text, contentType: response.headers["content-type"] }
    })))

describe("largeBody", () => {
  for (const pretty of [false, true]) {
    it(`renders a large Bundle in XML slice by slice, the same as whole${pretty ? ", pretty" : ""}`, async (context) => {
      if (catalog === undefined) return context.skip()
      const json = bundle(3000)
      expect(JSON.stringify(json).length).toBeGreaterThan(256 * 1024)
      let turns = 0
      const counting = setInterval(() => turns++, 0)
      const { text, contentType } = await body(json, pretty)
      clearInterval(counting)
      expect(text).toBe(toXml(json, catalog, { pretty }))
      expect(contentType).toContain("application/fhir+xml")
      // Rendering gave the event loop back at least once, so a timer could run in between.
      expect(turns).toBeGreaterThan(0)
    })
  }

  it("writes a signed Bundle, one large resource and a small one the same as whole, decimals with their text", async (context) => {
    if (catalog === undefined) return context.skip()
    const signed = { ...bundle(3000), type: "document", signature: { type: [{ system: "urn:iso-astm:E1762-95:2013", code: "1.2.840.10065.1.12.1.1" }], when: "2020-01-01T00:00:00Z", who: { reference: "Practitioner/x" } } }
    expect((await body(signed, false)).text).toBe(toXml(signed, catalog))
    const codes = {
      resourceType: "ValueSet",
      id: "big",
      status: "active",
      compose: { include: [{ system: "http://example.org/codes", concept: Array.from({ length: 20_000 }, (_, i) => ({ code: `c${i}`, display: `Code ${i}` })) }] }
    }
    let turns = 0
    const counting = setInterval(() => turns++, 0)
    const written = await body(codes, true)
    clearInterval(counting)
    expect(written.text).toBe(toXml(codes, catalog, { pretty: true }))
    expect(turns).toBeGreaterThan(0)
    const small = bundle(2)
    expect((await body(small, false)).text).toBe(toXml(small, catalog))
    const observation = `{"resourceType":"Bundle","type":"searchset","entry":[${Array.from({ length: 3000 }, (_, i) => `{"resource":{"resourceType":"Observation","id":"o${i}","status":"final","code":{"text":"x"},"valueQuantity":{"value":1.50}}}`).join(",")}]}`
    const decimals = new TextDecoder().decode(((await Effect.runPromise(largeBody(observation, { format: "xml", pretty: false }, catalog))).body as { readonly body: Uint8Array }).body)
    expect(decimals.match(/<value value="1\.50"\/>/g)?.length).toBe(3000)
  })
})
