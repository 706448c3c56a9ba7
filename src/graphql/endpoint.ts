/**
 * `/graphql` (docs/graphql.md): FHIR GraphQL (https://hl7.org/fhir/R4/graphql.html) over HTTP, as GraphQL over HTTP
 * has it: `GET /graphql?query=...&variables=...&operationName=...`, or `POST` with `application/json`
 * (`{"query", "variables", "operationName"}`) or `application/graphql` (the query as the body). The query is
 * parsed, validated and executed by the `graphql` package against the catalog's schema (schema.ts); what it reads
 * is read as the caller may (docs/smart.md, "Scopes"): a resource the caller may not read is an error of its field,
 * as one that does not exist is. The answer is `application/json`, `{ "data", "errors" }`: 200 once the request is a
 * GraphQL request (its errors, parse and validation errors included, in `errors`), 400 when it is not one.
 *
 * Mutations (mutations.ts) write as the REST API does (writes.ts), by POST only: a mutation sent by GET is a 405
 * (GraphQL over HTTP), `Allow: POST`. The answer to writes carries the last commit's `X-Svc-Commit-Ts`.
 */
import { HttpServerResponse } from "@effect/platform"
import { Cause, Clock, Effect, Exit, Runtime } from "effect"
import { execute, getOperationAST, GraphQLError, parse, specifiedRules, validate } from "graphql"
import { accessOf } from "../auth/access/Access.ts"
import { searchRestriction } from "../auth/access/conditions.ts"
import { granted, searchGranted, seen } from "../auth/access/enforce.ts"
import type { Catalog } from "../catalog/Catalog.ts"
import { CatalogService } from "../catalog/CatalogService.ts"
import { Database } from "../db/Database.ts"
import { outcomeResponse } from "../http/OperationOutcome.ts"
import type { Principal } from "../http/Principal.ts"
import type { RootHandler, RootRequest } from "../http/RootRoutes.ts"
import * as Search from "../search/Search.ts"
import { readCurrent } from "../store/reads.ts"
import { bodyText } from "../rest/RequestBody.ts"
import type { FhirError } from "../http/FhirError.ts"
import { depthLimit, resourceBudget } from "./bounds.ts"
import { referenceLoader, serverReference } from "./references.ts"
import { type GraphQLContext, schemaOf } from "./schema.ts"
import { ResourceStore } from "../store/ResourceStore.ts"
import { systemOrigin } from "../db/ChangeFeed.ts"
import { Admission } from "../http/FrontDoor.ts"
import { callerKey } from "../http/Principal.ts"
import { commitHeader } from "../rest/write.ts"
import { writeContext } from "./writes.ts"

/** The most bytes of a request body (a query and its variables). */
const maxRequestBytes = 1024 * 1024

interface GraphQLRequest {
  readonly query: string
  readonly variables: Record<string, unknown> | undefined
  readonly operationName: string | undefined
}

const notGraphQL = (message: string) => outcomeResponse("invalid", `/graphql: ${message}`, { status: 400 })

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value)

