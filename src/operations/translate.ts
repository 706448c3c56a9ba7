/**
 * `$translate` (https://hl7.org/fhir/R4/conceptmap-operation-translate.html): `GET|POST [base]/ConceptMap/$translate`
 * and `[base]/ConceptMap/{id}/$translate`. The code is `code` with `system` (and `version`), `coding`, or
 * `codeableConcept` (each of its codings). The maps used: the instance, the map given (`conceptMap`), the
 * map at `url` (with `conceptMapVersion`), or else every ConceptMap the catalog holds whose source value set
 * is `source` and target value set is `target` (each matched by canonical url; with `reverse` the other way
 * round; either left out: any), kept to those whose groups map the code's system (and `targetsystem`).
 * `dependency` (element and concept, in a Parameters body) is matched against the targets' `dependsOn`.
 * The answer is terminology/translate.ts's: `result`, `message`, and a `match` for each target found.
 */
import { Effect } from "effect"
import type { ConceptMapDef } from "../catalog/definitions.ts"
import { isObject, type Json } from "../catalog/json.ts"
import { fail } from "../http/FhirError.ts"
import type { FhirRequest } from "../rest/FhirRequest.ts"
import { readResource } from "../rest/RequestBody.ts"
import { resourceBody } from "../rest/respond.ts"
import { type Parameter, parametersOf, parts, value } from "../terminology/parameters.ts"
import { type Dependency, type TranslateCoding, translate as translateWith, type Translation } from "../terminology/translate.ts"
import { type Arguments, definedInputs, readArguments } from "./arguments.ts"
import type { OperationModule } from "./Operation.ts"
import {
  codeableConceptArgument,
  codingArgument,
  compiled,
  conceptMapOf,
  flag,
  readRule,
  resourceArgument,
  sees,
  storedDefinition,
  storedResource,
  text
} from "./terminologyInputs.ts"

const definition = "http://hl7.org/fhir/OperationDefinition/ConceptMap-translate"

/**
 * A POST's Parameters body, with its `dependency` parameters read apart: they have parts, which the
 * common reader of arguments does not take.
 */
const bodyOf = (request: FhirRequest) =>
  Effect.gen(function*() {
    const contentLength = Number(request.http.headers["content-length"] ?? "0")
    if (request.http.method !== "POST" || (contentLength === 0 && request.http.headers["transfer-encoding"] === undefined)) {
      return { body: undefined, dependencies: [] as ReadonlyArray<Dependency> }
    }
    const body = yield* readResource(request.http, request.maxBodyBytes, request.catalog)
    if (body["resourceType"] !== "Parameters") return yield* fail("invalid", `$translate takes a Parameters body, not ${String(body["resourceType"])}`)
    const all: ReadonlyArray<unknown> = Array.isArray(body["parameter"]) ? body["parameter"] : []
    const isDependency = (parameter: unknown): parameter is Json => isObject(parameter) && parameter["name"] === "dependency"
    const dependencies: Array<Dependency> = []
    for (const parameter of all.filter(isDependency)) {
      const partsOf: ReadonlyArray<unknown> = Array.isArray(parameter["part"]) ? parameter["part"] : []
      const part = (name: string) => partsOf.find((item): item is Json => isObject(item) && item["name"] === name)
      const element = part("element")?.["valueUri"]
      const concept = part("concept")?.["valueCodeableConcept"]
      const codings: ReadonlyArray<unknown> = isObject(concept) && Array.isArray(concept["coding"]) ? concept["coding"] : []
      dependencies.push({
        element: typeof element === "string" ? element : undefined,
        codings: codings.filter(isObject).map((coding) => ({
          system: typeof coding["system"] === "string" ? coding["system"] : undefined,
          code: typeof coding["code"] === "string" ? coding["code"] : undefined
        }))
      })
    }
    return { body: { ...body, parameter: all.filter((parameter) => !isDependency(parameter)) }, dependencies }
  })

