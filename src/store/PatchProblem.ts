/**
 * Why a patch was refused. `invalid`: the patch document itself is malformed (400). `processing`: a
 * well-formed patch that cannot be applied to this resource, such as a failed `test` (422). `too-costly`: a
 * patch that would grow the resource past what one patch may (413).
 */
import { Schema } from "effect"

export class PatchProblem extends Schema.TaggedError<PatchProblem>()("PatchProblem", {
  code: Schema.Literal("invalid", "processing", "too-costly"),
  diagnostics: Schema.String
}) {
  override get message(): string {
    return this.diagnostics
  }
}

export const malformedPatch = (diagnostics: string): PatchProblem => new PatchProblem({ code: "invalid", diagnostics })

export const unappliablePatch = (diagnostics: string): PatchProblem =>
  new PatchProblem({ code: "processing", diagnostics })

export const tooCostlyPatch = (diagnostics: string): PatchProblem => new PatchProblem({ code: "too-costly", diagnostics })
