/**
 * The FHIR REST API under `/fhir` (https://hl7.org/fhir/R4/http.html): one route table, negotiation,
 * and one place where errors become OperationOutcomes.
 */
import { HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Clock, Effect, Option, Ref } from "effect"
import type { Catalog } from "../catalog/Catalog.ts"
import { CatalogService } from "../catalog/CatalogService.ts"
import { databaseLimit } from "../db/errors.ts"
import { Admission } from "../http/FrontDoor.ts"
import { callerKey, Principal } from "../http/Principal.ts"
import { accessOf, unrestricted } from "../auth/access/Access.ts"
import { fhirRoute, type Route } from "../http/Route.ts"
import { systemOrigin } from "../db/ChangeFeed.ts"
import { instantOf } from "../store/versions.ts"
import { withOrigin, type Writer } from "../db/Writer.ts"
import { capabilityStatement } from "./capabilities.ts"
import { compartmentSearch } from "./compartment.ts"
import { fail, FhirError } from "../http/FhirError.ts"
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
import { type ResourceStore, type StoreError, StoreSettings } from "../store/ResourceStore.ts"
import type { LeaseLost } from "../db/WriterLease.ts"
import type { SqlError } from "@effect/sql/SqlError"
import type { Database } from "../db/Database.ts"
import { bodyText as renderBody, errorResponse } from "./respond.ts"
import { Operations } from "./Operations.ts"
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

/**
 * The refusal of a path or method no route takes (`unknown`): 404 for a path no route has, or naming a type the
 * server does not know, 405 for a method the path does not take.
 */
const refusal = (catalog: Catalog, method: string, segments: ReadonlyArray<string>, path: string) => {
  const [first, , third, fourth] = segments
  if (segments.length > 4 || segments.some((segment) => segment.startsWith("$"))) return Effect.fail(fail("not-found", `no route for ${path}`))
  const special = segments.length === 1 && (first === "_search" || first === "metadata" || first === "_history")
  if (first !== undefined && !special && !catalog.isResourceType(first)) {
    return Effect.fail(fail("not-found", `${first} is not a resource type this server knows`))
  }
  if (segments.length === 4 && third !== "_history" && fourth !== "_search") return Effect.fail(fail("not-found", `no route for ${path}`))
  return methodNotAllowed(method, path)
}

/** The request's answer, dispatched on its route (src/http/Route.ts: the front door's classification). */
const dispatch = (
  request: FhirRequest,
  route: Route,
  segments: ReadonlyArray<string>,
  capabilities: (request: FhirRequest) => Effect.Effect<string>
): Effect.Effect<HttpServerResponse.HttpServerResponse, FhirError | SqlError | StoreError | LeaseLost, Database | Writer | ResourceStore | StoreSettings | Operations> => {
  const method = request.http.method === "HEAD" ? "GET" : request.http.method
  const path = `${basePath}/${segments.join("/")}`
  const catalog = request.catalog
  if (route.interaction === "unknown") return refusal(catalog, method, segments, path)
  if (route.interaction === "operation") {
    return Effect.flatMap(Operations, (operations) =>
      operations.invoke(request, method, path, { name: route.operation!, level: route.level, type: route.type, id: route.id, version: route.version }))
  }
  if (segments.some((segment) => segment.startsWith("$"))) return Effect.fail(fail("not-found", `no route for ${path}`))
  const type = route.type
  if (type !== undefined && !catalog.isResourceType(type)) return Effect.fail(fail("not-found", `${type} is not a resource type this server knows`))
  const body = () => readResource(request.http, request.maxBodyBytes, request.catalog)
  const posted = method === "POST"
  switch (route.interaction) {
    case "capabilities":
      return Effect.map(capabilities(request), (text) => HttpServerResponse.text(text, { contentType: contentTypeOf(request.negotiated.format) }))
    case "batch-or-transaction":
      return Effect.flatMap(body(), (bundle) => processBundle(request, bundle, request.maxBundleEntries))
    case "search":
      if (type === undefined) return posted ? searchPosted(request, systemScope) : search(request, systemScope, request.params)
      if (route.target !== undefined) {
        return posted
          ? Effect.flatMap(postedParams(request), (params) => compartmentSearch(request, type, route.id!, route.target!, params))
          : compartmentSearch(request, type, route.id!, route.target, request.params)
      }
      return posted ? searchPosted(request, type) : search(request, type, request.params)
    case "history":
      return history(request, type === undefined ? {} : route.id === undefined ? { type } : { type, id: route.id })
    case "vread":
      return vread(request, type!, route.id!, route.version!)
    case "read":
      return read(request, type!, route.id!)
    case "create":
      return Effect.flatMap(body(), (resource) => create(request, type!, resource))
    case "update":
      return Effect.flatMap(body(), (resource) => route.conditional ? updateWhere(request, type!, resource) : update(request, type!, route.id!, resource))
    case "patch":
      return route.conditional ? patchWhere(request, type!) : patch(request, type!, route.id!)
    case "delete":
      return route.conditional ? removeWhere(request, type!) : remove(request, type!, route.id!)
    case "root-endpoint":
      return Effect.fail(fail("not-found", `no route for ${path}`))
  }
}

