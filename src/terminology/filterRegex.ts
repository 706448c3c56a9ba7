/**
 * The `regex` filter of a value set (https://hl7.org/fhir/R4/valueset-filter-operator.html): the whole code
 * (or property value) must match. A value set may come from any client (written over REST or given inline
 * to `$expand`), so a pattern that could take exponential time on a backtracking engine is refused rather
 * than run: a repeated group that itself holds a repetition or alternatives (`(a+)+`, `(a|aa)*`), a
 * back-reference, more than `maxRepetitions` repetitions whose count the engine chooses (`*`, `+`, `{n,}`,
 * `{n,m}`), or a pattern longer than `maxPatternLength`; and a value longer than `maxSubjectLength` is not
 * tested (it does not match). What is left backtracks at most polynomially, over short values.
 */

export const maxPatternLength = 256
export const maxRepetitions = 2
export const maxSubjectLength = 256

/** Whether `value` matches a pattern of `filterRegex`. */
export const matchesWhole = (pattern: RegExp, value: string): boolean => value.length <= maxSubjectLength && pattern.test(value)

/** The compiled pattern, anchored to the whole value, or why it is refused. */
export const filterRegex = (source: string): RegExp | { readonly problem: string } => {
  if (source.length > maxPatternLength) return { problem: `the regex '${source.slice(0, 40)}...' is longer than ${maxPatternLength} characters` }
  const risk = backtrackingRisk(source)
  if (risk !== undefined) return { problem: `the regex '${source}' is refused: ${risk}` }
  const whole = `^(?:${source})$`
  try {
    return new RegExp(whole, "u")
  } catch {
    // Definitions are written for Java's engine, which takes escapes that JavaScript's unicode mode refuses.
    try {
      return new RegExp(whole)
    } catch {
      return { problem: `the regex '${source}' is not a valid regular expression` }
    }
  }
}

const isQuantifierStart = (source: string, at: number): boolean => {
  const c = source[at]
  if (c === "*" || c === "+") return true
  if (c !== "{") return false
  const close = source.indexOf("}", at)
  if (close < 0) return false
  const body = source.slice(at + 1, close)
  // {n} repeats a fixed number of times; {n,} and {n,m} with m > 1 let the engine choose.
  const match = /^(\d+)(,(\d*))?$/.exec(body)
  if (match === null) return false
  if (match[2] === undefined) return false
  return match[3] === "" || Number(match[3]) > 1
}

/** Why the pattern could backtrack exponentially, or undefined. */
const backtrackingRisk = (source: string): string | undefined => {
  // For each open group: whether it holds a quantifier or an alternation.
  const groups: Array<{ varies: boolean }> = []
  let repetitions = 0
  let i = 0
  while (i < source.length) {
    const c = source[i]!
    if (c === "\\") {
      if (/[1-9k]/.test(source[i + 1] ?? "")) return "back-references are not taken"
      i += 2
      continue
    }
    if (c === "[") {
      // A character class: skip to its end (escapes inside included).
      i++
      if (source[i] === "^") i++
      if (source[i] === "]") i++
      while (i < source.length && source[i] !== "]") i += source[i] === "\\" ? 2 : 1
      i++
      continue
    }
    if (c === "(") {
      groups.push({ varies: false })
      i++
      // (?:, (?=, (?!, (?<=, (?<!, (?<name>: the prefix is no quantifier.
      if (source[i] === "?") {
        if (source[i + 1] === "<" && source[i + 2] !== "=" && source[i + 2] !== "!") {
          const end = source.indexOf(">", i)
          i = end < 0 ? source.length : end + 1
        } else {
          i += source[i + 1] === "<" ? 3 : 2
        }
      }
      continue
    }
    if (c === ")") {
      const group = groups.pop()
      i++
      if (group === undefined) continue
      if (isQuantifierStart(source, i) && group.varies) return "a repeated group holds a repetition or alternatives"
      if (groups.length > 0 && (group.varies || isQuantifierStart(source, i) || source[i] === "?")) groups[groups.length - 1]!.varies = true
      continue
    }
    if (isQuantifierStart(source, i) && ++repetitions > maxRepetitions) return `more than ${maxRepetitions} repetitions (*, +, {n,}, {n,m})`
    if ((c === "|" || isQuantifierStart(source, i) || c === "?") && groups.length > 0) groups[groups.length - 1]!.varies = true
    i++
  }
  return undefined
}
