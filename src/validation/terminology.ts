/**
 * A Coding against the terminology the server holds, wherever a Coding appears
 * (https://hl7.org/fhir/R4/datatypes.html#Coding, https://hl7.org/fhir/R4/terminologies.html):
 * - `system` is an absolute URI (`http:`, `https:` or `urn:`), names a code system rather than a value set,
 *   and not a supplement (a supplement adds designations and properties to another system's codes);
 * - a code of a system held completely (`content = complete`) is one of its codes; an unknown code in a
 *   system held as a fragment is a warning; a code of a version the server does not hold is not judged;
 * - `display` is the code's display or one of its designations (compared ignoring case, as the HL7
 *   reference validator compares them): a warning otherwise;
 * - an inactive or deprecated code is a warning;
 * - codes of systems the server does not hold are checked for their form where it is known: SNOMED CT
 *   identifiers (codes.ts) and LOINC codes (digits and a mod-10 check digit).
 */
import type { Json } from "../catalog/json.ts"
import type { CodeSystemDef, ConceptDef } from "../catalog/definitions.ts"
import { conceptStatus, displaysOf } from "../terminology/concepts.ts"
import { snomed, sctidProblem } from "./codes.ts"
import type { Reporter } from "./Reporter.ts"

export const loinc = "http://loinc.org"

/** The Luhn (mod 10) check digit LOINC uses (https://loinc.org/kb/users-guide/calculating-mod-10-check-digits/). */
const mod10 = (digits: string): number => {
  let sum = 0
  for (let i = 0; i < digits.length; i++) {
    let digit = digits.charCodeAt(digits.length - 1 - i) - 48
    if (i % 2 === 0) {
      digit *= 2
      if (digit > 9) digit -= 9
    }
    sum += digit
  }
  return (10 - (sum % 10)) % 10
}

/**
 * Why `code` is not a LOINC code, or undefined when it has the form of one: a term `NNNNN-N` whose last
 * digit is the mod-10 check digit of the others, or a part, answer or group code (`LP...`, `LA...`, `LG...`).
 */
export const loincProblem = (code: string): string | undefined => {
  const match = /^(L[A-Z])?([0-9]{1,8})-([0-9])$/.exec(code)
  if (match === null) return `'${code}' is not a LOINC code (digits, a hyphen and a check digit)`
  if (match[1] === undefined && mod10(match[2]!) !== Number(match[3])) return `'${code}' is not a LOINC code (its check digit is wrong)`
  return undefined
}

/**
 * v2 table 0203 (identifier types) also has, beyond its listed codes, `NN` followed by an ISO 3166 country
 * code: the national identifier of that country (https://terminology.hl7.org/CodeSystem-v2-0203.html).
 */
const identifierTypes = "http://terminology.hl7.org/CodeSystem/v2-0203"
const nationalIdentifier = /^NN[A-Z]{2,3}$/

/** `http:`, `https:` and `urn:` systems are absolute, as the HL7 reference validator reads Coding.system. */
const absoluteSystem = (system: string): boolean =>
  system.startsWith("http:") || system.startsWith("https:") || system.startsWith("urn:")

const collapse = (text: string): string => text.trim().replace(/\s+/g, " ").toLowerCase()

/** The problem of a Coding.display for a concept, or undefined when it is one of the concept's displays. */
export const displayProblem = (system: string, concept: ConceptDef, display: string): string | undefined => {
  const displays = displaysOf(concept)
  // A concept without any display says nothing a display could be held to.
  if (displays.length === 0) return undefined
  const lower = display.toLowerCase()
  if (displays.some((d) => d.value.toLowerCase() === lower)) return undefined
  const whitespace = displays.some((d) => collapse(d.value) === collapse(display))
  const listed = displays.map((d) => `'${d.value}'${d.language === undefined ? "" : ` (${d.language})`}`)
  const valid = listed.length === 1 ? `Valid display is ${listed[0]}` : `Valid display is one of ${listed.length} choices: ${listed.slice(0, -1).join(", ")} or ${listed[listed.length - 1]}`
  return `Wrong ${whitespace ? "whitespace in Display Name" : "Display Name"} '${display}' for ${system}#${concept.code}. ${valid}`
}

const versionText = (codeSystem: CodeSystemDef): string => (codeSystem.version === undefined ? "" : ` version '${codeSystem.version}'`)

/** The code system a Coding names, in the version it names when it names one; `wrongVersion` when that version is not held. */
const resolve = (reporter: Reporter, system: string, version: string | undefined): CodeSystemDef | "wrongVersion" | undefined => {
  const catalog = reporter.registry.catalog
  if (version !== undefined) {
    const exact = catalog.codeSystem(`${system}|${version}`)
    if (exact !== undefined) return exact
  }
  const codeSystem = catalog.codeSystem(system)
  if (codeSystem === undefined) return undefined
  if (version !== undefined && codeSystem.version !== undefined && codeSystem.version !== version) return "wrongVersion"
  return codeSystem
}

