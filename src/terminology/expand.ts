/**
 * ValueSet expansion and code hierarchies from the CodeSystems and ValueSets of the installed packages
 * (https://hl7.org/fhir/R4/valueset.html#expansion): what `:in`, `:not-in`, `:above` and `:below`
 * on token search parameters need. Only content the catalog holds is used; a ValueSet that needs a code
 * system the server does not hold (SNOMED CT, LOINC, ...) cannot be expanded and says so. Results are
 * kept per catalog snapshot.
 */
import type { Catalog } from "../catalog/Catalog.ts"
import type { CodeSystemDef, ValueSetDef, ValueSetInclude } from "../catalog/definitions.ts"
import { isObject, type Json, objects, str } from "../catalog/json.ts"

export interface Code {
  readonly system: string
  readonly code: string
}

/** An expansion, or why there is none. */
export type Expansion = { readonly codes: ReadonlyArray<Code> } | { readonly problem: string }

/** Beyond this many codes an expansion is refused rather than sent to the database as one long list. */
export const maxCodes = 10_000

const caches = new WeakMap<Catalog, Map<string, Expansion>>()

const withoutVersion = (url: string): string => {
  const bar = url.indexOf("|")
  return bar < 0 ? url : url.slice(0, bar)
}

const key = (code: Code): string => `${code.system}\u0000${code.code}`

class Refused {
  constructor(readonly problem: string) {}
}

/** A code and every code below it (is-a), or above it, in a CodeSystem's hierarchy. */
const closure = (system: CodeSystemDef, code: string, direction: "down" | "up"): ReadonlyArray<string> => {
  const seen = new Set<string>()
  const queue = [code]
  while (queue.length > 0) {
    const next = queue.pop()!
    if (seen.has(next)) continue
    seen.add(next)
    const concept = system.concept(next)
    if (concept === undefined) continue
    queue.push(...(direction === "down" ? concept.children : concept.parents))
  }
  return [...seen]
}

const conceptProperty = (json: Json, property: string): ReadonlyArray<string> =>
  objects(json, "property")
    .filter((item) => str(item, "code") === property)
    .flatMap((item) => {
      for (const name of ["valueCode", "valueString", "valueBoolean", "valueInteger", "valueDecimal"]) {
        const value = item[name]
        if (value !== undefined && value !== null) return [String(value)]
      }
      const coding = item["valueCoding"]
      return isObject(coding) && typeof coding["code"] === "string" ? [coding["code"]] : []
    })

/** The codes one filter selects from a CodeSystem. */
const filterCodes = (system: CodeSystemDef, filter: { property: string; op: string; value: string }): ReadonlyArray<string> => {
  const all = () => system.concepts()
  switch (filter.op) {
    case "is-a":
      return closure(system, filter.value, "down")
    case "descendent-of":
      return closure(system, filter.value, "down").filter((code) => code !== filter.value)
    case "is-not-a": {
      const below = new Set(closure(system, filter.value, "down"))
      return all().map((c) => c.code).filter((code) => !below.has(code))
    }
    case "generalizes":
      return closure(system, filter.value, "up")
    case "in": {
      const wanted = new Set(filter.value.split(",").map((v) => v.trim()))
      return filter.property === "concept" || filter.property === "code"
        ? [...wanted].filter((code) => system.concept(code) !== undefined)
        : all().filter((c) => conceptProperty(c.json, filter.property).some((v) => wanted.has(v))).map((c) => c.code)
    }
    case "=":
      return filter.property === "concept" || filter.property === "code"
        ? system.concept(filter.value) === undefined ? [] : [filter.value]
        : all().filter((c) => conceptProperty(c.json, filter.property).includes(filter.value)).map((c) => c.code)
    case "regex": {
      let pattern: RegExp
      try {
        pattern = new RegExp(`^(?:${filter.value})$`, "u")
      } catch {
        throw new Refused(`the filter regex '${filter.value}' is not a valid regular expression`)
      }
      return all().filter((c) => (filter.property === "code" || filter.property === "concept"
        ? pattern.test(c.code)
        : conceptProperty(c.json, filter.property).some((v) => pattern.test(v)))).map((c) => c.code)
    }
    case "exists": {
      const wanted = filter.value === "true"
      return all().filter((c) => (conceptProperty(c.json, filter.property).length > 0) === wanted).map((c) => c.code)
    }
    default:
      throw new Refused(`the filter operator '${filter.op}' (on ${filter.property}) is not supported`)
  }
}

const codeSystemFor = (catalog: Catalog, url: string, what: string): CodeSystemDef => {
  const system = catalog.codeSystem(url)
  if (system === undefined) throw new Refused(`${what} needs the code system ${url}, which this server does not hold`)
  if (system.content === "not-present" || system.content === "example") {
    throw new Refused(`${what} needs the codes of ${url}, which this server holds without its content (content '${system.content}')`)
  }
  return system
}

