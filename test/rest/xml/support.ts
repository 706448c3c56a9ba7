/** The real R4 catalog for the XML tests, built once per file; undefined (with a notice) when no registry answers. */
import { build, type Catalog } from "../../../src/catalog/Catalog.ts"
import { loadR4Conformance } from "../../support/r4Examples.ts"

export const loadCatalog = async (): Promise<Catalog | undefined> => {
  const resources = await loadR4Conformance()
  return resources === undefined ? undefined : build(resources, 1)
}
