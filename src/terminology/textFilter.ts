/**
 * The `filter` parameter of `$expand` (https://hl7.org/fhir/R4/valueset-operation-expand.html), which R4
 * leaves to the server: a code is kept when every word of the filter starts a word of its display, of one
 * of its designations, or its code, case and accents aside, punctuation read as spaces (what token `:text`
 * does in search). `abdo` finds "Abdominal pain" and "Pain in abdomen"; `pain abd` finds both too;
 * `domin` finds neither.
 */
import { words } from "../search/extract/values.ts"

const ascii = /^[\x00-\x7f]*$/

/** Text as words separated by single spaces, lower case, without accents, with a space in front. */
export const searchText = (parts: ReadonlyArray<string | undefined>): string => {
  let out = ""
  for (const part of parts) {
    if (part === undefined || part === "") continue
    const normal = ascii.test(part) ? part.replace(/[^A-Za-z0-9]+/g, " ").toLowerCase().trim() : words(part)
    if (normal !== "") out += ` ${normal}`
  }
  return out
}

/** The words of a filter, as `searchText` writes them. */
export const filterWords = (filter: string): ReadonlyArray<string> => searchText([filter]).split(" ").filter((word) => word !== "")

/** A test of a text made by `searchText`; undefined for a filter without words (it keeps everything). */
export const textMatcher = (filter: string): ((text: string) => boolean) | undefined => {
  const needles = filterWords(filter).map((word) => ` ${word}`)
  if (needles.length === 0) return undefined
  if (needles.length === 1) {
    const [needle] = needles as [string]
    return (text) => text.includes(needle)
  }
  return (text) => needles.every((needle) => text.includes(needle))
}
