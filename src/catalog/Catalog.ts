/**
 * The Catalog: an immutable compiled snapshot of the installed conformance resources, which every other
 * module asks instead of reading package files. `build` is pure and tolerant: a resource that cannot be
 * compiled is skipped and listed in `problems`. Each definition is made from its resource's summary
 * (summary.ts); what only some requests need (snapshots, concepts, compose) is read from the resource
 * when first asked for.
 */
import { canonicals, compareVersions } from "./Canonicals.ts"
import { codeSystemDef } from "./CodeSystems.ts"
import { conceptMapDef } from "./ConceptMaps.ts"
import type {
  CatalogProblem,
  CodeSystemDef,
  CompartmentDef,
  ConceptMapDef,
  OperationDef,
  OperationLevel,
  SearchParameterDef,
  StructureDefinition,
  ValueSetDef
} from "./definitions.ts"
import { elementTree, type ElementTree } from "./elementTree.ts"
import { isObject, type Json } from "./json.ts"
import { compartmentDef, operationDef, searchParameterDef, valueSetDef } from "./readDefinitions.ts"
import { structureDefinition } from "./readStructure.ts"
import { heldSource, unpackCache } from "./source.ts"
import { summarize, type Summary } from "./summary.ts"

export type * from "./definitions.ts"
export type { ElementNode, ElementTree } from "./elementTree.ts"

export interface Catalog {
  readonly generation: number
  readonly fhirVersion: string
  /** Concrete resource types (kind=resource, derivation=specialization, abstract=false), sorted. */
  readonly resourceTypes: ReadonlyArray<string>
  readonly isResourceType: (type: string) => boolean
  /** By canonical url, or `url|version` for that exact version. */
  readonly structureDefinition: (url: string) => StructureDefinition | undefined
  /** The base definition (not a profile) of a resource or data type. */
  readonly structureDefinitionForType: (type: string) => StructureDefinition | undefined
  /** The type and its ancestors through `baseDefinition`, most specific first. */
  readonly ancestors: (type: string) => ReadonlyArray<string>
  /** The elements of a type's JSON form from its base definition's snapshot, computed once per type. */
  readonly elementTree: (type: string) => ElementTree | undefined
  /** By code, including those inherited from the type's ancestors (Resource, DomainResource). */
  readonly searchParameters: (resourceType: string) => ReadonlyMap<string, SearchParameterDef>
  readonly searchParameter: (resourceType: string, code: string) => SearchParameterDef | undefined
  readonly searchParameterByUrl: (url: string) => SearchParameterDef | undefined
  readonly compartment: (code: string) => CompartmentDef | undefined
  readonly compartments: ReadonlyArray<CompartmentDef>
  readonly operations: ReadonlyArray<OperationDef>
  /** Operations invocable at a level; at type and instance level, those for `resourceType` or every resource. */
  readonly operationsFor: (level: OperationLevel, resourceType?: string) => ReadonlyArray<OperationDef>
  readonly codeSystem: (url: string) => CodeSystemDef | undefined
  /** The current code system of each url. */
  readonly codeSystems: ReadonlyArray<CodeSystemDef>
  readonly valueSet: (url: string) => ValueSetDef | undefined
  /** By canonical url, or `url|version`. */
  readonly conceptMap: (url: string) => ConceptMapDef | undefined
  /** The current concept map of each url. */
  readonly conceptMaps: ReadonlyArray<ConceptMapDef>
  /**
   * The current concept maps whose source value set is `source` and whose target value set is `target`
   * (either left out: any); a `|version` on either is ignored.
   */
  readonly conceptMapsBetween: (source: string | undefined, target: string | undefined) => ReadonlyArray<ConceptMapDef>
  readonly problems: ReadonlyArray<CatalogProblem>
}

/** A conformance resource as the catalog is built from it: its summary, and its JSON parsed or deflated (source.ts). */
export type CatalogEntry =
  | { readonly summary: Summary; readonly json: Json }
  | { readonly summary: Summary; readonly packed: Uint8Array }

/**
 * How much unpacked JSON text a catalog built from packed entries holds at most, with what was derived
 * from it (snapshots, concept indexes): the working set of validation and terminology, not every resource.
 */
