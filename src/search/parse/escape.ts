/**
 * Separators in search values and their escapes: `\,` `\$` `\|` `\\`.
 * https://hl7.org/fhir/R4/search.html#escaping
 */

/** Splits on every `separator` not preceded by an escaping backslash; the pieces keep their escapes. */
export const splitUnescaped = (text: string, separator: "," | "|" | "$"): Array<string> => {
  const pieces: Array<string> = []
  let start = 0
  for (let i = 0; i < text.length; i++) {
    const char = text[i]
    if (char === "\\") i++
    else if (char === separator) {
      pieces.push(text.slice(start, i))
      start = i + 1
    }
  }
  pieces.push(text.slice(start))
  return pieces
}

/** Removes the backslash of `\,` `\$` `\|` `\\`; any other backslash is kept as written. */
export const unescape = (text: string): string => text.replace(/\\([,$|\\])/g, "$1")
