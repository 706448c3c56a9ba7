/**
 * Content that an application may render as HTML (https://hl7.org/fhir/R4/security.html#narrative):
 * - a string that holds what looks like an HTML tag (`<b>`, `<script src=...>`, `</i>`): rendered without
 *   escaping, it is an injection. Strings are plain text in FHIR; only the narrative (xhtml) holds markup.
 * - markdown that holds raw HTML (a tag, `<!`, `<?`): FHIR's markdown is CommonMark without HTML
 *   (https://hl7.org/fhir/R4/datatypes.html#markdown); a renderer escapes it, or should.
 * - bidirectional control characters left open (CVE-2021-42574, "Trojan Source"): an embedding or override
 *   (U+202A-U+202E) not closed by U+202C, or an isolate (U+2066-U+2068) not closed by U+2069, before the end
 *   of the paragraph, can make text display in another order than it is read.
 * These are warnings: the server stores what it is sent, and the reader decides; `<` is looked for first, so
 * that most strings cost one indexOf.
 */

/** `<name` followed by `>`, `/>`, or whitespace and attributes up to `>`; or `</name>`. */
const htmlTag = /<\/?[A-Za-z][A-Za-z0-9_]*(?:\s[^<>]*)?\/?>/

/** The text at the first HTML tag of a string, or undefined when it has none. */
export const htmlTagIn = (text: string): string | undefined => {
  const at = text.indexOf("<")
  if (at < 0) return undefined
  const found = htmlTag.exec(text.slice(at))
  return found === null ? undefined : found[0].length > 40 ? `${found[0].slice(0, 40)}...` : found[0]
}

/** An unescaped tag opening or closing (`<b `, `</b>`), or `<!`, `<?`, as CommonMark would pass through raw. */
const markdownHtml = /(?<!\\)<\/?[A-Za-z][A-Za-z0-9-]*[\s>]|<[!?]/

/** The two characters at which raw HTML starts in markdown, or undefined when there is none. */
export const markdownHtmlAt = (text: string): string | undefined => {
  if (text.indexOf("<") < 0) return undefined
  const found = markdownHtml.exec(text)
  return found === null ? undefined : text.slice(found.index, found.index + 2)
}

const bidiChars = /[\u202A-\u202E\u2066-\u2069]/

const names: Readonly<Record<number, string>> = {
  0x202a: "LRE", 0x202b: "RLE", 0x202c: "PDF", 0x202d: "LRO", 0x202e: "RLO", 0x2066: "LRI", 0x2067: "RLI", 0x2068: "FSI", 0x2069: "PDI"
}

/**
 * Why the bidirectional controls of a text are unbalanced (the first control left open and where), or
 * undefined when they are balanced or there are none.
 */
export const bidiProblem = (text: string): string | undefined => {
  if (!bidiChars.test(text)) return undefined
  const open: Array<{ code: number; at: number }> = []
  const describe = (): string => {
    const first = open[0]!
    return `${names[first.code]} (U+${first.code.toString(16).toUpperCase()}) at character ${first.at + 1} is not closed`
  }
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === 10 || c === 13 || c === 0x2029) {
      if (open.length > 0) return describe()
    } else if (c >= 0x202a && c <= 0x202e && c !== 0x202c) open.push({ code: c, at: i })
    else if (c >= 0x2066 && c <= 0x2068) open.push({ code: c, at: i })
    else if (c === 0x202c) {
      // PDF closes the last embedding or override, within the current isolate.
      const last = open[open.length - 1]
      if (last !== undefined && last.code <= 0x202e) open.pop()
    } else if (c === 0x2069) {
      // PDI closes the last isolate and whatever embeddings were left open inside it.
      const index = open.map((entry) => entry.code >= 0x2066).lastIndexOf(true)
      if (index >= 0) open.length = index
    }
  }
  return open.length > 0 ? describe() : undefined
}

/**
 * Meta.security is a set of labels (https://hl7.org/fhir/R4/resource.html#Meta): the same system and code
 * twice is an error.
 */
export const duplicateSecurityLabels = (
  meta: Readonly<Record<string, unknown>>,
  path: string,
  reporter: { report(severity: "error", code: string, expression: string, diagnostics: string): void }
): void => {
  const labels = meta["security"]
  if (!Array.isArray(labels) || labels.length < 2) return
  const seen = new Set<string>()
  labels.forEach((label: unknown, i) => {
    if (typeof label !== "object" || label === null) return
    const { system, code } = label as Record<string, unknown>
    const key = `${String(system)}#${String(code)}`
    if (seen.has(key)) reporter.report("error", "business-rule", `${path}.security[${i}]`, `Duplicate security label ${key}`)
    seen.add(key)
  })
}
