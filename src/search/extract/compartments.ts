/**
 * Compartment membership (https://hl7.org/fhir/R4/compartmentdefinition.html), derived from the
 * reference rows of a resource: a resource of type T is in compartment C/x when one of its references
 * through a parameter the CompartmentDefinition C lists for T points at C/x. The focal resource is a
 * member of its own compartment (Patient/x is in Patient/x), as `{def}` says for Encounter,
 * Practitioner and RelatedPerson and as `$everything` needs for all of them.
 */
import type { Catalog } from "../../catalog/Catalog.ts"
import type { CompartmentRow, IndexRow } from "./IndexRow.ts"

/** The compartments a resource type can be in, each with the parameter codes that put it there. */
export type CompartmentLinks = ReadonlyArray<{ readonly compartment: string; readonly params: ReadonlySet<string> }>

const links = new WeakMap<Catalog, Map<string, CompartmentLinks>>()

/** `{def}` in a CompartmentDefinition names the focal resource itself, not a parameter. */
const focalMarker = "{def}"

export const compartmentLinks = (catalog: Catalog, type: string): CompartmentLinks => {
  let byType = links.get(catalog)
  if (byType === undefined) {
    byType = new Map()
    links.set(catalog, byType)
  }
  let found = byType.get(type)
  if (found === undefined) {
    found = catalog.compartments.flatMap((definition) => {
      const params = (definition.resources.get(type) ?? []).filter((code) => code !== focalMarker)
      return params.length === 0 ? [] : [{ compartment: definition.code, params: new Set(params) }]
    })
    if (catalog.isResourceType(type)) byType.set(type, found)
  }
  return found
}

/** Whether resources of `type` are the focal resources of a compartment of the catalog. */
export const isFocalType = (catalog: Catalog, type: string): boolean => catalog.compartment(type) !== undefined

/** What the compartment rows of `type` depend on, for the backfill's fingerprint. */
export const compartmentFingerprint = (catalog: Catalog, type: string): unknown =>
  [isFocalType(catalog, type), compartmentLinks(catalog, type).map((link) => [link.compartment, [...link.params].sort()])
    .sort((a, b) => String(a[0]).localeCompare(String(b[0])))]

/** The compartments `type/id` is in, read from its index rows; each once. */
export const compartmentRows = (catalog: Catalog, type: string, id: unknown, rows: ReadonlyArray<IndexRow>): ReadonlyArray<CompartmentRow> => {
  const out: Array<CompartmentRow> = []
  const seen = new Set<string>()
  const add = (code: string, targetId: string) => {
    const key = `${code}/${targetId}`
    if (seen.has(key)) return
    seen.add(key)
    out.push({ kind: "compartment", code, targetId })
  }
  if (typeof id === "string" && id !== "" && isFocalType(catalog, type)) add(type, id)
  const linked = compartmentLinks(catalog, type)
  if (linked.length === 0) return out
  for (const row of rows) {
    // A contained resource (`#id`) is no compartment's focal resource.
    if (row.kind !== "reference" || row.targetType === null || row.targetId === null || row.targetId.startsWith("#")) continue
    for (const link of linked) {
      if (link.compartment === row.targetType && link.params.has(row.code)) add(link.compartment, row.targetId)
    }
  }
  return out
}
