/**
 * The result parameters: `_sort`, `_count`, `_offset`, `_total`, `_summary`, `_elements`, `_include`, `_revinclude`.
 * https://hl7.org/fhir/R4/search.html#return
 */
import type { Catalog } from "../../catalog/Catalog.ts"
import { splitUnescaped, unescape } from "./escape.ts"
import { revincludeWildcard, unknownModifier, unreadable } from "./problems.ts"
import { type Include, isCommonCode, type Parameter, type Problem, type SortKey } from "./SearchRequest.ts"

export const defaultCount = 20
export const maxCount = 1000
/** The largest `_offset` read: past it a client follows the `next` links, whose cursors cost the same at any depth. */
export const maxOffset = 1_000_000

export const resultCodes: ReadonlySet<string> = new Set([
  "_sort", "_count", "_offset", "_cursor", "_total", "_summary", "_elements", "_include", "_revinclude"
])

const digits = /^\d+$/

/** `_count` as read everywhere: a non-negative integer, more than `maxCount` read as `maxCount`; undefined when unreadable. */
export const readCount = (value: string): number | undefined => (digits.test(value) ? Math.min(Number(value), maxCount) : undefined)

/** `_offset` as read everywhere: a non-negative integer up to `maxOffset`; undefined when it is not. */
export const readOffset = (value: string): number | undefined => {
  if (!digits.test(value)) return undefined
  const offset = Number(value)
  return offset <= maxOffset ? offset : undefined
}

export const offsetExpected = `a non-negative integer, at most ${maxOffset} (to page further, follow the next links)`
export const countExpected = "a non-negative integer"

export interface ResultState {
  sort: ReadonlyArray<SortKey>
  count: number
  offset: number | undefined
  cursor: string | undefined
  total: "none" | "estimate" | "accurate" | undefined
  summary: "true" | "text" | "data" | "count" | "false" | undefined
  elements: ReadonlyArray<string> | undefined
  include: Array<Include>
  revinclude: Array<Include>
}

export const emptyResult = (): ResultState => ({
  sort: [],
  count: defaultCount,
  offset: undefined,
  cursor: undefined,
  total: undefined,
  summary: undefined,
  elements: undefined,
  include: [],
  revinclude: []
})

const elementName = /^[A-Za-z][A-Za-z0-9_]*(?:\[x\])?$/

/** Applies one result parameter to `state`, or returns the problem. `lookup` finds a parameter of the searched type. */
export const readResult = (
  state: ResultState,
  code: string,
  modifier: string | undefined,
  key: string,
  value: string,
  type: string,
  catalog: Catalog,
  lookup: (code: string) => Parameter | undefined
): Problem | undefined => {
  const isInclude = code === "_include" || code === "_revinclude"
  if (modifier !== undefined && !(isInclude && modifier === "iterate")) {
    return unknownModifier(key, value, modifier, isInclude ? ["iterate"] : [])
  }
  switch (code) {
    case "_count": {
      const count = readCount(value)
      if (count === undefined) return unreadable(key, value, countExpected)
      state.count = count
      return undefined
    }
    case "_offset": {
      const offset = readOffset(value)
      if (offset === undefined) return unreadable(key, value, offsetExpected)
      state.offset = offset
      return undefined
    }
    case "_cursor":
      // Read against the search's order by the planner (src/search/plan/cursor.ts), which knows it.
      state.cursor = value
      return undefined
    case "_total":
      if (value !== "none" && value !== "estimate" && value !== "accurate") return unreadable(key, value, "none, estimate or accurate")
      state.total = value
      return undefined
    case "_summary":
      if (value !== "true" && value !== "text" && value !== "data" && value !== "count" && value !== "false") {
        return unreadable(key, value, "true, text, data, count or false")
      }
      state.summary = value
      return undefined
    case "_elements": {
      const names = value.split(",").map((n) => n.trim()).filter((n) => n !== "")
      const wrong = names.find((n) => !elementName.test(n))
      if (wrong !== undefined) return unreadable(key, value, "a comma-separated list of element names")
      state.elements = [...(state.elements ?? []), ...names]
      return undefined
    }
    case "_sort": {
      const keys: Array<SortKey> = []
      for (const raw of splitUnescaped(value, ",").map(unescape).filter((k) => k !== "")) {
        const desc = raw.startsWith("-")
        const name = desc ? raw.slice(1) : raw
        const param = lookup(name)
        if (param === undefined) return unreadable(key, value, `search parameters of ${type}, each optionally after -`)
        keys.push({ code: name, direction: desc ? "desc" : "asc", param })
      }
      state.sort = [...state.sort, ...keys]
      return undefined
    }
    default: {
      const iterate = modifier === "iterate"
      const read = readInclude(key, value, iterate, catalog)
      if ("message" in read) return read
      if (code === "_include") state.include.push(read)
      else if (read.kind === "wildcard") return revincludeWildcard(key)
      else state.revinclude.push(read)
      return undefined
    }
  }
}

const includeForm = "*, or Type:parameter[:targetType] naming a reference parameter of Type"

const readInclude = (key: string, value: string, iterate: boolean, catalog: Catalog): Include | Problem => {
  if (value === "*") return { kind: "wildcard", iterate }
  const [sourceType, code, targetType, ...extra] = value.split(":")
  if (sourceType === undefined || code === undefined || extra.length > 0) return unreadable(key, value, includeForm)
  if (!catalog.isResourceType(sourceType) || isCommonCode(code)) return unreadable(key, value, includeForm)
  const param = catalog.searchParameter(sourceType, code)
  if (param === undefined || param.type !== "reference") return unreadable(key, value, includeForm)
  if (targetType === undefined) return { kind: "parameter", sourceType, param, iterate }
  const anyTarget = param.target.length === 0 || param.target.includes("Resource")
  if (!catalog.isResourceType(targetType) || !(anyTarget || param.target.includes(targetType))) {
    return unreadable(key, value, `a target type of ${sourceType}.${code}: ${param.target.join(", ")}`)
  }
  return { kind: "parameter", sourceType, param, targetType, iterate }
}
