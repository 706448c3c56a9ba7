/**
 * The narrative's `div` (https://hl7.org/fhir/R4/narrative.html#rules): well-formed XHTML with a root `div`
 * in the XHTML namespace, only the basic formatting elements and attributes of HTML 4.0 (txt-1), and some
 * non-whitespace content (txt-2). No scripts, forms, frames, objects, event attributes or `javascript:`
 * links; a hyperlink is not empty and not a `urn:` or `cid:`, which name rather than locate. One pass over the text, no DOM, with a bound on nesting.
 */

import { isAbsoluteUri } from "./uris.ts"

const xhtmlNamespace = "http://www.w3.org/1999/xhtml"

const maxNesting = 256

const allowedElements = new Set([
  "p", "br", "div", "h1", "h2", "h3", "h4", "h5", "h6", "a", "span", "b", "em", "i", "strong", "small", "big", "tt",
  "dfn", "q", "var", "abbr", "acronym", "cite", "blockquote", "hr", "address", "bdo", "kbd", "sub", "sup", "ul",
  "ol", "li", "dl", "dt", "dd", "pre", "table", "caption", "colgroup", "col", "thead", "tr", "tfoot", "tbody", "th",
  "td", "code", "samp", "img", "map", "area", "s", "u", "strike", "center", "font"
])

const allowedAttributes = new Set([
  "title", "style", "class", "id", "lang", "xml:lang", "xml:space", "dir", "accesskey", "tabindex", "xmlns",
  "span", "width", "height", "align", "valign", "char", "charoff", "abbr", "axis", "headers", "scope", "rowspan",
  "colspan", "href", "name", "src", "alt", "longdesc", "border", "usemap", "ismap", "shape", "coords", "start",
  "type", "value", "summary", "cellpadding", "cellspacing", "frame", "rules", "nowrap", "cite", "datetime",
  "compact", "bgcolor", "color", "size", "face", "noshade", "clear"
])

const entities = new Set(["amp", "lt", "gt", "quot", "apos"])

const nameChar = /[A-Za-z0-9_:.\-]/

const isSpace = (c: string): boolean => c === " " || c === "\t" || c === "\n" || c === "\r"

class Broken {
  constructor(readonly problem: string) {}
}

