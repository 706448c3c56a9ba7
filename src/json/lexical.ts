/**
 * The lexical form of JSON numbers, kept beside the values (https://hl7.org/fhir/R4/datatypes.html#decimal:
 * "the precision of the decimal value has significance", so `1.50` is not `1.5`). Numbers stay JavaScript
 * numbers for every reader; a number whose text is not what `String(n)` gives back (`1.50`, `1e3`, `-0`,
 * 17 significant digits) has that text recorded against its holder (the object or array) and key. A holder is
 * marked when it or anything under it has such a record, so that writers only walk the marked parts.
 */

type Holder = object
type Key = string | number

const records = new WeakMap<Holder, Map<Key, string>>()
const marked = new WeakSet<Holder>()

const isContainer = (value: unknown): value is Holder => typeof value === "object" && value !== null

/** Whether `text` is how JavaScript writes the number it denotes (nothing to keep then). */
export const isCanonical = (text: string): boolean => String(Number(text)) === text

/**
 * The text recorded for the number at `holder[key]`, when the number there is still the one that text
 * denotes (a changed value is written as JavaScript writes it).
 */
export const lexicalOf = (holder: Holder, key: Key): string | undefined => {
  const text = records.get(holder)?.get(key)
  if (text === undefined) return undefined
  const value: unknown = (holder as Record<Key, unknown>)[key]
  return typeof value === "number" && Object.is(Number(text), value) ? text : undefined
}

/**
 * Records (or, with undefined or a canonical text, forgets) the text of the number at `holder[key]`. The
 * holder is marked; its ancestors are the caller's to mark (`markTree`), as they are not known here.
 */
export const setLexical = (holder: Holder, key: Key, text: string | undefined): void => {
  const known = records.get(holder)
  if (text === undefined || isCanonical(text)) {
    known?.delete(key)
    return
  }
  if (known === undefined) records.set(holder, new Map([[key, text]]))
  else known.set(key, text)
  marked.add(holder)
}

/** Whether `value` is a container with recorded texts in or under it. */
export const isMarked = (value: unknown): boolean => isContainer(value) && marked.has(value)

export const mark = (holder: Holder): void => {
  marked.add(holder)
}

/** Marks every container of `root` that has records in or under it; true when `root` has any. */
export const markTree = (root: unknown): boolean => {
  if (!isContainer(root)) return false
  let any = (records.get(root)?.size ?? 0) > 0
  if (Array.isArray(root)) {
    for (const item of root) if (markTree(item)) any = true
  } else {
    for (const key in root) if (markTree((root as Record<string, unknown>)[key])) any = true
  }
  if (any) marked.add(root)
  return any
}

/**
 * Makes `to`, a copy of `from` holding (some of) its values at the same keys, keep `from`'s texts; for the
 * copies made by spreading, by filtering or by rebuilding an object.
 */
export const carryLexical = <A extends Holder>(from: Holder, to: A): A => {
  if (!marked.has(from)) return to
  const known = records.get(from)
  if (known !== undefined && known.size > 0) {
    const copy = records.get(to)
    if (copy === undefined) records.set(to, new Map(known))
    else for (const [key, text] of known) copy.set(key, text)
  }
  marked.add(to)
  return to
}

/** Like `carryLexical` for an array copied by filtering: `indexes[i]` is where item i of `to` was in `from`. */
export const carryLexicalItems = <A extends Holder>(from: Holder, to: A, indexes: ReadonlyArray<number>): A => {
  if (!marked.has(from)) return to
  const known = records.get(from)
  if (known !== undefined) {
    indexes.forEach((index, at) => {
      const text = known.get(index)
      if (text !== undefined) setLexical(to, at, text)
    })
  }
  marked.add(to)
  return to
}

/**
 * Keeps the texts of an array's items with them across `array.splice(start, deleted, ...inserted)`: call it
 * before the splice, with the texts of the inserted items (undefined for none).
 */
export const spliceLexical = (array: ReadonlyArray<unknown>, start: number, deleted: number, inserted: ReadonlyArray<string | undefined>): void => {
  const known = records.get(array)
  const moved = new Map<Key, string>()
  if (known !== undefined) {
    for (const [key, text] of known) {
      if (typeof key !== "number") continue
      if (key < start) moved.set(key, text)
      else if (key >= start + deleted) moved.set(key - deleted + inserted.length, text)
    }
  }
  inserted.forEach((text, i) => {
    if (text !== undefined && !isCanonical(text)) moved.set(start + i, text)
  })
  if (moved.size === 0) {
    records.delete(array)
    return
  }
  records.set(array, moved)
  marked.add(array)
}

/** A deep copy of a JSON value that keeps its recorded texts. */
export const cloneJson = <A>(value: A): A => {
  if (!isContainer(value)) return value
  if (!marked.has(value)) return structuredClone(value)
  if (Array.isArray(value)) return carryLexical(value, value.map((item) => cloneJson(item))) as A
  const out: Record<string, unknown> = {}
  for (const key of Object.keys(value)) {
    Object.defineProperty(out, key, { value: cloneJson((value as Record<string, unknown>)[key]), enumerable: true, writable: true, configurable: true })
  }
  return carryLexical(value, out) as A
}
