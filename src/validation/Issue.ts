/**
 * What validation finds: one issue per problem, in the terms of OperationOutcome.issue
 * (https://hl7.org/fhir/R4/operationoutcome.html): a severity, an issue-type code, the FHIRPath-style
 * location (`Patient.name[0].given[1]`) and a readable text.
 */

export type Severity = "fatal" | "error" | "warning" | "information"

export interface Issue {
  readonly severity: Severity
  /** An issue-type code: structure, required, value, invariant, code-invalid, extension, not-found, ... */
  readonly code: string
  readonly expression: string
  readonly diagnostics: string
}

/** A resource is valid when no issue is an error or fatal. */
export const isValid = (issues: ReadonlyArray<Issue>): boolean =>
  !issues.some((issue) => issue.severity === "error" || issue.severity === "fatal")
