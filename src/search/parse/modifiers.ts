/**
 * Which modifier applies to which parameter type, as R4 lists them.
 * https://hl7.org/fhir/R4/search.html#modifiers
 * The catalog's `SearchParameter.modifier` is not consulted: R4 core leaves it empty on nearly every parameter.
 */
import type { Catalog, SearchParamType } from "../../catalog/Catalog.ts"
import { unknownModifier } from "./problems.ts"
import { type Modifier, type Parameter, parameterType, type Problem } from "./SearchRequest.ts"

type Named = Exclude<Modifier, { readonly kind: "type" }>["kind"]

const byType: Readonly<Record<SearchParamType, ReadonlyArray<Named>>> = {
  string: ["missing", "exact", "contains"],
  token: ["missing", "text", "not", "above", "below", "in", "not-in", "of-type"],
  reference: ["missing", "identifier", "above", "below"],
  uri: ["missing", "above", "below"],
  date: ["missing"],
  number: ["missing"],
  quantity: ["missing"],
  // R4: "modifiers are not supported on composite parameters".
  composite: [],
  special: ["missing"]
}

/** `_id` is an id, not a coded value: only `:missing` and `:not` make sense on it. */
const idModifiers: ReadonlyArray<Named> = ["missing", "not"]

export const allowedModifiers = (param: Parameter): ReadonlyArray<Named> =>
  param === "_id" ? idModifiers : byType[parameterType(param)]

/**
 * A reference parameter that names no target, or every resource type, can point at anything.
 * R4 writes Reference(Any) out in full: every resource type but Parameters, which is never stored.
 */
export const pointsAtAnything = (param: Parameter, catalog: Catalog): boolean => {
  if (typeof param === "string") return false
  const targets = param.target
  if (targets.length === 0 || targets.includes("Resource") || targets.includes("DomainResource")) return true
  return catalog.resourceTypes.length > 1 &&
    catalog.resourceTypes.every((type) => type === "Parameters" || targets.includes(type))
}

/** The modifier after the parameter's code, or the problem that refuses it. */
export const readModifier = (key: string, value: string, text: string, param: Parameter, catalog: Catalog): Modifier | Problem => {
  const allowed = allowedModifiers(param)
  const named = allowed.find((m) => m === text)
  if (named !== undefined) return { kind: named }
  if (typeof param !== "string" && param.type === "reference" && catalog.isResourceType(text)) {
    if (pointsAtAnything(param, catalog) || param.target.includes(text)) return { kind: "type", type: text }
  }
  const listed = typeof param !== "string" && param.type === "reference" ? [...allowed, "[type]"] : allowed
  return unknownModifier(key, value, text, listed)
}
