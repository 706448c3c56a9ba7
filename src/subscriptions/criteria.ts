/**
 * A Subscription's `criteria` (https://hl7.org/fhir/R4/subscription.html, "criteria"; interface spec, Search
 * rules 2 and 5) read by search's own parser, with its rules: repeated parameters are AND, a comma is OR, and a
 * value that cannot be read is a 400 naming the parameter. A Subscription whose criteria cannot be read is
 * refused on create and update (commands.ts calls `subscriptionProblem` for every write of a Subscription), so
 * that no stored Subscription is silently never matched. docs/subscriptions.md, "Criteria".
 */
import { Either } from "effect"
import type { Catalog } from "../catalog/Catalog.ts"
import { fail, type FhirError } from "../http/FhirError.ts"
import { parseSearch } from "../search/parse/parseSearch.ts"
import { resultCodes } from "../search/parse/result.ts"
import type { SearchRequest } from "../search/parse/SearchRequest.ts"
import { urlTextProblem } from "../validation/fhirText.ts"

/** Criteria read: the type it watches and the search every created or updated resource of it is matched with. */
export interface Criteria {
  readonly type: string
  /** As written in the Subscription. */
  readonly text: string
  readonly search: SearchRequest
}

/** The channel types this server delivers (interface spec, Subscription fields). */
export const channelTypes: ReadonlySet<string> = new Set(["rest-hook", "websocket"])

const criteriaForm = /^\/?([A-Z][A-Za-z0-9]*)(?:\?(.*))?$/s

/**
 * `Type` or `Type?query`, read with the search rules (never leniently): the criteria, or a 400 whose text names
 * each parameter that cannot be read and what was expected. Result parameters (`_count`, `_sort`,
 * `_include`...) shape a page, which a notification has none of: they are refused rather than ignored.
 */
export const readCriteria = (catalog: Catalog, criteria: unknown): Either.Either<Criteria, FhirError> => {
  const refused = (message: string) => Either.left(fail("invalid", `Subscription.criteria ${message}`, 400))
  if (typeof criteria !== "string" || criteria.trim() === "") return refused("is required: a search such as Observation?code=http://loinc.org|1234-5")
  const text = criteria.trim()
  const form = criteriaForm.exec(text)
  if (form === null) return refused(`${JSON.stringify(text)} is not a search on a resource type (Type?name=value&...)`)
  const type = form[1]!
  if (!catalog.isResourceType(type)) return refused(`${JSON.stringify(text)} names ${type}, which is not a resource type this server knows`)
  const query = form[2] ?? ""
  const unreadable = urlTextProblem(query)
  if (unreadable !== undefined) return refused(`cannot be used: ${unreadable}`)
  const params = new URLSearchParams(query)
  const result = [...new Set([...params.keys()].filter((key) => resultCodes.has(key.split(":")[0]!)))]
  if (result.length > 0) return refused(`holds ${result.join(", ")}: result parameters shape a page of results and have no place in criteria`)
  const parsed = parseSearch(type, params, catalog, { lenient: false })
  if (Either.isLeft(parsed)) {
    const problems = parsed.left
    const code = problems.some((problem) => problem.status === 400) ? "invalid" : "not-supported"
    return Either.left(fail(code, `Subscription.criteria cannot be used: ${problems.map((problem) => problem.message).join("; ")}`, 400))
  }
  return Either.right({ type, text, search: parsed.right })
}

/**
 * The 400 for a Subscription this server could never act on: criteria that cannot be read, or a channel type
 * it does not deliver. An `off` Subscription is checked too: turning it on later must not meet a refusal of
 * what was stored. What only fails a notification (no endpoint, a bad `channel.header` entry) is not refused
 * here: the spec puts the Subscription in `error` with the reason when it is notified.
 */
export const subscriptionProblem = (catalog: Catalog, resource: Readonly<Record<string, unknown>>): FhirError | undefined => {
  const criteria = readCriteria(catalog, resource["criteria"])
  if (Either.isLeft(criteria)) return criteria.left
  const channel = resource["channel"]
  const channelType = typeof channel === "object" && channel !== null ? (channel as Record<string, unknown>)["type"] : undefined
  if (typeof channelType === "string" && !channelTypes.has(channelType)) {
    return fail("not-supported", `Subscription.channel.type ${JSON.stringify(channelType)} is not delivered by this server; it delivers rest-hook and websocket`, 400)
  }
  return undefined
}