/** The codes of one include or exclude. */
const includeCodes = (catalog: Catalog, include: ValueSetInclude, stack: ReadonlyArray<string>, what: string): Map<string, Code> => {
  let result: Map<string, Code> | undefined
  if (include.system !== undefined) {
    const system = include.system
    const codes = new Map<string, Code>()
    if (include.concept.length > 0 && include.filter.length === 0) {
      for (const concept of include.concept) codes.set(key({ system, code: concept.code }), { system, code: concept.code })
    } else {
      const codeSystem = codeSystemFor(catalog, system, what)
      let selected: ReadonlyArray<string> = codeSystem.concepts().map((c) => c.code)
      for (const filter of include.filter) {
        const allowed = new Set(filterCodes(codeSystem, filter))
        selected = selected.filter((code) => allowed.has(code))
      }
      if (include.concept.length > 0) {
        const listed = new Set(include.concept.map((c) => c.code))
        selected = selected.filter((code) => listed.has(code))
      }
      for (const code of selected) codes.set(key({ system, code }), { system, code })
    }
    result = codes
  }
  for (const url of include.valueSet) {
    const imported = new Map(expandInto(catalog, url, stack).map((code) => [key(code), code] as const))
    result = result === undefined ? imported : new Map([...result].filter(([k]) => imported.has(k)))
  }
  return result ?? new Map()
}

const fromExpansion = (valueSet: ValueSetDef): ReadonlyArray<Code> | undefined => {
  const expansion = valueSet.resource["expansion"]
  if (!isObject(expansion)) return undefined
  const out: Array<Code> = []
  const visit = (items: ReadonlyArray<Json>) => {
    for (const item of items) {
      const system = str(item, "system")
      const code = str(item, "code")
      if (system !== undefined && code !== undefined && item["abstract"] !== true) out.push({ system, code })
      visit(objects(item, "contains"))
    }
  }
  visit(objects(expansion, "contains"))
  return out
}

const expandInto = (catalog: Catalog, url: string, stack: ReadonlyArray<string>): ReadonlyArray<Code> => {
  const canonical = withoutVersion(url)
  if (stack.includes(canonical)) throw new Refused(`the ValueSet ${canonical} includes itself`)
  const valueSet = catalog.valueSet(canonical)
  if (valueSet === undefined) throw new Refused(`the ValueSet ${canonical} is not known to this server`)
  const what = `the ValueSet ${canonical}`
  const compose = valueSet.compose
  if (compose === undefined) {
    const expanded = fromExpansion(valueSet)
    if (expanded !== undefined) return expanded
    throw new Refused(`${what} has neither a compose nor an expansion`)
  }
  const next = [...stack, canonical]
  const codes = new Map<string, Code>()
  for (const include of compose.include) {
    for (const [k, code] of includeCodes(catalog, include, next, what)) codes.set(k, code)
    if (codes.size > maxCodes) throw new Refused(`${what} has more than ${maxCodes} codes`)
  }
  for (const exclude of compose.exclude) {
    for (const k of includeCodes(catalog, exclude, next, what).keys()) codes.delete(k)
  }
  return [...codes.values()]
}

const cached = (catalog: Catalog, cacheKey: string, compute: () => ReadonlyArray<Code>): Expansion => {
  let cache = caches.get(catalog)
  if (cache === undefined) caches.set(catalog, cache = new Map())
  const hit = cache.get(cacheKey)
  if (hit !== undefined) return hit
  let result: Expansion
  try {
    result = { codes: compute() }
  } catch (error) {
    if (!(error instanceof Refused)) throw error
    result = { problem: error.problem }
  }
  cache.set(cacheKey, result)
  return result
}

/** The codes of the ValueSet at `url` (a `|version` is ignored: the catalog holds one version). */
export const expandValueSet = (catalog: Catalog, url: string): Expansion =>
  cached(catalog, `vs ${withoutVersion(url)}`, () => expandInto(catalog, url, []))

/** `code` and its descendants (`below`) or ancestors (`above`) in the CodeSystem `system`. */
export const subsumed = (catalog: Catalog, system: string, code: string, direction: "above" | "below"): Expansion =>
  cached(catalog, `${direction} ${system} ${code}`, () => {
    const codeSystem = codeSystemFor(catalog, system, `:${direction}`)
    if (codeSystem.concept(code) === undefined) throw new Refused(`the code system ${system} has no code '${code}'`)
    return closure(codeSystem, code, direction === "below" ? "down" : "up").map((c) => ({ system, code: c }))
  })
