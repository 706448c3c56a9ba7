/** Responses of the FHIR interactions: the resource in the negotiated format, with its version headers. */
import { HttpServerResponse } from "@effect/platform"
import type { Catalog } from "../catalog/Catalog.ts"
import { parseJson, stringifyJson } from "../json/Json.ts"
import { operationOutcome } from "../http/OperationOutcome.ts"
import { instantOf } from "../store/versions.ts"
import type { VersionRow } from "../store/reads.ts"
import { statusFor } from "../http/OperationOutcome.ts"
import type { FhirError } from "../http/FhirError.ts"
import { contentTypeOf, type Negotiated } from "./Format.ts"
import { renderXml } from "./xmlBridge.ts"

/** HTTP-date (RFC 9110) of a commit timestamp in microseconds. */
export const httpDate = (commitTs: number): string => new Date(Math.floor(commitTs / 1000)).toUTCString()

export const etag = (version: number): string => `W/"${version}"`

/** The body text of a resource in the negotiated format; stored JSON is served as it is when not pretty. */
export const bodyText = (json: string | Record<string, unknown>, negotiated: Negotiated, catalog: Catalog): string => {
  if (negotiated.format === "xml") {
    return renderXml(typeof json === "string" ? parseJson(json) as Record<string, unknown> : json, catalog, negotiated.pretty)
  }
  if (typeof json === "string") return negotiated.pretty ? stringifyJson(parseJson(json), 2) : json
  return stringifyJson(json, negotiated.pretty ? 2 : undefined)
}

export const resourceBody = (
  json: string | Record<string, unknown>,
  negotiated: Negotiated,
  catalog: Catalog,
  options: { readonly status?: number; readonly headers?: Record<string, string> } = {}
): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.text(bodyText(json, negotiated, catalog), {
    status: options.status ?? 200,
    contentType: contentTypeOf(negotiated.format),
    ...(options.headers ? { headers: options.headers } : {})
  })

/** ETag and Last-Modified of a version. */
export const versionHeaders = (row: Pick<VersionRow, "version" | "commitTs">): Record<string, string> => ({
  etag: etag(row.version),
  "last-modified": httpDate(row.commitTs)
})

export const lastUpdated = instantOf

/** The OperationOutcome of an error: every issue it carries (validation), or its one error issue. */
export const outcomeOf = (error: FhirError) =>
  error.issues !== undefined && error.issues.length > 0
    ? { resourceType: "OperationOutcome" as const, issue: error.issues }
    : operationOutcome([{
      severity: "error",
      code: error.code,
      diagnostics: error.diagnostics,
      ...(error.expression ? { expression: error.expression } : {})
    }])

/** An error as an OperationOutcome in the negotiated format. */
export const errorResponse = (error: FhirError, negotiated: Negotiated, catalog: Catalog | undefined) => {
  const outcome = outcomeOf(error)
  const status = error.status ?? statusFor(error.code)
  const xml = negotiated.format === "xml" && catalog !== undefined
  return HttpServerResponse.text(
    xml ? renderXml(outcome, catalog, negotiated.pretty) : JSON.stringify(outcome, null, negotiated.pretty ? 2 : undefined),
    { status, contentType: contentTypeOf(xml ? "xml" : "json") }
  )
}
