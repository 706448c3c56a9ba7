/**
 * The characters a FHIR value may hold (https://hl7.org/fhir/R4/datatypes.html#string and the "Unicode"
 * rules of #primitive): no control character other than TAB, CR and LF; and, as XML 1.0 (Char) also
 * forbids them and no encoding can carry them, neither U+FFFE, U+FFFF nor an unpaired surrogate.
 * Bodies, URLs and query parameters holding one are refused with a 400 (docs/rest.md, "Limits").
 */

/** One character FHIR text may not hold. */
export const forbiddenChar = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

/** A quick first look: any surrogate (a pair is fine, so `forbiddenChar` decides) or a forbidden character. */
const suspectChar = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uD800-\uDFFF\uFFFE\uFFFF]/

export const hasForbiddenChar = (text: string): boolean => suspectChar.test(text) && forbiddenChar.test(text)

/** `U+0000 at character 3` for the first forbidden character of `text`, or undefined when there is none. */
export const forbiddenCharIn = (text: string): string | undefined => {
  if (!suspectChar.test(text)) return undefined
  const found = forbiddenChar.exec(text)
  if (found === null) return undefined
  const code = found[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, "0")
  return `U+${code} at character ${found.index + 1}`
}

/** What FHIR text may not hold, as error messages say it. */
export const forbiddenCharRule = "control characters other than TAB, CR and LF, U+FFFE, U+FFFF and unpaired surrogates are not allowed in FHIR text"

const percentRuns = /(?:%[0-9A-Fa-f]{2})+/g
const utf8 = new TextDecoder("utf-8", { fatal: true })

/**
 * Why the text of a URL's query or path segment cannot be read: percent-encoded bytes that are not UTF-8
 * (which a URLSearchParams would silently turn into U+FFFD), or a character FHIR text may not hold once
 * decoded. Undefined when it reads.
 */
export const urlTextProblem = (raw: string): string | undefined => {
  for (const run of raw.matchAll(percentRuns)) {
    const text = run[0]
    if (!/%[89A-Fa-f]/.test(text)) continue
    const bytes = new Uint8Array(text.length / 3)
    for (let i = 0; i < bytes.length; i++) bytes[i] = parseInt(text.slice(i * 3 + 1, i * 3 + 3), 16)
    try {
      utf8.decode(bytes)
    } catch {
      return `${text} is not percent-encoded UTF-8`
    }
  }
  return undefined
}

/** The first name or value of `params` that holds a character FHIR text may not hold, described; undefined when none does. */
export const paramsProblem = (params: Iterable<readonly [string, string]>): string | undefined => {
  for (const [name, value] of params) {
    const inName = forbiddenCharIn(name)
    if (inName !== undefined) return `the parameter name ${JSON.stringify(name)} holds ${inName}: ${forbiddenCharRule}`
    const inValue = forbiddenCharIn(value)
    if (inValue !== undefined) return `the value of parameter ${JSON.stringify(name)} holds ${inValue}: ${forbiddenCharRule}`
  }
  return undefined
}