/** Checks an `&...;` reference at `at` (the ampersand) and returns the index after it. */
const reference = (text: string, at: number): number => {
  const end = text.indexOf(";", at)
  const body = end < 0 || end - at > 12 ? "" : text.slice(at + 1, end)
  if (/^#[0-9]{1,7}$/.test(body) || /^#x[0-9a-fA-F]{1,6}$/.test(body) || entities.has(body)) return end + 1
  throw new Broken(body === "" || body.startsWith("#")
    ? "an '&' that does not start a character reference (write &amp;)"
    : `the entity &${body}; is not one of XML's (&amp; &lt; &gt; &quot; &apos;): use the character itself`)
}

/** Schemes that name something rather than locate it: a browser cannot follow them. */
const literalSchemes = new Set(["urn", "cid"])

/** Why the href of a hyperlink cannot be followed: empty, or a `urn:` or `cid:` (not a location). */
const hyperlinkProblem = (href: string): string | undefined => {
  if (href.trim() === "") return "a hyperlink <a href=\"\"> is empty"
  const colon = href.indexOf(":")
  if (colon <= 0) return undefined
  const scheme = href.slice(0, colon)
  if (literalSchemes.has(scheme) && isAbsoluteUri(href)) {
    return `the hyperlink scheme '${scheme}' in '${href.length > 80 ? `${href.slice(0, 80)}...` : href}' is not a scheme a browser can follow`
  }
  return undefined
}

/** The problems of a narrative div, empty when it is acceptable. */
export const checkXhtml = (text: string): ReadonlyArray<string> => {
  const problems: Array<string> = []
  const stack: Array<string> = []
  let content = false
  let rootSeen = false
  let i = 0
  const n = text.length
  try {
    while (i < n) {
      const c = text[i]!
      if (c !== "<") {
        if (c === "&") {
          i = reference(text, i)
          content = true
          continue
        }
        if (stack.length === 0 && !isSpace(c)) throw new Broken("text outside the root div")
        if (!isSpace(c)) content = true
        i++
        continue
      }
      if (text.startsWith("<!--", i)) {
        const end = text.indexOf("-->", i + 4)
        if (end < 0) throw new Broken("a comment that is not closed")
        i = end + 3
        continue
      }
      if (text.startsWith("<![CDATA[", i)) {
        const end = text.indexOf("]]>", i)
        if (end < 0 || stack.length === 0) throw new Broken("a CDATA section that is not closed or is outside the div")
        if (text.slice(i + 9, end).trim() !== "") content = true
        i = end + 3
        continue
      }
      if (text[i + 1] === "?" || text[i + 1] === "!") throw new Broken("processing instructions and declarations are not allowed")
      const closing = text[i + 1] === "/"
      let j = closing ? i + 2 : i + 1
      const nameStart = j
      while (j < n && nameChar.test(text[j]!)) j++
      const name = text.slice(nameStart, j)
      if (name === "") throw new Broken("a '<' that does not start a tag (write &lt;)")
      const local = name.toLowerCase()
      if (closing) {
        while (j < n && isSpace(text[j]!)) j++
        if (text[j] !== ">") throw new Broken(`the end tag </${name}> is not closed`)
        const open = stack.pop()
        if (open !== name) throw new Broken(`</${name}> closes ${open === undefined ? "nothing" : `<${open}>`}`)
        i = j + 1
        continue
      }
      if (stack.length === 0) {
        if (rootSeen) throw new Broken("more than one root element")
        if (name !== "div") throw new Broken(`the root element is <${name}>, not <div>`)
        rootSeen = true
      }
      if (!allowedElements.has(name)) problems.push(`the element <${name}> is not allowed in a narrative`)
      const seen = new Set<string>()
      let namespace: string | undefined
      let selfClosing = false
      for (;;) {
        const before = j
        while (j < n && isSpace(text[j]!)) j++
        if (j >= n) throw new Broken(`the tag <${name}> is not closed`)
        if (text[j] === ">") break
        if (text[j] === "/" && text[j + 1] === ">") {
          selfClosing = true
          j++
          break
        }
        if (j === before) throw new Broken(`attributes of <${name}> must be separated by spaces`)
        const attributeStart = j
        while (j < n && nameChar.test(text[j]!)) j++
        const attribute = text.slice(attributeStart, j)
        if (attribute === "") throw new Broken(`unexpected ${JSON.stringify(text[j])} in the tag <${name}>`)
        while (j < n && isSpace(text[j]!)) j++
        if (text[j] !== "=") throw new Broken(`the attribute ${attribute} of <${name}> has no value`)
        j++
        while (j < n && isSpace(text[j]!)) j++
        const quote = text[j]
        if (quote !== '"' && quote !== "'") throw new Broken(`the value of ${attribute} on <${name}> is not quoted`)
        const end = text.indexOf(quote, j + 1)
        if (end < 0) throw new Broken(`the value of ${attribute} on <${name}> is not closed`)
        const value = text.slice(j + 1, end)
        if (value.includes("<")) throw new Broken(`the value of ${attribute} on <${name}> contains '<'`)
        for (let k = value.indexOf("&"); k >= 0; k = value.indexOf("&", k + 1)) reference(value, k)
        j = end + 1
        if (seen.has(attribute)) throw new Broken(`the attribute ${attribute} appears twice on <${name}>`)
        seen.add(attribute)
        const lower = attribute.toLowerCase()
        if (attribute === "xmlns") namespace = value
        else if (lower.startsWith("on")) problems.push(`the event attribute ${attribute} on <${name}> is not allowed in a narrative`)
        else if (!allowedAttributes.has(attribute)) problems.push(`the attribute ${attribute} on <${name}> is not allowed in a narrative`)
        else if ((lower === "href" || lower === "src") && /^\s*(javascript|vbscript):/i.test(value)) {
          problems.push(`a ${value.slice(0, value.indexOf(":"))}: link on <${name}> is not allowed in a narrative`)
        } else if (lower === "href" && local === "a") {
          const problem = hyperlinkProblem(value)
          if (problem !== undefined) problems.push(problem)
        }
      }
      if (stack.length === 0 && namespace !== xhtmlNamespace) {
        problems.push(`the root div must be in the XHTML namespace (xmlns="${xhtmlNamespace}")`)
      } else if (namespace !== undefined && namespace !== xhtmlNamespace) {
        problems.push(`<${name}> declares the namespace ${namespace}: a narrative is XHTML only`)
      }
      if (local === "img" && seen.has("src")) content = true
      i = j + 1
      if (!selfClosing) {
        if (stack.length >= maxNesting) throw new Broken(`elements nested more than ${maxNesting} deep`)
        stack.push(name)
      } else if (stack.length === 0) break
    }
    if (!rootSeen) throw new Broken("there is no root div")
    if (stack.length > 0) throw new Broken(`<${stack[stack.length - 1]}> is not closed`)
    if (text.slice(i).trim() !== "") throw new Broken("content after the root div")
    if (!content) problems.push("the narrative has no content (txt-2: it SHALL have some non-whitespace content)")
  } catch (error) {
    if (!(error instanceof Broken)) throw error
    problems.unshift(`the narrative is not well-formed XHTML: ${error.problem}`)
  }
  return problems
}
