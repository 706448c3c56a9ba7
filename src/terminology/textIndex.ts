/**
 * A word index over the search texts of a kept expansion (textFilter.ts): its distinct words in order, each
 * with the entries that have it. A filter's word is looked up as a prefix range of those words, so that a
 * request costs what its matches cost rather than a pass over every code's text; built once per kept
 * expansion, the first time a filter asks.
 */

export interface TextIndex {
  /** Distinct words, sorted. */
  readonly words: ReadonlyArray<string>
  /** For each word, the entries (ascending) whose text has it. */
  readonly postings: ReadonlyArray<Int32Array>
  readonly size: number
}

export const buildTextIndex = (texts: ReadonlyArray<string>): TextIndex => {
  const byWord = new Map<string, Array<number>>()
  texts.forEach((text, entry) => {
    for (const word of text.split(" ")) {
      if (word === "") continue
      const list = byWord.get(word)
      if (list === undefined) byWord.set(word, [entry])
      else if (list[list.length - 1] !== entry) list.push(entry)
    }
  })
  const words = [...byWord.keys()].sort()
  return { words, postings: words.map((word) => Int32Array.from(byWord.get(word)!)), size: texts.length }
}

/** The first position in `words` not before `prefix`. */
const lowerBound = (words: ReadonlyArray<string>, prefix: string): number => {
  let low = 0
  let high = words.length
  while (low < high) {
    const middle = (low + high) >>> 1
    if (words[middle]! < prefix) low = middle + 1
    else high = middle
  }
  return low
}

/**
 * The entries (ascending) that have, for every one of `needles`, a word starting with it. `needles` are
 * words as the index has them (textFilter.ts `searchText`).
 */
export const lookupText = (index: TextIndex, needles: ReadonlyArray<string>): ReadonlyArray<number> => {
  // How many needles each entry has matched so far; an entry is counted once per needle.
  const matched = new Uint8Array(index.size)
  let round = 0
  for (const needle of needles.slice(0, 255)) {
    let hits = 0
    for (let at = lowerBound(index.words, needle); at < index.words.length && index.words[at]!.startsWith(needle); at++) {
      for (const entry of index.postings[at]!) {
        if (matched[entry] === round) {
          matched[entry] = round + 1
          hits++
        }
      }
    }
    round++
    if (hits === 0) return []
  }
  const out: Array<number> = []
  for (let entry = 0; entry < index.size; entry++) if (matched[entry] === round) out.push(entry)
  return out
}
