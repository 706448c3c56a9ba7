/**
 * A compiler for the FHIRPath (https://hl7.org/fhirpath/N1/) that most R4 invariants are written in,
 * running on the JSON directly and many times faster than a general engine: paths of element names
 * (the R4 model tells choice elements apart), `$this`, `%resource`, `%rootResource`, `%ucum`, literals,
 * the functions exists, empty, not, count, hasValue, first, last, tail, distinct, isDistinct, where,
 * select, all, trace, matches, startsWith, endsWith, contains, length, lower, upper and toInteger, the
 * operators `=`, `!=`, `in`, `contains`, `|`, `+`, `-`, `&`, comparisons of numbers, `is`, `as` and
 * `ofType` on a choice element (read from its JSON name), and the three-valued and, or, xor and implies.
 * Anything else is not compiled (the caller uses fhirpath.js), and a case that cannot be decided at run
 * time (comparing strings that may be dates, an object in an equality, an element whose type is not
 * known) throws `Undecided`, so that the caller falls back.
 */

import { javaRegex } from "./regex.ts"
import { modelBase, step } from "./simpleModel.ts"
import {
  bool,
  type Collection,
  distinct,
  empty,
  equal,
  type Evaluate,
  fromLogical,
  functions,
  isUpper,
  logical,
  navigate,
  singleString,
  Undecided,
  unwrap,
  variables,
  type Variables
} from "./simpleValues.ts"

export { Undecided } from "./simpleValues.ts"

export type SimpleInvariant = (focus: unknown, vars: Variables) => boolean | undefined

// Tokens: identifiers (also `quoted`), $this, %variables, strings, numbers, operators and punctuation.
type Token = { readonly kind: "id" | "quoted" | "var" | "str" | "num" | "op"; readonly text: string }

const tokenize = (source: string): ReadonlyArray<Token> | undefined => {
  const tokens: Array<Token> = []
  let i = 0
  while (i < source.length) {
    const c = source[i]!
    if (/\s/.test(c)) {
      i++
    } else if (/[A-Za-z_$%]/.test(c)) {
      let j = i + 1
      while (j < source.length && /[A-Za-z0-9_]/.test(source[j]!)) j++
      const text = source.slice(i, j)
      tokens.push({ kind: c === "%" ? "var" : "id", text: c === "%" ? text.slice(1) : text })
      i = j
    } else if (c === "`") {
      const end = source.indexOf("`", i + 1)
      if (end < 0) return undefined
      tokens.push({ kind: "quoted", text: source.slice(i + 1, end) })
      i = end + 1
    } else if (c === "'") {
      let j = i + 1
      let text = ""
      while (j < source.length && source[j] !== "'") {
        if (source[j] === "\\") {
          const next = source[j + 1]
          if (next === undefined || !"'\\/\"`".includes(next)) return undefined
          text += next
          j += 2
          continue
        }
        text += source[j]
        j++
      }
      if (j >= source.length) return undefined
      tokens.push({ kind: "str", text })
      i = j + 1
    } else if (/[0-9]/.test(c)) {
      let j = i + 1
      while (j < source.length && /[0-9.]/.test(source[j]!)) j++
      tokens.push({ kind: "num", text: source.slice(i, j) })
      i = j
    } else {
      const two = source.slice(i, i + 2)
      if (two === "!=" || two === "<=" || two === ">=") {
        tokens.push({ kind: "op", text: two })
        i += 2
      } else if ("().,=<>|+-&".includes(c)) {
        tokens.push({ kind: "op", text: c })
        i++
      } else return undefined
    }
  }
  return tokens
}

class Unsupported extends Error {}

const keywords = new Set(["and", "or", "xor", "implies", "div", "mod", "is", "as", "in", "contains"])

/** A compiled part, with the model path of the items it yields when known (`Observation.component`, `CodeableConcept`). */
interface Part {
  readonly ev: Evaluate
  readonly path: string | undefined
  /** Set when the part navigates to a choice element: where it came from and the element's name. */
  readonly choice?: { readonly input: Part; readonly name: string }
}

