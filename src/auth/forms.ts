/**
 * Reading the requests of the authorization endpoints and writing their OAuth answers (RFC 6749): form
 * bodies, cookies and the redirects of the authorization endpoint (4.1.2.1), never cached. The JSON answers
 * and errors of the token endpoint (5.1, 5.2) are src/auth/oauthError.ts.
 */
import { type HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { noStore } from "./oauthError.ts"

/** The query of a GET, or the form body of a POST (`application/x-www-form-urlencoded`). */
export const formOf = (http: HttpServerRequest.HttpServerRequest): Effect.Effect<URLSearchParams | string> => {
  const queryAt = http.url.indexOf("?")
  const query = new URLSearchParams(queryAt === -1 ? "" : http.url.slice(queryAt + 1))
  if (http.method === "GET" || http.method === "HEAD") return Effect.succeed(query)
  const type = (http.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase()
  if (type !== "application/x-www-form-urlencoded") {
    return Effect.succeed(`the request body must be application/x-www-form-urlencoded (got ${type === "" ? "none" : type})`)
  }
  return http.text.pipe(
    Effect.map((text) => new URLSearchParams(text)),
    Effect.orElseSucceed(() => "the request body could not be read")
  )
}

/** The value of cookie `name` in the request's `Cookie` header. */
export const cookie = (http: HttpServerRequest.HttpServerRequest, name: string): string | undefined => {
  const header = http.headers["cookie"]
  if (header === undefined) return undefined
  for (const part of header.split(";")) {
    const at = part.indexOf("=")
    if (at !== -1 && part.slice(0, at).trim() === name) return part.slice(at + 1).trim()
  }
  return undefined
}

/** `uri` with `params` added to its query (a redirect back to the client). */
export const withQuery = (uri: string, params: Readonly<Record<string, string | undefined>>): string => {
  const url = new URL(uri)
  for (const [name, value] of Object.entries(params)) if (value !== undefined) url.searchParams.append(name, value)
  return url.toString()
}

/** A 302 to `location`, never cached. */
export const redirect = (location: string, headers: Readonly<Record<string, string>> = {}) =>
  HttpServerResponse.empty({ status: 302, headers: { location, ...noStore, ...headers } })
