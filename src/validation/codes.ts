/**
 * Codes against the terminology the server holds (https://hl7.org/fhir/R4/terminologies.html#strength):
 * a required binding is an error when the code is outside the value set, an extensible one a warning.
 * Only what can be decided from the installed packages is judged: a value set that cannot be expanded
 * (it needs SNOMED CT, LOINC, ...) is not held against anyone. Separately, a Coding whose system the
 * server holds completely must name a code of that system, and a SNOMED CT code must be a well-formed
 * identifier (its check digit) or a postcoordinated expression.
 */
import type { Catalog } from "../catalog/Catalog.ts"
import { isObject } from "../catalog/json.ts"
import { valueSetMembers } from "../terminology/expand.ts"
import type { Binding } from "./compile.ts"

/** The codes of a value set, or why they cannot be known here. */
export type Membership =
  | { readonly known: true; readonly pairs: ReadonlySet<string>; readonly codes: ReadonlySet<string> }
  | { readonly known: false; readonly problem: string }

export const expandForBinding = (catalog: Catalog, valueSet: string): Membership => {
  const expansion = valueSetMembers(catalog, valueSet)
  if ("problem" in expansion) return { known: false, problem: expansion.problem }
  const pairs = new Set<string>()
  const codes = new Set<string>()
  for (const { system, code } of expansion.codes) {
    pairs.add(`${system}|${code}`)
    codes.add(code)
  }
  return { known: true, pairs, codes }
}

export interface CodeProblem {
  readonly severity: "error" | "warning"
  readonly diagnostics: string
  /** Appended to the element's path: `.coding[0]` and the like. */
  readonly at: string
}

const strengthSeverity = (binding: Binding): "error" | "warning" => (binding.strength === "required" ? "error" : "warning")

const shortValueSet = (url: string): string => url.replace(/\|.*$/, "")

const hasPair = (membership: { readonly pairs: ReadonlySet<string> }, coding: unknown): boolean =>
  isObject(coding) && typeof coding["system"] === "string" && typeof coding["code"] === "string" &&
  membership.pairs.has(`${coding["system"]}|${coding["code"]}`)

/** The codings of a Coding or CodeableConcept value that have a code. */
const codingsOf = (value: Record<string, unknown>, type: string): ReadonlyArray<Record<string, unknown>> => {
  if (type === "Coding") return typeof value["code"] === "string" ? [value] : []
  const codings = value["coding"]
  if (!Array.isArray(codings)) return []
  return codings.filter((coding): coding is Record<string, unknown> => isObject(coding) && typeof coding["code"] === "string")
}

/** A cross-version extension (http://hl7.org/fhir/versions.html#extensions) that carries a code of another FHIR version. */
const crossVersion = /^http:\/\/hl7\.org\/fhir\/[0-9.]+\/StructureDefinition\/extension-/

const crossVersionCode = (extensions: unknown): { readonly url: string; readonly code: string } | undefined => {
  if (!isObject(extensions) || !Array.isArray(extensions["extension"])) return undefined
  for (const extension of extensions["extension"]) {
    if (isObject(extension) && typeof extension["url"] === "string" && crossVersion.test(extension["url"])) {
      return { url: extension["url"], code: String(extension["valueCode"] ?? extension["valueString"] ?? "") }
    }
  }
  return undefined
}

/**
 * The problem of a bound value: `code`/`string`/`uri` primitives, Coding and CodeableConcept. `value` is
 * undefined for a primitive that only has extensions (`extensions` is then its `_name` object). Under a
 * required binding such a primitive has no code, and that is an error whatever its extensions say (a
 * data-absent-reason included), as the HL7 reference validator has it; only a cross-version extension that
 * carries the code of another FHIR version makes it a warning.
 */
export const checkBinding = (
  membership: Membership,
  binding: Binding,
  type: string,
  value: unknown,
  extensions?: unknown
): CodeProblem | undefined => {
  if (binding.strength !== "required" && binding.strength !== "extensible") return undefined
  const required = binding.strength === "required"
  if (type === "code" || type === "string" || type === "uri") {
    if (value === undefined) {
      if (!required) return undefined
      const alternative = crossVersionCode(extensions)
      return alternative === undefined
        ? { severity: "error", at: "", diagnostics: `No code provided, and a code is required from the value set ${shortValueSet(binding.valueSet)}` }
        : { severity: "warning", at: "", diagnostics: `Though a code is required, no code has been provided; instead, an alternative code '${alternative.code}' is provided in the cross-version extension '${alternative.url}'. Many systems will not support this extension, or may not understand or support the alternative code` }
    }
    if (typeof value !== "string" || !membership.known || membership.codes.has(value)) return undefined
    return { severity: strengthSeverity(binding), at: "", diagnostics: `The value '${value}' is not in the value set ${shortValueSet(binding.valueSet)} (${binding.strength} binding)` }
  }
  if ((type !== "Coding" && type !== "CodeableConcept") || !isObject(value)) return undefined
  if (membership.known) {
    // The common case, a code in the value set, without allocating.
    if (type === "Coding" ? hasPair(membership, value) : Array.isArray(value["coding"]) && value["coding"].some((coding) => hasPair(membership, coding))) return undefined
  }
  const codings = codingsOf(value, type)
  const valueSet = shortValueSet(binding.valueSet)
  if (codings.length === 0) {
    return required && type === "CodeableConcept"
      ? { severity: "error", at: "", diagnostics: `No code provided, and a code is required from the value set ${valueSet}` }
      : undefined
  }
  if (!membership.known) return undefined
  if (codings.every((c) => typeof c["system"] !== "string")) {
    return { severity: "warning", at: "", diagnostics: `A code without a system cannot be checked against the value set ${valueSet}` }
  }
  const shown = codings.map((c) => `${String(c["system"] ?? "")}#${String(c["code"])}`).join(", ")
  const severity = strengthSeverity(binding)
  return type === "Coding"
    ? { severity, at: "", diagnostics: `The code ${shown} is not in the value set ${valueSet} (${binding.strength} binding)` }
    : { severity, at: "", diagnostics: `None of the codes (${shown}) is in the value set ${valueSet} (${binding.strength} binding)` }
}

