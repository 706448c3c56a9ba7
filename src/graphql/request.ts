/**
 * A GraphQL request over HTTP, as GraphQL over HTTP has it (https://graphql.org/learn/serving-over-http/):
 * `GET ...?query=...&variables=...&operationName=...`, or `POST` with `application/json`
 * (`{"query", "variables", "operationName"}`) or `application/graphql` (the query as the body). The body is read
 * with the project's bounded reader; what is not a GraphQL request is said as a reason (a 400 where it is served).
 */
import type { HttpServerRequest } from "@effect/platform"
import { Effect } from "effect"
import type { FhirError } from "../http/FhirError.ts"
import { bodyText } from "../rest/RequestBody.ts"

/** The most bytes of a request body (a query and its variables). */
export const maxRequestBytes = 1024 * 1024

export interface GraphQLRequest {
  readonly query: string
  readonly variables: Record<string, unknown> | undefined
  readonly operationName: string | undefined
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value)

/** The request's query, variables and operation name, or the reason it is not a GraphQL request. */
export const readRequest = (http: HttpServerRequest.HttpServerRequest): Effect.Effect<GraphQLRequest | string, FhirError> =>
  Effect.gen(function*() {
    if (http.method === "GET" || http.method === "HEAD") {
      const params = new URL(http.url, "http://localhost").searchParams
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
    const type = (http.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase()
    // Read at most maxRequestBytes (413 past them, 400 when not UTF-8), however the body is sent.
    const text = yield* bodyText(http, maxRequestBytes)
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
