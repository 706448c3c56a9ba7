/**
 * Splits a SQL script into statements, since SQLite prepares one statement per call.
 * Semicolons inside quotes, identifiers, comments and a trigger's BEGIN ... END do not split.
 */

const isWordChar = (c: string | undefined): boolean => c !== undefined && /[A-Za-z0-9_$]/.test(c)

/** Whether text holds anything besides whitespace and comments. */
const hasCode = (text: string): boolean =>
  text.replace(/--[^\n]*/g, "").replace(/\/\*[\s\S]*?\*\//g, "").trim() !== ""

export const splitStatements = (script: string): ReadonlyArray<string> => {
  const statements: Array<string> = []
  let start = 0
  let words: Array<string> = [] // the first words of the current statement, to recognise CREATE TRIGGER
  let depth = 0 // BEGIN/CASE ... END nesting inside a trigger body
  let i = 0
  const isTrigger = () => {
    const head = words.slice(0, 4)
    return head[0] === "CREATE" && (head[1] === "TRIGGER" || head[2] === "TRIGGER" || head[3] === "TRIGGER")
  }
  const closeQuote = (quote: string, from: number): number => {
    let j = from + 1
    while (j < script.length) {
      if (script[j] === quote) {
        if (script[j + 1] === quote && quote !== "]") {
          j += 2
          continue
        }
        return j + 1
      }
      j++
    }
    return j
  }
  while (i < script.length) {
    const c = script[i]!
    if (c === "-" && script[i + 1] === "-") {
      const end = script.indexOf("\n", i)
      i = end === -1 ? script.length : end + 1
    } else if (c === "/" && script[i + 1] === "*") {
      const end = script.indexOf("*/", i + 2)
      i = end === -1 ? script.length : end + 2
    } else if (c === "'" || c === "\"" || c === "`") {
      i = closeQuote(c, i)
    } else if (c === "[") {
      i = closeQuote("]", i)
    } else if (isWordChar(c) && !isWordChar(script[i - 1])) {
      let j = i
      while (isWordChar(script[j])) j++
      const word = script.slice(i, j).toUpperCase()
      if (words.length < 4) words.push(word)
      if (isTrigger()) {
        if (word === "BEGIN" || word === "CASE") depth++
        else if (word === "END" && depth > 0) depth--
      }
      i = j
    } else if (c === ";" && depth === 0) {
      const text = script.slice(start, i).trim()
      if (hasCode(text)) statements.push(text)
      start = i + 1
      words = []
      i++
    } else {
      i++
    }
  }
  const rest = script.slice(start).trim()
  if (hasCode(rest)) statements.push(rest)
  return statements
}
