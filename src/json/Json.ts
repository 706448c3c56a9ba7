/**
 * JSON text to values and back, keeping the text of numbers that JavaScript would write differently
 * (`105.00`, `1.50E+3`, `-0`): FHIR decimals keep their precision (https://hl7.org/fhir/R4/json.html#primitive,
 * https://hl7.org/fhir/R4/datatypes.html#decimal). Values are what `JSON.parse` gives; the texts live beside
 * them (./lexical.ts). Text without such a number is parsed by `JSON.parse` alone, and a value without
 * recorded texts is written by `JSON.stringify` alone.
 */
import { isCanonical, isMarked, lexicalOf, mark, setLexical } from "./lexical.ts"

/**
 * A number in value position: after `:`, `,` or `[`, before `,`, `}`, `]` or whitespace; or something
 * inside a string that looks like one (`"seed: 1416774286699354796 "`), which `mayHoldLexicalNumbers` tells apart by counting quotes.
 */
const numberInValuePosition = /[:,[][ \t\n\r]*(-?[0-9][0-9.eE+-]*)(?=[,}\] \t\n\r])/g

/** Whether the quote at `at` is escaped (an odd run of backslashes before it). */
const escapedQuote = (text: string, at: number): boolean => {
  let backslashes = 0
  while (at - backslashes - 1 >= 0 && text.charCodeAt(at - backslashes - 1) === 0x5c) backslashes++
  return backslashes % 2 === 1
}

/**
 * Whether `text` may hold a number whose text `String(Number(text))` does not give back, outside strings.
 * Most texts have none: one regular expression over the text, then quotes counted only up to a candidate.
 */
const mayHoldLexicalNumbers = (text: string): boolean => {
  numberInValuePosition.lastIndex = 0
  let scanned = 0
  let inString = false
  for (let m = numberInValuePosition.exec(text); m !== null; m = numberInValuePosition.exec(text)) {
    if (isCanonical(m[1]!)) continue
    for (let quote = text.indexOf("\"", scanned); quote !== -1 && quote < m.index; quote = text.indexOf("\"", quote + 1)) {
      if (!escapedQuote(text, quote)) inString = !inString
    }
    scanned = m.index
    if (!inString) {
      numberInValuePosition.lastIndex = 0
      return true
    }
  }
  return false
}

const enum Code {
  Quote = 0x22,
  Backslash = 0x5c,
  Comma = 0x2c,
  Colon = 0x3a,
  OpenBrace = 0x7b,
  CloseBrace = 0x7d,
  OpenBracket = 0x5b,
  CloseBracket = 0x5d
}

/**
 * A reader of text that `JSON.parse` has accepted, so it checks nothing; it builds what `JSON.parse` builds
 * (the last of duplicate keys wins, in the place of the first; `__proto__` is an ordinary member) and records
 * the texts of numbers against their holders.
 */
class Reader {
  private at = 0
  /** The text of the number just read when it is not canonical. */
  private lexeme: string | undefined = undefined
  /** Whether the container just read has records in or under it. */
  private holds = false

  constructor(private readonly text: string) {}

  private space(): void {
    const text = this.text
    let c = text.charCodeAt(this.at)
    while (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) c = text.charCodeAt(++this.at)
  }

  value(): unknown {
    this.space()
    this.lexeme = undefined
    this.holds = false
    const text = this.text
    switch (text.charCodeAt(this.at)) {
      case Code.OpenBrace:
        return this.object()
      case Code.OpenBracket:
        return this.array()
      case Code.Quote:
        return this.string()
      case 0x74: // t
        this.at += 4
        return true
      case 0x66: // f
        this.at += 5
        return false
      case 0x6e: // n
        this.at += 4
        return null
      default: {
        const start = this.at
        let c = text.charCodeAt(this.at)
        // - + . 0-9 e E
        while ((c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x2b || c === 0x2e || c === 0x65 || c === 0x45) c = text.charCodeAt(++this.at)
        const lexeme = text.slice(start, this.at)
        if (!isCanonical(lexeme)) this.lexeme = lexeme
        return Number(lexeme)
      }
    }
  }

  private string(): string {
    const text = this.text
    const start = this.at
    let i = start + 1
    let escaped = false
    for (;;) {
      const c = text.charCodeAt(i)
      if (c === Code.Quote) break
      if (c === Code.Backslash) {
        escaped = true
        i += 2
      } else {
        i++
      }
    }
    this.at = i + 1
    return escaped ? JSON.parse(text.slice(start, i + 1)) as string : text.slice(start + 1, i)
  }

  private object(): Record<string, unknown> {
    const out: Record<string, unknown> = {}
    let holds = false
    this.at++
    this.space()
    if (this.text.charCodeAt(this.at) === Code.CloseBrace) {
      this.at++
      return out
    }
    for (;;) {
      this.space()
      const key = this.string()
      this.space()
      this.at++ // :
      const value = this.value()
      if (key === "__proto__") Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true })
      else out[key] = value
      // A duplicate key's last value wins: its text, or none.
      if (this.lexeme !== undefined) {
        setLexical(out, key, this.lexeme)
        holds = true
      } else {
        setLexical(out, key, undefined)
        if (this.holds) holds = true
      }
      this.space()
      if (this.text.charCodeAt(this.at++) !== Code.Comma) break
    }
    if (holds) mark(out)
    this.lexeme = undefined
    this.holds = holds
    return out
  }

  private array(): Array<unknown> {
    const out: Array<unknown> = []
    let holds = false
    this.at++
    this.space()
    if (this.text.charCodeAt(this.at) === Code.CloseBracket) {
      this.at++
      return out
    }
    for (;;) {
      const value = this.value()
      if (this.lexeme !== undefined) {
        setLexical(out, out.length, this.lexeme)
        holds = true
      } else if (this.holds) {
        holds = true
      }
      out.push(value)
      this.space()
      if (this.text.charCodeAt(this.at++) !== Code.Comma) break
    }
    if (holds) mark(out)
    this.lexeme = undefined
    this.holds = holds
    return out
  }
}

