import { beforeAll, describe, expect, it } from "vitest"
import type { Catalog } from "../../../src/catalog/Catalog.ts"
import { parseJson } from "../../../src/json/Json.ts"
import { toXml } from "../../../src/rest/xml/toXml.ts"
import { loadCatalog } from "./support.ts"

let catalog: Catalog | undefined
beforeAll(async () => {
  catalog = await loadCatalog()
}, 300_000)

const declaration = `<?xml version="1.0" encoding="UTF-8"?>`
const xml = (resource: Record<string, unknown>): string => {
  if (catalog === undefined) throw new Error("no catalog")
  return toXml(resource, catalog).slice(declaration.length)
}

describe("toXml", () => {
  it("names the root after the resource type, in the FHIR namespace, with elements in definition order", (context) => {
    if (catalog === undefined) return context.skip()
    expect(xml({ gender: "male", active: true, id: "p1", resourceType: "Patient" })).toBe(
      `<Patient xmlns="http://hl7.org/fhir"><id value="p1"/><active value="true"/><gender value="male"/></Patient>`
    )
  })

  it("writes numbers and booleans as they are held, and a decimal given as a string unchanged", (context) => {
    if (catalog === undefined) return context.skip()
    expect(xml({ resourceType: "Observation", status: "final", code: { text: "x" }, valueQuantity: { value: 1.5 } }))
      .toContain(`<valueQuantity><value value="1.5"/></valueQuantity>`)
    expect(xml({ resourceType: "Observation", status: "final", code: { text: "x" }, valueQuantity: { value: "1.50" } }))
      .toContain(`<value value="1.50"/>`)
    expect(xml({ resourceType: "Patient", multipleBirthInteger: 2 })).toContain(`<multipleBirthInteger value="2"/>`)
  })

  it("writes a decimal with the text it was parsed with, while it holds that number", (context) => {
    if (catalog === undefined) return context.skip()
    const observation = parseJson(`{"resourceType":"Observation","status":"final","code":{"text":"x"},"valueQuantity":{"value":1.50},` +
      `"component":[{"code":{"text":"c"},"valueQuantity":{"value":2.0E-3}}]}`) as any
    expect(xml(observation)).toContain(`<valueQuantity><value value="1.50"/></valueQuantity>`)
    expect(xml(observation)).toContain(`<valueQuantity><value value="2.0E-3"/></valueQuantity>`)
    observation.valueQuantity.value = 1.25
    expect(xml(observation)).toContain(`<valueQuantity><value value="1.25"/></valueQuantity>`)
    const sequence = parseJson(`{"resourceType":"MolecularSequence","coordinateSystem":0,"quality":[{"type":"snp","roc":{"precision":[0.10,0.2,3.000]}}]}`) as any
    expect(xml(sequence)).toContain(`<precision value="0.10"/><precision value="0.2"/><precision value="3.000"/>`)
  })

  it("writes a primitive's id and extensions from its _name sibling, aligned in arrays", (context) => {
    if (catalog === undefined) return context.skip()
    const ext = { url: "http://example.org/x", valueString: "y" }
    expect(xml({ resourceType: "Patient", birthDate: "1970-03-30", _birthDate: { id: "b1", extension: [ext] } })).toContain(
      `<birthDate id="b1" value="1970-03-30"><extension url="http://example.org/x"><valueString value="y"/></extension></birthDate>`
    )
    expect(xml({ resourceType: "Patient", name: [{ given: ["A", null, "C"], _given: [null, { extension: [ext] }, null] }] }))
      .toContain(
        `<name><given value="A"/><given><extension url="http://example.org/x"><valueString value="y"/></extension></given>` +
          `<given value="C"/></name>`
      )
  })

  it("writes element ids and extension urls as attributes", (context) => {
    if (catalog === undefined) return context.skip()
    expect(xml({
      resourceType: "Patient",
      extension: [{ valueBoolean: true, url: "http://example.org/e", id: "e1" }],
      name: [{ id: "n1", family: "F" }]
    })).toBe(
      `<Patient xmlns="http://hl7.org/fhir"><extension id="e1" url="http://example.org/e"><valueBoolean value="true"/>` +
        `</extension><name id="n1"><family value="F"/></name></Patient>`
    )
  })

  it("follows contentReference elements such as Questionnaire.item.item", (context) => {
    if (catalog === undefined) return context.skip()
    const questionnaire = {
      resourceType: "Questionnaire",
      status: "draft",
      item: [{ linkId: "1", type: "group", item: [{ type: "string", linkId: "1.1", required: true }] }]
    }
    expect(xml(questionnaire)).toContain(
      `<item><linkId value="1"/><type value="group"/><item><linkId value="1.1"/><type value="string"/>` +
        `<required value="true"/></item></item>`
    )
  })

  it("wraps contained, Bundle.entry.resource and Parameters.parameter.resource in an element named after the type", (context) => {
    if (catalog === undefined) return context.skip()
    expect(xml({ resourceType: "Patient", contained: [{ resourceType: "Organization", id: "o" }] }))
      .toContain(`<contained><Organization><id value="o"/></Organization></contained>`)
    expect(xml({ resourceType: "Bundle", type: "collection", entry: [{ resource: { resourceType: "Patient", id: "p" } }] }))
      .toContain(`<entry><resource><Patient><id value="p"/></Patient></resource></entry>`)
    expect(xml({ resourceType: "Parameters", parameter: [{ name: "r", resource: { resourceType: "Patient", id: "p" } }] }))
      .toContain(`<parameter><name value="r"/><resource><Patient><id value="p"/></Patient></resource></parameter>`)
  })

  it("embeds the narrative as XHTML markup, adding the namespace when missing and escaping what is not XHTML", (context) => {
    if (catalog === undefined) return context.skip()
    const div = `<div xmlns="http://www.w3.org/1999/xhtml"><p>a &amp; <b>b</b></p></div>`
    expect(xml({ resourceType: "Patient", text: { status: "generated", div } }))
      .toContain(`<text><status value="generated"/>${div}</text>`)
    expect(xml({ resourceType: "Patient", text: { status: "generated", div: "<div>x</div>" } }))
      .toContain(`<div xmlns="http://www.w3.org/1999/xhtml">x</div>`)
    expect(xml({ resourceType: "Patient", text: { status: "generated", div: "<div>x</div><evil/>" } }))
      .toContain(`<div xmlns="http://www.w3.org/1999/xhtml">&lt;div&gt;x&lt;/div&gt;&lt;evil/&gt;</div>`)
  })

  it("escapes attribute values, whitespace included, so that they read back unchanged", (context) => {
    if (catalog === undefined) return context.skip()
    expect(xml({ resourceType: "Patient", name: [{ text: "a&b <c> \"d\" 'e'\n\tf\r" }] }))
      .toContain(`<text value="a&amp;b &lt;c&gt; &quot;d&quot; 'e'&#xA;&#x9;f&#xD;"/>`)
  })

  it("pretty-prints with two-space indentation", (context) => {
    if (catalog === undefined) return context.skip()
    expect(toXml({ resourceType: "Patient", id: "p", name: [{ family: "F" }] }, catalog, { pretty: true })).toBe(
      `${declaration}\n<Patient xmlns="http://hl7.org/fhir">\n  <id value="p"/>\n  <name>\n    <family value="F"/>\n  </name>\n</Patient>`
    )
  })

  it("leaves out properties that no definition names", (context) => {
    if (catalog === undefined) return context.skip()
    expect(xml({ resourceType: "Patient", id: "p", nickname: "x" })).toBe(`<Patient xmlns="http://hl7.org/fhir"><id value="p"/></Patient>`)
  })
})
