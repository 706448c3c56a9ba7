/**
 * The operations the FHIR API serves (https://hl7.org/fhir/R4/operations.html): one module each, found by
 * name and level (system `[base]/$op`, type `[base]/{type}/$op`, instance `[base]/{type}/{id}/$op`, and
 * for some a version of an instance, `[base]/{type}/{id}/_history/{vid}/$op`) and the resource type. An
 * operation of the interface that a later version serves (spec: Operations) is a 501 naming it; any other
 * `$name` is not an operation this server knows (404).
 */
import { Effect, Layer } from "effect"
import type { Catalog } from "../catalog/Catalog.ts"
import type { OperationLevel } from "../catalog/definitions.ts"
import { fail, type FhirError } from "../http/FhirError.ts"
import type { FhirRequest } from "../rest/FhirRequest.ts"
import { type OperationAt, Operations } from "../rest/Operations.ts"
import { documentModule } from "./document.ts"
import { everythingModule } from "./everything.ts"
import { exportModule } from "./export.ts"
import { graphqlModule } from "./graphql.ts"
import { installModule } from "./install.ts"
import { layer as installsLayer } from "../packages/PackageInstalls.ts"
import { expandModule } from "./expand.ts"
import { expandabilityModule } from "./expandability.ts"
import type { OperationCall, OperationModule } from "./Operation.ts"
import { operationGranted } from "../auth/access/enforce.ts"
import { metaModule } from "./meta.ts"
import { metaAddModule } from "./metaAdd.ts"
import { metaDeleteModule } from "./metaDelete.ts"
import { lookupModule } from "./lookup.ts"
import { subsumesModule } from "./subsumes.ts"
import { translateModule } from "./translate.ts"
import { validateModule } from "./validate.ts"
import { validateCodeModule } from "./validateCode.ts"

/** Every operation served, in the order the CapabilityStatement lists them. */
export const operations = [
  validateModule, everythingModule, exportModule, metaModule, metaAddModule, metaDeleteModule, documentModule, installModule,
  expandModule, expandabilityModule, lookupModule, validateCodeModule, subsumesModule, translateModule, graphqlModule
] as const

/** The operations of the interface that later versions serve: asked for today, a 501. */
const plannedOperations: ReadonlySet<string> = new Set([
  "everything", "validate", "populate", "extract", "assemble", "next-question", "behavior"
])

/** Whether the module serves `level` on `type` (every type when it names none). */
const serves = (module: (typeof operations)[number], level: OperationLevel, type: string | undefined): boolean =>
  (module.levels as ReadonlyArray<OperationLevel>).includes(level) && (type === undefined || module.types === undefined || module.types.includes(type))

/**
 * The operations served on a resource type at type or instance level, or (undefined) at system level, for the
 * CapabilityStatement.
 */
export const operationsOn = (type: string | undefined): ReadonlyArray<{ readonly name: string; readonly definition: string }> =>
  operations.flatMap((module) =>
    (type === undefined ? serves(module, "system", undefined) : serves(module, "type", type) || serves(module, "instance", type))
      ? [{ name: module.name, definition: module.definition(type) }]
      : [])

/** The operations served at system level (`[base]/$op`), for the CapabilityStatement's `rest.operation`. */
export const systemOperations = (): ReadonlyArray<{ readonly name: string; readonly definition: string }> => operationsOn(undefined)

/**
 * Where a path invokes an operation: its name, level, type, id and, on a version of an instance
 * (`{type}/{id}/_history/{vid}/$name`), the version; undefined when no segment is `$name` last.
 */
export const operationPath = (segments: ReadonlyArray<string>): OperationAt | undefined => {
  const last = segments[segments.length - 1]
  if (last === undefined || !last.startsWith("$") || segments.slice(0, -1).some((segment) => segment.startsWith("$"))) return undefined
  const name = last.slice(1)
  const [first, second, third, fourth] = segments
  if (segments.length === 5 && third === "_history") return { name, level: "instance", type: first!, id: second!, version: fourth! }
  if (segments.length > 3) return undefined
  if (segments.length === 1) return { name, level: "system" }
  if (segments.length === 2) return { name, level: "type", type: first! }
  return { name, level: "instance", type: first!, id: second! }
}

/** What running a module gives: the union of their answers, errors and services. */
type Run = ReturnType<(typeof operations)[number]["run"]>

/** The answer to a call of an operation at `segments` (an operation path, see operationPath). */

export const invoke = (
  request: FhirRequest,
  catalog: Catalog,
  method: string,
  path: string,
  at: OperationAt
): Effect.Effect<Effect.Effect.Success<Run>, Effect.Effect.Error<Run> | FhirError, Effect.Effect.Context<Run>> => {
  if (at.type !== undefined && !catalog.isResourceType(at.type)) return Effect.fail(fail("not-found", `${at.type} is not a resource type this server knows`))
  const call: OperationCall = { request, type: at.type, id: at.id, version: at.version }
  for (const module of operations) {
    if (module.name !== at.name || !serves(module, at.level, at.type)) continue
    if (at.version !== undefined && !(module as OperationModule<unknown>).onVersions) {
      return Effect.fail(fail("not-found", `$${at.name} is not served on a version of a resource (${path}): call it on the resource`))
    }
    if (!(module.methods as ReadonlyArray<string>).includes(method)) {
      return Effect.fail(fail("not-supported", `${method} is not allowed on ${path}`, 405))
    }
    if (!(module as OperationModule<unknown>).checksAccess) {
      const refused = operationGranted(request.access, catalog, at.name, at.type)
      if (refused !== undefined) return Effect.fail(refused)
    }
    return module.run(call) as Run
  }
  const named = operations.find((module) => module.name === at.name)
  if (named?.types !== undefined && (at.type === undefined ? !plannedOperations.has(at.name) : !named.types.includes(at.type))) {
    return Effect.fail(fail("not-found", `$${at.name} is defined on ${named.types.join(" and ")}, not on ${path}`))
  }
  if (named !== undefined && !plannedOperations.has(at.name) && !(named.levels as ReadonlyArray<OperationLevel>).includes(at.level)) {
    const where = { system: "[base]/$", type: "[base]/{type}/$", instance: "[base]/{type}/{id}/$" }
    const forms = (named.levels as ReadonlyArray<OperationLevel>).map((level) => `${where[level]}${at.name}`).join(" or ")
    return Effect.fail(fail("not-found", `$${at.name} is not served at ${at.level} level (${path}): call it as ${forms}`))
  }
  return plannedOperations.has(at.name)
    ? Effect.fail(fail("not-supported", `the operation $${at.name} (${path}) is not available in this build yet`, 501))
    : Effect.fail(fail("not-found", `$${at.name} is not an operation this server knows (${path})`))
}

/** The Operations service of the FHIR app: every module above, run with the services the layer was built with. */
export const layer = Layer.effect(Operations, Effect.gen(function*() {
  const context = yield* Effect.context<Effect.Effect.Context<ReturnType<typeof invoke>>>()
  return Operations.of({
    invoke: (request, method, path, at) => Effect.provide(invoke(request, request.catalog, method, path, at), context),
    on: operationsOn
  })
})).pipe(Layer.provide(installsLayer))
