/** Compiles a CodeSystem; its concept index (flattened hierarchy with parent links) is built on first use. */
import type { CodeSystemDef, ConceptDef } from "./definitions.ts"
import { bool, type Json, lazy, objects, str } from "./json.ts"

interface ConceptIndex {
  readonly list: ReadonlyArray<ConceptDef>
  readonly byCode: ReadonlyMap<string, ConceptDef>
}

/** Parents come from the nesting of `concept` and from `parent` / `child` / `subsumedBy` properties. */
const index = (json: Json, caseSensitive: boolean): ConceptIndex => {
  const parents = new Map<string, Set<string>>()
  const children = new Map<string, Set<string>>()
  const order: Array<{ code: string; json: Json }> = []
  const link = (parent: string, child: string) => {
    if (parent === child) return
    let up = parents.get(child)
    if (up === undefined) parents.set(child, up = new Set())
    up.add(parent)
    let down = children.get(parent)
    if (down === undefined) children.set(parent, down = new Set())
    down.add(child)
  }
  const visit = (concepts: ReadonlyArray<Json>, parent: string | undefined) => {
    for (const concept of concepts) {
      const code = str(concept, "code")
      if (code === undefined) continue
      order.push({ code, json: concept })
      if (parent !== undefined) link(parent, code)
      for (const property of objects(concept, "property")) {
        const value = str(property, "valueCode")
        if (value === undefined) continue
        const name = str(property, "code")
        // `subsumedBy` is how terminology.hl7.org's code systems (the v3 ones among them) state their hierarchy.
        if (name === "parent" || name === "subsumedBy") link(value, code)
        else if (name === "child") link(code, value)
      }
      visit(objects(concept, "concept"), code)
    }
  }
  visit(objects(json, "concept"), undefined)
  const list: Array<ConceptDef> = []
  const byCode = new Map<string, ConceptDef>()
  for (const { code, json: concept } of order) {
    const key = caseSensitive ? code : code.toLowerCase()
    if (byCode.has(key)) continue
    const def: ConceptDef = {
      code,
      display: str(concept, "display"),
      definition: str(concept, "definition"),
      parents: [...(parents.get(code) ?? [])],
      children: [...(children.get(code) ?? [])],
      json: concept
    }
    list.push(def)
    byCode.set(key, def)
  }
  return { list, byCode }
}

export const readCodeSystem = (json: Json): CodeSystemDef | string => {
  const url = str(json, "url")
  if (url === undefined || url === "") return "CodeSystem.url is missing"
  const caseSensitive = bool(json, "caseSensitive")
  const concepts = lazy(() => index(json, caseSensitive ?? true))
  return {
    url,
    version: str(json, "version"),
    name: str(json, "name"),
    resource: json,
    content: str(json, "content"),
    caseSensitive,
    hierarchyMeaning: str(json, "hierarchyMeaning"),
    valueSet: str(json, "valueSet"),
    concepts: () => concepts().list,
    concept: (code) => concepts().byCode.get(caseSensitive === false ? code.toLowerCase() : code)
  }
}
