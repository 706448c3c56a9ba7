/** A failure of a FHIR interaction, rendered as an OperationOutcome with the status its issue code maps to. */
import { Schema } from "effect"
import { type IssueCode, issueCodes } from "../http/OperationOutcome.ts"

export class FhirError extends Schema.TaggedError<FhirError>()("FhirError", {
  code: Schema.Literal(...issueCodes),
  diagnostics: Schema.String,
  status: Schema.optional(Schema.Number),
  expression: Schema.optional(Schema.Array(Schema.String))
}) {
  override get message(): string {
    return this.diagnostics
  }
}

export const fail = (code: IssueCode, diagnostics: string, status?: number): FhirError =>
  new FhirError({ code, diagnostics, ...(status === undefined ? {} : { status }) })
