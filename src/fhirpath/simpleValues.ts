/**
 * The values and functions of the invariant compiler (`simplePath.ts`): collections of JSON values, with
 * primitives wrapped so that an element with only extensions still counts, navigation by element name,
 * FHIRPath's three-valued logic and equality, and the functions of the subset.
 */

export class Undecided extends Error {}

export type Collection = ReadonlyArray<unknown>

export interface Variables {
  readonly resource: unknown
  readonly rootResource: unknown
}

export interface Context {
  readonly $this: unknown
  readonly vars: Variables
}

export type Evaluate = (focus: Collection, context: Context) => Collection

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

export const isUpper = (code: number): boolean => code >= 65 && code <= 90

/** A primitive in a collection: its value (undefined when it only has extensions). */
export class Primitive {
  constructor(readonly value: unknown) {}
}

const push = (out: Array<unknown>, value: unknown, extension: unknown): void => {
  if (isObject(value)) out.push(value)
  else if (value !== undefined && value !== null) out.push(new Primitive(value))
  else if (extension !== undefined && extension !== null) out.push(new Primitive(undefined))
}

/**
 * The children called `name` of each item. `choice` says whether the element is a choice (`value[x]`, found
 * as `valueQuantity`...); when the type of the items is not known (undefined), a key that could be either
 * (`responseCode` for `response`) is not decided here.
 */
export const navigate = (focus: Collection, name: string, choice: boolean | undefined): Collection => {
  const out: Array<unknown> = []
  for (const item of focus) {
    if (item instanceof Primitive) throw new Undecided()
    if (!isObject(item)) continue
    let key = name
    if (!(name in item) && !(`_${name}` in item)) {
      if (choice === false) continue
      key = ""
      for (const candidate in item) {
        // `_valueString` alone (a value with only extensions) is a value too.
        const start = candidate.charCodeAt(0) === 95 ? 1 : 0
        if (candidate.length > name.length + start && candidate.startsWith(name, start) && isUpper(candidate.charCodeAt(name.length + start))) {
          key = candidate.slice(start)
          break
        }
      }
      if (key === "") continue
      if (choice === undefined) throw new Undecided()
    }
    const value = item[key]
    const extension = item[`_${key}`]
    if (Array.isArray(value) || Array.isArray(extension)) {
      const values = Array.isArray(value) ? value : []
      const extensions = Array.isArray(extension) ? extension : []
      for (let i = 0; i < Math.max(values.length, extensions.length); i++) push(out, values[i], extensions[i])
    } else push(out, value, extension)
  }
  return out
}

export const bool = (value: boolean): Collection => [value]
export const empty: Collection = []

export const unwrap = (item: unknown): unknown => (item instanceof Primitive ? item.value : item)

/** A collection as a boolean operand: empty, a single boolean, or not decidable here. */
export const logical = (collection: Collection): boolean | undefined => {
  if (collection.length === 0) return undefined
  if (collection.length === 1) {
    const value = unwrap(collection[0])
    if (typeof value === "boolean") return value
  }
  throw new Undecided()
}

export const fromLogical = (value: boolean | undefined): Collection => (value === undefined ? empty : bool(value))

const looksLikeDate = /^\d{4}(-\d\d(-\d\d(T[\d:.]+(Z|[+-]\d\d:\d\d)?)?)?)?$/

/** A primitive value for equality; objects and valueless primitives are not decided here. */
const scalar = (item: unknown): string | number | boolean => {
  const value = unwrap(item)
  if (typeof value === "string" || typeof value === "number" || typeof value === "boolean") return value
  throw new Undecided()
}

export const equal = (a: unknown, b: unknown): boolean => {
  const x = scalar(a)
  const y = scalar(b)
  // Dates and times of different precision are not simply unequal in FHIRPath.
  if (typeof x === "string" && typeof y === "string" && x !== y && looksLikeDate.test(x) && looksLikeDate.test(y)) throw new Undecided()
  return x === y
}

export const singleString = (input: Collection): string | undefined => {
  if (input.length === 0) return undefined
  if (input.length > 1) throw new Undecided()
  const value = unwrap(input[0])
  if (typeof value !== "string") throw new Undecided()
  return value
}