/** The codes to translate. */
const codingsOf = (args: Arguments) =>
  Effect.gen(function*() {
    const coding = yield* codingArgument(args, "coding", "$translate")
    const concept = yield* codeableConceptArgument(args, "codeableConcept", "$translate")
    const code = text(args, "code")
    const given = [coding, concept, code].filter((item) => item !== undefined).length
    if (given === 0) return yield* fail("required", "$translate needs the code to translate: code (with system), coding or codeableConcept")
    if (given > 1) return yield* fail("invalid", "$translate takes one of code, coding and codeableConcept")
    const codings = concept ?? [coding ?? { system: text(args, "system"), version: text(args, "version"), code, display: undefined }]
    // A CodeableConcept's codings without a code or a system are passed over, as long as one can be translated.
    const usable = codings.flatMap((item): ReadonlyArray<TranslateCoding> =>
      item.code === undefined || item.code === "" || item.system === undefined ? [] : [{ system: item.system, version: item.version, code: item.code }])
    if (usable.length > 0) return usable
    const first = codings[0]!
    if (first.code === undefined || first.code === "") return yield* fail("invalid", "$translate was given a coding without a code")
    return yield* fail("required", `$translate needs the system of the code '${first.code}'`)
  })

const answerOf = (translation: Translation) =>
  parametersOf([
    value("result", "Boolean", translation.result),
    ...(translation.messages.length === 0 ? [] : [value("message", "String", translation.messages.join("; "))]),
    ...translation.matches.map((match): Parameter =>
      parts("match", [
        value("equivalence", "Code", match.equivalence),
        ...(match.concept === undefined ? [] : [{ name: "concept", valueCoding: match.concept }]),
        ...match.product.map((product) => parts("product", [value("element", "Uri", product.element), { name: "concept", valueCoding: product.concept }])),
        value("source", "Uri", match.source)
      ]))
  ])

/** `$translate` on ConceptMap, or with the map `id`. */
export const translate = (request: FhirRequest, id: string | undefined) =>
  Effect.gen(function*() {
    const { catalog } = request
    const rule = yield* readRule(request, "ConceptMap")
    const { body, dependencies } = yield* bodyOf(request)
    const args = yield* readArguments(request, "$translate", definedInputs(catalog, definition), body)
    if (args.values.has("dependency")) return yield* fail("invalid", "The parameter 'dependency' of $translate has parts (element, concept): it goes in a Parameters body")
    const codings = yield* codingsOf(args)
    const reverse = flag(args, "reverse")
    const given = yield* resourceArgument(args, "conceptMap", "ConceptMap", "$translate")
    const url = text(args, "url")
    let maps: ReadonlyArray<ConceptMapDef>
    if (id !== undefined) {
      maps = [yield* compiled(storedDefinition(yield* storedResource(request, rule, "ConceptMap", id), catalog.conceptMap, conceptMapOf), `ConceptMap/${id}`)]
    } else if (given !== undefined) {
      maps = [yield* compiled(conceptMapOf(given), "The ConceptMap given (parameter conceptMap)")]
    } else if (url !== undefined) {
      const version = text(args, "conceptMapVersion")
      const known = catalog.conceptMap(version === undefined ? url : `${url}|${version}`)
      if (known === undefined || !(yield* sees(request, rule, "ConceptMap", known))) {
        return yield* fail("not-found", `The ConceptMap '${url}'${version === undefined ? "" : ` version '${version}'`} is not known to this server`)
      }
      maps = [known]
    } else {
      const source = text(args, "source")
      const target = text(args, "target")
      const between = reverse ? catalog.conceptMapsBetween(target, source) : catalog.conceptMapsBetween(source, target)
      const systems = new Set(codings.map((coding) => coding.system))
      // Only maps with a group for the code's system are read further (a group without a system might map any).
      const relevant = between.filter((map) => map.systems.some((group) => {
        const from = reverse ? group.target : group.source
        return from === undefined || systems.has(from)
      }))
      maps = yield* Effect.filter(relevant, (map) => sees(request, rule, "ConceptMap", map))
    }
    // Under a restricted grant, a map that `other-map` names is not followed: each would need its own check.
    const otherMap = rule._tag === "All" ? catalog.conceptMap : () => undefined
    const translation = translateWith(maps, { codings, targetSystem: text(args, "targetsystem"), reverse, dependencies }, otherMap)
    return resourceBody(answerOf(translation), request.negotiated, catalog)
  })

export const translateModule = {
  name: "translate",
  levels: ["type", "instance"],
  types: ["ConceptMap"],
  definition: () => definition,
  methods: ["GET", "POST"],
  checksAccess: true,
  run: (call) => translate(call.request, call.id)
} satisfies OperationModule<ReturnType<typeof translate>>
