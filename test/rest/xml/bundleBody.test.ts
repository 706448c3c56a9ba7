/** A large response Bundle in XML is rendered in slices, giving the event loop back, and reads the same as one rendered whole. */
import { Effect } from "effect"
import { beforeAll, describe, expect, it } from "vitest"
import type { Catalog } from "../../../src/catalog/Catalog.ts"
import { bundleBody } from "../../../src/rest/bundleBody.ts"
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
  Effect.runPromise(Effect.flatMap(bundleBody(JSON.stringify(json), { format: "xml", pretty }, catalog!), (response) =>
    Effect.sync(() => {
      const text = new TextDecoder().decode((response.body as { readonly body: Uint8Array }).body)
      return { text, contentType: response.headers["content-type"] }
    })))

describe("bundleBody", () => {
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

  it("renders a Bundle with a signature, and a small one, whole", async (context) => {
    if (catalog === undefined) return context.skip()
    const signed = { ...bundle(3000), type: "document", signature: { type: [{ system: "urn:iso-astm:E1762-95:2013", code: "1.2.840.10065.1.12.1.1" }], when: "2020-01-01T00:00:00Z", who: { reference: "Practitioner/x" } } }
    expect((await body(signed, false)).text).toBe(toXml(signed, catalog))
    const small = bundle(2)
    expect((await body(small, false)).text).toBe(toXml(small, catalog))
  })
})
