/**
 * The code system an operation answers from ($lookup, $subsumes), or the refusal that says honestly why
 * it cannot answer: a code system the server does not know is a 404; one it holds without its concepts
 * (content `not-present`, as SNOMED CT in the R4 packages) a 422 `not-supported`, since the code may well
 * exist and only a terminology server that holds the system can tell; a value set's url or a supplement
 * in place of a code system a 400. An unknown code is a 404 naming the code and the system; in a code
 * system held in part (content `fragment` or `example`) it is "not known here", with a warning that the
 * full code system may have it.
 */
import { Effect } from "effect"
import type { Catalog } from "../catalog/Catalog.ts"
import type { CodeSystemDef, ConceptDef } from "../catalog/definitions.ts"
import { fail, FhirError } from "../http/FhirError.ts"
import { type Holding, holding, holdingOf, named } from "./concepts.ts"

/** A code system the server holds concepts of. */
export interface Held {
  readonly codeSystem: CodeSystemDef
  readonly partial: boolean
}

/** The refusal of `holding`, or the code system held; `doing` says what was asked ("look up the code 'x'"). */
export const heldOrRefused = (found: Holding, system: string, version: string | undefined, doing: string): Effect.Effect<Held, FhirError> => {
  switch (found._tag) {
    case "held":
      return Effect.succeed({ codeSystem: found.codeSystem, partial: found.partial })
    case "unknown":
      return Effect.fail(fail("not-found", `The code system '${system}' is not known to this server (it holds no CodeSystem with that url), so it cannot ${doing}`))
    case "valueSet":
      return Effect.fail(fail("invalid", `'${system}' is a ValueSet, not a code system`))
    case "supplement":
      return Effect.fail(fail("invalid", `The CodeSystem '${system}' is a supplement (it adds to the codes of ${found.codeSystem.resource["supplements"] === undefined ? "another code system" : String(found.codeSystem.resource["supplements"])}), not a code system with codes of its own`))
    case "otherVersion":
      return Effect.fail(fail("not-found", `This server does not hold version '${version}' of the code system '${system}' (it holds ${found.held.version ?? "a version without a version label"}), so it cannot ${doing}`))
    case "notPresent":
      return Effect.fail(fail(
        "not-supported",
        `This server holds the code system '${named(found.codeSystem)}' without its concepts (content '${found.codeSystem.content}'), so it cannot ${doing}: only a terminology server that holds the content of ${system} can`,
        422
      ))
  }
}

/** The code system `system` (in `version`) from the catalog, or the refusal. */
export const heldCodeSystem = (catalog: Catalog, system: string, version: string | undefined, doing: string): Effect.Effect<Held, FhirError> =>
  heldOrRefused(holding(catalog, system, version), system, version, doing)

/** A code system given as a resource (an instance, or a parameter), or the refusal. */
export const heldDefinition = (codeSystem: CodeSystemDef, doing: string): Effect.Effect<Held, FhirError> =>
  heldOrRefused(holdingOf(codeSystem), codeSystem.url, undefined, doing)

/** The concept `code` of `held`, or the 404 that names the code and the system. */
export const conceptOf = (held: Held, code: string): Effect.Effect<ConceptDef, FhirError> => {
  const concept = held.codeSystem.concept(code)
  if (concept !== undefined) return Effect.succeed(concept)
  const diagnostics = `The code '${code}' is not in the code system '${named(held.codeSystem)}'`
  if (!held.partial) return Effect.fail(fail("not-found", diagnostics))
  return Effect.fail(new FhirError({
    code: "not-found",
    diagnostics: `The code '${code}' is not known here: this server holds the code system '${named(held.codeSystem)}' only in part`,
    issues: [
      { severity: "error", code: "not-found", diagnostics: `The code '${code}' is not known here: this server holds the code system '${named(held.codeSystem)}' only in part` },
      {
        severity: "warning",
        code: "not-found",
        diagnostics: `The code system's content is '${held.codeSystem.content}': the code may exist in the full code system '${held.codeSystem.url}'`
      }
    ]
  }))
}
