/**
 * What the questionnaire checks are given (the reporter, the caller's lookup, the Bundle being walked) and
 * what a response check carries down its items: types of their own, so that the modules that check a
 * response (its items, enableWhen, its answers) need not import one another for them.
 */
import type { Json } from "../../catalog/json.ts"
import type { Severity } from "../Issue.ts"
import type { Registry } from "../registry.ts"
import type { QuestionnaireLookup } from "../Reporter.ts"
import type { Indexed } from "./items.ts"

export interface QuestionnaireReporter {
  readonly registry: Registry
  readonly report: (severity: Severity, code: string, expression: string, diagnostics: string) => void
  /** Questionnaires the caller can supply (ValidateOptions.questionnaire). */
  readonly questionnaires?: QuestionnaireLookup | undefined
  /** The Bundle resource being walked that holds the resource, if any. */
  readonly bundle?: Json | undefined
}

export interface Frame {
  readonly qItem: Json
  readonly element: Json
}

export interface Context {
  readonly q: Json
  readonly qr: Json
  readonly reporter: QuestionnaireReporter
  readonly notCompleted: boolean
  readonly allItems: ReadonlyArray<Indexed>
  readonly byLinkId: ReadonlyMap<string, Indexed>
}
