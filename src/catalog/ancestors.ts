/** The chain of a type's StructureDefinitions through `baseDefinition`. */
import type { Catalog } from "./Catalog.ts"

/** The type and its ancestors through `baseDefinition`, most specific first. */
export const ancestorsOf = (catalog: Catalog, type: string): ReadonlyArray<string> => {
  const chain = [type]
  let sd = catalog.structureDefinitionForType(type)
  while (sd?.baseDefinition !== undefined) {
    sd = catalog.structureDefinition(sd.baseDefinition)
    if (sd === undefined || chain.includes(sd.type)) break
    chain.push(sd.type)
  }
  return chain
}
