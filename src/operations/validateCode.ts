/**
 * `$validate-code` on ValueSet (https://hl7.org/fhir/R4/valueset-operation-validate-code.html) and on
 * CodeSystem (https://hl7.org/fhir/R4/codesystem-operation-validate-code.html), `GET|POST` at type and
 * instance level. The coded value is `code` with `system` (`systemVersion` on ValueSet, `version` on
 * CodeSystem) and `display`, or `coding`, or `codeableConcept`; what it is checked against is the
 * instance, the resource given (`valueSet`, `codeSystem`), the `url` (with `valueSetVersion`), or on
 * ValueSet a `context` naming an element with a binding (`[StructureDefinition url]#[path]`, or
 * `Type.path` of a base type). On CodeSystem `system` is read as `url` too (R4's definition has no `system`;
 * without either, the code's own system is the one). `date` is read and has no effect. The verdict is
 * terminology/validateCode.ts's; a value set or code system that is not known (or not one the caller may
 * read) is a 404.
 */
import { Effect } from "effect"
import type { Catalog } from "../catalog/Catalog.ts"
import type { ValueSetDef } from "../catalog/definitions.ts"
import { fail } from "../http/FhirError.ts"
import type { FhirRequest } from "../rest/FhirRequest.ts"
import { resourceBody } from "../rest/respond.ts"
import {
  codingInCodeSystem,
  codingInValueSet,
  type CodingInput,
  combine,
  type ValidateOptions,
  verdictParameters
} from "../terminology/validateCode.ts"
import { type Arguments, definedInputs, type InputParameter, readArguments, withExtras } from "./arguments.ts"
import type { OperationModule } from "./Operation.ts"
import {
  codeableConceptArgument,
  codingArgument,
  codeSystemOf,
  compiled,
  flag,
  givenUrl,
  readRule,
  resourceArgument,
  sees,
  storedDefinition,
  storedResource,
  text,
  valueSetOf
} from "./terminologyInputs.ts"

const definitions = {
  ValueSet: "http://hl7.org/fhir/OperationDefinition/ValueSet-validate-code",
  CodeSystem: "http://hl7.org/fhir/OperationDefinition/CodeSystem-validate-code"
} as const

type On = keyof typeof definitions

const codeSystemExtras: ReadonlyArray<InputParameter> = [{ name: "system", type: "uri", min: 0, max: "1" }]

/** The codings to validate, each with the path its findings name: `Coding`, or `CodeableConcept.coding[i]`. */
const codingsOf = (args: Arguments, on: On) =>
  Effect.gen(function*() {
    const coding = yield* codingArgument(args, "coding", "$validate-code")
    const concept = yield* codeableConceptArgument(args, "codeableConcept", "$validate-code")
    const code = text(args, "code")
    const given = [coding, concept, code].filter((item) => item !== undefined).length
    if (given === 0) return yield* fail("required", "$validate-code needs what to validate: code (with system), coding or codeableConcept")
    if (given > 1) return yield* fail("invalid", "$validate-code takes one of code, coding and codeableConcept")
    if (concept !== undefined) return concept.map((item, i) => ({ coding: item as CodingInput, path: `CodeableConcept.coding[${i}]` }))
    const display = text(args, "display")
    if (coding !== undefined) return [{ coding: display === undefined ? coding : { ...coding, display: coding.display ?? display }, path: "Coding" }]
    const system = on === "ValueSet" ? text(args, "system") : undefined
    const version = text(args, on === "ValueSet" ? "systemVersion" : "version")
    return [{ coding: { system, version, code, display } satisfies CodingInput, path: "Coding" }]
  })

/** The value set a `context` names: the binding of an element of a StructureDefinition. */
const contextValueSet = (catalog: Catalog, context: string) => {
  const hash = context.indexOf("#")
  const structure = hash >= 0 ? catalog.structureDefinition(context.slice(0, hash)) : catalog.structureDefinitionForType(context.split(".")[0]!)
  const path = hash >= 0 ? context.slice(hash + 1) : context
  const element = structure?.snapshot?.element.find((item) => item.id === path || item.path === path)
  const valueSet = element?.binding?.valueSet
  return valueSet === undefined
    ? Effect.fail(fail("not-found", `The context '${context}' names no element with a value set binding that this server knows`))
    : Effect.succeed(valueSet.replace(/\|.*$/, ""))
}

/** The catalog with one more value set: one given in the request, or written since the catalog was built. */
const withValueSet = (catalog: Catalog, valueSet: ValueSetDef): Catalog => ({
  ...catalog,
  valueSet: (url) => (url === valueSet.url || url === `${valueSet.url}|${valueSet.version ?? ""}` ? valueSet : catalog.valueSet(url))
})

