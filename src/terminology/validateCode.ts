/**
 * Whether a coded value is valid (https://hl7.org/fhir/R4/valueset-operation-validate-code.html,
 * https://hl7.org/fhir/R4/codesystem-operation-validate-code.html): a code of a code system, or a member
 * of a value set (its expansion, terminology/expand.ts), with the code system's word on the concept:
 * - an unknown code of a code system held completely, a code outside the value set, and an abstract
 *   (`notSelectable`) concept when `abstract` is not true make `result` false;
 * - a display that is not one of the concept's, and an inactive or deprecated concept, are warnings: the
 *   result stays true (as the server's validation treats them, docs/validation.md);
 * - what cannot be decided here (a code of a system held without its content, such as SNOMED CT, or not
 *   held at all; a value set that cannot be expanded without such content; an unknown code of a system held
 *   in part) is `result` false with a message saying that it could not be validated, never a claim that
 *   the code is wrong: `cause` names the code system the server lacks.
 * A CodeableConcept is valid when one of its codings is.
 */
import type { Catalog } from "../catalog/Catalog.ts"
import type { CodeSystemDef } from "../catalog/definitions.ts"
import { displayProblem } from "../validation/terminology.ts"
import { type Holding, holding, holdingOf, isAbstract, conceptStatus, displayIn, named } from "./concepts.ts"
import { valueSetMembers } from "./expand.ts"
import { type Parameters, parametersOf, value } from "./parameters.ts"

export interface CodingInput {
  readonly system?: string | undefined
  readonly version?: string | undefined
  readonly code?: string | undefined
  readonly display?: string | undefined
}

export interface ValidateOptions {
  /** The `abstract` parameter: abstract concepts are valid only when it is true. */
  readonly abstractAllowed: boolean
  readonly displayLanguage: string | undefined
}

export interface Finding {
  readonly severity: "error" | "warning" | "information"
  /** The FHIR issue type (https://hl7.org/fhir/R4/valueset-issue-type.html). */
  readonly code: "code-invalid" | "not-found" | "not-supported" | "business-rule" | "invalid" | "informational"
  readonly text: string
  readonly expression: string
}

/** The verdict on one coding. */
export interface CodingVerdict {
  readonly valid: boolean
  readonly display: string | undefined
  readonly findings: ReadonlyArray<Finding>
  /** The code system this server would need to decide (a `false` that is not a judgement of the code). */
  readonly cause: string | undefined
}

/** The verdict on what was given: `result`, `message`, `display` and the issues behind the message. */
export interface Verdict {
  readonly result: boolean
  readonly display: string | undefined
  readonly findings: ReadonlyArray<Finding>
  readonly causes: ReadonlyArray<string>
}

const order = { error: 0, warning: 1, information: 2 } as const

/** The message of a verdict: its findings, the most severe first. */
export const messageOf = (findings: ReadonlyArray<Finding>): string | undefined =>
  findings.length === 0 ? undefined : [...findings].sort((a, b) => order[a.severity] - order[b.severity]).map((finding) => finding.text).join("; ")

const codeText = (coding: CodingInput): string => `${coding.system === undefined ? "" : `${coding.system}#`}${coding.code ?? ""}`

