/**
 * The answers of the authorization server's endpoints, which speak OAuth rather than FHIR: JSON bodies with
 * `error` and `error_description` (RFC 6749, 5.2; RFC 7591, 3.2.2; RFC 6750, 3), never cached (RFC 6749, 5.1:
 * `Cache-Control: no-store`, `Pragma: no-cache`), whether they hold a credential or an error.
 */
import { HttpServerResponse } from "@effect/platform"

/** The headers every answer of the authorization server carries. */
export const noStore: Readonly<Record<string, string>> = { "cache-control": "no-store", pragma: "no-cache" }

/** A JSON answer with the no-store headers. */
export const jsonResponse = (status: number, body: unknown, headers: Readonly<Record<string, string>> = {}) =>
  HttpServerResponse.text(JSON.stringify(body), { status, contentType: "application/json", headers: { ...noStore, ...headers } })

/** An OAuth error answer. */
export const oauthError = (status: number, error: string, description: string, headers: Readonly<Record<string, string>> = {}) =>
  jsonResponse(status, { error, error_description: description }, headers)
