/**
 * The Catalog: an immutable compiled snapshot of the installed conformance resources, which every other
 * module asks instead of reading package files. `build` is pure and tolerant: a resource that cannot be
 * compiled is skipped and listed in `problems`.
 */
import { canonicals, compareVersions } from "./Canonicals.ts"
import { readCodeSystem } from "./CodeSystems.ts"
import type {
  CatalogProblem,
  CodeSystemDef,
  CompartmentDef,
  OperationDef,
  OperationLevel,
  SearchParameterDef,
  StructureDefinition,
  ValueSetDef
} from "./definitions.ts"
import { elementTree, type ElementTree } from "./elementTree.ts"
import { isObject, type Json, str } from "./json.ts"
import { readCompartmentDefinition, readOperationDefinition, readSearchParameter, readValueSet } from "./readDefinitions.ts"
import { readStructureDefinition } from "./readStructure.ts"

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
  readonly valueSet: (url: string) => ValueSetDef | undefined
  readonly problems: ReadonlyArray<CatalogProblem>
}

interface Compiled {
  readonly structures: Array<StructureDefinition>
  readonly searchParameters: Array<SearchParameterDef>
  readonly compartments: Array<CompartmentDef>
  readonly operations: Array<OperationDef>
  readonly codeSystems: Array<CodeSystemDef>
  readonly valueSets: Array<ValueSetDef>
  readonly problems: Array<CatalogProblem>
}

const problem = (json: Json | undefined, message: string): CatalogProblem => ({
  resourceType: json === undefined ? undefined : str(json, "resourceType"),
  id: json === undefined ? undefined : str(json, "id"),
  url: json === undefined ? undefined : str(json, "url"),
  message
})

const compile = (resources: Iterable<unknown>): Compiled => {
  const out: Compiled = {
    structures: [],
    searchParameters: [],
    compartments: [],
    operations: [],
    codeSystems: [],
    valueSets: [],
    problems: []
  }
  const add = <A>(list: Array<A>, json: Json, result: A | string) => {
    if (typeof result === "string") out.problems.push(problem(json, result))
    else list.push(result)
  }
  for (const json of resources) {
    if (!isObject(json)) {
      out.problems.push(problem(undefined, "not a JSON object"))
      continue
    }
    try {
      switch (json["resourceType"]) {
        case "StructureDefinition":
          add(out.structures, json, readStructureDefinition(json))
          break
        case "SearchParameter":
          add(out.searchParameters, json, readSearchParameter(json))
          break
        case "CompartmentDefinition":
          add(out.compartments, json, readCompartmentDefinition(json))
          break
        case "OperationDefinition":
          add(out.operations, json, readOperationDefinition(json))
          break
        case "CodeSystem":
          add(out.codeSystems, json, readCodeSystem(json))
          break
        case "ValueSet":
          add(out.valueSets, json, readValueSet(json))
          break
      }
    } catch (error) {
      out.problems.push(problem(json, `could not be compiled: ${String(error)}`))
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

export const build = (resources: Iterable<Record<string, unknown>>, generation: number): Catalog => {
  const compiled = compile(resources)
  const structures = canonicals(compiled.structures)
  const searchParameters = canonicals(compiled.searchParameters)
  const operations = canonicals(compiled.operations).current
  const codeSystems = canonicals(compiled.codeSystems)
  const valueSets = canonicals(compiled.valueSets)
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
    valueSet: valueSets.get,
    problems: compiled.problems
  }
}
