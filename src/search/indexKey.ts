/**
 * Bounded index keys for text of any length (migration 0008). A Postgres b-tree entry holds at most about
 * 2.7 KB, so the columns the lookup indexes cover (a token's `value` and `system`, a string's `normalized`,
 * a uri's `value`) hold a key: the text itself up to `keyLength` code points, else its first `keyLength`
 * code points and `keyMarker`. A longer text is kept whole in the column's `_full` twin (NULL otherwise),
 * where a search on a long value checks it. SQLite uses the same columns, so both stores answer alike.
 *
 * A short text is its own key and a cut key is one code point longer than any short text, so `key = text`
 * for a text of `keyLength` code points or fewer matches exactly the rows holding that text, and a
 * prefix of `keyLength` code points or fewer matches the keys of exactly the texts that start with it.
 */

/** Code points of a text kept in its key; the migration cuts existing rows at the same length. */
export const keyLength = 256

/** Ends a cut key (U+2026, the ellipsis). */
export const keyMarker = "\u2026"

/** The first `count` code points of `text`, or undefined when it has no more than that. */
const cut = (text: string, count: number): string | undefined => {
  if (text.length <= count) return undefined
  let units = 0
  for (let points = 0; points < count; points++) {
    const code = text.charCodeAt(units)
    units += code >= 0xd800 && code <= 0xdbff && units + 1 < text.length ? 2 : 1
    if (units >= text.length) return undefined
  }
  return text.slice(0, units)
}

/** Whether `text` is longer than its key can hold. */
export const isLong = (text: string): boolean => cut(text, keyLength) !== undefined

/** The key stored in the indexed column for `text`. */
export const indexKey = (text: string): string => {
  const head = cut(text, keyLength)
  return head === undefined ? text : head + keyMarker
}

/** The `_full` column's value for `text`: the text when its key is cut, else NULL. */
export const fullText = (text: string | null): string | null => (text !== null && isLong(text) ? text : null)

/** The key column's value (NULL stays NULL). */
export const keyOf = (text: string | null): string | null => (text === null ? null : indexKey(text))
