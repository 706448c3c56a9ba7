/** FHIR XML at the REST edge: rendering responses and reading bodies (docs/formats.md). */
import { Effect, Either } from "effect"
import type { Catalog } from "../catalog/Catalog.ts"
import { fail, type FhirError } from "../http/FhirError.ts"
import { fromXml } from "./xml/fromXml.ts"
import { toXml } from "./xml/toXml.ts"

export const renderXml = (resource: Record<string, unknown>, catalog: Catalog, pretty: boolean): string =>
  toXml(resource, catalog, { pretty })

/** A resource from FHIR XML, or a 400 naming the element and line where the XML breaks. */
export const parseXml = (text: string, catalog: Catalog): Effect.Effect<Record<string, unknown>, FhirError> => {
  const parsed = fromXml(text, catalog)
  return Either.isRight(parsed)
    ? Effect.succeed(parsed.right)
    : Effect.fail(fail("structure", `the body is not a FHIR XML resource: ${parsed.left.message}`))
}
