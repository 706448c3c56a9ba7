/**
 * A Questionnaire's items indexed in document order, with their parents, so that enableWhen targets can be
 * placed before or after, inside or outside the item that names them.
 */
import type { Json } from "../../catalog/json.ts"
import { list } from "./json.ts"

export interface Indexed {
  readonly item: Json
  readonly path: string
  /** Position in a pre-order walk of the items: an item's ancestors and earlier items have smaller ones. */
  readonly order: number
  readonly parent: Indexed | undefined
}

export const indexItems = (root: Json, path: string): ReadonlyArray<Indexed> => {
  const out: Array<Indexed> = []
  const visit = (owner: Json, at: string, parent: Indexed | undefined, depth: number): void => {
    if (depth > 64) return
    list(owner["item"]).forEach((item, i) => {
      const entry: Indexed = { item, path: `${at}.item[${i}]`, order: out.length, parent }
      out.push(entry)
      visit(item, entry.path, entry, depth + 1)
    })
  }
  visit(root, path, undefined, 0)
  return out
}

export const contains = (ancestor: Indexed, entry: Indexed | undefined): boolean => {
  for (let e = entry; e !== undefined; e = e.parent) if (e === ancestor) return true
  return false
}
