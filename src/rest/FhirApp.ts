/**
 * The FHIR REST API under `/fhir` (https://hl7.org/fhir/R4/http.html): one route table, negotiation,
 * and one place where errors become OperationOutcomes.
 */
import { HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Clock, Effect, Option, Ref } from "effect"
import type { Catalog } from "../catalog/Catalog.ts"
import { CatalogService } from "../catalog/CatalogService.ts"
import { databaseLimit } from "../db/errors.ts"
import { callerKey, Principal } from "../http/Principal.ts"
import { RequestInfo } from "../http/RequestLog.ts"
import { systemOrigin } from "../store/ChangeFeed.ts"
import { instantOf } from "../store/ResourceStore.ts"
import { withOrigin } from "../store/Writer.ts"
import { capabilityStatement } from "./capabilities.ts"
import { compartmentSearch } from "./compartment.ts"
import { fail, FhirError } from "./FhirError.ts"
import type { FhirRequest } from "./FhirRequest.ts"
import { contentTypeOf, negotiate } from "./Format.ts"
import { history } from "./history.ts"
import { patch, patchWhere } from "./patch.ts"
import { read, vread } from "./read.ts"
import { bodyText, readResource } from "./RequestBody.ts"
import type { SearchScope } from "../search/parse/parseScope.ts"
import { search } from "./search.ts"
import { processBundle } from "./bundle/Bundles.ts"
import { basePath, baseUrl, RestSettings } from "./Rest.ts"
import { bodyText as renderBody, errorResponse } from "./respond.ts"
import { invoke, operationPath } from "../operations/registry.ts"
import { forbiddenCharIn, forbiddenCharRule, paramsProblem, urlTextProblem } from "../validation/fhirText.ts"
import { create, remove, removeWhere, update, updateWhere } from "./write.ts"

const methodNotAllowed = (method: string, path: string) =>
  Effect.fail(fail("not-supported", `${method} is not allowed on ${path}`, 405))

const systemScope: SearchScope = { types: undefined, typeParameter: true }

/** The form body and the URL's query together, as FHIR says of a POST `_search` (search.html#Introduction). */
const postedParams = (request: FhirRequest) =>
  Effect.flatMap(bodyText(request.http, request.maxBodyBytes), (text) => {
    const problem = urlTextProblem(text) ?? paramsProblem(new URLSearchParams(text))
    if (problem !== undefined) return Effect.fail(fail("invalid", `the search form cannot be read: ${problem}`))
    const params = new URLSearchParams(request.params)
    for (const [name, value] of new URLSearchParams(text)) params.append(name, value)
    return Effect.succeed(params)
  })

const searchPosted = (request: FhirRequest, scope: string | SearchScope) =>
  Effect.flatMap(postedParams(request), (params) => search(request, scope, params))