/** Every check of one Coding (a rule of the Coding type, rules.ts). */
/**
 * A code of a system whose content the server does not hold (SNOMED CT, LOINC, RxNorm...: `not-present`):
 * checked for its form at most, which the warning says, as the reference validator says when it runs
 * without a terminology server. A terminology service that holds such systems would judge it instead.
 */
const notHeld = (reporter: Reporter, path: string, system: string, code: string): void => {
  reporter.report("warning", "not-supported", `${path}.code`, `The code '${code.slice(0, 80)}' could not be validated: this server does not hold the content of the code system '${system}'${system === snomed || system === loinc ? " (its form was checked)" : ""}`)
}

export const checkCoding = (coding: Json, path: string, reporter: Reporter): void => {
  const system = coding["system"]
  const code = coding["code"]
  if (typeof system !== "string") {
    if (typeof code === "string") {
      reporter.report("warning", "code-invalid", path, "A code with no system has no defined meaning, and it cannot be validated. A system should be provided")
    }
    return
  }
  if (!absoluteSystem(system)) {
    reporter.report("error", "code-invalid", `${path}.system`, `Coding.system must be an absolute reference, not a local reference ('${system}')`)
    return
  }
  if (system === snomed || system === loinc) {
    if (typeof code !== "string") return
    const problem = system === snomed ? snomedProblem(code) : loincProblem(code)
    if (problem !== undefined) reporter.report("error", "code-invalid", `${path}.code`, `Unknown code in ${system}: ${problem}`)
    else notHeld(reporter, path, system, code)
    return
  }
  const version = typeof coding["version"] === "string" ? coding["version"] : undefined
  const codeSystem = resolve(reporter, system, version)
  if (codeSystem === undefined) {
    if (reporter.registry.catalog.valueSet(system) !== undefined) {
      reporter.report("error", "code-invalid", `${path}.system`, `The Coding references a value set, not a code system ('${system}')`)
    } else if (typeof code === "string") {
      reporter.report("warning", "not-found", `${path}.system`, `A definition for CodeSystem '${system}' could not be found, so the code cannot be validated`)
    }
    return
  }
  if (codeSystem === "wrongVersion") {
    reporter.report("warning", "not-found", `${path}.system`, `A definition for CodeSystem '${system}' version '${version}' could not be found, so the code cannot be validated. Valid versions: ${reporter.registry.catalog.codeSystem(system)?.version ?? ""}`)
    return
  }
  if (codeSystem.content === "supplement") {
    reporter.report("error", "code-invalid", `${path}.system`, `CodeSystem ${system} is a supplement, so can't be used as a value in Coding.system`)
    return
  }
  if (typeof code !== "string") return
  if (codeSystem.content !== "complete" && codeSystem.content !== "fragment") {
    notHeld(reporter, path, system, code)
    return
  }
  const concept = codeSystem.concept(code)
  if (concept === undefined) {
    if (system === identifierTypes && nationalIdentifier.test(code)) return
    if (codeSystem.content === "complete") {
      reporter.report("error", "code-invalid", `${path}.code`, `Unknown code '${code}' in the CodeSystem '${system}'${versionText(codeSystem)}`)
    } else {
      reporter.report("warning", "code-invalid", `${path}.code`, `Unknown code '${code}' in the CodeSystem '${system}'${versionText(codeSystem)}: the code system is a fragment, so the code may be valid in another fragment`)
    }
    return
  }
  if (concept.code !== code) {
    reporter.report("information", "business-rule", `${path}.code`, `The code '${code}' differs from the correct code '${concept.code}' by case. Although the code system '${system}' is case insensitive, implementers are strongly encouraged to use the correct case anyway`)
  }
  const status = conceptStatus(concept)
  if (status !== undefined) {
    reporter.report("warning", "business-rule", path, status === "deprecated"
      ? `The concept '${concept.code}' is deprecated and its use should be reviewed`
      : `The concept '${concept.code}' has a status of ${status} and its use should be reviewed`)
  }
  const display = coding["display"]
  if (typeof display === "string") {
    const problem = displayProblem(system, concept, display)
    // A warning, as in the HL7 reference validator's display-warning mode: its default makes it an error,
    // which would refuse published data wholesale (Synthea writes displays of its own for HL7 codes).
    if (problem !== undefined) reporter.report("warning", "code-invalid", `${path}.display`, problem)
  }
}

/** Postcoordinated expressions (https://confluence.ihtsdotools.org/display/DOCSCG) are not judged here. */
const snomedProblem = (code: string): string | undefined =>
  /[:=+{}()|]/.test(code) ? undefined : sctidProblem(code.trim())
