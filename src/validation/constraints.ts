/**
 * The constraints (invariants) a StructureDefinition states on its elements and its context invariants
 * (https://hl7.org/fhir/R4/elementdefinition-definitions.html#ElementDefinition.constraint,
 * https://hl7.org/fhir/R4/structuredefinition-definitions.html#StructureDefinition.contextInvariant):
 * - a constraint has a key (warning) and an expression (information: it cannot be checked without one);
 * - in the snapshot, one key means one expression everywhere (ele-1 aside), and an expression the profile
 *   itself defines parses as FHIRPath (error);
 * - in the differential, a constraint's source is the profile itself, and a key the base already uses keeps
 *   the base's expression (errors);
 * - a context invariant parses as FHIRPath (error).
 * Expressions are parsed, not type-checked against the element's types.
 */
import fhirpath from "fhirpath"
import { isObject, type Json } from "../catalog/json.ts"
import type { Reporter } from "./Reporter.ts"

/** Parse outcomes by expression text: undefined when it parses, else the parser's message. Bounded. */
const parsed = new Map<string, string | undefined>()

export const parseProblem = (expression: string): string | undefined => {
  if (parsed.has(expression)) return parsed.get(expression)
  let problem: string | undefined
  try {
    fhirpath.parse(expression)
  } catch (error) {
    problem = (error instanceof Error ? error.message : String(error)).slice(0, 300)
  }
  if (parsed.size > 5_000) parsed.clear()
  parsed.set(expression, problem)
  return problem
}

const list = (value: unknown): ReadonlyArray<unknown> => (Array.isArray(value) ? value : [])

/** The expression of each constraint key in a StructureDefinition's snapshot. */
const snapshotKeys = (sd: Json | undefined): Map<string, string> => {
  const keys = new Map<string, string>()
  const snapshot = sd?.["snapshot"]
  for (const element of isObject(snapshot) ? list(snapshot["element"]) : []) {
    if (!isObject(element)) continue
    for (const constraint of list(element["constraint"])) {
      if (isObject(constraint) && typeof constraint["key"] === "string" && typeof constraint["expression"] === "string" && !keys.has(constraint["key"])) {
        keys.set(constraint["key"], constraint["expression"])
      }
    }
  }
  return keys
}

export const structureDefinitionConstraints = (value: Json, path: string, reporter: Reporter): void => {
  const url = typeof value["url"] === "string" ? value["url"] : undefined
  const version = typeof value["version"] === "string" ? value["version"] : undefined
  const ownSource = (source: unknown): boolean =>
    source === undefined || source === url || (version !== undefined && source === `${url}|${version}`)
  let baseKeys: Map<string, string> | undefined
  const baseKey = (key: string): string | undefined => {
    if (baseKeys === undefined) {
      const base = value["baseDefinition"]
      baseKeys = typeof base === "string" ? snapshotKeys(reporter.registry.catalog.structureDefinition(base)?.resource) : new Map()
    }
    return baseKeys.get(key)
  }
  for (const part of ["snapshot", "differential"] as const) {
    const holder = value[part]
    if (!isObject(holder)) continue
    const seen = new Map<string, string>()
    list(holder["element"]).forEach((element, e) => {
      if (!isObject(element)) return
      list(element["constraint"]).forEach((constraint, c) => {
        if (!isObject(constraint)) return
        const at = `${path}.${part}.element[${e}].constraint[${c}]`
        const key = constraint["key"]
        const expression = constraint["expression"]
        if (typeof key !== "string" || key === "") {
          reporter.report("warning", "informational", at, "The constraint has no key, so the content cannot be validated against it")
          return
        }
        if (typeof expression !== "string" || expression === "") {
          reporter.report("information", "informational", at, `The constraint '${key}' has no expression, so validators cannot check it`)
          return
        }
        const earlier = seen.get(key)
        if (part === "snapshot") {
          if (earlier !== undefined && earlier !== expression && key !== "ele-1") {
            reporter.report("error", "invalid", at, `The constraint '${key}' has the expression '${expression.slice(0, 200)}', which differs from its earlier expression '${earlier.slice(0, 200)}'`)
          }
          if (ownSource(constraint["source"])) {
            const problem = parseProblem(expression)
            if (problem !== undefined) reporter.report("error", "invalid", `${at}.expression`, `Error in constraint '${key}' with expression '${expression.slice(0, 200)}': ${problem}`)
          }
        } else {
          if (!ownSource(constraint["source"])) {
            reporter.report("error", "invalid", `${at}.source`, `The constraint '${key}' of the differential has the source ${String(constraint["source"]).slice(0, 200)}: it must have none, or be this profile (${url ?? "no url"})`)
          } else {
            const inBase = baseKey(key)
            if (inBase !== undefined && inBase !== expression) {
              reporter.report("error", "invalid", at, `The constraint key '${key}' is already used by the base definition with another expression ('${inBase.slice(0, 200)}')`)
            } else if (earlier !== undefined && earlier !== expression) {
              reporter.report("error", "invalid", at, `The constraint key '${key}' is already used in this differential with another expression ('${earlier.slice(0, 200)}')`)
            }
          }
        }
        if (earlier === undefined) seen.set(key, expression)
      })
    })
  }
  list(value["contextInvariant"]).forEach((expression, i) => {
    if (typeof expression !== "string" || expression === "") return
    const problem = parseProblem(expression)
    if (problem !== undefined) reporter.report("error", "invalid", `${path}.contextInvariant[${i}]`, `Error in the context invariant '${expression.slice(0, 200)}': ${problem}`)
  })
}
