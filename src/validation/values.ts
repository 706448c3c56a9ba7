/**
 * fixed[x] and pattern[x] (https://hl7.org/fhir/R4/elementdefinition-definitions.html#ElementDefinition.fixed_x_):
 * a fixed value must be matched exactly; a pattern only in what it states (every property it has, every
 * item of each of its arrays found among the instance's items).
 */

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** Numbers compare by value: a decimal written 1.0 in JSON reads as 1. */
export const equalsFixed = (value: unknown, fixed: unknown): boolean => {
  if (value === fixed) return true
  if (Array.isArray(fixed)) {
    return Array.isArray(value) && value.length === fixed.length && fixed.every((item, i) => equalsFixed(value[i], item))
  }
  if (isObject(fixed)) {
    if (!isObject(value)) return false
    const keys = Object.keys(fixed)
    if (Object.keys(value).length !== keys.length) return false
    return keys.every((key) => equalsFixed(value[key], fixed[key]))
  }
  return false
}

export const matchesPattern = (value: unknown, pattern: unknown): boolean => {
  if (value === pattern) return true
  if (Array.isArray(pattern)) {
    const items = Array.isArray(value) ? value : [value]
    return pattern.every((wanted) => items.some((item) => matchesPattern(item, wanted)))
  }
  if (isObject(pattern)) {
    if (!isObject(value)) return false
    for (const key in pattern) if (!matchesPattern(value[key], pattern[key])) return false
    return true
  }
  return false
}
