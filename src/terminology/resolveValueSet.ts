/**
 * Which ValueSet a canonical names (https://hl7.org/fhir/R4/valueset-operation-expand.html, `url`): a ValueSet
 * of the catalog (`url` or `url|version`), or else the whole of the CodeSystem whose `CodeSystem.valueSet` it
 * is ("defined implicitly by some code system known to the server").
 */
import type { Catalog } from "../catalog/Catalog.ts"
import type { CodeSystemDef } from "../catalog/definitions.ts"
import { str } from "../catalog/json.ts"
import type { Source } from "./expansion.ts"

export const withoutVersion = (canonical: string): string => {
  const bar = canonical.indexOf("|")
  return bar < 0 ? canonical : canonical.slice(0, bar)
}

// Code systems by the url of their whole-system value set (CodeSystem.valueSet), per catalog.
const implicitSets = new WeakMap<Catalog, ReadonlyMap<string, CodeSystemDef>>()

const implicitSet = (catalog: Catalog, url: string): CodeSystemDef | undefined => {
  let byUrl = implicitSets.get(catalog)
  if (byUrl === undefined) {
    const map = new Map<string, CodeSystemDef>()
    for (const system of catalog.codeSystems) if (system.valueSet !== undefined) map.set(withoutVersion(system.valueSet), system)
    implicitSets.set(catalog, byUrl = map)
  }
  return byUrl.get(url)
}

/**
 * The ValueSet a canonical (`url` or `url|version`) names in the catalog: a ValueSet resource, or else the
 * whole of the CodeSystem whose `valueSet` it is (R4: "defined implicitly by some code system").
 */
export const resolveValueSet = (catalog: Catalog, canonical: string): Source | undefined => {
  const valueSet = catalog.valueSet(canonical)
  if (valueSet !== undefined) return { url: valueSet.url, version: valueSet.version, json: valueSet.resource }
  if (canonical.includes("|")) return undefined
  const system = implicitSet(catalog, canonical)
  if (system === undefined) return undefined
  const resource = system.resource
  return {
    url: canonical,
    version: system.version,
    json: {
      resourceType: "ValueSet",
      url: canonical,
      ...(system.version === undefined ? {} : { version: system.version }),
      ...(system.name === undefined ? {} : { name: system.name }),
      status: str(resource, "status") ?? "active",
      compose: { include: [{ system: system.url }] }
    }
  }
}

/** A name for a value set in messages. */
export const valueSetName = (source: Source): string => (source.url === undefined ? "the ValueSet given" : `the ValueSet ${source.url}`)
