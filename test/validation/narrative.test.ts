import { describe, expect, it } from "vitest"
import { validateResource } from "../../src/validation/Validator.ts"
import { checkXhtml } from "../../src/validation/xhtml.ts"
import { catalogTests, errors } from "./support.ts"

const withCatalog = catalogTests()

const div = (inner: string, attributes = ' xmlns="http://www.w3.org/1999/xhtml"') => `<div${attributes}>${inner}</div>`

describe("the narrative div", () => {
  it.each([
    div("<p>Hello <b>world</b></p>"),
    div('<table border="1"><tr><td colspan="2">a &amp; b &#169; &#x00A9;</td></tr></table>'),
    div('<a href="#x">x</a><img src="#p" alt="p"/><br/>'),
    div('<span style="color: red" xml:lang="en">x</span><!-- a comment -->'),
    `\n  ${div("x")}\n`,
    div('<img src="data:image/png;base64,AAAA"/>')
  ])("accepts %s", (text) => {
    expect(checkXhtml(text)).toEqual([])
  })

  it.each([
    [div("<script>alert(1)</script>"), "the element <script> is not allowed in a narrative"],
    [div('<p onclick="alert(1)">x</p>'), "the event attribute onclick on <p> is not allowed in a narrative"],
    [div('<a href="javascript:alert(1)">x</a>'), "a javascript: link on <a> is not allowed in a narrative"],
    [div('<form><input name="a"/></form>'), "the element <form> is not allowed in a narrative"],
    [div('<iframe src="http://example.org"></iframe>'), "the element <iframe> is not allowed in a narrative"],
    [div("x", ""), 'the root div must be in the XHTML namespace (xmlns="http://www.w3.org/1999/xhtml")'],
    ['<p xmlns="http://www.w3.org/1999/xhtml">x</p>', "the narrative is not well-formed XHTML: the root element is <p>, not <div>"],
    [div("<p>x"), "the narrative is not well-formed XHTML: </div> closes <p>"],
    [div("a & b"), "the narrative is not well-formed XHTML: an '&' that does not start a character reference (write &amp;)"],
    [div("&nbsp;"), "the narrative is not well-formed XHTML: the entity &nbsp; is not one of XML's (&amp; &lt; &gt; &quot; &apos;): use the character itself"],
    [div("<p class=x>y</p>"), "the narrative is not well-formed XHTML: the value of class on <p> is not quoted"],
    [div("  \n "), "the narrative has no content (txt-2: it SHALL have some non-whitespace content)"],
    ["plain text", "the narrative is not well-formed XHTML: text outside the root div"],
    [`${div("x")}<div/>`, "the narrative is not well-formed XHTML: more than one root element"],
    [div("<p>".repeat(300) + "</p>".repeat(300)), "the narrative is not well-formed XHTML: elements nested more than 256 deep"]
  ])("refuses %s", (text, problem) => {
    expect(checkXhtml(text)).toContain(problem)
  })

  withCatalog("a script in a resource's narrative is an error at Resource.text.div", (c) => {
    const found = errors(validateResource({ resourceType: "Patient", text: { status: "generated", div: div("<script>x</script>") } }, c))
    expect(found).toEqual([{ severity: "error", code: "value", expression: "Patient.text.div", diagnostics: "the element <script> is not allowed in a narrative" }])
  })

  withCatalog("a narrative without its div is an error (Narrative.div is required)", (c) => {
    expect(errors(validateResource({ resourceType: "Patient", text: { status: "generated" } }, c))[0]?.diagnostics).toBe(
      "Narrative.div: minimum required = 1, but only found 0"
    )
  })
})
