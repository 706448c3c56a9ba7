/**
 * `$lookup` (https://hl7.org/fhir/R4/codesystem-operation-lookup.html): `GET|POST [base]/CodeSystem/$lookup`
 * with `system` and `code` (and `version`) or `coding`, and `[base]/CodeSystem/{id}/$lookup` (R5 defines the
 * instance level; R4 the type level only) on that code system. `displayLanguage` and `property` shape the
 * answer (terminology/lookup.ts); `date` is read and has no effect: the server holds one version of a code
 * system and answers from it. A code system not held, or held without its concepts, and an unknown code
 * are refused as terminology/heldCodeSystem.ts says.
 */
import { Effect } from "effect"
import { fail } from "../http/FhirError.ts"
import type { FhirRequest } from "../rest/FhirRequest.ts"
import { resourceBody } from "../rest/respond.ts"
import { conceptOf, heldCodeSystem, heldDefinition } from "../terminology/heldCodeSystem.ts"
import { lookupAnswer } from "../terminology/lookup.ts"
import { definedInputs, readArguments } from "./arguments.ts"
import type { OperationModule } from "./Operation.ts"
import { codingArgument, codeSystemOf, compiled, readRule, sees, storedDefinition, storedResource, text } from "./terminologyInputs.ts"

const definition = "http://hl7.org/fhir/OperationDefinition/CodeSystem-lookup"

/** `$lookup` on CodeSystem, or on the code system `id`. */
export const lookup = (request: FhirRequest, id: string | undefined) =>
  Effect.gen(function*() {
    const { catalog } = request
    const rule = yield* readRule(request, "CodeSystem")
    const args = yield* readArguments(request, "$lookup", definedInputs(catalog, definition))
    const coding = yield* codingArgument(args, "coding", "$lookup")
    if (coding !== undefined && (args.values.has("code") || args.values.has("system"))) {
      return yield* fail("invalid", "$lookup takes either code and system or coding, not both")
    }
    const system = coding?.system ?? text(args, "system")
    const version = coding?.version ?? text(args, "version")
    const code = coding?.code ?? text(args, "code")
    if (code === undefined || code === "") return yield* fail("required", "$lookup needs a code: the parameters code and system, or coding")
    const doing = `look up the code '${code}'`
    let held
    if (id !== undefined) {
      const stored = yield* storedResource(request, rule, "CodeSystem", id)
      const codeSystem = yield* compiled(storedDefinition(stored, catalog.codeSystem, codeSystemOf), `CodeSystem/${id}`)
      if (system !== undefined && system !== codeSystem.url) {
        return yield* fail("invalid", `The system '${system}' is not the code system of CodeSystem/${id} (${codeSystem.url})`)
      }
      if (version !== undefined && codeSystem.version !== undefined && version !== codeSystem.version) {
        return yield* fail("not-found", `CodeSystem/${id} is version '${codeSystem.version}' of ${codeSystem.url}, not '${version}'`)
      }
      held = yield* heldDefinition(codeSystem, doing)
    } else {
      if (system === undefined) return yield* fail("required", `$lookup needs the system of the code '${code}' (the parameter system, or coding)`)
      const named = (version === undefined ? undefined : catalog.codeSystem(`${system}|${version}`)) ?? catalog.codeSystem(system)
      if (named !== undefined && !(yield* sees(request, rule, "CodeSystem", named))) {
        return yield* fail("not-found", `The code system '${system}' is not known to this server (it holds no CodeSystem with that url), so it cannot ${doing}`)
      }
      held = yield* heldCodeSystem(catalog, system, version, doing)
    }
    const concept = yield* conceptOf(held, code)
    const answer = lookupAnswer(held.codeSystem, concept, { displayLanguage: text(args, "displayLanguage"), properties: args.values.getAll("property") })
    return resourceBody(answer, request.negotiated, catalog)
  })

export const lookupModule = {
  name: "lookup",
  levels: ["type", "instance"],
  types: ["CodeSystem"],
  definition: () => definition,
  methods: ["GET", "POST"],
  checksAccess: true,
  run: (call) => lookup(call.request, call.id)
} satisfies OperationModule<ReturnType<typeof lookup>>
