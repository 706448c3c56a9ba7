/** Compiles a CodeSystem; its concept index (flattened hierarchy with parent links) is built on first use. */
import type { CodeSystemDef, ConceptDef } from "./definitions.ts"
import { bool, type Json, objects, str } from "./json.ts"
import type { Source } from "./source.ts"

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

export type CodeSystemData = Omit<CodeSystemDef, "resource" | "concepts" | "concept">

export const readCodeSystem = (json: Json): CodeSystemData | string => {
  const url = str(json, "url")
  if (url === undefined || url === "") return "CodeSystem.url is missing"
  return {
    url,
    version: str(json, "version"),
    name: str(json, "name"),
    content: str(json, "content"),
    caseSensitive: bool(json, "caseSensitive"),
    hierarchyMeaning: str(json, "hierarchyMeaning"),
    valueSet: str(json, "valueSet")
  }
}

export const codeSystemDef = (data: CodeSystemData, source: Source): CodeSystemDef => {
  const caseSensitive = data.caseSensitive
  const concepts = () => source.derived("concepts", (json) => index(json, caseSensitive ?? true))
  return {
    url: data.url,
    version: data.version,
    name: data.name,
    get resource() {
      return source.json()
    },
    content: data.content,
    caseSensitive,
    hierarchyMeaning: data.hierarchyMeaning,
    valueSet: data.valueSet,
    concepts: () => concepts().list,
    concept: (code) => concepts().byCode.get(caseSensitive === false ? code.toLowerCase() : code)
  }
}
