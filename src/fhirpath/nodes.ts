/**
 * What the fhirpath engine returns with `resolveInternalTypes: false`: ResourceNodes that know their FHIR
 * type and parent, or plain values computed by the expression (booleans of `exists()`, say).
 */
export interface FhirNode {
  readonly data: unknown
  readonly fhirNodeDataType: string | null
  readonly propName: string | undefined
  readonly parentResNode: FhirNode | null
}

export interface Typed {
  /** FHIR type name (`code`, `CodeableConcept`), or `boolean`/`string`/`decimal` for System values. */
  readonly type: string
  readonly data: unknown
  readonly node: FhirNode | undefined
}

const isNode = (value: unknown): value is FhirNode =>
  typeof value === "object" && value !== null && "fhirNodeDataType" in value && "parentResNode" in value

const systemTypes: Readonly<Record<string, string>> = {
  "System.String": "string",
  "System.Boolean": "boolean",
  "System.Integer": "integer",
  "System.Decimal": "decimal",
  "System.Date": "date",
  "System.DateTime": "dateTime"
}

/** fhirpath.js wraps decimals in an object (FP_Decimal) holding the number in `value`: unwrap it. */
const primitive = (data: unknown): unknown => {
  if (typeof data !== "object" || data === null || Array.isArray(data)) return data
  const number: unknown = "asStr" in data && "value" in data ? data.value : undefined
  return typeof number === "number" ? number : data
}

/** The value and FHIR type of one result of an evaluation, or undefined for what cannot be indexed. */
export const typed = (value: unknown): Typed | undefined => {
  if (isNode(value)) {
    if (value.data === undefined || value.data === null) return undefined
    const raw = value.fhirNodeDataType ?? "Element"
    return { type: systemTypes[raw] ?? raw, data: primitive(value.data), node: value }
  }
  switch (typeof value) {
    case "boolean":
      return { type: "boolean", data: value, node: undefined }
    case "string":
      return { type: "string", data: value, node: undefined }
    case "number":
      return { type: Number.isInteger(value) ? "integer" : "decimal", data: value, node: undefined }
    default: {
      const number = primitive(value)
      return typeof number === "number" ? { type: Number.isInteger(number) ? "integer" : "decimal", data: number, node: undefined } : undefined
    }
  }
}

export type Json = Readonly<Record<string, unknown>>

export const obj = (value: unknown): Json | undefined =>
  typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Json) : undefined

export const text = (value: unknown): string | undefined => (typeof value === "string" && value !== "" ? value : undefined)

export const list = (value: unknown): ReadonlyArray<unknown> => (Array.isArray(value) ? value : value === undefined ? [] : [value])

/** Extension nodes stand for their `value[x]`. */
export const extensionValue = (data: Json): Typed | undefined => {
  for (const key in data) {
    if (key.startsWith("value") && key.length > 5) {
      const type = key.slice(5)
      const fhirType = /^[A-Z][a-z]/.test(type) && !complexTypes.has(type) ? type[0]!.toLowerCase() + type.slice(1) : type
      return { type: fhirType, data: data[key], node: undefined }
    }
  }
  return undefined
}

const complexTypes = new Set([
  "Address", "Age", "Annotation", "Attachment", "CodeableConcept", "Coding", "ContactPoint", "Count", "Distance",
  "Duration", "HumanName", "Identifier", "Money", "Period", "Quantity", "Range", "Ratio", "Reference", "SampledData",
  "Signature", "Timing", "ContactDetail", "Contributor", "DataRequirement", "Expression", "ParameterDefinition",
  "RelatedArtifact", "TriggerDefinition", "UsageContext", "Dosage", "Meta"
])

/** The element path of a node below its nearest named type (`Patient.gender`, `Address.use`), for bindings. */
export const elementPath = (node: FhirNode): string | undefined => {
  const props: Array<string> = []
  let current: FhirNode = node
  while (current.parentResNode !== null) {
    if (current.propName === undefined) return undefined
    props.unshift(current.propName)
    const parentType = current.parentResNode.fhirNodeDataType
    if (parentType !== null && parentType !== "BackboneElement" && parentType !== "Element") {
      return `${parentType}.${props.join(".")}`
    }
    current = current.parentResNode
  }
  return undefined
}
