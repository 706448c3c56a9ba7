/**
 * What a rule of a resource or data type (rules.ts) is given: where to report, the registry of what is
 * compiled, and what the walk knows around the value. Its own module, so that the rules and the walk that
 * runs them depend on it rather than on each other.
 */
import type { Json } from "../catalog/json.ts"
import type { Severity } from "./Issue.ts"
import type { FoundReference } from "./referencePolicy.ts"
import type { Registry } from "./registry.ts"

/** Finds a Questionnaire by canonical url (`url` or `url|version`). */
export type QuestionnaireLookup = (url: string) => unknown

export interface Reporter {
  readonly registry: Registry
  readonly report: (severity: Severity, code: string, expression: string, diagnostics: string) => void
  /** Questionnaires the caller can supply by canonical url (ValidateOptions.questionnaire). */
  readonly questionnaires?: QuestionnaireLookup | undefined
  /** The Bundle resource being walked that holds the current resource, if any. */
  readonly bundle?: Json | undefined
  /** The references met so far in the walk (those inside a resource are there when its rule runs). */
  readonly references: ReadonlyArray<FoundReference>
  /** The walk's options: `examples` when validating a specification's examples. */
  readonly options?: { readonly examples?: boolean | undefined } | undefined
  /** A reference of an entry resolved (or not) in the Bundle: its aggregation modes and target profiles are checked (walk.ts). */
  readonly referenceTarget?: (found: FoundReference, target: Record<string, unknown> | undefined, destination: "bundled" | "elsewhere") => void
}

export type Rule = (value: Json, path: string, reporter: Reporter) => void
