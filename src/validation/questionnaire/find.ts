/**
 * Finding a Questionnaire: contained (`#id`), an entry of the Bundle that holds the resource (by url or
 * fullUrl), or given by the caller (`ValidateOptions.questionnaire`, a lookup by canonical url that the
 * server may answer from its store).
 */
import { isObject, type Json } from "../../catalog/json.ts"
import type { QuestionnaireReporter } from "./context.ts"
import { list } from "./json.ts"

/** Finds a Questionnaire (its JSON) by canonical url, `url|version` included; undefined when unknown. */
export type { QuestionnaireLookup } from "../Reporter.ts"

const isQuestionnaire = (value: unknown): value is Json => isObject(value) && value["resourceType"] === "Questionnaire"

/** By `#id` among `holder`'s contained resources, in the Bundle being walked, or through the caller's lookup. */
export const findQuestionnaire = (reference: string, holder: Json, reporter: QuestionnaireReporter): Json | undefined => {
  if (reference.startsWith("#")) {
    const id = reference.slice(1)
    return list(holder["contained"]).find((r) => r["id"] === id && isQuestionnaire(r))
  }
  const bar = reference.indexOf("|")
  const url = bar < 0 ? reference : reference.slice(0, bar)
  const version = bar < 0 ? undefined : reference.slice(bar + 1)
  const bundle = reporter.bundle
  if (bundle !== undefined) {
    for (const entry of list(bundle["entry"])) {
      const resource = entry["resource"]
      if (!isQuestionnaire(resource)) continue
      const byUrl = resource["url"] === url && (version === undefined || resource["version"] === version)
      if (byUrl || entry["fullUrl"] === reference || (typeof resource["id"] === "string" && url === `Questionnaire/${resource["id"]}`)) return resource
    }
  }
  const lookup = reporter.questionnaires
  if (lookup === undefined) return undefined
  try {
    const found = lookup(reference) ?? (version === undefined ? undefined : lookup(url))
    return isQuestionnaire(found) ? found : undefined
  } catch {
    return undefined
  }
}
