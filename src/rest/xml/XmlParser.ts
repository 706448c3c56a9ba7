/**
 * A small, strict XML 1.0 reader (https://www.w3.org/TR/xml/ and https://www.w3.org/TR/xml-names/) with just
 * what FHIR needs: elements, attributes, namespaces, text, CDATA, the five predefined entities and character
 * references. A DOCTYPE is refused outright, so no entity is ever expanded and nothing external is fetched
 * (XXE); processing instructions other than the XML declaration are refused; comments are dropped.
 */

import { maxBodyDepth } from "../bodyCheck.ts"

export interface XmlAttribute {
  readonly prefix: string
  readonly local: string
  readonly ns: string
  readonly value: string
}

export interface XmlElement {
  readonly prefix: string
  readonly local: string
  readonly ns: string
  /** Namespace declarations are not attributes here; `defaultNs` is this element's own `xmlns="..."`. */
  readonly attributes: ReadonlyArray<XmlAttribute>
  readonly defaultNs: string | undefined
  readonly children: Array<XmlNode>
  /** Offsets of the element's markup in `XmlDocument.source`, end exclusive. */
  readonly start: number
  end: number
}

export type XmlNode = XmlElement | string

export interface XmlDocument {
  readonly root: XmlElement
  /** The text parsed, line ends normalised to `\n`: offsets refer to it. */
  readonly source: string
}

export class XmlSyntaxError extends Error {
  constructor(readonly reason: string, readonly offset: number) {
    super(reason)
  }
}

const XML_NS = "http://www.w3.org/XML/1998/namespace"
const XMLNS_NS = "http://www.w3.org/2000/xmlns/"
const XHTML_NS = "http://www.w3.org/1999/xhtml"
// Readers of the tree recurse: one limit of nesting for every body, JSON or XML (docs/rest.md, "Limits").
const maxDepth = maxBodyDepth
const forbiddenChar = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]/
const lineEnds = /\r\n?/g
const needsAttributeWork = /[&\t\n]/