const onValueSet = (request: FhirRequest, id: string | undefined, args: Arguments) =>
  Effect.gen(function*() {
    const { catalog } = request
    const rule = yield* readRule(request, "ValueSet")
    const given = yield* resourceArgument(args, "valueSet", "ValueSet", "$validate-code")
    const url = text(args, "url")
    const context = text(args, "context")
    let valueSet: ValueSetDef
    if (id !== undefined) {
      valueSet = yield* compiled(storedDefinition(yield* storedResource(request, rule, "ValueSet", id), catalog.valueSet, valueSetOf), `ValueSet/${id}`)
    } else if (given !== undefined) {
      valueSet = yield* compiled(valueSetOf(given), "The ValueSet given (parameter valueSet)")
    } else {
      if (url === undefined && context === undefined) return yield* fail("required", "$validate-code on ValueSet needs the value set: url, valueSet, context, or an instance ([base]/ValueSet/{id}/$validate-code)")
      const canonical = url ?? (yield* contextValueSet(catalog, context!))
      const version = text(args, "valueSetVersion")
      const known = catalog.valueSet(version === undefined ? canonical : `${canonical}|${version}`)
      if (known === undefined || !(yield* sees(request, rule, "ValueSet", known))) {
        return yield* fail("not-found", `The ValueSet '${canonical}'${version === undefined ? "" : ` version '${version}'`} is not known to this server`)
      }
      valueSet = known
    }
    const held = catalog.valueSet(valueSet.version === undefined ? valueSet.url : `${valueSet.url}|${valueSet.version}`) === valueSet
    const within = held ? catalog : withValueSet(catalog, valueSet)
    const label = valueSet.url === givenUrl("ValueSet") ? "given in the request" : valueSet.version === undefined ? valueSet.url : `${valueSet.url}|${valueSet.version}`
    const options = optionsOf(args)
    const codings = yield* codingsOf(args, "ValueSet")
    return combine(codings.map(({ coding, path }) => codingInValueSet(within, valueSet.url, label, coding, options, path)))
  })

const onCodeSystem = (request: FhirRequest, id: string | undefined, args: Arguments) =>
  Effect.gen(function*() {
    const { catalog } = request
    const rule = yield* readRule(request, "CodeSystem")
    const given = yield* resourceArgument(args, "codeSystem", "CodeSystem", "$validate-code")
    const codings = yield* codingsOf(args, "CodeSystem")
    let codeSystem
    if (id !== undefined) {
      codeSystem = yield* compiled(storedDefinition(yield* storedResource(request, rule, "CodeSystem", id), catalog.codeSystem, codeSystemOf), `CodeSystem/${id}`)
    } else if (given !== undefined) {
      codeSystem = yield* compiled(codeSystemOf(given), "The CodeSystem given (parameter codeSystem)")
    } else {
      const url = text(args, "url") ?? text(args, "system") ?? codings[0]?.coding.system
      if (url === undefined) return yield* fail("required", "$validate-code on CodeSystem needs the code system: url, codeSystem, a coding with a system, or an instance ([base]/CodeSystem/{id}/$validate-code)")
      const known = catalog.codeSystem(url)
      if (known === undefined || !(yield* sees(request, rule, "CodeSystem", known))) {
        return yield* fail("not-found", `The CodeSystem '${url}' is not known to this server`)
      }
      codeSystem = known
    }
    const options = optionsOf(args)
    return combine(codings.map(({ coding, path }) => codingInCodeSystem(catalog, codeSystem, coding, options, path)))
  })

const optionsOf = (args: Arguments): ValidateOptions => ({ abstractAllowed: flag(args, "abstract"), displayLanguage: text(args, "displayLanguage") })

/** `$validate-code` on `on` (ValueSet or CodeSystem), or on its instance `id`. */
export const validateCode = (request: FhirRequest, on: On, id: string | undefined) =>
  Effect.gen(function*() {
    const defined = definedInputs(request.catalog, definitions[on])
    const args = yield* readArguments(request, "$validate-code", on === "CodeSystem" ? withExtras(defined, codeSystemExtras) : defined)
    const verdict = on === "ValueSet" ? yield* onValueSet(request, id, args) : yield* onCodeSystem(request, id, args)
    return resourceBody(verdictParameters(verdict), request.negotiated, request.catalog)
  })

export const validateCodeModule = {
  name: "validate-code",
  levels: ["type", "instance"],
  types: ["ValueSet", "CodeSystem"],
  definition: (type) => definitions[type === "CodeSystem" ? "CodeSystem" : "ValueSet"],
  methods: ["GET", "POST"],
  checksAccess: true,
  run: (call) => validateCode(call.request, call.type === "CodeSystem" ? "CodeSystem" : "ValueSet", call.id)
} satisfies OperationModule<ReturnType<typeof validateCode>>