// SNOMED CT identifiers: https://confluence.ihtsdotools.org/display/DOCRELFMT/6.1+SCTID+Data+Type
const verhoeffD = [
  [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 2, 3, 4, 0, 6, 7, 8, 9, 5], [2, 3, 4, 0, 1, 7, 8, 9, 5, 6],
  [3, 4, 0, 1, 2, 8, 9, 5, 6, 7], [4, 0, 1, 2, 3, 9, 5, 6, 7, 8], [5, 9, 8, 7, 6, 0, 4, 3, 2, 1],
  [6, 5, 9, 8, 7, 1, 0, 4, 3, 2], [7, 6, 5, 9, 8, 2, 1, 0, 4, 3], [8, 7, 6, 5, 9, 3, 2, 1, 0, 4],
  [9, 8, 7, 6, 5, 4, 3, 2, 1, 0]
] as const
const verhoeffP = [
  [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 5, 7, 6, 2, 8, 3, 0, 9, 4], [5, 8, 0, 3, 7, 9, 6, 1, 4, 2],
  [8, 9, 1, 6, 0, 4, 3, 5, 2, 7], [9, 4, 5, 3, 1, 2, 6, 8, 7, 0], [4, 2, 8, 6, 5, 7, 3, 9, 0, 1],
  [2, 7, 9, 3, 8, 0, 6, 4, 1, 5], [7, 0, 4, 6, 9, 1, 3, 2, 5, 8]
] as const

const verhoeffValid = (digits: string): boolean => {
  let c = 0
  for (let i = 0; i < digits.length; i++) {
    const digit = digits.charCodeAt(digits.length - 1 - i) - 48
    c = verhoeffD[c]![verhoeffP[i % 8]![digit]!]!
  }
  return c === 0
}

/** Why `code` is not a SNOMED CT identifier, or undefined when it is one. */
export const sctidProblem = (code: string): string | undefined => {
  if (!/^[0-9]+$/.test(code)) return `'${code}' is not a SNOMED CT identifier (digits only)`
  if (code.length < 6 || code.length > 18) return `'${code}' is not a SNOMED CT identifier (6 to 18 digits)`
  if (code.startsWith("0")) return `'${code}' is not a SNOMED CT identifier (it starts with 0)`
  const format = code.charAt(code.length - 3)
  if (format !== "0" && format !== "1") return `'${code}' is not a SNOMED CT identifier (partition ${code.slice(-3, -1)})`
  if (!verhoeffValid(code)) return `'${code}' is not a SNOMED CT identifier (its check digit is wrong)`
  // The partition's second digit says what the id names: 0 a concept, 1 a description, 2 a relationship.
  const kind = code.charAt(code.length - 2)
  if (kind !== "0") return `'${code}' is not a SNOMED CT concept identifier (partition ${code.slice(-3, -1)}: ${kind === "1" ? "a description" : kind === "2" ? "a relationship" : "not a concept"})`
  return undefined
}

/** Postcoordinated expressions (https://confluence.ihtsdotools.org/display/DOCSCG) are not judged here. */
const looksLikeExpression = (code: string): boolean => /[:=+{}()|]/.test(code)

export const snomed = "http://snomed.info/sct"

/**
 * The problem of a code in a system: unknown in a system held completely, or not a SNOMED CT identifier.
 * A code of another version of the system than the one held is not judged.
 */
export const codeInSystemProblem = (catalog: Catalog, system: string, code: string, version?: string): string | undefined => {
  if (system === snomed) {
    if (looksLikeExpression(code)) return undefined
    const problem = sctidProblem(code.trim())
    return problem === undefined ? undefined : `Unknown code in ${snomed}: ${problem}`
  }
  const codeSystem = (version === undefined ? undefined : catalog.codeSystem(`${system}|${version}`)) ?? catalog.codeSystem(system)
  if (codeSystem === undefined || codeSystem.content !== "complete") return undefined
  if (version !== undefined && codeSystem.version !== undefined && codeSystem.version !== version) return undefined
  return codeSystem.concept(code) === undefined ? `Unknown code '${code}' in the CodeSystem '${system}'` : undefined
}
