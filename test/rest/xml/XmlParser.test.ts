import { describe, expect, it } from "vitest"
import { parseXml, type XmlElement, XmlSyntaxError } from "../../../src/rest/xml/XmlParser.ts"

const problem = (text: string): string => {
  try {
    parseXml(text)
  } catch (error) {
    if (error instanceof XmlSyntaxError) return error.reason
    throw error
  }
  return "no problem"
}

const child = (element: XmlElement, index: number): XmlElement => {
  const node = element.children[index]
  if (node === undefined || typeof node === "string") throw new Error(`no element at ${index}`)
  return node
}

describe("parseXml", () => {
  it("resolves default and prefixed namespaces and keeps declarations out of the attributes", () => {
    const { root } = parseXml(`<?xml version="1.0" encoding="UTF-8"?><a xmlns="urn:a" xmlns:b="urn:b"><b:c b:d="1" e="2"/></a>`)
    expect(root.ns).toBe("urn:a")
    expect(root.attributes).toEqual([])
    expect(root.defaultNs).toBe("urn:a")
    const c = child(root, 0)
    expect([c.prefix, c.local, c.ns]).toEqual(["b", "c", "urn:b"])
    expect(c.attributes).toEqual([
      { prefix: "b", local: "d", ns: "urn:b", value: "1" },
      { prefix: "", local: "e", ns: "", value: "2" }
    ])
  })

  it("decodes the predefined entities and character references, and normalises whitespace in attributes", () => {
    const { root } = parseXml(`<a v="x&amp;y&lt;&gt;&quot;&apos;&#65;&#x42;&#xA;z\tw\nq">t&amp;u&#x1F600;</a>`)
    expect(root.attributes[0]?.value).toBe("x&y<>\"'AB\nz w q")
    expect(root.children).toEqual(["t&u\u{1F600}"])
  })

  it("normalises line ends, keeps CDATA as text and drops comments", () => {
    const { root, source } = parseXml("<a>x\r\ny<!-- note --><![CDATA[<b>&amp;]]></a>\r\n<!-- after -->")
    expect(root.children).toEqual(["x\ny", "<b>&amp;"])
    expect(source).not.toContain("\r")
  })

  it("drops whitespace between elements outside XHTML and keeps it inside", () => {
    const { root } = parseXml(`<a>\n  <b/>\n  <div xmlns="http://www.w3.org/1999/xhtml"> <p>x</p> </div>\n</a>`)
    expect(root.children).toHaveLength(2)
    expect(child(root, 1).children).toHaveLength(3)
  })

  it("gives each element its markup offsets", () => {
    const text = `<a><b x="1">y</b></a>`
    const b = child(parseXml(text).root, 0)
    expect(text.slice(b.start, b.end)).toBe(`<b x="1">y</b>`)
  })

  it("refuses a DOCTYPE outright, so that no entity is ever expanded (XXE)", () => {
    const xxe = `<?xml version="1.0"?><!DOCTYPE a [<!ENTITY x SYSTEM "file:///etc/passwd">]><a>&x;</a>`
    expect(problem(xxe)).toContain("DOCTYPE")
    expect(problem(`<a>&x;</a>`)).toContain("undefined entity &x;")
  })

  it("refuses processing instructions and a late XML declaration", () => {
    expect(problem(`<?xml-stylesheet href="a.xsl"?><a/>`)).toContain("processing instruction")
    expect(problem(`<a><?php echo 1 ?></a>`)).toContain("processing instruction")
    expect(problem(` <?xml version="1.0"?><a/>`)).toContain("XML declaration")
  })

  it("refuses malformed documents", () => {
    expect(problem(`<a><b></a>`)).toContain("</b>")
    expect(problem(`<a>`)).toContain("not closed")
    expect(problem(`<a/><b/>`)).toContain("second root")
    expect(problem(`text<a/>`)).toContain("outside the root")
    expect(problem(`<a x="1" x="2"/>`)).toContain("twice")
    expect(problem(`<a x=1/>`)).toContain("quoted")
    expect(problem(`<a x="<"/>`)).toContain("'<'")
    expect(problem(`<p:a/>`)).toContain("undeclared namespace prefix")
    expect(problem(`<a>&#0;</a>`)).toContain("character reference")
    expect(problem(`<a>\u0001</a>`)).toContain("not allowed")
    expect(problem(`<a><!-- a -- b --></a>`)).toContain("--")
    expect(problem(``)).toContain("no root")
    expect(problem("<a>".repeat(257) + "</a>".repeat(257))).toContain("nested deeper than the limit of 256 levels")
    expect(problem("<a>".repeat(256) + "</a>".repeat(256))).toBe("no problem")
    expect(problem(`<a xmlns="urn:a" xmlns="urn:b"/>`)).toContain("the attribute xmlns twice")
  })

  it("reads a tag of twenty thousand attributes, and finds a repeat or a '<' in its last one", () => {
    const many = Array.from({ length: 20_000 }, (_, i) => ` a${i}="v${i}"`).join("")
    expect(parseXml(`<a${many}/>`).root.attributes).toHaveLength(20_000)
    expect(problem(`<a${many} a7="again"/>`)).toContain("the attribute a7 twice")
    expect(problem(`<a${many} z="x<y"/>`)).toContain("'<' in the value of the attribute z")
  })
})