export const defaultUnpackBudgetBytes = 16 * 1024 * 1024

interface Compiled {
  readonly structures: Array<StructureDefinition>
  readonly searchParameters: Array<SearchParameterDef>
  readonly compartments: Array<CompartmentDef>
  readonly operations: Array<OperationDef>
  readonly codeSystems: Array<CodeSystemDef>
  readonly valueSets: Array<ValueSetDef>
  readonly conceptMaps: Array<ConceptMapDef>
  readonly problems: Array<CatalogProblem>
}

const compile = (entries: Iterable<CatalogEntry>, unpackBudgetBytes: number): Compiled => {
  const out: Compiled = {
    structures: [],
    searchParameters: [],
    compartments: [],
    operations: [],
    codeSystems: [],
    valueSets: [],
    conceptMaps: [],
    problems: []
  }
  const unpacked = unpackCache(unpackBudgetBytes)
  for (const entry of entries) {
    const summary = entry.summary
    const source = () => ("json" in entry ? heldSource(entry.json) : unpacked.source(entry.packed))
    switch (summary.kind) {
      case "StructureDefinition":
        out.structures.push(structureDefinition(summary.data, source()))
        break
      case "SearchParameter":
        out.searchParameters.push(searchParameterDef(summary.data, source()))
        break
      case "CompartmentDefinition":
        out.compartments.push(compartmentDef(summary.data, source()))
        break
      case "OperationDefinition":
        out.operations.push(operationDef(summary.data, source()))
        break
      case "CodeSystem":
        out.codeSystems.push(codeSystemDef(summary.data, source()))
        break
      case "ValueSet":
        out.valueSets.push(valueSetDef(summary.data, source()))
        break
      case "ConceptMap":
        out.conceptMaps.push(conceptMapDef(summary.data, source()))
        break
      case "problem": {
        const { resourceType, id, url, message } = summary.problem
        out.problems.push({ resourceType, id, url, message })
        break
      }
      case "other":
        break
    }
  }
  return out
}

/** One definition per code: the highest version, then the last given. */
const latestByCode = <A extends CompartmentDef>(items: ReadonlyArray<A>): ReadonlyMap<string, A> => {
  const byCode = new Map<string, A>()
  for (const item of items) {
    const present = byCode.get(item.code)
    if (present === undefined || compareVersions(item.version, present.version) >= 0) byCode.set(item.code, item)
  }
  return byCode
}

const noParameters: ReadonlyMap<string, SearchParameterDef> = new Map()

const withoutVersion = (url: string): string => {
  const bar = url.indexOf("|")
  return bar < 0 ? url : url.slice(0, bar)
}

/** The maps of `maps` by their source or target value set (without its version). */
const mapsBy = (maps: ReadonlyArray<ConceptMapDef>, side: "source" | "target"): ReadonlyMap<string, ReadonlyArray<ConceptMapDef>> => {
  const by = new Map<string, Array<ConceptMapDef>>()
  for (const map of maps) {
    const url = map[side]
    if (url === undefined) continue
    const key = withoutVersion(url)
    const list = by.get(key)
    if (list === undefined) by.set(key, [map])
    else list.push(map)
  }
  return by
}

/** The catalog of parsed resources, each held as given. */
export const build = (resources: Iterable<Record<string, unknown>>, generation: number): Catalog =>
  fromEntries(entriesOf(resources), generation)

function* entriesOf(resources: Iterable<unknown>): Iterable<CatalogEntry> {
  for (const resource of resources) yield { summary: summarize(resource), json: isObject(resource) ? resource : {} }
}

