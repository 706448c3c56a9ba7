/**
 * What a resource type's index rows depend on, as a fingerprint: its lineage and, for each of its search
 * parameters, what extraction reads (code, type, expression, components), and the compartments it can be
 * in with the parameters that put it there. A url or version that changes alone does not change the rows,
 * so it does not ask for a backfill.
 */
import * as Crypto from "node:crypto"
import type { Catalog } from "../../catalog/Catalog.ts"
import { compartmentFingerprint } from "../extract/compartments.ts"

/** Raised when extraction itself changes in a way that needs every index row written again (2: compartment rows). */
const extractionFormat = 2

const hash = (text: string): string => Crypto.createHash("sha256").update(text).digest("hex").slice(0, 32)

const typeFingerprint = (catalog: Catalog, type: string): string => {
  const parameters = [...catalog.searchParameters(type).values()].map((param) =>
    JSON.stringify([
      param.code,
      param.type,
      param.expression ?? "",
      param.components.map((component) => {
        const definition = catalog.searchParameterByUrl(component.definition)
        return [definition?.code ?? "", definition?.type ?? "", component.expression]
      })
    ])
  ).sort()
  return hash(JSON.stringify([extractionFormat, catalog.ancestors(type), parameters, compartmentFingerprint(catalog, type)]))
}

/** The fingerprint of every resource type of the catalog. */
export const typeFingerprints = (catalog: Catalog): ReadonlyMap<string, string> =>
  new Map(catalog.resourceTypes.map((type) => [type, typeFingerprint(catalog, type)]))

/** One fingerprint for a list of parts, e.g. to name a backfill job. */
export const fingerprintOf = (parts: unknown): string => hash(JSON.stringify(parts))
