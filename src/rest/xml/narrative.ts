/**
 * The narrative `div` read back into the string JSON holds (https://hl7.org/fhir/R4/narrative.html): XHTML
 * only. When the div declares the XHTML namespace itself and uses no prefixes, its markup is taken exactly as
 * written, so that JSON → XML → JSON keeps it byte for byte; otherwise it is written out again, the XHTML
 * namespace declared on the div. A `&#xD;` in the markup taken as written is a raw CR again, as JSON held it
 * before it was written to XML (xmlText.ts).
 */
import { XHTML_NS } from "./toXml.ts"
import { escapeAttribute, escapeText, readMarkup } from "./xmlText.ts"
import type { XmlElement } from "./XmlParser.ts"

const XML_NS = "http://www.w3.org/XML/1998/namespace"

const check = (element: XmlElement, fail: (reason: string, at: XmlElement) => never): boolean => {
  if (element.ns !== XHTML_NS) fail(`the element <${element.local}> inside the narrative is not XHTML`, element)
  let plain = element.prefix === ""
  for (const attribute of element.attributes) {
    if (attribute.ns !== "" && attribute.ns !== XML_NS) {
      fail(`the attribute ${attribute.prefix}:${attribute.local} inside the narrative is not XHTML`, element)
    }
    if (attribute.prefix !== "" && attribute.prefix !== "xml") plain = false
  }
  for (const child of element.children) {
    if (typeof child !== "string" && !check(child, fail)) plain = false
  }
  return plain
}

const write = (element: XmlElement, out: Array<string>, root: boolean): void => {
  out.push("<", element.local)
  if (root) out.push(` xmlns="${XHTML_NS}"`)
  for (const attribute of element.attributes) {
    const name = attribute.ns === XML_NS ? `xml:${attribute.local}` : attribute.local
    out.push(" ", name, "=\"", escapeAttribute(attribute.value), "\"")
  }
  if (element.children.length === 0) {
    out.push("/>")
    return
  }
  out.push(">")
  for (const child of element.children) {
    if (typeof child === "string") out.push(escapeText(child))
    else write(child, out, false)
  }
  out.push("</", element.local, ">")
}

export const narrativeText = (div: XmlElement, source: string, fail: (reason: string, at: XmlElement) => never): string => {
  const plain = check(div, fail)
  if (plain && div.defaultNs === XHTML_NS) return readMarkup(source.slice(div.start, div.end))
  const out: Array<string> = []
  write(div, out, true)
  return out.join("")
}
