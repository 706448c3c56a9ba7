/**
 * Text as FHIR XML writes it (https://www.w3.org/TR/xml/#charsets, #AVNormalize, #sec-line-ends): a reader
 * turns a raw CR into a line end and raw TAB, CR and LF inside an attribute value into spaces, so these are
 * written as character references, and a round trip keeps them. XML 1.0 cannot hold the C0 controls other
 * than TAB, CR and LF, U+FFFE, U+FFFF or an unpaired surrogate at all: such input is refused before it is
 * stored (src/validation/fhirText.ts), and should one be found in what was stored before, it is written as
 * U+FFFD, so that a response is always well-formed XML.
 */

const replacement = "\uFFFD"
const attributeSpecial = /[&<>"\t\n\r\u0000-\u0008\u000B\u000C\u000E-\u001F\uD800-\uDFFF\uFFFE\uFFFF]/
const textSpecial = /[&<>\r\u0000-\u0008\u000B\u000C\u000E-\u001F\uD800-\uDFFF\uFFFE\uFFFF]/
/** One character to replace; a surrogate pair is matched whole, and kept. */
const specials = /[\uD800-\uDBFF][\uDC00-\uDFFF]|[&<>"\t\n\r\u0000-\u0008\u000B\u000C\u000E-\u001F\uD800-\uDFFF\uFFFE\uFFFF]/g
const textSpecials = /[\uD800-\uDBFF][\uDC00-\uDFFF]|[&<>\r\u0000-\u0008\u000B\u000C\u000E-\u001F\uD800-\uDFFF\uFFFE\uFFFF]/g
const entities: Readonly<Record<string, string>> = {
  "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "\t": "&#x9;", "\n": "&#xA;", "\r": "&#xD;"
}
const entityOf = (c: string): string => c.length === 2 ? c : entities[c] ?? replacement

export const escapeAttribute = (value: string): string =>
  attributeSpecial.test(value) ? value.replace(specials, entityOf) : value

export const escapeText = (value: string): string =>
  textSpecial.test(value) ? value.replace(textSpecials, entityOf) : value

const markupSpecial = /[\r\u0000-\u0008\u000B\u000C\u000E-\u001F\uD800-\uDFFF\uFFFE\uFFFF]|&#xD;/
const unpaired = /[\uD800-\uDBFF][\uDC00-\uDFFF]|[\u0000-\u0008\u000B\u000C\u000E-\u001F\uD800-\uDFFF\uFFFE\uFFFF]/g
const keepPairs = (c: string): string => c.length === 2 ? c : replacement

/**
 * Well-formed XHTML markup (the narrative as JSON holds it) made ready to embed in an XML document: each raw
 * CR of its text and attribute values becomes `&#xD;`, which the reader (src/rest/xml/narrative.ts) turns
 * back into a raw CR, so JSON → XML → JSON keeps the narrative as it was. A `&#xD;` the markup itself holds
 * is written `&#13;` (the same character), so that it too comes back as it was. A CR anywhere else (between
 * attributes, in a comment) is a line end to any XML reader and is left so.
 */
export const embedMarkup = (markup: string): string => {
  if (!markupSpecial.test(markup)) return markup
  const safe = markup.replace(unpaired, keepPairs)
  let out = ""
  let at = 0
  let i = 0
  const n = safe.length
  const skipTo = (end: string) => {
    const found = safe.indexOf(end, i)
    i = found === -1 ? n : found + end.length
  }
  while (i < n) {
    const c = safe.charCodeAt(i)
    if (c === 0x0d) {
      out += safe.slice(at, i) + "&#xD;"
      at = ++i
    } else if (c === 0x26 && safe.startsWith("&#xD;", i)) {
      out += safe.slice(at, i) + "&#13;"
      at = i += 5
    } else if (c === 0x3c) {
      if (safe.startsWith("<!--", i)) skipTo("-->")
      else if (safe.startsWith("<?", i)) skipTo("?>")
      else if (safe.startsWith("<![CDATA[", i)) {
        // A CDATA section cannot hold a reference: it is closed around each CR.
        const end = safe.indexOf("]]>", i)
        const stop = end === -1 ? n : end
        out += safe.slice(at, i) + safe.slice(i, stop).replace(/\r/g, "]]>&#xD;<![CDATA[")
        at = i = stop
      } else {
        // A tag: CRs in its quoted attribute values are escaped, those between attributes left alone.
        i++
        while (i < n && safe.charCodeAt(i) !== 0x3e) {
          const q = safe.charCodeAt(i)
          if (q === 0x22 || q === 0x27) {
            const close = safe.indexOf(q === 0x22 ? "\"" : "'", i + 1)
            const stop = close === -1 ? n : close
            const value = safe.slice(i + 1, stop)
            if (value.includes("\r") || value.includes("&#xD;")) {
              out += safe.slice(at, i + 1) + value.replace(/&#xD;/g, "&#13;").replace(/\r/g, "&#xD;")
              at = stop
            }
            i = stop + 1
          } else {
            i++
          }
        }
      }
    } else {
      i++
    }
  }
  return out + safe.slice(at)
}

/** The reverse of `embedMarkup` on markup read from an XML document: each `&#xD;` is a raw CR again. */
export const readMarkup = (markup: string): string => markup.includes("&#xD;") ? markup.replace(/&#xD;/g, "\r") : markup
