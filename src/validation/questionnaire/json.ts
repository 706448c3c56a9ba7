/**
 * The JSON helpers every part of the questionnaire checks shares: arrays and strings read defensively (a
 * resource under validation may hold anything), the extensions the checks look for, and `value[x]` read by
 * its suffix.
 */
import { isObject, type Json } from "../../catalog/json.ts"

export const ext = {
  minValue: "http://hl7.org/fhir/StructureDefinition/minValue",
  maxValue: "http://hl7.org/fhir/StructureDefinition/maxValue",
  minQuantity: "http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-minQuantity",
  maxQuantity: "http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-maxQuantity",
  maxDecimals: "http://hl7.org/fhir/StructureDefinition/maxDecimalPlaces",
  minLength: "http://hl7.org/fhir/StructureDefinition/minLength",
  regex: "http://hl7.org/fhir/StructureDefinition/regex",
  entryFormat: "http://hl7.org/fhir/StructureDefinition/entryFormat",
  mimeType: "http://hl7.org/fhir/StructureDefinition/mimeType",
  maxSize: "http://hl7.org/fhir/StructureDefinition/maxSize",
  unitOption: "http://hl7.org/fhir/StructureDefinition/questionnaire-unitOption",
  unitValueSet: "http://hl7.org/fhir/StructureDefinition/questionnaire-unitValueSet",
  referenceResource: "http://hl7.org/fhir/StructureDefinition/questionnaire-referenceResource",
  exclusive: "http://hl7.org/fhir/StructureDefinition/questionnaire-optionExclusive",
  minOccurs: "http://hl7.org/fhir/StructureDefinition/questionnaire-minOccurs",
  maxOccurs: "http://hl7.org/fhir/StructureDefinition/questionnaire-maxOccurs",
  derivationType: "http://hl7.org/fhir/StructureDefinition/questionnaire-derivationType",
  enableWhenExpression: "http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-enableWhenExpression",
  enableWhenFinnish: "http://phr.kanta.fi/StructureDefinition/fiphr-ext-questionnaire-enablewhen"
} as const

export const list = (value: unknown): ReadonlyArray<Json> => (Array.isArray(value) ? value.filter(isObject) : [])
export const text = (value: Json, key: string): string | undefined => (typeof value[key] === "string" ? (value[key] as string) : undefined)

export const extensions = (value: Json, url: string): ReadonlyArray<Json> => list(value["extension"]).filter((e) => e["url"] === url)
export const extension = (value: Json, url: string): Json | undefined => list(value["extension"]).find((e) => e["url"] === url)

/** The `value[x]` of an extension, answer or option: its type (`integer`, `Coding`) and value. */
export const valueOf = (value: Json | undefined, prefix = "value"): { readonly type: string; readonly key: string; readonly value: unknown } | undefined => {
  if (value === undefined) return undefined
  for (const key in value) {
    const name = key.charCodeAt(0) === 95 ? key.slice(1) : key
    if (!name.startsWith(prefix) || name.length === prefix.length) continue
    const suffix = name.slice(prefix.length)
    if (!/^[A-Z]/.test(suffix)) continue
    const type = complexTypes.has(suffix) ? suffix : suffix.charAt(0).toLowerCase() + suffix.slice(1)
    return { type, key: name, value: value[name] }
  }
  return undefined
}

const complexTypes = new Set(["Attachment", "Coding", "Quantity", "Reference", "Address", "Age", "Annotation", "CodeableConcept", "ContactPoint",
  "Count", "Distance", "Duration", "HumanName", "Identifier", "Money", "Period", "Range", "Ratio", "SampledData", "Signature", "Timing",
  "ContactDetail", "Contributor", "DataRequirement", "Expression", "ParameterDefinition", "RelatedArtifact", "TriggerDefinition",
  "UsageContext", "Dosage", "Meta"])

export const integerOf = (value: Json | undefined): number | undefined => {
  const v = valueOf(value)?.value
  return typeof v === "number" && Number.isInteger(v) ? v : typeof v === "string" && /^-?\d+$/.test(v) ? Number(v) : undefined
}