/**
 * `JSON.parse(text)`, keeping the text of numbers (see the module comment); throws what `JSON.parse`
 * throws on text that is not JSON.
 */
export const parseJson = (text: string): unknown => {
  const value: unknown = JSON.parse(text)
  if (typeof value !== "object" || value === null || !mayHoldLexicalNumbers(text)) return value
  try {
    return new Reader(text).value()
  } catch (error) {
    // Nesting too deep for the second reader's recursion: the value without the number texts, for the
    // caller's own depth check (src/rest/bodyCheck.ts) to refuse with its message.
    if (error instanceof RangeError) return value
    throw error
  }
}

const isContainer = (value: unknown): value is object => typeof value === "object" && value !== null

/** Whether the container or one of its direct members is marked: a spread copy of a marked object is not. */
const needsWalk = (value: object): boolean => {
  if (isMarked(value)) return true
  if (Array.isArray(value)) {
    for (const item of value) if (isMarked(item)) return true
    return false
  }
  for (const key in value) if (isMarked((value as Record<string, unknown>)[key])) return true
  return false
}

class Writer {
  constructor(private readonly indent: string) {}

  /** A member's text, or undefined where `JSON.stringify` leaves it out. */
  member(holder: object, key: string | number, value: unknown, depth: number): string | undefined {
    if (typeof value === "number") return lexicalOf(holder, key) ?? JSON.stringify(value)
    if (!isContainer(value)) return JSON.stringify(value)
    if (needsWalk(value) && typeof (value as { toJSON?: unknown }).toJSON !== "function") return this.container(value, depth)
    if (this.indent === "") return JSON.stringify(value)
    const text: string | undefined = JSON.stringify(value, null, this.indent)
    return depth === 0 || text === undefined ? text : text.replaceAll("\n", "\n" + this.indent.repeat(depth))
  }

  container(value: object, depth: number): string {
    const pretty = this.indent !== ""
    const inner = pretty ? "\n" + this.indent.repeat(depth + 1) : ""
    const parts: Array<string> = []
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) parts.push(this.member(value, i, value[i], depth + 1) ?? "null")
      if (parts.length === 0) return "[]"
      return "[" + inner + parts.join("," + inner) + (pretty ? "\n" + this.indent.repeat(depth) : "") + "]"
    }
    const record = value as Record<string, unknown>
    for (const key of Object.keys(record)) {
      const text = this.member(record, key, record[key], depth + 1)
      if (text !== undefined) parts.push(JSON.stringify(key) + (pretty ? ": " : ":") + text)
    }
    if (parts.length === 0) return "{}"
    return "{" + inner + parts.join("," + inner) + (pretty ? "\n" + this.indent.repeat(depth) : "") + "}"
  }
}

/**
 * `JSON.stringify(value, null, indent)` of a resource or other JSON value, writing each number whose text
 * was kept by that text (while the number there is still the one it denotes).
 */
export const stringifyJson = (value: unknown, indent?: number): string => {
  const spaces = indent === undefined ? "" : " ".repeat(Math.min(10, Math.max(0, indent)))
  if (!isContainer(value) || !needsWalk(value) || typeof (value as { toJSON?: unknown }).toJSON === "function") {
    return JSON.stringify(value, null, spaces === "" ? undefined : spaces)
  }
  return new Writer(spaces).container(value, 0)
}
