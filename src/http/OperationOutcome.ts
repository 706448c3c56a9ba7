/**
 * Every error leaves the server as an OperationOutcome (https://hl7.org/fhir/R4/operationoutcome.html).
 * This is the one table from FHIR issue code to HTTP status.
 */
import { HttpServerResponse } from "@effect/platform"

export const issueCodes = [
  "invalid", "structure", "value", "required", "login", "forbidden", "not-found", "not-supported",
  "conflict", "deleted", "duplicate", "multiple-matches", "too-costly", "processing", "business-rule",
  "throttled", "exception", "transient", "informational"
] as const

export type IssueCode = (typeof issueCodes)[number]

export type Severity = "fatal" | "error" | "warning" | "information"

export interface Issue {
  readonly severity: Severity
  readonly code: IssueCode
  readonly diagnostics: string
  readonly expression?: ReadonlyArray<string>
}

const statusByCode: Record<IssueCode, number> = {
  invalid: 400,
  structure: 400,
  value: 400,
  required: 400,
  login: 401,
  forbidden: 403,
  "not-found": 404,
  "not-supported": 405,
  conflict: 409,
  deleted: 410,
  duplicate: 409,
  "multiple-matches": 412,
  "too-costly": 413,
  processing: 422,
  "business-rule": 422,
  throttled: 429,
  exception: 500,
  transient: 503,
  informational: 200
}

export const statusFor = (code: IssueCode): number => statusByCode[code]

export const operationOutcome = (issues: ReadonlyArray<Issue>) => ({
  resourceType: "OperationOutcome" as const,
  issue: issues.map((issue) => ({
    severity: issue.severity,
    code: issue.code,
    diagnostics: issue.diagnostics,
    ...(issue.expression ? { expression: issue.expression } : {})
  }))
})

/** An OperationOutcome response with one error issue; the status follows the issue code unless given. */
export const outcomeResponse = (
  code: IssueCode,
  diagnostics: string,
  options?: { readonly status?: number; readonly headers?: Record<string, string> }
): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.text(JSON.stringify(operationOutcome([{ severity: "error", code, diagnostics }])), {
    status: options?.status ?? statusFor(code),
    contentType: "application/fhir+json; charset=utf-8",
    ...(options?.headers ? { headers: options.headers } : {})
  })
