/**
 * `$subsumes` (https://hl7.org/fhir/R4/codesystem-operation-subsumes.html): `GET|POST [base]/CodeSystem/$subsumes`
 * with `system` (and `version`) and `codeA`/`codeB`, or `codingA`/`codingB`, and
 * `[base]/CodeSystem/{id}/$subsumes` on that code system. The answer's `outcome` is `equivalent`,
 * `subsumes`, `subsumed-by` or `not-subsumed` from the code system's hierarchy (terminology/subsumes.ts).
 * Codings of two different code systems are refused (422): the server knows no relation between systems.
 */
import { Effect } from "effect"
import { fail } from "../http/FhirError.ts"
import type { FhirRequest } from "../rest/FhirRequest.ts"
import { resourceBody } from "../rest/respond.ts"
import { conceptOf, heldCodeSystem, heldDefinition } from "../terminology/heldCodeSystem.ts"
import { parametersOf, value } from "../terminology/parameters.ts"
import { subsumption } from "../terminology/subsumes.ts"
import { type Arguments, definedInputs, readArguments } from "./arguments.ts"
import type { OperationModule } from "./Operation.ts"
import { type CodingArgument, codingArgument, codeSystemOf, compiled, readRule, sees, storedDefinition, storedResource, text } from "./terminologyInputs.ts"

const definition = "http://hl7.org/fhir/OperationDefinition/CodeSystem-subsumes"

/** Code `A` or `B`: the parameter `code{side}` or `coding{side}`. */
const sideOf = (args: Arguments, side: "A" | "B") =>
  Effect.gen(function*() {
    const coding = yield* codingArgument(args, `coding${side}`, "$subsumes")
    const code = text(args, `code${side}`)
    if (coding !== undefined && code !== undefined) return yield* fail("invalid", `$subsumes takes either code${side} or coding${side}, not both`)
    const given: CodingArgument = coding ?? { system: undefined, version: undefined, code, display: undefined }
    if (given.code === undefined || given.code === "") return yield* fail("required", `$subsumes needs code ${side}: the parameter code${side} or coding${side}`)
    return given as CodingArgument & { readonly code: string }
  })

/** `$subsumes` on CodeSystem, or on the code system `id`. */
export const subsumes = (request: FhirRequest, id: string | undefined) =>
  Effect.gen(function*() {
    const { catalog } = request
    const rule = yield* readRule(request, "CodeSystem")
    const args = yield* readArguments(request, "$subsumes", definedInputs(catalog, definition))
    const a = yield* sideOf(args, "A")
    const b = yield* sideOf(args, "B")
    const version = text(args, "version") ?? a.version ?? b.version
    const doing = `tell how '${a.code}' and '${b.code}' relate`
    let held
    if (id !== undefined) {
      const stored = yield* storedResource(request, rule, "CodeSystem", id)
      const codeSystem = yield* compiled(storedDefinition(stored, catalog.codeSystem, codeSystemOf), `CodeSystem/${id}`)
      held = yield* heldDefinition(codeSystem, doing)
    } else {
      const system = text(args, "system") ?? a.system ?? b.system
      if (system === undefined) return yield* fail("required", "$subsumes needs the code system: the parameter system, or the system of codingA or codingB")
      const named = (version === undefined ? undefined : catalog.codeSystem(`${system}|${version}`)) ?? catalog.codeSystem(system)
      if (named !== undefined && !(yield* sees(request, rule, "CodeSystem", named))) {
        return yield* fail("not-found", `The code system '${system}' is not known to this server (it holds no CodeSystem with that url), so it cannot ${doing}`)
      }
      held = yield* heldCodeSystem(catalog, system, version, doing)
    }
    const url = held.codeSystem.url
    for (const [side, given] of [["A", a], ["B", b]] as const) {
      if (given.system !== undefined && given.system !== url) {
        return yield* fail("not-supported", `codingA and codingB must be codes of the code system ${url}: coding${side} is of ${given.system}, and this server knows no relation between code systems`, 422)
      }
    }
    const outcome = yield* subsumption(held.codeSystem, yield* conceptOf(held, a.code), yield* conceptOf(held, b.code))
    return resourceBody(parametersOf([value("outcome", "Code", outcome)]), request.negotiated, catalog)
  })

export const subsumesModule = {
  name: "subsumes",
  levels: ["type", "instance"],
  types: ["CodeSystem"],
  definition: () => definition,
  methods: ["GET", "POST"],
  checksAccess: true,
  run: (call) => subsumes(call.request, call.id)
} satisfies OperationModule<ReturnType<typeof subsumes>>
