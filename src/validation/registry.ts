/**
 * What validation compiles, kept per Catalog object (so per catalog generation) and built lazily: a
 * StructureDefinition when a resource first needs it, a value set's codes when a binding is first met,
 * an element's invariants when it is first present. Nothing is compiled per request.
 */
import type { Catalog } from "../catalog/Catalog.ts"
import { expandForBinding, type Membership } from "./codes.ts"
import { type Children, compileStructure, type CompiledStructure, type ElementNode } from "./compile.ts"
import { compileInvariant, type Invariant } from "./invariants.ts"

export interface Registry {
  readonly catalog: Catalog
  /** By canonical url (`url|version` tried exactly first). */
  readonly structure: (url: string) => CompiledStructure | undefined
  /** The base definition of a type. */
  readonly forType: (type: string) => CompiledStructure | undefined
  readonly membership: (valueSet: string) => Membership
  /** The invariants of an element, evaluated with `base` as the FHIRPath type context (none for a resource). */
  readonly invariants: (node: ElementNode, base: string | undefined) => ReadonlyArray<Invariant>
  /** What `_name` of a primitive may hold: the primitive type's elements other than `value`. */
  readonly primitiveParts: (type: string) => Children
  /** A type and the types it derives from (`Age`, `Quantity`, `Element`). */
  readonly ancestors: (type: string) => ReadonlyArray<string>
}

const registries = new WeakMap<Catalog, Registry>()

export const registryFor = (catalog: Catalog): Registry => {
  const known = registries.get(catalog)
  if (known !== undefined) return known
  const structures = new Map<string, CompiledStructure | undefined>()
  const structure = (url: string): CompiledStructure | undefined => {
    if (structures.has(url)) return structures.get(url)
    const sd = catalog.structureDefinition(url) ?? (url.includes("|") ? catalog.structureDefinition(url.slice(0, url.indexOf("|"))) : undefined)
    // Only urls the catalog knows are remembered, so that names from requests cannot grow the map.
    if (sd === undefined) return undefined
    const compiled = compileStructure(sd)
    structures.set(url, compiled)
    return compiled
  }
  const byType = new Map<string, CompiledStructure | undefined>()
  const forType = (type: string): CompiledStructure | undefined => {
    if (byType.has(type)) return byType.get(type)
    const sd = catalog.structureDefinitionForType(type)
    if (sd === undefined) return undefined
    const compiled = structure(sd.url)
    byType.set(type, compiled)
    return compiled
  }
  const memberships = new Map<string, Membership>()
  const membership = (valueSet: string): Membership => {
    let result = memberships.get(valueSet)
    if (result === undefined) {
      try {
        result = expandForBinding(catalog, valueSet)
      } catch (error) {
        result = { known: false, problem: String(error) }
      }
      memberships.set(valueSet, result)
    }
    return result
  }
  // A node is always checked in one role (an element at its path, a type's root, a resource), so one base.
  const invariantCache = new Map<ElementNode, ReadonlyArray<Invariant>>()
  const invariants = (node: ElementNode, base: string | undefined): ReadonlyArray<Invariant> => {
    let list = invariantCache.get(node)
    if (list === undefined) {
      list = node.constraints.flatMap((constraint) => compileInvariant(constraint, base, base ?? node.path) ?? [])
      invariantCache.set(node, list)
    }
    return list
  }
  const parts = new Map<string, Children>()
  const primitiveParts = (type: string): Children => {
    let children = parts.get(type)
    if (children === undefined) {
      const all = forType(type)?.root.children
      const list = (all?.list ?? []).filter((child) => child.name !== "value")
      const byJsonName = new Map([...(all?.byJsonName ?? [])].filter(([name]) => name !== "value"))
      children = { list, byJsonName, required: [] }
      parts.set(type, children)
    }
    return children
  }
  const lineages = new Map<string, ReadonlyArray<string>>()
  const ancestors = (type: string): ReadonlyArray<string> => {
    let lineage = lineages.get(type)
    if (lineage === undefined) {
      lineage = catalog.ancestors(type)
      // Only types the catalog knows are remembered, so that names from requests cannot grow the map.
      if (catalog.structureDefinitionForType(type) !== undefined) lineages.set(type, lineage)
    }
    return lineage
  }
  const registry: Registry = { catalog, structure, forType, membership, invariants, primitiveParts, ancestors }
  registries.set(catalog, registry)
  return registry
}
