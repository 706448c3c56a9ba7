/** Why an XML document could not be read as a FHIR resource; `path` and `line` say where, when known. */
import { Schema } from "effect"

export class XmlProblem extends Schema.TaggedError<XmlProblem>()("XmlProblem", {
  reason: Schema.String,
  path: Schema.UndefinedOr(Schema.String),
  line: Schema.UndefinedOr(Schema.Number)
}) {
  override get message(): string {
    const at = this.path === undefined ? "" : ` at ${this.path}`
    const line = this.line === undefined ? "" : ` (line ${this.line})`
    return `${this.reason}${at}${line}`
  }
}

/** 1-based line of an offset; only computed when a problem is reported. */
export const lineAt = (text: string, offset: number): number => {
  let line = 1
  let i = text.indexOf("\n")
  while (i !== -1 && i < offset) {
    line++
    i = text.indexOf("\n", i + 1)
  }
  return line
}