/** The code system's verdict on a coding whose system the server holds as `held`. */
const inCodeSystem = (held: Holding, coding: CodingInput & { readonly system: string; readonly code: string }, options: ValidateOptions, path: string): CodingVerdict => {
  const { system, code } = coding
  const undecided = (finding: Finding, cause: string): CodingVerdict => ({ valid: false, display: undefined, findings: [finding], cause })
  const invalid = (finding: Finding): CodingVerdict => ({ valid: false, display: undefined, findings: [finding], cause: undefined })
  switch (held._tag) {
    case "unknown":
      return undecided({ severity: "warning", code: "not-found", expression: `${path}.system`, text: `The code '${code}' could not be validated: the code system '${system}' is not known to this server` }, system)
    case "valueSet":
      return invalid({ severity: "error", code: "invalid", expression: `${path}.system`, text: `'${system}' is a ValueSet, not a code system` })
    case "supplement":
      return invalid({ severity: "error", code: "invalid", expression: `${path}.system`, text: `The CodeSystem '${system}' is a supplement, which cannot be the system of a code` })
    case "otherVersion":
      return undecided({
        severity: "warning",
        code: "not-found",
        expression: `${path}.version`,
        text: `The code '${code}' could not be validated: this server does not hold version '${coding.version}' of the code system '${system}' (it holds ${held.held.version ?? "a version without a label"})`
      }, `${system}|${coding.version}`)
    case "notPresent":
      return undecided({
        severity: "warning",
        code: "not-supported",
        expression: `${path}.code`,
        text: `The code '${code}' could not be validated: this server holds the code system '${named(held.codeSystem)}' without its content (content '${held.codeSystem.content}')`
      }, system)
    case "held":
      break
  }
  const codeSystem = held.codeSystem
  const concept = codeSystem.concept(code)
  if (concept === undefined) {
    return held.partial
      ? undecided({
        severity: "warning",
        code: "not-found",
        expression: `${path}.code`,
        text: `The code '${code}' is not known here: this server holds the code system '${named(codeSystem)}' only in part (content '${codeSystem.content}'), and the full code system may have it`
      }, system)
      : invalid({ severity: "error", code: "code-invalid", expression: `${path}.code`, text: `Unknown code '${code}' in the CodeSystem '${named(codeSystem)}'` })
  }
  const findings: Array<Finding> = []
  let valid = true
  if (concept.code !== code) {
    findings.push({ severity: "information", code: "business-rule", expression: `${path}.code`, text: `The code '${code}' differs from the correct code '${concept.code}' by case` })
  }
  if (isAbstract(concept.json) && !options.abstractAllowed) {
    valid = false
    findings.push({
      severity: "error",
      code: "business-rule",
      expression: `${path}.code`,
      text: `The concept '${concept.code}' of '${codeSystem.url}' is abstract (not selectable): it is valid only where abstract concepts are allowed (the parameter 'abstract' true)`
    })
  }
  const status = conceptStatus(concept)
  if (status !== undefined) {
    findings.push({
      severity: "warning",
      code: "business-rule",
      expression: `${path}.code`,
      text: status === "deprecated" ? `The concept '${concept.code}' is deprecated` : `The concept '${concept.code}' has a status of ${status}`
    })
  }
  if (coding.display !== undefined) {
    const problem = displayProblem(system, concept, coding.display)
    if (problem !== undefined) findings.push({ severity: "warning", code: "code-invalid", expression: `${path}.display`, text: problem })
  }
  return { valid, display: displayIn(concept, options.displayLanguage), findings, cause: undefined }
}

const withCode = (coding: CodingInput, path: string): CodingVerdict | (CodingInput & { readonly code: string }) =>
  coding.code === undefined || coding.code === ""
    ? { valid: false, display: undefined, findings: [{ severity: "error", code: "invalid", expression: path, text: "The coding has no code" }], cause: undefined }
    : coding as CodingInput & { readonly code: string }

const isVerdict = (value: unknown): value is CodingVerdict => typeof value === "object" && value !== null && "findings" in value

/** A coding against the code system `codeSystem` (CodeSystem/$validate-code). */
export const codingInCodeSystem = (catalog: Catalog, codeSystem: CodeSystemDef, coding: CodingInput, options: ValidateOptions, path: string): CodingVerdict => {
  const given = withCode(coding, path)
  if (isVerdict(given)) return given
  if (given.system !== undefined && given.system !== codeSystem.url) {
    return {
      valid: false,
      display: undefined,
      findings: [{ severity: "error", code: "invalid", expression: `${path}.system`, text: `The coding's system '${given.system}' is not the code system '${codeSystem.url}'` }],
      cause: undefined
    }
  }
  const version = given.version
  const held = version === undefined || codeSystem.version === undefined || version === codeSystem.version
    ? holdingOf(codeSystem)
    : holding(catalog, codeSystem.url, version)
  return inCodeSystem(held, { ...given, system: codeSystem.url }, options, path)
}

/** The display a value set's compose gives a code, when it lists it. */
const composedDisplay = (catalog: Catalog, valueSetUrl: string, system: string, code: string): string | undefined => {
  for (const include of catalog.valueSet(valueSetUrl)?.compose?.include ?? []) {
    if (include.system !== system) continue
    const listed = include.concept.find((concept) => concept.code === code)
    if (listed?.display !== undefined) return listed.display
  }
  return undefined
}

/**
 * A coding against the value set at `valueSetUrl` in `catalog` (ValueSet/$validate-code). `label` names the
 * value set in messages. A coding without a system is read as the one system of the value set that has its code.
 */
