/** FHIR XML, until the XML module is wired in. */
import { Effect } from "effect"
import type { Catalog } from "../catalog/Catalog.ts"
import { fail, type FhirError } from "./FhirError.ts"

export const renderXml = (_resource: Record<string, unknown>, _catalog: Catalog, _pretty: boolean): string => {
  throw new Error("XML is not available in this build yet")
}

export const parseXml = (_text: string, _catalog: Catalog): Effect.Effect<unknown, FhirError> =>
  Effect.fail(fail("not-supported", "XML bodies are not available in this build yet", 415))
