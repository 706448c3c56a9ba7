/**
 * The errors of a GraphQL answer as FHIR GraphQL asks (https://hl7.org/fhir/R4/graphql.html, "Error Handling"):
 * each error's `message`, and an OperationOutcome in its `extensions.resource` with one issue saying the same, whose
 * code says what kind of failure it is. A field's failure carries its code (`FieldError`: `not-found`, `deleted`,
 * `forbidden`, `too-costly`, `exception`); any other is about the request (`invalid`): a query that cannot be read
 * or validated, an argument that cannot be used.
 */
import { GraphQLError } from "graphql"
import { type IssueCode, operationOutcome } from "../http/OperationOutcome.ts"

/** A field that cannot be answered, and why, as an OperationOutcome's issue code. */
export class FieldError extends Error {
  constructor(message: string, readonly code: IssueCode) {
    super(message)
  }
}

/** The code of an error: its own when it is a field's `FieldError` (or a failure that already has an outcome), else `invalid`. */
const codeOf = (error: GraphQLError): IssueCode => (error.originalError instanceof FieldError ? error.originalError.code : "invalid")

/** `error` with its OperationOutcome in `extensions.resource` (an error that already has one keeps it). */
export const withOutcome = (error: GraphQLError): GraphQLError =>
  error.extensions["resource"] !== undefined
    ? error
    : new GraphQLError(error.message, {
      ...(error.nodes === undefined ? {} : { nodes: error.nodes }),
      ...(error.source === undefined ? {} : { source: error.source }),
      ...(error.positions === undefined ? {} : { positions: error.positions }),
      ...(error.path === undefined ? {} : { path: error.path }),
      ...(error.originalError === undefined ? {} : { originalError: error.originalError }),
      extensions: { ...error.extensions, resource: operationOutcome([{ severity: "error", code: codeOf(error), diagnostics: error.message }]) }
    })

/**
 * An error of the answer as GraphQL writes it: one the engine threw that is not a GraphQL error (a query or
 * variables nested past what its stack holds) said in words, not as `{}`.
 */
export const stated = (error: unknown): GraphQLError =>
  error instanceof GraphQLError
    ? error
    : new GraphQLError(error instanceof RangeError ? "The query or its variables nest too deeply to be read" : `The query could not be run: ${String(error)}`)
