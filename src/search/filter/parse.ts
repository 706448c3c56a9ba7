/**
 * The text of a `_filter` parameter read into its syntax tree, before any parameter is looked up.
 * https://hl7.org/fhir/R4/search_filter.html (the grammar and "Notes about using the syntax").
 *
 *   filter    = term *( ws ("and" / "or") ws term )     ; left to right, no precedence between and and or
 *   term      = "(" filter ")" / "not" "(" filter ")" / paramExp
 *   paramExp  = paramPath ws compareOp ws compValue
 *   paramPath = paramName [ "[" filter "]" ] [ "." paramPath ]
 *   compValue = JSON string / token (any run of characters but whitespace, ")" and "]")
 *
 * Keywords and operators are read in any case. docs/search.md ("_filter") gives the decisions.
 */
import { filterSyntax, filterTooLarge } from "../parse/problems.ts"
import { type FilterOperator, filterOperators, type Problem } from "../parse/SearchRequest.ts"

/** A value as written: the text of a JSON string (decoded) or of a token. */
export interface FilterValue {
  readonly text: string
  readonly quoted: boolean
  /** Offset of the value in the expression. */
  readonly at: number
}

/**
 * One name of a path, with the filter its targets must meet when one is given in brackets. `type`: a
 * `name:Type` step names the target type as a chain does in plain search (beyond the R4 grammar).
 */
export interface PathStep {
  readonly name: string
  readonly type?: string
  readonly filter?: FilterSyntax
  readonly at: number
}

export type FilterSyntax =
  | { readonly kind: "and" | "or"; readonly operands: ReadonlyArray<FilterSyntax> }
  | { readonly kind: "not"; readonly operand: FilterSyntax }
  | {
    readonly kind: "compare"
    readonly path: ReadonlyArray<PathStep>
    readonly operator: FilterOperator
    readonly value: FilterValue
    readonly at: number
    readonly operatorAt: number
  }

/** Comparisons in one `_filter` parameter, at most. */
export const maxComparisons = 100
/** Parentheses, `not` and brackets nest at most this deep. */
export const maxNesting = 16

class SyntaxProblem {
  constructor(readonly problem: Problem) {}
}

const operatorSet: ReadonlySet<string> = new Set(filterOperators)
const nameStart = /[A-Za-z_]/
const nameChar = /[A-Za-z0-9_-]/
const space = /\s/