/**
 * The items with repeats left out, as `equal` decides: one pass over a map of the values (comparing every pair
 * made `Bundle.entry.fullUrl.isDistinct()` quadratic, seconds for a Bundle of ten thousand entries). As comparing
 * pairs would, it is undecided when there are two or more items and one is not a primitive value, or when two
 * different date-like strings meet.
 */
export const distinct = (input: Collection): Collection => {
  if (input.length < 2) return input
  const seen = new Set<string>()
  const out: Array<unknown> = []
  let date: string | undefined
  for (const item of input) {
    const value = scalar(item)
    if (typeof value === "string" && looksLikeDate.test(value)) {
      if (date !== undefined && date !== value) throw new Undecided()
      date = value
    }
    const key = `${typeof value}:${String(value)}`
    if (seen.has(key)) continue
    seen.add(key)
    out.push(item)
  }
  return out
}

type Fn = (input: Collection, args: ReadonlyArray<Evaluate>, context: Context) => Collection

const noArgs = (fn: (input: Collection) => Collection): { arity: number; fn: Fn } => ({ arity: 0, fn: (input) => fn(input) })

const criteria = (input: Collection, criterion: Evaluate, context: Context, keep: (value: boolean | undefined) => boolean): Collection =>
  input.filter((item) => keep(logical(criterion([item], { ...context, $this: item }))))

const stringTest = (test: (value: string, argument: string) => boolean): { arity: number; fn: Fn } => ({
  arity: 1,
  fn: (input, [argument], context) => {
    const value = singleString(input)
    const wanted = singleString(argument!(context.$this === undefined ? empty : [context.$this], context))
    // As the reference validator does, a string function of nothing is false rather than empty.
    return value === undefined || wanted === undefined ? bool(false) : bool(test(value, wanted))
  }
})

export const functions: Readonly<Record<string, { readonly arity: number; readonly fn: Fn }>> = {
  exists: { arity: -1, fn: (input, [criterion], context) => bool((criterion === undefined ? input : criteria(input, criterion, context, (v) => v === true)).length > 0) },
  empty: noArgs((input) => bool(input.length === 0)),
  not: noArgs((input) => fromLogical(((v) => (v === undefined ? undefined : !v))(logical(input)))),
  count: noArgs((input) => [input.length]),
  hasValue: noArgs((input) => bool(input.length === 1 && input[0] instanceof Primitive && input[0].value !== undefined)),
  first: noArgs((input) => input.slice(0, 1)),
  last: noArgs((input) => input.slice(-1)),
  tail: noArgs((input) => input.slice(1)),
  distinct: noArgs(distinct),
  isDistinct: noArgs((input) => bool(distinct(input).length === input.length)),
  where: { arity: 1, fn: (input, [criterion], context) => criteria(input, criterion!, context, (v) => v === true) },
  all: { arity: 1, fn: (input, [criterion], context) => bool(criteria(input, criterion!, context, (v) => v !== true).length === 0) },
  select: { arity: 1, fn: (input, [projection], context) => input.flatMap((item) => projection!([item], { ...context, $this: item })) },
  trace: { arity: -1, fn: (input) => input },
  length: noArgs((input) => ((value) => (value === undefined ? empty : [value.length]))(singleString(input))),
  lower: noArgs((input) => ((value) => (value === undefined ? empty : [value.toLowerCase()]))(singleString(input))),
  toInteger: noArgs((input) => {
    if (input.length === 0) return empty
    if (input.length > 1) throw new Undecided()
    const value = unwrap(input[0])
    if (typeof value === "number") return Number.isInteger(value) ? [value] : empty
    if (typeof value === "string") return /^[+-]?\d+$/.test(value) ? [Number(value)] : empty
    if (typeof value === "boolean") return [value ? 1 : 0]
    throw new Undecided()
  }),
  upper: noArgs((input) => ((value) => (value === undefined ? empty : [value.toUpperCase()]))(singleString(input))),
  startsWith: stringTest((value, prefix) => value.startsWith(prefix)),
  endsWith: stringTest((value, suffix) => value.endsWith(suffix)),
  contains: stringTest((value, part) => value.includes(part))
}

export const variables: Readonly<Record<string, (context: Context) => Collection>> = {
  resource: (context) => (context.vars.resource === undefined ? empty : [context.vars.resource]),
  rootResource: (context) => (context.vars.rootResource === undefined ? empty : [context.vars.rootResource]),
  ucum: () => ["http://unitsofmeasure.org"]
}
