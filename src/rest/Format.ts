/**
 * Content negotiation (ARCHITECTURE.md, Formats): JSON by default, `application/json` the same as
 * `application/fhir+json`; XML when asked by `_format` or `Accept`; `_pretty`.
 */
import { fail, type FhirError } from "../http/FhirError.ts"

export type Format = "json" | "xml"

export interface Negotiated {
  readonly format: Format
  readonly pretty: boolean
}

const formatNames: Record<string, Format> = {
  json: "json",
  "application/json": "json",
  "application/fhir+json": "json",
  xml: "xml",
  "text/xml": "xml",
  "application/xml": "xml",
  "application/fhir+xml": "xml"
}

const mediaType = (value: string): string => value.split(";")[0]!.trim().toLowerCase()

/** The response format a request asks for, or a 406 naming what was asked. */
export const negotiate = (params: URLSearchParams, accept: string | undefined): Negotiated | FhirError => {
  const pretty = params.get("_pretty") === "true"
  const given = params.get("_format")
  if (given !== null) {
    const format = formatNames[mediaType(given)]
    return format === undefined ? fail("not-supported", `_format ${given} is not supported: use json or xml`, 406) : { format, pretty }
  }
  if (accept === undefined || accept.trim() === "") return { format: "json", pretty }
  for (const part of accept.split(",")) {
    const type = mediaType(part)
    const format = formatNames[type]
    if (format !== undefined) return { format, pretty }
    if (type === "*/*" || type === "application/*") return { format: "json", pretty }
  }
  return fail("not-supported", `Accept ${accept} names no format this server writes: use application/fhir+json or application/fhir+xml`, 406)
}

/** The format of a request body from its Content-Type (absent means JSON), or undefined when unsupported. */
export const bodyFormat = (contentType: string | undefined): Format | "json-patch" | undefined => {
  if (contentType === undefined || contentType.trim() === "") return "json"
  const type = mediaType(contentType)
  if (type === "application/json-patch+json") return "json-patch"
  return formatNames[type]
}

export const contentTypeOf = (format: Format): string =>
  format === "json" ? "application/fhir+json; charset=utf-8" : "application/fhir+xml; charset=utf-8"
