/** CR, TAB and LF through JSON → XML → JSON, and characters XML 1.0 cannot hold never written. */
import { Either } from "effect"
import { beforeAll, describe, expect, it } from "vitest"
import type { Catalog } from "../../../src/catalog/Catalog.ts"
import { fromXml } from "../../../src/rest/xml/fromXml.ts"
import { toXml } from "../../../src/rest/xml/toXml.ts"
import { parseXml } from "../../../src/rest/xml/XmlParser.ts"
import { embedMarkup, escapeAttribute, escapeText, readMarkup } from "../../../src/rest/xml/xmlText.ts"
import { loadCatalog } from "./support.ts"

let catalog: Catalog | undefined
beforeAll(async () => {
  catalog = await loadCatalog()
}, 300_000)

const div = `<div xmlns="http://www.w3.org/1999/xhtml">\r\n<p title="a\rb\tc\nd">line one\r\nline two\rthree &#xD; four</p>\r\n</div>`

describe("XML text", () => {
  it("writes CR as a reference in text, and TAB, CR and LF as references in attribute values", () => {
    expect(escapeText("a\r\nb\tc")).toBe("a&#xD;\nb\tc")
    expect(escapeAttribute("a\r\nb\tc")).toBe("a&#xD;&#xA;b&#x9;c")
    expect(parseXml(`<a v="${escapeAttribute("a\r\nb\tc")}">${escapeText("x\r\ny")}</a>`).root).toMatchObject({
      attributes: [{ local: "v", value: "a\r\nb\tc" }],
      children: ["x\r\ny"]
    })
  })

  it("replaces what XML 1.0 cannot hold by U+FFFD, and keeps surrogate pairs", () => {
    const bad = "a\u0000b\u0001c\u000Bd\uFFFEe\uFFFFf\uD800g\uDC00h\uD83D\uDE00i"
    const expected = "a\uFFFDb\uFFFDc\uFFFDd\uFFFDe\uFFFDf\uFFFDg\uFFFDh\uD83D\uDE00i"
    expect(escapeText(bad)).toBe(expected)
    expect(escapeAttribute(bad)).toBe(expected)
    expect(embedMarkup(`<div>${bad}</div>`)).toBe(`<div>${expected}</div>`)
  })

  it("embeds narrative markup with each CR of its text and attribute values as &#xD;, and reads it back", () => {
    const embedded = embedMarkup(div)
    expect(embedded).not.toContain("\r")
    expect(embedded).toContain(`title="a&#xD;b\tc\nd"`)
    expect(embedded).toContain("three &#13; four")
    expect(parseXml(embedded).root.local).toBe("div")
    expect(readMarkup(parseXml(embedded).source)).toBe(div.replace("&#xD;", "&#13;"))
    // CDATA cannot hold a reference: it is closed around the CR.
    expect(embedMarkup("<div><![CDATA[a\rb]]></div>")).toBe("<div><![CDATA[a]]>&#xD;<![CDATA[b]]></div>")
  })

  it("gives back CR, TAB and LF in narrative and string values through JSON → XML → JSON", (context) => {
    if (catalog === undefined) return context.skip()
    const resource = {
      resourceType: "Patient",
      id: "p1",
      text: { status: "generated", div },
      name: [{ family: "a\rb\tc\r\nd", given: ["x\ny", " \t "] }]
    }
    const xml = toXml(resource, catalog)
    expect(xml).not.toContain("\r")
    const back = fromXml(xml, catalog)
    expect(Either.isRight(back) && back.right).toEqual({ ...resource, text: { status: "generated", div: div.replace("&#xD;", "&#13;") } })
    // A narrative without the XHTML namespace, and one that is not markup at all.
    const bare = { ...resource, text: { status: "generated", div: `<div>a\r\nb</div>` } }
    expect(Either.getOrThrow(fromXml(toXml(bare, catalog), catalog))["text"]).toEqual({ status: "generated", div: `<div xmlns="http://www.w3.org/1999/xhtml">a\r\nb</div>` })
  })

  it("writes well-formed XML even for a stored resource holding what FHIR text may not hold", (context) => {
    if (catalog === undefined) return context.skip()
    const resource = { resourceType: "Patient", text: { status: "generated", div: `<div xmlns="http://www.w3.org/1999/xhtml">a\u0000b</div>` }, name: [{ family: "a\u0000\uD800b" }] }
    const xml = toXml(resource, catalog)
    expect(() => parseXml(xml)).not.toThrow()
    expect(Either.getOrThrow(fromXml(xml, catalog))).toMatchObject({ name: [{ family: "a\uFFFD\uFFFDb" }] })
  })
})