const jsonEscapes: Readonly<Record<string, string>> = { "\"": "\"", "\\": "\\", "/": "/", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" }

/** The syntax tree of `text`, or the problem at the first place it cannot be read. */
export const parseFilter = (text: string): FilterSyntax | Problem => {
  let pos = 0
  let comparisons = 0

  const found = (): string => (pos >= text.length ? "the end" : `'${text.slice(pos, pos + 12).replace(/\s.*$/s, "") || text[pos]}'`)
  const fail = (expected: string, at = pos): never => {
    const saved = pos
    pos = at
    const what = found()
    pos = saved
    throw new SyntaxProblem(filterSyntax(text, at, expected, what))
  }
  const skipSpace = (): boolean => {
    const start = pos
    while (pos < text.length && space.test(text[pos]!)) pos++
    return pos > start
  }
  /** The word at `pos` (letters only), not consumed. */
  const peekWord = (): string => /^[A-Za-z]+/.exec(text.slice(pos))?.[0] ?? ""

  const parseName = (): string => {
    const start = pos
    if (pos >= text.length || !nameStart.test(text[pos]!)) fail("a search parameter name")
    while (pos < text.length && nameChar.test(text[pos]!)) pos++
    return text.slice(start, pos)
  }

  const parseString = (): string => {
    const start = pos
    pos++
    let out = ""
    while (pos < text.length) {
      const char = text[pos]!
      if (char === "\"") {
        pos++
        return out
      }
      if (char === "\\") {
        const next = text[pos + 1]
        if (next === "u" && /^[0-9A-Fa-f]{4}$/.test(text.slice(pos + 2, pos + 6))) {
          out += String.fromCharCode(parseInt(text.slice(pos + 2, pos + 6), 16))
          pos += 6
          continue
        }
        const plain = next === undefined ? undefined : jsonEscapes[next]
        if (plain === undefined) fail("a JSON string escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t or \\uXXXX)")
        out += plain
        pos += 2
        continue
      }
      out += char
      pos++
    }
    return fail(`the closing quote of the string opened at position ${start + 1}`)
  }

  const parseValue = (): FilterValue => {
    const at = pos
    if (text[pos] === "\"") {
      const value = parseString()
      if (pos < text.length && !space.test(text[pos]!) && text[pos] !== ")" && text[pos] !== "]") {
        fail("whitespace, ')' or ']' after the string")
      }
      return { text: value, quoted: true, at }
    }
    while (pos < text.length && !space.test(text[pos]!) && text[pos] !== ")" && text[pos] !== "]") pos++
    if (pos === at) fail("a value: a string in double quotes or a token")
    return { text: text.slice(at, pos), quoted: false, at }
  }

  const parsePath = (depth: number): Array<PathStep> => {
    const steps: Array<PathStep> = []
    for (;;) {
      const at = pos
      const name = parseName()
      const typed = /^:([A-Z][A-Za-z]*)(?=[.[])/.exec(text.slice(pos))
      const type = typed?.[1]
      if (typed !== null) pos += typed[0].length
      const named = type === undefined ? { name, at } : { name, type, at }
      if (text[pos] === "[") {
        pos++
        skipSpace()
        const filter = parseFilterAt(depth + 1)
        skipSpace()
        if (text[pos] !== "]") fail("']' closing the filter of the path, 'and' or 'or'")
        pos++
        steps.push({ ...named, filter })
      } else {
        steps.push(named)
      }
      if (text[pos] !== ".") return steps
      pos++
    }
  }

  const parseTerm = (depth: number): FilterSyntax => {
    if (depth > maxNesting) throw new SyntaxProblem(filterTooLarge(text, `parentheses, not and brackets nest at most ${maxNesting} deep`))
    if (text[pos] === "(") {
      pos++
      skipSpace()
      const inner = parseFilterAt(depth + 1)
      skipSpace()
      if (text[pos] !== ")") fail("')', 'and' or 'or'")
      pos++
      return inner
    }
    const word = peekWord()
    if (word.toLowerCase() === "not" && !nameChar.test(text[pos + 3] ?? " ")) {
      pos += 3
      skipSpace()
      if (text[pos] !== "(") fail("'(' after not: not takes an expression in parentheses")
      pos++
      skipSpace()
      const operand = parseFilterAt(depth + 1)
      skipSpace()
      if (text[pos] !== ")") fail("')', 'and' or 'or'")
      pos++
      return { kind: "not", operand }
    }
    const at = pos
    if (pos >= text.length || !nameStart.test(text[pos]!)) fail("a search parameter name, '(' or not(")
    const path = parsePath(depth)
    if (!skipSpace()) fail(text[pos] === ":" ? "whitespace and an operator (modifiers are not written in _filter: the operator says how to compare)" : "whitespace and an operator")
    const opAt = pos
    const operator = peekWord().toLowerCase()
    if (!operatorSet.has(operator) || nameChar.test(text[pos + operator.length] ?? " ")) {
      fail(`an operator (${filterOperators.join(" ")})`, opAt)
    }
    pos += operator.length
    if (!skipSpace()) fail("whitespace and a value")
    const value = parseValue()
    comparisons++
    if (comparisons > maxComparisons) throw new SyntaxProblem(filterTooLarge(text, `at most ${maxComparisons} comparisons are allowed`))
    return { kind: "compare", path, operator: operator as FilterOperator, value, at, operatorAt: opAt }
  }

  /** Terms joined by `and`/`or`, left to right: `a or b and c` is `(a or b) and c`. */
  const parseFilterAt = (depth: number): FilterSyntax => {
    let left = parseTerm(depth)
    for (;;) {
      const save = pos
      if (!skipSpace()) return left
      const word = peekWord().toLowerCase()
      if ((word !== "and" && word !== "or") || nameChar.test(text[pos + word.length] ?? " ")) {
        pos = save
        return left
      }
      pos += word.length
      if (!skipSpace()) fail(`whitespace after ${word}`)
      const right = parseTerm(depth)
      const kind = word as "and" | "or"
      left = (left.kind === "and" || left.kind === "or") && left.kind === kind
        ? { kind, operands: [...left.operands, right] }
        : { kind, operands: [left, right] }
    }
  }

  try {
    skipSpace()
    const tree = parseFilterAt(0)
    skipSpace()
    if (pos < text.length) fail("'and', 'or' or the end of the expression")
    return tree
  } catch (error) {
    if (error instanceof SyntaxProblem) return error.problem
    throw error
  }
}

export const isSyntaxProblem = (read: FilterSyntax | Problem): read is Problem => "message" in read