/** The catalog of `entries`; a packed entry is unpacked when first needed and kept within `unpackBudgetBytes`. */
export const fromEntries = (
  entries: Iterable<CatalogEntry>,
  generation: number,
  unpackBudgetBytes: number = defaultUnpackBudgetBytes
): Catalog => {
  const compiled = compile(entries, unpackBudgetBytes)
  const structures = canonicals(compiled.structures)
  const searchParameters = canonicals(compiled.searchParameters)
  const operations = canonicals(compiled.operations).current
  const codeSystems = canonicals(compiled.codeSystems)
  const valueSets = canonicals(compiled.valueSets)
  const conceptMaps = canonicals(compiled.conceptMaps)
  const mapsBySource = mapsBy(conceptMaps.current, "source")
  const mapsByTarget = mapsBy(conceptMaps.current, "target")
  const conceptMapsBetween = (source: string | undefined, target: string | undefined): ReadonlyArray<ConceptMapDef> => {
    if (source === undefined && target === undefined) return conceptMaps.current
    const bySource = source === undefined ? undefined : mapsBySource.get(withoutVersion(source)) ?? []
    const byTarget = target === undefined ? undefined : mapsByTarget.get(withoutVersion(target)) ?? []
    if (bySource === undefined) return byTarget!
    if (byTarget === undefined) return bySource
    return bySource.filter((map) => byTarget.includes(map))
  }
  const compartments = latestByCode(canonicals(compiled.compartments).current)

  const byType = new Map<string, StructureDefinition>()
  const resourceTypes = new Set<string>()
  for (const sd of structures.current) {
    if (sd.derivation === "constraint") continue
    byType.set(sd.type, sd)
    if (sd.kind === "resource" && sd.derivation === "specialization" && !sd.abstract) resourceTypes.add(sd.type)
  }

  const byBase = new Map<string, Array<SearchParameterDef>>()
  for (const sp of searchParameters.current) {
    for (const base of sp.base) {
      const list = byBase.get(base)
      if (list === undefined) byBase.set(base, [sp])
      else list.push(sp)
    }
  }

  /** The type and its ancestors through `baseDefinition`, most specific first. */
  const lineage = (type: string): ReadonlyArray<string> => {
    const chain = [type]
    let sd = byType.get(type)
    while (sd?.baseDefinition !== undefined) {
      sd = structures.get(sd.baseDefinition)
      if (sd === undefined || chain.includes(sd.type)) break
      chain.push(sd.type)
    }
    return chain
  }

  // Memoised per known type only, so that arbitrary type names from requests cannot grow the cache.
  const parameterMaps = new Map<string, ReadonlyMap<string, SearchParameterDef>>()
  const parametersOf = (type: string): ReadonlyMap<string, SearchParameterDef> => {
    const known = parameterMaps.get(type)
    if (known !== undefined) return known
    if (!byType.has(type) && !byBase.has(type)) return noParameters
    const map = new Map<string, SearchParameterDef>()
    for (const ancestor of [...lineage(type)].reverse()) {
      for (const sp of byBase.get(ancestor) ?? []) map.set(sp.code, sp)
    }
    parameterMaps.set(type, map)
    return map
  }

  const trees = new Map<string, ElementTree>()
  const elementTreeOf = (type: string): ElementTree | undefined => {
    const known = trees.get(type)
    if (known !== undefined) return known
    const sd = byType.get(type)
    if (sd === undefined) return undefined
    const tree = elementTree(sd)
    trees.set(type, tree)
    return tree
  }

  const sortedTypes = [...resourceTypes].sort()
  const compartmentList = [...compartments.values()]
  return {
    generation,
    fhirVersion: byType.get("Resource")?.fhirVersion ?? "4.0.1",
    resourceTypes: sortedTypes,
    isResourceType: (type) => resourceTypes.has(type),
    structureDefinition: structures.get,
    structureDefinitionForType: (type) => byType.get(type),
    ancestors: lineage,
    elementTree: elementTreeOf,
    searchParameters: parametersOf,
    searchParameter: (type, code) => parametersOf(type).get(code),
    searchParameterByUrl: searchParameters.get,
    compartment: (code) => compartments.get(code),
    compartments: compartmentList,
    operations,
    operationsFor: (level, resourceType) =>
      operations.filter((op) =>
        op[level] &&
        (level === "system" || resourceType === undefined || op.resourceTypes.includes(resourceType) ||
          op.resourceTypes.includes("Resource"))
      ),
    codeSystem: codeSystems.get,
    codeSystems: codeSystems.current,
    valueSet: valueSets.get,
    conceptMap: conceptMaps.get,
    conceptMaps: conceptMaps.current,
    conceptMapsBetween,
    problems: compiled.problems
  }
}