const route = (request: FhirRequest, segments: ReadonlyArray<string>, capabilities: (request: FhirRequest) => Effect.Effect<string>) => {
  const method = request.http.method === "HEAD" ? "GET" : request.http.method
  const path = `${basePath}/${segments.join("/")}`
  const [first, second, third, fourth, ...rest] = segments
  if (rest.length > 0) return Effect.fail(fail("not-found", `no route for ${path}`))
  if (first === undefined) {
    // A GET on the base is a search across types (search.html#searchall), `_type` naming them.
    if (method !== "POST") return method === "GET" ? search(request, systemScope, request.params) : methodNotAllowed(method, path)
    return Effect.flatMap(readResource(request.http, request.maxBodyBytes, request.catalog), (body) =>
      processBundle(request, body, request.maxBundleEntries))
  }
  if (first === "_search" && second === undefined) return method === "POST" ? searchPosted(request, systemScope) : methodNotAllowed(method, path)
  if (first === "metadata" && second === undefined) {
    return method === "GET"
      ? Effect.map(capabilities(request), (text) => HttpServerResponse.text(text, { contentType: contentTypeOf(request.negotiated.format) }))
      : methodNotAllowed(method, path)
  }
  if (first === "_history" && second === undefined) return method === "GET" ? history(request, {}) : methodNotAllowed(method, path)
  const operation = operationPath(segments)
  if (operation !== undefined) return invoke(request, request.catalog, method, path, operation)
  if (segments.some((segment) => segment.startsWith("$"))) return Effect.fail(fail("not-found", `no route for ${path}`))
  if (!request.catalog.isResourceType(first)) return Effect.fail(fail("not-found", `${first} is not a resource type this server knows`))
  const type = first
  if (second === undefined) {
    // PUT, PATCH and DELETE on the type are the conditional interactions: the query names the resource.
    switch (method) {
      case "GET":
        return search(request, type, request.params)
      case "POST":
        return Effect.flatMap(readResource(request.http, request.maxBodyBytes, request.catalog), (body) => create(request, type, body))
      case "PUT":
        return Effect.flatMap(readResource(request.http, request.maxBodyBytes, request.catalog), (body) => updateWhere(request, type, body))
      case "PATCH":
        return patchWhere(request, type)
      case "DELETE":
        return removeWhere(request, type)
      default:
        return methodNotAllowed(method, path)
    }
  }
  if (second === "_history" && third === undefined) return method === "GET" ? history(request, { type }) : methodNotAllowed(method, path)
  if (second === "_search" && third === undefined) return method === "POST" ? searchPosted(request, type) : methodNotAllowed(method, path)
  const id = second
  if (third === undefined) {
    switch (method) {
      case "GET":
        return read(request, type, id)
      case "PUT":
        return Effect.flatMap(readResource(request.http, request.maxBodyBytes, request.catalog), (body) => update(request, type, id, body))
      case "PATCH":
        return patch(request, type, id)
      case "DELETE":
        return remove(request, type, id)
      default:
        return methodNotAllowed(method, path)
    }
  }
  if (third === "_history") {
    if (method !== "GET") return methodNotAllowed(method, path)
    return fourth === undefined ? history(request, { type, id }) : vread(request, type, id, fourth)
  }
  // `[base]/{Compartment}/{id}/{type or *}` (search.html#compartments), and its POST `_search`.
  if (fourth === undefined) return method === "GET" ? compartmentSearch(request, type, id, third, request.params) : methodNotAllowed(method, path)
  if (fourth === "_search") {
    return method === "POST"
      ? Effect.flatMap(postedParams(request), (params) => compartmentSearch(request, type, id, third, params))
      : methodNotAllowed(method, path)
  }
  return Effect.fail(fail("not-found", `no route for ${path}`))
}

/** Whether the path is a search: on a type, across types, or in a compartment. */
const isSearchPath = (catalog: Catalog, segments: ReadonlyArray<string>, method: string): boolean => {
  const [first = "", , third] = segments
  if (segments.length === 0) return method === "GET"
  if (segments.length === 1 && first === "_search") return true
  if (!catalog.isResourceType(first)) return false
  if (segments.length === 1) return method === "GET"
  if (segments.length === 2) return segments[1] === "_search"
  const compartment = third !== undefined && third !== "_history" && !third.startsWith("$") && catalog.compartment(first) !== undefined
  return compartment && (segments.length === 3 ? method === "GET" : segments[3] === "_search")
}

const decodeSegments = (path: string): ReadonlyArray<string> | FhirError => {
  let segments: ReadonlyArray<string>
  try {
    segments = path.split("/").filter((segment) => segment !== "").map(decodeURIComponent)
  } catch {
    return fail("invalid", `the path ${path} is not correctly percent-encoded UTF-8`)
  }
  for (const segment of segments) {
    const found = forbiddenCharIn(segment)
    if (found !== undefined) return fail("invalid", `the path ${path} holds ${found}: ${forbiddenCharRule}`)
  }
  return segments
}

/** A 400 when the query's percent-encoding is not UTF-8 or a name or value holds a character FHIR text may not hold. */
const queryProblem = (query: string, params: URLSearchParams): FhirError | undefined => {
  const problem = urlTextProblem(query) ?? paramsProblem(params)
  return problem === undefined ? undefined : fail("invalid", `the query cannot be read: ${problem}`)
}

