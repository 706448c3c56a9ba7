import { Either } from "effect"
import { beforeAll, describe, expect, it } from "vitest"
import type { Catalog } from "../../../src/catalog/Catalog.ts"
import { stringifyJson } from "../../../src/json/Json.ts"
import { fromXml } from "../../../src/rest/xml/fromXml.ts"
import { loadCatalog } from "./support.ts"

let catalog: Catalog | undefined
beforeAll(async () => {
  catalog = await loadCatalog()
}, 300_000)

const FHIR = `xmlns="http://hl7.org/fhir"`
const read = (text: string): Record<string, unknown> => {
  if (catalog === undefined) throw new Error("no catalog")
  const result = fromXml(text, catalog)
  if (Either.isLeft(result)) throw new Error(result.left.message)
  return result.right
}
const refusal = (text: string): string => {
  if (catalog === undefined) throw new Error("no catalog")
  const result = fromXml(text, catalog)
  return Either.isLeft(result) ? result.left.message : "accepted"
}

describe("fromXml", () => {
  it("reads the resource type from the root, arrays where the definition repeats, and JSON types of primitives", (context) => {
    if (catalog === undefined) return context.skip()
    expect(read(`<?xml version="1.0"?>
      <Patient ${FHIR}>
        <!-- comments are ignored -->
        <id value="p1"/>
        <active value="true"/>
        <name><family value="F"/><given value="A"/><given value="B"/></name>
        <multipleBirthInteger value="2"/>
      </Patient>`)).toEqual({
      resourceType: "Patient",
      id: "p1",
      active: true,
      name: [{ family: "F", given: ["A", "B"] }],
      multipleBirthInteger: 2
    })
  })

  it("reads decimals as numbers, and choice types under their typed name", (context) => {
    if (catalog === undefined) return context.skip()
    const observation = read(
      `<Observation ${FHIR}><status value="final"/><code><text value="x"/></code>` +
        `<valueQuantity><value value="1.50"/><unit value="mg"/></valueQuantity></Observation>`
    )
    expect(observation["valueQuantity"]).toEqual({ value: 1.5, unit: "mg" })
  })

  it("keeps the text of decimals beside their numbers, in single and repeating elements", (context) => {
    if (catalog === undefined) return context.skip()
    const observation = read(
      `<Observation ${FHIR}><status value="final"/><code><text value="x"/></code>` +
        `<valueQuantity><value value="1.50"/></valueQuantity><component><code><text value="c"/></code>` +
        `<valueQuantity><value value="-1E+3"/></valueQuantity></component></Observation>`
    )
    expect(stringifyJson(observation)).toContain(`"valueQuantity":{"value":1.50}`)
    expect(stringifyJson(observation)).toContain(`"valueQuantity":{"value":-1E+3}`)
    const sequence = read(
      `<MolecularSequence ${FHIR}><coordinateSystem value="0"/><quality><type value="snp"/><roc>` +
        `<score value="1"/><score value="2"/><precision value="0.10"/><precision value="0.2"/><precision value="3.000"/>` +
        `</roc></quality></MolecularSequence>`
    )
    expect(stringifyJson(sequence)).toContain(`"precision":[0.10,0.2,3.000]`)
    // An integer's `+` is XML's, not JSON's: written as the number.
    expect(stringifyJson(read(`<Patient ${FHIR}><multipleBirthInteger value="+2"/></Patient>`))).toBe(`{"resourceType":"Patient","multipleBirthInteger":2}`)
  })

  it("puts a primitive's id and extensions in its _name sibling, aligned with null in arrays", (context) => {
    if (catalog === undefined) return context.skip()
    const ext = `<extension url="http://example.org/x"><valueString value="y"/></extension>`
    expect(read(`<Patient ${FHIR}><birthDate id="b1" value="1970-03-30">${ext}</birthDate></Patient>`)).toEqual({
      resourceType: "Patient",
      birthDate: "1970-03-30",
      _birthDate: { id: "b1", extension: [{ url: "http://example.org/x", valueString: "y" }] }
    })
    expect(read(`<Patient ${FHIR}><name><given value="A"/><given>${ext}</given><given value="C"/></name></Patient>`)["name"])
      .toEqual([{ given: ["A", null, "C"], _given: [null, { extension: [{ url: "http://example.org/x", valueString: "y" }] }, null] }])
    expect(read(`<Patient ${FHIR}><name><given>${ext}</given></name></Patient>`)["name"])
      .toEqual([{ _given: [{ extension: [{ url: "http://example.org/x", valueString: "y" }] }] }])
  })

  it("reads element ids and extension urls from attributes", (context) => {
    if (catalog === undefined) return context.skip()
    expect(read(`<Patient ${FHIR}><extension id="e1" url="http://example.org/e"><valueBoolean value="false"/></extension>` +
      `<name id="n1"><family value="F"/></name></Patient>`)).toEqual({
      resourceType: "Patient",
      extension: [{ id: "e1", url: "http://example.org/e", valueBoolean: false }],
      name: [{ id: "n1", family: "F" }]
    })
  })

  it("follows contentReference elements such as Questionnaire.item.item", (context) => {
    if (catalog === undefined) return context.skip()
    const questionnaire = read(`<Questionnaire ${FHIR}><status value="draft"/><item><linkId value="1"/><type value="group"/>` +
      `<item><linkId value="1.1"/><type value="integer"/><initial><valueInteger value="3"/></initial></item></item></Questionnaire>`)
    expect(questionnaire["item"]).toEqual([
      { linkId: "1", type: "group", item: [{ linkId: "1.1", type: "integer", initial: [{ valueInteger: 3 }] }] }
    ])
  })

  it("reads contained resources and Bundle entries from the element named after their type", (context) => {
    if (catalog === undefined) return context.skip()
    expect(read(`<Patient ${FHIR}><contained><Organization><id value="o"/></Organization></contained></Patient>`)["contained"])
      .toEqual([{ resourceType: "Organization", id: "o" }])
    expect(read(`<Bundle ${FHIR}><type value="collection"/><entry><resource><Patient><id value="p"/></Patient></resource>` +
      `</entry></Bundle>`)["entry"]).toEqual([{ resource: { resourceType: "Patient", id: "p" } }])
  })

  it("reads the narrative back to its XHTML string, exactly as written when it declares its namespace", (context) => {
    if (catalog === undefined) return context.skip()
    const div = `<div xmlns="http://www.w3.org/1999/xhtml">\n  <p class="x">a &amp; <b>b</b><br/></p>\n</div>`
    expect(read(`<Patient ${FHIR}><text><status value="generated"/>${div}</text></Patient>`)["text"])
      .toEqual({ status: "generated", div })
    const prefixed = `<Patient ${FHIR} xmlns:h="http://www.w3.org/1999/xhtml"><text><status value="generated"/>` +
      `<h:div><h:p xml:lang="en">x &lt; y</h:p></h:div></text></Patient>`
    expect(read(prefixed)["text"]).toEqual({
      status: "generated",
      div: `<div xmlns="http://www.w3.org/1999/xhtml"><p xml:lang="en">x &lt; y</p></div>`
    })
  })

  it("unescapes attribute values", (context) => {
    if (catalog === undefined) return context.skip()
    expect(read(`<Patient ${FHIR}><name><text value="a&amp;b &lt;c&gt; &quot;d&quot; 'e'&#xA;&#x9;f"/></name></Patient>`)["name"])
      .toEqual([{ text: "a&b <c> \"d\" 'e'\n\tf" }])
  })

  it("refuses malformed XML with its line", (context) => {
    if (catalog === undefined) return context.skip()
    expect(refusal(`<Patient ${FHIR}>\n<id value="p">\n</Patient>`)).toBe(
      "malformed XML: the end tag </Patient> where </id> was expected (line 3)"
    )
    expect(refusal(`<Patient ${FHIR}>\r<id value="p">\r\n</Patient>`)).toContain("(line 3)")
  })

  it("refuses a DOCTYPE (XXE) and processing instructions", (context) => {
    if (catalog === undefined) return context.skip()
    expect(refusal(`<!DOCTYPE Patient [<!ENTITY e SYSTEM "file:///etc/passwd">]><Patient ${FHIR}/>`)).toContain("DOCTYPE")
    expect(refusal(`<?xml-stylesheet href="x"?><Patient ${FHIR}/>`)).toContain("processing instruction")
  })

  it("refuses a wrong namespace, a root that is not a resource type and unknown elements, naming path and line", (context) => {
    if (catalog === undefined) return context.skip()
    expect(refusal(`<Patient xmlns="http://hl7.org/fhir/x"/>`)).toContain("not 'http://hl7.org/fhir'")
    expect(refusal(`<Patient/>`)).toContain("namespace")
    expect(refusal(`<HumanName ${FHIR}/>`)).toContain("<HumanName> is not a resource type")
    expect(refusal(`<Patient ${FHIR}>\n  <name>\n    <nickname value="x"/>\n  </name>\n</Patient>`))
      .toBe("unknown element at Patient.name.nickname (line 3)")
    expect(refusal(`<Patient ${FHIR}><name><family xmlns="urn:x" value="F"/></name></Patient>`)).toContain("urn:x")
    expect(refusal(`<Patient ${FHIR}><text><status value="generated"/><div>x</div></text></Patient>`)).toContain("XHTML")
    expect(refusal(`<Patient ${FHIR}><text><status value="generated"/><div xmlns="http://www.w3.org/1999/xhtml">` +
      `<svg xmlns="http://www.w3.org/2000/svg"/></div></text></Patient>`)).toContain("not XHTML")
  })

  it("refuses what the definitions do not allow: order, repeats, values, text, empty elements, attributes", (context) => {
    if (catalog === undefined) return context.skip()
    expect(refusal(`<Patient ${FHIR}><gender value="male"/><active value="true"/></Patient>`)).toContain("out of order")
    expect(refusal(`<Patient ${FHIR}><active value="true"/><active value="false"/></Patient>`)).toContain("only once")
    expect(refusal(`<Patient ${FHIR}><deceasedBoolean value="true"/><deceasedDateTime value="2000"/></Patient>`))
      .toContain("only once")
    expect(refusal(`<Patient ${FHIR}><active value="yes"/></Patient>`)).toBe("'yes' is not a boolean at Patient.active (line 1)")
    expect(refusal(`<Patient ${FHIR}><multipleBirthInteger value="1.5"/></Patient>`)).toContain("not a valid integer")
    expect(refusal(`<Patient ${FHIR}><active value=""/></Patient>`)).toContain("empty value")
    expect(refusal(`<Patient ${FHIR}><active>true</active></Patient>`)).toContain("text content")
    expect(refusal(`<Patient ${FHIR}><active/></Patient>`)).toContain("needs a value")
    expect(refusal(`<Patient ${FHIR}><name/></Patient>`)).toContain("empty element")
    expect(refusal(`<Patient ${FHIR}><name use="official"/></Patient>`)).toContain("attribute 'use'")
    expect(refusal(`<Patient ${FHIR} id="p"/>`)).toContain("attribute 'id'")
    expect(refusal(`<Patient ${FHIR}><contained><Patient/><Patient/></contained></Patient>`)).toContain("more than one")
  })
})
