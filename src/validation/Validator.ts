/**
 * The resource validator (https://hl7.org/fhir/R4/validation.html): a pure function from a resource's JSON
 * and the catalog to the issues found. What is compiled for it (StructureDefinitions, value sets,
 * invariants) is kept per Catalog object and built on first use, never per request. Whatever a client
 * sends is answered with issues: the function does not throw.
 */
import type { Catalog } from "../catalog/Catalog.ts"
import type { Issue } from "./Issue.ts"
import { duplicateKeys, duplicateKeyText } from "./jsonKeys.ts"
import type { QuestionnaireLookup } from "./questionnaire/find.ts"
import type { FoundReference } from "./referencePolicy.ts"
import { registryFor } from "./registry.ts"
import { Walk } from "./walk.ts"

export type { Issue, Severity } from "./Issue.ts"
export { isValid } from "./Issue.ts"

export interface ValidateOptions {
  /** Profiles to check the resource against besides its meta.profile; an unknown one is an error. */
  readonly profiles?: ReadonlyArray<string>
  /** `ignore`: contained resources are not validated (nor is dom-3, which asks that they be referred to). */
  readonly contained?: "check" | "ignore"
  /**
   * Finds a Questionnaire by canonical url (`url` or `url|version`), for checking a QuestionnaireResponse
   * against the Questionnaire it names when that is neither contained nor in the same Bundle; the server
   * may answer it from its store. Without it such a response gets a warning that it was not checked.
   */
  readonly questionnaire?: QuestionnaireLookup
  /** Extension urls accepted without a definition: url prefixes (`validation.allowed_extension_domains`). */
  readonly allowedExtensionDomains?: ReadonlyArray<string>
  /**
   * Validating the examples of a specification, as the reference validator's examples mode: extensions on
   * the example domains (example.org, acme.com) are accepted without a definition. Off for what clients write.
   */
  readonly examples?: boolean
  /**
   * The findings of the vital signs profile R4 implies by an Observation's code: errors (the default, as
   * the reference validator has them) or warnings (`validation.vital_signs`).
   */
  readonly vitalSigns?: "error" | "warning"
  /**
   * The time of the check (epoch milliseconds, from the caller's clock: the write path and $validate give
   * Effect's Clock): dates more than 80 years after its year are flagged. Left out, only years before 1800 are.
   */
  readonly now?: number
}

export type { QuestionnaireLookup } from "./questionnaire/find.ts"

export const validateResource = (resource: unknown, catalog: Catalog, options?: ValidateOptions): ReadonlyArray<Issue> => {
  const walk = new Walk(registryFor(catalog), options)
  walk.questionnaires = options?.questionnaire
  try {
    walk.run(resource, "", options?.profiles ?? [])
    return walk.issues
  } catch (error) {
    const expression = typeof resource === "object" && resource !== null && "resourceType" in resource
      ? String(resource.resourceType)
      : ""
    return [
      ...walk.issues,
      {
        severity: "fatal",
        code: "exception",
        expression,
        diagnostics: `The validator could not finish: ${error instanceof Error ? error.message : String(error)}`
      }
    ]
  }
}

/** What a write needs: the issues, and the references the resource holds for the reference policy. */
export interface WriteValidation {
  readonly issues: ReadonlyArray<Issue>
  readonly references: ReadonlyArray<FoundReference>
}

export const validateForWrite = (resource: unknown, catalog: Catalog, options?: ValidateOptions): WriteValidation => {
  const steps = validateForWriteSteps(resource, catalog, options)
  for (;;) {
    const step = steps.next()
    if (step.done) return step.value
  }
}

/**
 * `validateForWrite` in steps, each yielding the units of work it did (Walk.steps), for a caller that lets
 * other requests in between (src/rest/commands.ts); the same issues and references.
 */
export function* validateForWriteSteps(resource: unknown, catalog: Catalog, options?: ValidateOptions): Generator<number, WriteValidation, undefined> {
  const walk = new Walk(registryFor(catalog), options)
  walk.questionnaires = options?.questionnaire
  try {
    yield* walk.steps(resource, "", options?.profiles ?? [])
    return { issues: walk.issues, references: walk.references }
  } catch (error) {
    return {
      issues: [...walk.issues, { severity: "fatal", code: "exception", expression: "", diagnostics: `The validator could not finish: ${error instanceof Error ? error.message : String(error)}` }],
      references: walk.references
    }
  }
}

/** Validates JSON text: text that does not parse is a fatal structure issue. */
export const validateJson = (text: string, catalog: Catalog, options?: ValidateOptions): ReadonlyArray<Issue> => {
  let resource: unknown
  try {
    resource = JSON.parse(text)
  } catch (error) {
    return [{
      severity: "fatal",
      code: "structure",
      expression: "",
      diagnostics: `The content is not valid JSON: ${error instanceof Error ? error.message : String(error)}`
    }]
  }
  const repeated = duplicateKeys(text, resource).map((duplicate): Issue =>
    ({ severity: "error", code: "invalid", expression: duplicate.path, diagnostics: duplicateKeyText(duplicate) }))
  const issues = validateResource(resource, catalog, options)
  return repeated.length === 0 ? issues : [...repeated, ...issues]
}