/** The FHIR app; it answers every path under `/fhir`. */
export const make = (options: { readonly maxBodyBytes: number; readonly maxBundleEntries: number; readonly maxPageBytes: number }) =>
  Effect.gen(function*() {
    // The statement of the catalog generation last asked for, as JSON, with its renderings by format as asked for.
    const cached = yield* Ref.make<{ readonly generation: number; readonly json: Record<string, unknown>; readonly bodies: Map<string, string> } | undefined>(undefined)
    const settings = yield* RestSettings

    const capabilities = (request: FhirRequest) =>
      Effect.gen(function*() {
        const catalog = request.catalog
        let hit = yield* Ref.get(cached)
        if (hit?.generation !== catalog.generation) {
          const now = yield* Clock.currentTimeMillis
          const json = capabilityStatement(catalog, {
            base: settings.publicUrl === undefined ? undefined : baseUrl(settings.publicUrl, undefined),
            updateAsCreate: settings.updateAsCreate,
            date: instantOf(now * 1000)
          })
          hit = { generation: catalog.generation, json, bodies: new Map() }
          yield* Ref.set(cached, hit)
        }
        const key = `${request.negotiated.format}${request.negotiated.pretty ? " pretty" : ""}`
        const known = hit.bodies.get(key)
        if (known !== undefined) return known
        const body = renderBody(hit.json, request.negotiated, catalog)
        hit.bodies.set(key, body)
        return body
      })

    return Effect.gen(function*() {
      const http = yield* HttpServerRequest.HttpServerRequest
      const catalog = yield* CatalogService.pipe(Effect.flatMap((service) => service.get))
      const queryAt = http.url.indexOf("?")
      const path = queryAt === -1 ? http.url : http.url.slice(0, queryAt)
      const params = new URLSearchParams(queryAt === -1 ? "" : http.url.slice(queryAt + 1))
      const negotiated = negotiate(params, http.headers["accept"])
      const fallback = { format: "json" as const, pretty: false }
      if (negotiated instanceof FhirError) return errorResponse(negotiated, fallback, catalog)
      const segments = decodeSegments(path.slice(basePath.length))
      if (segments instanceof FhirError) return errorResponse(segments, negotiated, catalog)
      const badQuery = queryProblem(queryAt === -1 ? "" : http.url.slice(queryAt + 1), params)
      if (badQuery !== undefined) return errorResponse(badQuery, negotiated, catalog)
      const request: FhirRequest = {
        http,
        params,
        negotiated,
        base: baseUrl(settings.publicUrl, http.headers["host"]),
        catalog,
        maxBodyBytes: options.maxBodyBytes,
        maxPageBytes: options.maxPageBytes,
        maxBundleEntries: options.maxBundleEntries
      }
      // Every search answer varies with Prefer (handling=lenient), errors included (spec: Search rules 6).
      const isSearch = isSearchPath(catalog, segments, http.method)
      // What this request commits is published as made for its caller (src/store/ChangeFeed.ts).
      const info = yield* Effect.serviceOption(RequestInfo)
      const principal = yield* Effect.serviceOption(Principal)
      const origin = Option.isNone(info) ? systemOrigin : {
        actor: Option.match(principal, { onNone: () => `address:${info.value.client}`, onSome: callerKey }),
        requestId: info.value.requestId
      }
      return yield* route(request, segments, capabilities).pipe(
        withOrigin(origin),
        Effect.catchTag("FhirError", (error) => Effect.succeed(errorResponse(error, negotiated, catalog))),
        // The writer lease is lost (another process writes now): nothing was committed; the client may retry there.
        Effect.catchTag("LeaseLost", (error) =>
          Effect.logWarning(`a write was refused: this process no longer holds the writer lease (${error.reason})`).pipe(
            Effect.as(errorResponse(fail("transient", "this server can no longer write (it lost the writer lease); nothing was written: try again", 503), negotiated, catalog))
          )),
        Effect.catchTag("SqlError", (error) => {
          switch (databaseLimit(error)) {
            case "deadline":
              return Effect.logWarning("a statement ran past its deadline (database.statement_timeout_ms)").pipe(
                Effect.as(errorResponse(fail("too-costly", "the database did not answer within the statement deadline (database.statement_timeout_ms): narrow the request, or try again later", 503), negotiated, catalog))
              )
            case "pool":
              return Effect.logWarning("no database connection was free in time").pipe(
                Effect.as(HttpServerResponse.setHeader(
                  errorResponse(fail("transient", "the server is busy: no database connection was free in time; try again shortly"), negotiated, catalog),
                  "retry-after",
                  "1"
                ))
              )
            default:
              return Effect.logError("database error", error.cause).pipe(
                Effect.as(errorResponse(fail("exception", "the database failed to answer this request; see the server log"), negotiated, catalog))
              )
          }
        }),
        Effect.map((response) => (isSearch ? HttpServerResponse.setHeader(response, "vary", "Prefer") : response))
      )
    })
  })