/** Functions whose result has the items (and so the type) of their input. */
const keepsItems = new Set(["where", "first", "last", "tail", "distinct", "trace"])

/**
 * Compiles `expression` when it is inside the subset; undefined otherwise. `base` is the model path or
 * type of the focus (`Period`, `Observation.referenceRange`, `Patient`), which tells choice elements apart.
 */
export const compileSimple = (expression: string, base?: string): SimpleInvariant | undefined => {
  const tokens = tokenize(expression)
  if (tokens === undefined) return undefined
  let at = 0
  const peek = (): Token | undefined => tokens[at]
  const isOp = (text: string): boolean => peek()?.kind === "op" && peek()?.text === text
  const isWord = (text: string): boolean => peek()?.kind === "id" && peek()?.text === text
  const expect = (text: string): void => {
    if (!isOp(text)) throw new Unsupported()
    at++
  }

  const matchesCall = (): Evaluate => {
    expect("(")
    const token = peek()
    if (token?.kind !== "str") throw new Unsupported()
    at++
    expect(")")
    let pattern: RegExp
    try {
      pattern = javaRegex(token.text)
    } catch {
      throw new Unsupported()
    }
    // As the reference validator does, a string function of nothing is false rather than empty.
    return (focus) => {
      const value = singleString(focus)
      return value === undefined ? bool(false) : bool(pattern.test(value))
    }
  }

  /** `name(...)` applied to `input` (whose items have the model path `inputPath`). */
  const invoke = (name: string, input: Part): Part => {
    if (name === "ofType") {
      expect("(")
      const type = typeName()
      expect(")")
      return ofType(input, type)
    }
    if (name === "matches") {
      const test = matchesCall()
      return { ev: (focus, context) => test(input.ev(focus, context), context), path: undefined }
    }
    expect("(")
    const args: Array<Part> = []
    if (!isOp(")")) {
      args.push(implies(input.path))
      while (isOp(",")) {
        at++
        args.push(implies(input.path))
      }
    }
    expect(")")
    const fn = functions[name]
    if (fn === undefined || (fn.arity >= 0 && fn.arity !== args.length)) throw new Unsupported()
    const evaluators = args.map((arg) => arg.ev)
    const path = keepsItems.has(name) ? input.path : name === "select" ? args[0]?.path : undefined
    return { ev: (focus, context) => fn.fn(input.ev(focus, context), evaluators, context), path }
  }

  const navigation = (input: Part, name: string): Part => {
    const next = step(input.path, name)
    const choice = next.choice
    const ev: Evaluate = (focus, context) => navigate(input.ev(focus, context), name, choice)
    return choice === true ? { ev, path: next.path, choice: { input, name } } : { ev, path: next.path }
  }

  /** A type name after `is`, `as` or `ofType(`: `decimal`, `Quantity`, `System.Boolean`, `FHIR.string`. */
  const typeName = (): string => {
    let token = peek()
    if (token?.kind !== "id") throw new Unsupported()
    at++
    while (isOp(".")) {
      at++
      token = peek()
      if (token?.kind !== "id") throw new Unsupported()
      at++
    }
    return token.text
  }

  /** The values of a choice element of one type, read from its JSON name (`probability` as decimal: `probabilityDecimal`). */
  const ofType = (part: Part, type: string): Part => {
    if (part.choice === undefined) throw new Unsupported()
    const key = part.choice.name + type.charAt(0).toUpperCase() + type.slice(1)
    const input = part.choice.input
    return { ev: (focus, context) => navigate(input.ev(focus, context), key, false), path: undefined }
  }

  const chain = (start: Part): Part => {
    let part = start
    while (isOp(".")) {
      at++
      const token = peek()
      if (token?.kind !== "id" && token?.kind !== "quoted") throw new Unsupported()
      at++
      part = token.kind === "id" && isOp("(") ? invoke(token.text, part) : navigation(part, token.text)
    }
    return part
  }

  const term = (focusPath: string | undefined): Part => {
    const token = peek()
    if (token === undefined) throw new Unsupported()
    at++
    const focus: Part = { ev: (items) => items, path: focusPath }
    if (token.kind === "op" && token.text === "(") {
      const inner = implies(focusPath)
      expect(")")
      return chain(inner)
    }
    if (token.kind === "str") {
      const value: Collection = [token.text]
      return chain({ ev: () => value, path: undefined })
    }
    if (token.kind === "num") {
      const value: Collection = [Number(token.text)]
      return { ev: () => value, path: undefined }
    }
    if (token.kind === "var") {
      const variable = variables[token.text]
      if (variable === undefined) throw new Unsupported()
      return chain({ ev: (_, context) => variable(context), path: undefined })
    }
    if (token.kind === "quoted") return chain(navigation(focus, token.text))
    if (token.kind === "id") {
      if (token.text === "true" || token.text === "false") {
        const value = bool(token.text === "true")
        return { ev: () => value, path: undefined }
      }
      if (token.text === "$this") return chain({ ev: (_, context) => (context.$this === undefined ? empty : [context.$this]), path: focusPath })
      if (keywords.has(token.text) || isUpper(token.text.charCodeAt(0)) || token.text.startsWith("$")) throw new Unsupported()
      if (isOp("(")) return chain(invoke(token.text, focus))
      return chain(navigation(focus, token.text))
    }
    throw new Unsupported()
  }

  const additive = (focusPath: string | undefined): Part => {
    let left = term(focusPath)
    while (isOp("+") || isOp("-") || isOp("&")) {
      const op = peek()!.text
      at++
      const l = left.ev
      const r = term(focusPath).ev
      left = {
        path: undefined,
        ev: (focus, context) => {
          const a = l(focus, context)
          const b = r(focus, context)
          if (a.length > 1 || b.length > 1) throw new Undecided()
          if (op === "&") {
            const x = a.length === 0 ? "" : unwrap(a[0])
            const y = b.length === 0 ? "" : unwrap(b[0])
            if (typeof x !== "string" || typeof y !== "string") throw new Undecided()
            return [x + y]
          }
          if (a.length === 0 || b.length === 0) return empty
          const x = unwrap(a[0])
          const y = unwrap(b[0])
          if (typeof x === "number" && typeof y === "number") return [op === "+" ? x + y : x - y]
          if (op === "+" && typeof x === "string" && typeof y === "string") return [x + y]
          throw new Undecided()
        }
      }
    }
    return left
  }

  /** `x is T` and `x as T`, for a choice element x; as the reference validator reads it, nothing is of no type. */
  const typed = (focusPath: string | undefined): Part => {
    let left = additive(focusPath)
    while (isWord("is") || isWord("as")) {
      const test = peek()!.text === "is"
      at++
      const values = ofType(left, typeName())
      if (!test) {
        left = values
        continue
      }
      const choice = left.ev
      left = {
        path: undefined,
        ev: (focus, context) => {
          const all = choice(focus, context)
          if (all.length > 1) throw new Undecided()
          return bool(all.length === 1 && values.ev(focus, context).length === 1)
        }
      }
    }
    return left
  }

  const union = (focusPath: string | undefined): Part => {
    let left = typed(focusPath)
    while (isOp("|")) {
      at++
      const l = left.ev
      const r = typed(focusPath).ev
      left = { ev: (focus, context) => distinct([...l(focus, context), ...r(focus, context)]), path: undefined }
    }
    return left
  }

  const comparison = (focusPath: string | undefined): Part => {
    const left = union(focusPath)
    const token = peek()
    if (token?.kind !== "op" || !["<", ">", "<=", ">="].includes(token.text)) return left
    at++
    const l = left.ev
    const r = union(focusPath).ev
    const op = token.text
    return {
      path: undefined,
      ev: (focus, context) => {
        const a = l(focus, context)
        const b = r(focus, context)
        if (a.length === 0 || b.length === 0) return empty
        if (a.length > 1 || b.length > 1) throw new Undecided()
        const x = unwrap(a[0])
        const y = unwrap(b[0])
        // Strings may be dates or times, which compare by their own rules.
        if (typeof x !== "number" || typeof y !== "number") throw new Undecided()
        return bool(op === "<" ? x < y : op === ">" ? x > y : op === "<=" ? x <= y : x >= y)
      }
    }
  }

  const equality = (focusPath: string | undefined): Part => {
    const left = comparison(focusPath)
    if (!isOp("=") && !isOp("!=")) return left
    const negate = peek()!.text === "!="
    at++
    const l = left.ev
    const r = comparison(focusPath).ev
    return {
      path: undefined,
      ev: (focus, context) => {
        const a = l(focus, context)
        const b = r(focus, context)
        if (a.length === 0 || b.length === 0) return empty
        const same = a.length === b.length && a.every((item, i) => equal(item, b[i]))
        return bool(negate ? !same : same)
      }
    }
  }

  const membership = (focusPath: string | undefined): Part => {
    let left = equality(focusPath)
    while (isWord("in") || isWord("contains")) {
      const contains = peek()!.text === "contains"
      at++
      const l = left.ev
      const r = equality(focusPath).ev
      left = {
        path: undefined,
        ev: (focus, context) => {
          const [element, collection] = contains ? [r(focus, context), l(focus, context)] : [l(focus, context), r(focus, context)]
          if (element.length === 0) return empty
          if (element.length > 1) throw new Undecided()
          return bool(collection.some((item) => equal(item, element[0])))
        }
      }
    }
    return left
  }

  const and = (focusPath: string | undefined): Part => {
    let left = membership(focusPath)
    while (isWord("and")) {
      at++
      const l = left.ev
      const r = membership(focusPath).ev
      left = {
        path: undefined,
        ev: (focus, context) => {
          const a = logical(l(focus, context))
          if (a === false) return bool(false)
          const b = logical(r(focus, context))
          if (b === false) return bool(false)
          return a === true && b === true ? bool(true) : empty
        }
      }
    }
    return left
  }

  const or = (focusPath: string | undefined): Part => {
    let left = and(focusPath)
    while (isWord("or") || isWord("xor")) {
      const exclusive = peek()!.text === "xor"
      at++
      const l = left.ev
      const r = and(focusPath).ev
      left = {
        path: undefined,
        ev: exclusive
          ? (focus, context) => {
            const a = logical(l(focus, context))
            const b = logical(r(focus, context))
            return a === undefined || b === undefined ? empty : bool(a !== b)
          }
          : (focus, context) => {
            const a = logical(l(focus, context))
            if (a === true) return bool(true)
            const b = logical(r(focus, context))
            if (b === true) return bool(true)
            return a === false && b === false ? bool(false) : empty
          }
      }
    }
    return left
  }

  const implies = (focusPath: string | undefined): Part => {
    let left = or(focusPath)
    while (isWord("implies")) {
      at++
      const l = left.ev
      const r = or(focusPath).ev
      left = {
        path: undefined,
        ev: (focus, context) => {
          const a = logical(l(focus, context))
          if (a === false) return bool(true)
          const b = logical(r(focus, context))
          if (a === true) return fromLogical(b)
          return b === true ? bool(true) : empty
        }
      }
    }
    return left
  }

  try {
    const evaluate = implies(modelBase(base)).ev
    if (at !== tokens.length) return undefined
    return (focus, vars) => {
      const result = evaluate([focus], { $this: focus, vars })
      if (result.length === 0) return undefined
      if (result.length === 1) {
        const value = unwrap(result[0])
        if (typeof value === "boolean") return value
      }
      // A non-boolean result counts as true, as the reference validator reads it.
      return true
    }
  } catch (error) {
    if (error instanceof Unsupported) return undefined
    throw error
  }
}