/** The request's query, variables and operation name, or the reason it is not a GraphQL request. */
const readRequest = (request: RootRequest): Effect.Effect<GraphQLRequest | string, FhirError> =>
  Effect.gen(function*() {
    if (request.http.method === "GET" || request.http.method === "HEAD") {
      const params = new URL(request.http.url, "http://localhost").searchParams
      const query = params.get("query")
      if (query === null || query.trim() === "") return "a GET gives the query as the parameter 'query'"
      const variablesText = params.get("variables")
      let variables: unknown
      if (variablesText !== null && variablesText !== "") {
        try {
          variables = JSON.parse(variablesText)
        } catch {
          return "the parameter 'variables' is not JSON"
        }
        if (!isRecord(variables)) return "the parameter 'variables' is not a JSON object"
      }
      return { query, variables: variables as Record<string, unknown> | undefined, operationName: params.get("operationName") ?? undefined }
    }
    const type = (request.http.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase()
    // Read at most maxRequestBytes (413 past them, 400 when not UTF-8), however the body is sent.
    const text = yield* bodyText(request.http, maxRequestBytes)
    if (type === "application/graphql") return { query: text, variables: undefined, operationName: undefined }
    if (type !== "application/json") return `a POST is application/json ({"query": ...}) or application/graphql, not ${type === "" ? "without a type" : type}`
    let body: unknown
    try {
      body = JSON.parse(text)
    } catch {
      return "the body is not JSON"
    }
    if (!isRecord(body) || typeof body["query"] !== "string" || body["query"].trim() === "") return "the body needs 'query', a string"
    if (body["variables"] !== undefined && body["variables"] !== null && !isRecord(body["variables"])) return "'variables' is not a JSON object"
    if (body["operationName"] !== undefined && body["operationName"] !== null && typeof body["operationName"] !== "string") return "'operationName' is not a string"
    return {
      query: body["query"],
      variables: (body["variables"] ?? undefined) as Record<string, unknown> | undefined,
      operationName: (body["operationName"] ?? undefined) as string | undefined
    }
  })

/** Reads `type/id` as `principal` may: the resource, or a failure whose message the answer's `errors` gives. */
const readAs = (db: Database["Type"], catalog: Catalog, principal: Principal, type: string, id: string) =>
  Effect.gen(function*() {
    const access = accessOf(principal)
    const rule = yield* granted(access, catalog, type, "r")
    return yield* db.withReader((sql) =>
      Effect.gen(function*() {
        yield* seen(sql, catalog, type, id, rule)
        const current = yield* readCurrent(sql, type, id)
        if (current === undefined) return yield* Effect.fail(new Error(`${type}/${id} is not known`))
        if (current.content === null) return yield* Effect.fail(new Error(`${type}/${id} was deleted`))
        return JSON.parse(current.content) as Record<string, unknown>
      })
    )
  }).pipe(
    Effect.mapError((error) => new Error(error.message)),
    Effect.catchAllDefect((defect) => Effect.fail(new Error(`reading ${type}/${id} failed: ${String(defect)}`)))
  )

/**
 * The first page of a search of `type` as `principal` may see it: the same parser, the same refusals (never
 * lenient) and the same restriction as a REST search; a refusal is a failure whose message the answer gives.
 */
const searchAs = (db: Database["Type"], catalog: Catalog, principal: Principal, type: string, params: URLSearchParams) =>
  Effect.gen(function*() {
    const access = accessOf(principal)
    yield* searchGranted(access, catalog, type, params)
    const now = yield* Clock.currentTimeMillis
    const rows = yield* db.withReader((sql) =>
      Search.run(sql, { catalog, params, lenient: false, restriction: searchRestriction(sql, access, catalog, now) }, type)
    )
    return rows.matches.map((row) => JSON.parse(row.content) as Record<string, unknown>)
  }).pipe(
    Effect.mapError((error) => new Error(error.message)),
    Effect.catchAllDefect((defect) => Effect.fail(new Error(`searching ${type} failed: ${String(defect)}`)))
  )

/** Runs `effect` for a resolver: its value, or a rejection with its own error (whose message the field's error gives). */
const resolved = <A>(runtime: Runtime.Runtime<never>, effect: Effect.Effect<A, Error>): Promise<A> =>
  Runtime.runPromiseExit(runtime)(effect).then((exit) => (Exit.isSuccess(exit) ? exit.value : Promise.reject(Cause.squash(exit.cause))))

/** What a mutation sent by GET is answered (a 405). */
const mutationByGet = Symbol("mutation by GET")

const isRead = (request: RootRequest): boolean => request.http.method === "GET" || request.http.method === "HEAD"

/**
 * An error of the answer as GraphQL writes it: one the engine threw that is not a GraphQL error (a query or
 * variables nested past what its stack holds) said in words, not as `{}`.
 */
const stated = (error: unknown): GraphQLError =>
  error instanceof GraphQLError
    ? error
    : new GraphQLError(error instanceof RangeError ? "The query or its variables nest too deeply to be read" : `The query could not be run: ${String(error)}`)

/** The answer to a GraphQL request: `{ data, errors }`, with the commit of the last write it made. */
const answer = (result: { readonly data?: unknown; readonly errors?: ReadonlyArray<unknown> }, commitTs: number | undefined) =>
  HttpServerResponse.text(JSON.stringify(result.errors === undefined ? result : { ...result, errors: result.errors.map(stated) }), {
    status: 200,
    contentType: "application/json",
    ...(commitTs === undefined ? {} : { headers: commitHeader(commitTs) })
  })

/**
 * How the mutations of `request` write (writes.ts): as its caller, with its access and origin; each write first
 * takes one resource of the query's budget (`take`). `lastCommit` is the commit of the last one made.
 */
const mutationWrites = (
  request: RootRequest,
  catalog: Catalog,
  options: { readonly base: string; readonly maxBundleEntries: number },
  runtime: Runtime.Runtime<never>,
  take: (count: number) => void
) =>
  Effect.gen(function*() {
    const store = yield* ResourceStore
    const admission = yield* Effect.serviceOption(Admission)
    let lastCommit: number | undefined
    const writes = writeContext({
      scope: { base: options.base, catalog, maxBundleEntries: options.maxBundleEntries, access: accessOf(request.principal) },
      origin: admission._tag === "Some"
        ? { actor: callerKey(request.principal), requestId: admission.value.requestId, client: admission.value.client }
        : systemOrigin,
      run: (effect) => resolved(runtime, Effect.provideService(effect, ResourceStore, store)),
      committed: (commitTs) => {
        lastCommit = Math.max(lastCommit ?? 0, commitTs)
      }
    })
    const counted = <A extends ReadonlyArray<unknown>, B>(write: (...args: A) => Promise<B>) => (...args: A): Promise<B> => {
      take(1)
      return write(...args)
    }
    return {
      context: { create: counted(writes.create), update: counted(writes.update), delete: counted(writes.delete) },
      lastCommit: () => lastCommit
    }
  })

/** `/graphql`, with or without `--smart`. */
export const graphqlRoutes = (options: {
  readonly smart: boolean
  /** `[base]`, the FHIR base of this server: references under it are resolved as relative ones. */
  readonly base: string
  /** `server.max_bundle_entries`, for a Bundle a mutation writes. */
  readonly maxBundleEntries: number
}): Readonly<Record<string, RootHandler<never, Database | CatalogService | ResourceStore>>> => ({
  "/graphql": (request) =>
    Effect.gen(function*() {
      if (options.smart && request.principal._tag !== "Authorized") {
        return outcomeResponse("login", "/graphql needs a bearer token", { status: 401, headers: { "www-authenticate": "Bearer" } })
      }
      const read = yield* Effect.either(readRequest(request))
      if (read._tag === "Left") return outcomeResponse(read.left.code, `/graphql: ${read.left.diagnostics}`, read.left.status === undefined ? {} : { status: read.left.status })
      const asked = read.right
      if (typeof asked === "string") return notGraphQL(asked)
      const catalog = yield* (yield* CatalogService).get
      const db = yield* Database
      const runtime = yield* Effect.runtime<never>()
      const references = referenceLoader(db, catalog, request.principal, (effect) => resolved(runtime, Effect.mapError(effect, (error) => new Error(error.message))))
      const budget = resourceBudget()
      const counted = <A>(count: (value: A) => number) => (value: A): A => {
        budget.take(count(value))
        return value
      }
      const writes = yield* mutationWrites(request, catalog, options, runtime, (count) => budget.take(count))
      const contextValue: GraphQLContext = {
        ...writes.context,
        resolve: (reference) => {
          const local = serverReference(catalog, reference, options.base)
          return local === undefined
            ? Promise.reject(new Error(`the reference ${JSON.stringify(reference)} is not to a resource of this server (Type/id)`))
            : references.load(local.type, local.id).then(counted(() => 1))
        },
        read: (type, id) => resolved(runtime, readAs(db, catalog, request.principal, type, id)).then(counted(() => 1)),
        search: (type, params) => resolved(runtime, searchAs(db, catalog, request.principal, type, params)).then(counted((found) => found.length))
      }
      const schema = schemaOf(catalog)
      const result = yield* Effect.promise(async () => {
        let document
        try {
          document = parse(asked.query)
        } catch (error) {
          return { errors: [error] }
        }
        if (isRead(request) && getOperationAST(document, asked.operationName)?.operation === "mutation") return mutationByGet
        const invalid = validate(schema, document, [...specifiedRules, depthLimit])
        if (invalid.length > 0) return { errors: invalid }
        return await execute({
          schema,
          document,
          contextValue,
          ...(asked.variables === undefined ? {} : { variableValues: asked.variables }),
          ...(asked.operationName === undefined ? {} : { operationName: asked.operationName })
        })
      })
      if (result === mutationByGet) {
        return outcomeResponse("not-supported", "/graphql: a mutation is sent by POST, not GET", { status: 405, headers: { allow: "POST" } })
      }
      return answer(result, writes.lastCommit())
    })
})