const isSpace = (c: number) => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d
const isNameStart = (c: number) =>
  (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || c === 0x5f || c === 0x3a || c >= 0xc0
const isNameChar = (c: number) =>
  isNameStart(c) || (c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x2e || c === 0xb7

const isXmlChar = (code: number) =>
  code === 0x9 || code === 0xa || code === 0xd || (code >= 0x20 && code <= 0xd7ff) ||
  (code >= 0xe000 && code <= 0xfffd) || (code >= 0x10000 && code <= 0x10ffff)

const allDigits = (digits: string, hex: boolean): boolean => {
  if (digits.length === 0 || digits.length > 8) return false
  for (let k = 0; k < digits.length; k++) {
    const c = digits.charCodeAt(k)
    const decimal = c >= 0x30 && c <= 0x39
    const letter = (c >= 0x61 && c <= 0x66) || (c >= 0x41 && c <= 0x46)
    if (!decimal && !(hex && letter)) return false
  }
  return true
}

const predefined: Readonly<Record<string, string>> = { lt: "<", gt: ">", amp: "&", quot: "\"", apos: "'" }

const isWhitespaceBetween = (text: string, from: number, to: number): boolean => {
  for (let i = from; i < to; i++) if (!isSpace(text.charCodeAt(i))) return false
  return true
}

export const isWhitespace = (text: string): boolean => isWhitespaceBetween(text, 0, text.length)

export const parseXml = (input: string): XmlDocument => {
  const src = input.includes("\r") ? input.replace(lineEnds, "\n") : input
  const bad = forbiddenChar.exec(src)
  if (bad !== null) throw new XmlSyntaxError("a character not allowed in XML", bad.index)
  let i = src.charCodeAt(0) === 0xfeff ? 1 : 0
  const fail = (reason: string, at: number = i): never => {
    throw new XmlSyntaxError(reason, at)
  }

  /** Decodes entity and character references from `from` to `to`; in attributes, literal whitespace becomes a space. */
  const decode = (from: number, to: number, attribute: boolean): string => {
    const raw = src.slice(from, to)
    if (attribute ? !needsAttributeWork.test(raw) : !raw.includes("&")) return raw
    let out = ""
    let last = 0
    for (let k = 0; k < raw.length; k++) {
      const c = raw.charCodeAt(k)
      if (attribute && (c === 0x09 || c === 0x0a)) {
        out += raw.slice(last, k) + " "
        last = k + 1
      } else if (c === 0x26) {
        const semi = raw.indexOf(";", k)
        if (semi === -1) fail("an unterminated entity reference", from + k)
        const name = raw.slice(k + 1, semi)
        let value: string
        if (name.startsWith("#")) {
          const hex = name.startsWith("#x")
          const digits = name.slice(hex ? 2 : 1)
          const code = allDigits(digits, hex) ? Number.parseInt(digits, hex ? 16 : 10) : -1
          if (!isXmlChar(code)) fail(`an invalid character reference &${name};`, from + k)
          value = String.fromCodePoint(code)
        } else {
          const known = predefined[name]
          if (known === undefined) fail(`the undefined entity &${name}; (only the five predefined entities are allowed)`, from + k)
          value = known ?? ""
        }
        out += raw.slice(last, k) + value
        last = semi + 1
        k = semi
      }
    }
    return out + raw.slice(last)
  }

  const readName = (): string => {
    const start = i
    if (!isNameStart(src.charCodeAt(i))) fail("a name was expected")
    while (i < src.length && isNameChar(src.charCodeAt(i))) i++
    return src.slice(start, i)
  }
  const skipSpace = () => {
    while (i < src.length && isSpace(src.charCodeAt(i))) i++
  }
  const splitName = (name: string, at: number): [string, string] => {
    const colon = name.indexOf(":")
    if (colon === -1) return ["", name]
    if (colon === 0 || colon === name.length - 1 || name.indexOf(":", colon + 1) !== -1) fail(`the malformed name '${name}'`, at)
    return [name.slice(0, colon), name.slice(colon + 1)]
  }

  // Namespace bindings in scope, innermost last; `scopes` holds the binding count at each open element.
  const bindings: Array<readonly [string, string]> = [["xml", XML_NS], ["xmlns", XMLNS_NS]]
  const scopes: Array<number> = []
  const resolve = (prefix: string, at: number): string => {
    for (let k = bindings.length - 1; k >= 0; k--) {
      const binding = bindings[k]
      if (binding !== undefined && binding[0] === prefix) return binding[1]
    }
    return prefix === "" ? "" : fail(`the undeclared namespace prefix '${prefix}'`, at)
  }

  if (src.startsWith("<?xml", i) && isSpace(src.charCodeAt(i + 5))) {
    const close = src.indexOf("?>", i)
    if (close === -1) fail("an unterminated XML declaration")
    if (!src.slice(i + 5, close).trimStart().startsWith("version")) fail("an XML declaration without a version")
    i = close + 2
  }

  const stack: Array<XmlElement> = []
  let root: XmlElement | undefined
  while (i < src.length) {
    const lt = src.indexOf("<", i)
    const textEnd = lt === -1 ? src.length : lt
    if (textEnd > i) {
      const parent = stack[stack.length - 1]
      if (parent === undefined) {
        if (!isWhitespaceBetween(src, i, textEnd)) fail("text outside the root element")
      } else if (parent.ns === XHTML_NS || !isWhitespaceBetween(src, i, textEnd)) {
        // Outside XHTML, FHIR has no mixed content: whitespace between elements is not kept.
        parent.children.push(decode(i, textEnd, false))
      }
      i = textEnd
    }
    if (lt === -1) break
    const next = src.charCodeAt(lt + 1)
    if (next === 0x21) { // <!
      if (src.startsWith("<!--", lt)) {
        const close = src.indexOf("--", lt + 4)
        if (close === -1) fail("an unterminated comment", lt)
        if (src.charCodeAt(close + 2) !== 0x3e) fail("'--' inside a comment", close)
        i = close + 3
      } else if (src.startsWith("<![CDATA[", lt)) {
        const parent = stack[stack.length - 1]
        if (parent === undefined) fail("CDATA outside the root element", lt)
        const close = src.indexOf("]]>", lt + 9)
        if (close === -1) fail("an unterminated CDATA section", lt)
        parent?.children.push(src.slice(lt + 9, close))
        i = close + 3
      } else if (src.startsWith("<!DOCTYPE", lt)) {
        fail("a DOCTYPE declaration: DTDs and entity declarations are not accepted", lt)
      } else {
        fail("unexpected markup '<!'", lt)
      }
    } else if (next === 0x3f) { // <?
      i = lt + 2
      const target = readName()
      fail(target.toLowerCase() === "xml"
        ? "an XML declaration that is not at the very start"
        : `the processing instruction <?${target}?> (not accepted)`, lt)
    } else if (next === 0x2f) { // </
      i = lt + 2
      const name = readName()
      skipSpace()
      if (src.charCodeAt(i) !== 0x3e) fail(`a malformed end tag </${name}`)
      const open = stack.pop()
      if (open === undefined) fail(`the end tag </${name}> without a start tag`, lt)
      const openName = open === undefined ? "" : open.prefix === "" ? open.local : `${open.prefix}:${open.local}`
      if (openName !== name) fail(`the end tag </${name}> where </${openName}> was expected`, lt)
      i++
      if (open !== undefined) open.end = i
      bindings.length = scopes.pop() ?? bindings.length
    } else {
      i = lt + 1
      if (root !== undefined && stack.length === 0) fail("a second root element", lt)
      const qname = readName()
      const [prefix, local] = splitName(qname, lt)
      const raw: Array<{ readonly name: string; readonly value: string; readonly at: number }> = []
      // Every name of this tag (namespace declarations too), to refuse a repeat without comparing each pair.
      const names = new Set<string>()
      scopes.push(bindings.length)
      let defaultNs: string | undefined
      let selfClosing = false
      for (;;) {
        const before = i
        skipSpace()
        const c = src.charCodeAt(i)
        if (c === 0x3e) {
          i++
          break
        }
        if (c === 0x2f && src.charCodeAt(i + 1) === 0x3e) {
          i += 2
          selfClosing = true
          break
        }
        if (i >= src.length) fail(`the unterminated start tag <${qname}`, lt)
        if (i === before) fail(`a space before the attribute in <${qname}`)
        const at = i
        const name = readName()
        skipSpace()
        if (src.charCodeAt(i) !== 0x3d) fail(`'=' after the attribute ${name}`)
        i++
        skipSpace()
        const quote = src.charCodeAt(i)
        if (quote !== 0x22 && quote !== 0x27) fail(`a quoted value for the attribute ${name}`)
        const close = src.indexOf(quote === 0x22 ? "\"" : "'", i + 1)
        if (close === -1) fail(`an unterminated value for the attribute ${name}`)
        // Within the value only: searching on to the next '<' read the rest of a long tag once per attribute.
        const lessThan = src.slice(i + 1, close).indexOf("<")
        if (lessThan !== -1) fail(`'<' in the value of the attribute ${name}`, i + 1 + lessThan)
        const value = decode(i + 1, close, true)
        i = close + 1
        if (names.has(name)) fail(`the attribute ${name} twice`, at)
        names.add(name)
        if (name === "xmlns") {
          defaultNs = value
          bindings.push(["", value])
        } else if (name.startsWith("xmlns:")) {
          const declared = name.slice(6)
          if (value === "") fail(`an empty namespace for the prefix ${declared}`, at)
          bindings.push([declared, value])
        } else {
          raw.push({ name, value, at })
        }
      }
      const attributes = raw.map(({ at, name, value }): XmlAttribute => {
        const [attrPrefix, attrLocal] = splitName(name, at)
        return { prefix: attrPrefix, local: attrLocal, ns: attrPrefix === "" ? "" : resolve(attrPrefix, at), value }
      })
      const element: XmlElement = {
        prefix, local, ns: resolve(prefix, lt), attributes, defaultNs, children: [], start: lt, end: i
      }
      stack[stack.length - 1]?.children.push(element)
      if (root === undefined) root = element
      if (selfClosing) bindings.length = scopes.pop() ?? bindings.length
      else if (stack.push(element) > maxDepth) fail(`elements nested deeper than the limit of ${maxDepth} levels`, lt)
    }
  }
  const open = stack[stack.length - 1]
  if (open !== undefined) fail(`the element <${open.prefix === "" ? open.local : `${open.prefix}:${open.local}`}> is not closed`, open.start)
  if (root === undefined) return fail("no root element", 0)
  return { root, source: src }
}
