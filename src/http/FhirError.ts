/** A failure of a FHIR interaction, rendered as an OperationOutcome with the status its issue code maps to. */
import { Schema } from "effect"
import { type IssueCode, issueCodes } from "./OperationOutcome.ts"

export class FhirError extends Schema.TaggedError<FhirError>()("FhirError", {
  code: Schema.Literal(...issueCodes),
  diagnostics: Schema.String,
  status: Schema.optional(Schema.Number),
  expression: Schema.optional(Schema.Array(Schema.String)),
  /** Every issue, when there are several (validation): the OperationOutcome lists these instead. */
  issues: Schema.optional(Schema.Array(Schema.Struct({
    severity: Schema.Literal("fatal", "error", "warning", "information"),
    code: Schema.String,
    diagnostics: Schema.String,
    expression: Schema.optional(Schema.Array(Schema.String))
  })))
}) {
  override get message(): string {
    return this.diagnostics
  }
}

export const fail = (code: IssueCode, diagnostics: string, status?: number): FhirError =>
  new FhirError({ code, diagnostics, ...(status === undefined ? {} : { status }) })

type ValidationIssue = { readonly severity: "fatal" | "error" | "warning" | "information"; readonly code: string; readonly expression: string; readonly diagnostics: string }

/** A 422 whose OperationOutcome lists `issues`. */
const unprocessable = (diagnostics: string, issues: ReadonlyArray<ValidationIssue>): FhirError =>
  new FhirError({
    code: "processing",
    status: 422,
    diagnostics,
    issues: issues.map((issue) => ({
      severity: issue.severity,
      code: issue.code,
      diagnostics: issue.diagnostics,
      ...(issue.expression === "" ? {} : { expression: [issue.expression] })
    }))
  })

/** A write refused because the resource is not valid (422), with every issue found, warnings included. */
export const invalidResource = (what: string, issues: ReadonlyArray<ValidationIssue>): FhirError => {
  const errors = issues.filter((issue) => issue.severity === "error" || issue.severity === "fatal")
  return unprocessable(`${what} is not valid: ${errors.length} error${errors.length === 1 ? "" : "s"}, the first: ${errors[0]?.diagnostics ?? ""}`, issues)
}

/** A write refused by the reference policy (422), with each reference that does not hold. */
export const invalidReferences = (issues: ReadonlyArray<ValidationIssue>): FhirError =>
  unprocessable(issues[0]?.diagnostics ?? "a reference does not hold", issues)
