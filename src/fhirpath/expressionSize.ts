/**
 * A bound on the FHIRPath expressions the server compiles (FHIRPath Patch paths, SearchParameter
 * expressions, invariants): fhirpath.js parses and evaluates recursively, about one level per operator,
 * bracket or parenthesis, so an expression of a few thousand of them (`-----1`, `a or a or ...`) overflows
 * the stack. The most an R4 expression holds is 141 (SearchParameter clinical-patient). Limits: docs/rest.md.
 */

/** The most operators, brackets and parentheses one expression may hold. */
export const maxExpressionTerms = 256

const operatorChars = new Set("()[]{}+-*/|&=<>!~")
const operatorWords = /(?<![\w$`])(?:and|or|xor|implies|is|as|in|contains|div|mod)(?![\w`])/g

/** How many operators, brackets and parentheses `expression` holds outside its strings and quoted names. */
export const expressionTerms = (expression: string): number => {
  let count = 0
  let plain = ""
  let quote: string | undefined
  for (let i = 0; i < expression.length; i++) {
    const c = expression[i]!
    if (quote !== undefined) {
      if (c === "\\") i++
      else if (c === quote) quote = undefined
      continue
    }
    if (c === "'" || c === "`") {
      quote = c
      plain += " "
      continue
    }
    if (operatorChars.has(c)) count++
    plain += c
  }
  return count + (plain.match(operatorWords)?.length ?? 0)
}

/** Why `expression` is too large to compile, or undefined. */
export const expressionTooLarge = (expression: string): string | undefined => {
  const terms = expressionTerms(expression)
  return terms > maxExpressionTerms
    ? `the FHIRPath expression holds ${terms} operators, brackets and parentheses; the limit is ${maxExpressionTerms}`
    : undefined
}
