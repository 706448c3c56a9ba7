/** Structural checks of a write (until full validation): type, resourceType, ids. */
import type { Catalog } from "../catalog/Catalog.ts"
import { fail, type FhirError } from "../http/FhirError.ts"

export const idPattern = /^[A-Za-z0-9\-.]{1,64}$/

/** A 404 unless the catalog serves `type`. */
export const knownType = (catalog: Catalog, type: string): FhirError | undefined =>
  catalog.isResourceType(type) ? undefined : fail("not-found", `${type} is not a resource type this server knows`)

export const validId = (id: string): FhirError | undefined =>
  idPattern.test(id) ? undefined : fail("value", `${JSON.stringify(id)} is not a valid FHIR id (1-64 of A-Z a-z 0-9 - .)`)

/** The body holds a resource of the URL's type; on update its id is the URL's. */
export const bodyMatches = (body: Record<string, unknown>, type: string, id?: string): FhirError | undefined => {
  const given = body["resourceType"]
  if (typeof given !== "string") return fail("structure", "the body has no resourceType")
  if (given !== type) return fail("invalid", `the body holds a ${given}, but the URL is for ${type}`)
  if (id === undefined) return undefined
  const bodyId = body["id"]
  if (bodyId === undefined) return fail("required", `the body has no id; an update of ${type}/${id} must carry id "${id}"`)
  if (bodyId !== id) return fail("invalid", `the body's id ${JSON.stringify(bodyId)} differs from the URL's id "${id}"`)
  return undefined
}

/** `If-Match: W/"3"` → 3; undefined when absent; a 400 when it does not name a version. */
export const ifMatchVersion = (header: string | undefined): number | undefined | FhirError => {
  if (header === undefined) return undefined
  const match = /^\s*(?:W\/)?"(\d+)"\s*$/.exec(header)
  if (match === null) return fail("value", `If-Match ${header} does not name a version (expected W/"<versionId>")`)
  return Number(match[1])
}