/** Whether the route is a search: on a type, across types, or in a compartment, of types the server knows. */
const isSearchRoute = (catalog: Catalog, route: Route): boolean =>
  route.interaction === "search" &&
  (route.type === undefined || catalog.isResourceType(route.type)) &&
  (route.target === undefined || catalog.compartment(route.type!) !== undefined)

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
    const storeSettings = yield* StoreSettings
    const operations = yield* Operations

    const capabilities = (request: FhirRequest) =>
      Effect.gen(function*() {
        const catalog = request.catalog
        let hit = yield* Ref.get(cached)
        if (hit?.generation !== catalog.generation) {
          const now = yield* Clock.currentTimeMillis
          const json = capabilityStatement(catalog, {
            base: settings.publicUrl === undefined ? undefined : baseUrl(settings.publicUrl, undefined),
            updateAsCreate: storeSettings.updateAsCreate,
            operationsOn: operations.on,
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
      const principal = yield* Effect.serviceOption(Principal)
      const request: FhirRequest = {
        http,
        params,
        negotiated,
        base: baseUrl(settings.publicUrl, http.headers["host"]),
        catalog,
        maxBodyBytes: options.maxBodyBytes,
        maxPageBytes: options.maxPageBytes,
        maxBundleEntries: options.maxBundleEntries,
        access: Option.isSome(principal) ? accessOf(principal.value) : unrestricted
      }
      // Every search answer varies with Prefer (handling=lenient), errors included (spec: Search rules 6).
      // The route the front door classified the request with; the same from the path when no front door ran.
      const admission = yield* Effect.serviceOption(Admission)
      const route = Option.isSome(admission) ? admission.value.route : fhirRoute(http.method, segments)
      const isSearch = isSearchRoute(catalog, route)
      const databaseFailure = (limit: "deadline" | "pool" | undefined, cause: unknown) => {
        switch (limit) {
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
          case undefined:
            return Effect.logError("database error", cause).pipe(
              Effect.as(errorResponse(fail("exception", "the database failed to answer this request; see the server log"), negotiated, catalog))
            )
        }
      }
      // What this request commits is published as made for its caller (src/db/ChangeFeed.ts).
      const origin = Option.isNone(admission)
        ? systemOrigin
        : { actor: callerKey(admission.value.principal), requestId: admission.value.requestId, client: admission.value.client }
      // The fast path waited for a connection as long as the pool lets a request wait, and found none.
      if (Option.isSome(admission) && admission.value.poolWaited === true) return yield* databaseFailure("pool", undefined)
      return yield* dispatch(request, route, segments, capabilities).pipe(
        withOrigin(origin),
        Effect.catchTag("FhirError", (error) => Effect.succeed(errorResponse(error, negotiated, catalog))),
        // The writer lease is lost (another process writes now): nothing was committed; the client may retry there.
        Effect.catchTag("LeaseLost", (error) =>
          Effect.logWarning(`a write was refused: this process no longer holds the writer lease (${error.reason})`).pipe(
            Effect.as(errorResponse(fail("transient", "this server can no longer write (it lost the writer lease); nothing was written: try again", 503), negotiated, catalog))
          )),
        // A read's statement failed (SqlError), or a write's (StoreError, from the ResourceStore).
        Effect.catchTag("SqlError", (error) => databaseFailure(databaseLimit(error), error.cause)),
        Effect.catchTag("StoreError", (error) => databaseFailure(error.limit, error.cause)),
        Effect.map((response) => (isSearch ? HttpServerResponse.setHeader(response, "vary", "Prefer") : response))
      )
    })
  })
