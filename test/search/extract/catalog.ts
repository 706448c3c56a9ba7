/** The R4 catalog for the extraction tests, or undefined (with a notice) when it cannot be had outside CI. */
import { build, type Catalog } from "../../../src/catalog/Catalog.ts"
import { loadR4Conformance } from "../../support/r4Examples.ts"

export const loadCatalog = async (): Promise<Catalog | undefined> => {
  const resources = await loadR4Conformance()
  return resources === undefined ? undefined : build(resources, 1)
}
