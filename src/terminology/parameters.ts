/** The Parameters resource (https://hl7.org/fhir/R4/parameters.html) the terminology operations answer with. */

export type Parameter = { readonly name: string } & Readonly<Record<string, unknown>>

// A type rather than an interface, so that it is a Record<string, unknown> where a resource is taken.
export type Parameters = {
  readonly resourceType: "Parameters"
  readonly parameter: ReadonlyArray<Parameter>
}

export const parametersOf = (parameter: ReadonlyArray<Parameter>): Parameters => ({ resourceType: "Parameters", parameter })

/** A parameter of a primitive type: `value(name, "Code", "male")` is `{ name, valueCode: "male" }`. */
export const value = (name: string, type: string, given: string | boolean | number): Parameter => ({ name, [`value${type}`]: given })

/** A parameter with parts. */
export const parts = (name: string, part: ReadonlyArray<Parameter>): Parameter => ({ name, part })

/** A Coding without the fields it does not have. */
export const coding = (fields: { readonly system?: string | undefined; readonly version?: string | undefined; readonly code?: string | undefined; readonly display?: string | undefined }): Record<string, string> => {
  const out: Record<string, string> = {}
  if (fields.system !== undefined) out["system"] = fields.system
  if (fields.version !== undefined) out["version"] = fields.version
  if (fields.code !== undefined) out["code"] = fields.code
  if (fields.display !== undefined) out["display"] = fields.display
  return out
}