export const codingInValueSet = (catalog: Catalog, valueSetUrl: string, label: string, coding: CodingInput, options: ValidateOptions, path: string): CodingVerdict => {
  const given = withCode(coding, path)
  if (isVerdict(given)) return given
  const expansion = valueSetMembers(catalog, valueSetUrl)
  if ("problem" in expansion) {
    const system = given.system
    const held = system === undefined ? undefined : holding(catalog, system, given.version)
    return {
      valid: false,
      display: undefined,
      findings: [{ severity: "warning", code: "not-supported", expression: `${path}.code`, text: `The code '${codeText(given)}' could not be validated against the value set ${label}: ${expansion.problem}` }],
      cause: held !== undefined && held._tag !== "held" ? system : undefined
    }
  }
  const findings: Array<Finding> = []
  let system = given.system
  if (system === undefined) {
    const systems = expansion.systemsOf(given.code)
    if (systems.length !== 1) {
      return {
        valid: false,
        display: undefined,
        findings: [{
          severity: "error",
          code: "invalid",
          expression: `${path}.system`,
          text: systems.length === 0
            ? `The code '${given.code}' (no system given) is not in the value set ${label}`
            : `The code '${given.code}' has no system, and the value set ${label} has it in ${systems.length} systems (${systems.join(", ")}): a system is needed`
        }],
        cause: undefined
      }
    }
    system = systems[0]!
    findings.push({ severity: "information", code: "informational", expression: `${path}.system`, text: `No system was given: the code '${given.code}' is read as ${system}#${given.code}, the one code of that value in the value set ${label}` })
  }
  const held = holding(catalog, system, given.version)
  const fromSystem = inCodeSystem(held, { ...given, system }, options, path)
  const caseInsensitive = held._tag === "held" && held.codeSystem.caseSensitive === false
  const member = expansion.has(system, given.code) || (caseInsensitive && expansion.systemsOf(given.code, true).includes(system))
  if (!member) {
    return {
      valid: false,
      display: undefined,
      findings: [
        { severity: "error", code: "code-invalid", expression: `${path}.code`, text: `The code '${system}#${given.code}' is not in the value set ${label}` },
        ...fromSystem.findings.filter((finding) => finding.severity === "error")
      ],
      cause: undefined
    }
  }
  if (held._tag === "held" && !(held.partial && fromSystem.cause !== undefined)) {
    // The code system judges the concept: an unknown code of a complete system is wrong even if a value set lists it.
    return { ...fromSystem, findings: [...findings, ...fromSystem.findings] }
  }
  // The value set lists the code, and the code system cannot say more: its display is the value set's, if any.
  const display = composedDisplay(catalog, valueSetUrl, system, given.code)
  if (given.display !== undefined && display !== undefined && given.display.toLowerCase() !== display.toLowerCase()) {
    findings.push({ severity: "warning", code: "code-invalid", expression: `${path}.display`, text: `Wrong Display Name '${given.display}' for ${system}#${given.code}. Valid display is '${display}'` })
  }
  findings.push({
    severity: "information",
    code: "not-supported",
    expression: `${path}.code`,
    text: `The code is in the value set ${label}; its code system '${system}' is not held completely here, so the concept itself (its display, status) was not checked`
  })
  return { valid: true, display, findings, cause: undefined }
}

/** The verdict on several codings (a CodeableConcept): valid when one is; the first valid one gives the display. */
export const combine = (verdicts: ReadonlyArray<CodingVerdict>): Verdict => {
  const valid = verdicts.find((verdict) => verdict.valid)
  const causes = [...new Set(verdicts.flatMap((verdict) => (verdict.cause === undefined ? [] : [verdict.cause])))]
  if (valid === undefined) {
    return { result: false, display: undefined, findings: verdicts.flatMap((verdict) => verdict.findings), causes }
  }
  // The concept is valid: the other codings' errors are no longer errors of the whole.
  const others = verdicts.filter((verdict) => verdict !== valid).flatMap((verdict) => verdict.findings.filter((finding) => finding.severity !== "error"))
  return { result: true, display: valid.display, findings: [...valid.findings, ...others], causes: [] }
}

/**
 * The answer's Parameters: `result`, `message` and `display` (R4), `issues` (the findings as an
 * OperationOutcome, as R5 names it) and `x-caused-by-unknown-system` for each code system the server would
 * need to decide (the name other terminology servers give it), so that a client can tell "not valid" from
 * "could not be validated".
 */
export const verdictParameters = (verdict: Verdict): Parameters => {
  const message = messageOf(verdict.findings)
  return parametersOf([
    value("result", "Boolean", verdict.result),
    ...(message === undefined ? [] : [value("message", "String", message)]),
    ...(verdict.display === undefined ? [] : [value("display", "String", verdict.display)]),
    ...verdict.causes.map((cause) => value("x-caused-by-unknown-system", "Canonical", cause)),
    ...(verdict.findings.length === 0 ? [] : [{
      name: "issues",
      resource: {
        resourceType: "OperationOutcome",
        issue: verdict.findings.map((finding) => ({ severity: finding.severity, code: finding.code, diagnostics: finding.text, expression: [finding.expression] }))
      }
    }])
  ])
}
