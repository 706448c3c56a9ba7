/**
 * What the terminology operations ($lookup, $validate-code, $subsumes, $translate) share: reading codings
 * from their arguments, the caller's access (docs/smart.md, "Scopes": read on the operation's type; at
 * instance level the resource must be one the caller may see; under a restricted grant the resource a url
 * names too), and the CodeSystem, ValueSet or ConceptMap an instance or a parameter gives.
 */
import { Effect } from "effect"
import { granted, standing, unseen } from "../auth/access/enforce.ts"
import type { Rule } from "../auth/access/Access.ts"
import type { CanonicalDef, CodeSystemDef, ConceptMapDef, ValueSetDef } from "../catalog/definitions.ts"
import { codeSystemDef, readCodeSystem } from "../catalog/CodeSystems.ts"
import { conceptMapDef, readConceptMap } from "../catalog/ConceptMaps.ts"
import { isObject, type Json } from "../catalog/json.ts"
import { readValueSet, valueSetDef } from "../catalog/readDefinitions.ts"
import { heldSource } from "../catalog/source.ts"
import { Database } from "../db/Database.ts"
import { fail } from "../http/FhirError.ts"
import type { FhirRequest } from "../rest/FhirRequest.ts"
import { readCurrent } from "../store/reads.ts"
import type { Arguments } from "./arguments.ts"

export type Definition = "CodeSystem" | "ValueSet" | "ConceptMap"

export interface CodingArgument {
  readonly system: string | undefined
  readonly version: string | undefined
  readonly code: string | undefined
  readonly display: string | undefined
}

const field = (json: Json, key: string): string | undefined => (typeof json[key] === "string" ? json[key] : undefined)

const codingFrom = (json: Json): CodingArgument => ({
  system: field(json, "system"),
  version: field(json, "version"),
  code: field(json, "code"),
  display: field(json, "display")
})

/** A text parameter's value (given at most once: `readArguments` checks the count). */
export const text = (args: Arguments, name: string): string | undefined => args.values.get(name) ?? undefined

/** A boolean parameter's value; `readArguments` has checked its form. */
export const flag = (args: Arguments, name: string): boolean => args.values.get(name) === "true"

/**
 * A Coding parameter: `valueCoding` in a Parameters body, or in the URL as a token `system|code` (the form
 * of a token search parameter).
 */
export const codingArgument = (args: Arguments, name: string, operation: string) =>
  Effect.gen(function*() {
    const complex = args.complex.get(name)?.[0]?.value
    if (complex !== undefined) return codingFrom(complex)
    const token = text(args, name)
    if (token === undefined) return undefined
    const bar = token.indexOf("|")
    if (bar < 0) return yield* fail("invalid", `The parameter '${name}' of ${operation} is a Coding: in the URL, give it as system|code`)
    return { system: bar === 0 ? undefined : token.slice(0, bar), version: undefined, code: token.slice(bar + 1), display: undefined } satisfies CodingArgument
  })

/** A CodeableConcept parameter's codings: only from a Parameters body. */
export const codeableConceptArgument = (args: Arguments, name: string, operation: string) =>
  Effect.gen(function*() {
    if (args.values.has(name)) return yield* fail("invalid", `The parameter '${name}' of ${operation} is a CodeableConcept: it goes in a Parameters body (valueCodeableConcept)`)
    const concept = args.complex.get(name)?.[0]?.value
    if (concept === undefined) return undefined
    const codings = Array.isArray(concept["coding"]) ? concept["coding"].filter(isObject).map(codingFrom) : []
    if (codings.length === 0) return yield* fail("invalid", `The parameter '${name}' of ${operation} has no coding`)
    return codings
  })

/** The caller's rule for reading `type` (403 when it may not read it at all). */
export const readRule = (request: FhirRequest, type: Definition) => granted(request.access, request.catalog, type, "r")

/** Whether the caller's rule reaches the stored resource of a catalog definition (always, unless restricted). */
export const sees = (request: FhirRequest, rule: Rule, type: Definition, definition: CanonicalDef) =>
  Effect.gen(function*() {
    if (rule._tag === "All") return true
    const id = definition.resource["id"]
    if (typeof id !== "string") return false
    const db = yield* Database
    return (yield* db.withReader((sql) => standing(sql, request.catalog, type, id, rule))) === "allowed"
  })

/**
 * The current resource `type/id`, read as the caller may: 404 when there is none or the caller cannot see it
 * (under a restricted grant a deleted one too, as a read answers), 410 when deleted.
 */
export const storedResource = (request: FhirRequest, rule: Rule, type: Definition, id: string) =>
  Effect.gen(function*() {
    const db = yield* Database
    const found = yield* db.withReader((sql) => standing(sql, request.catalog, type, id, rule))
    if (found !== undefined && found !== "allowed") return yield* unseen(type, id)
    const row = yield* db.withReader((sql) => readCurrent(sql, type, id))
    if (row === undefined) return yield* unseen(type, id)
    if (row.content === null) return yield* fail("deleted", `${type}/${id} was deleted`)
    const json: unknown = JSON.parse(row.content)
    return { json: isObject(json) ? json : {}, version: row.version }
  })

/**
 * The definition of a stored resource: the catalog's when the catalog holds this very version (its indexes
 * are built already), else one made from the stored JSON (a write the catalog has not been rebuilt with yet).
 */
export const storedDefinition = <A extends CanonicalDef>(
  stored: { readonly json: Json; readonly version: number },
  fromCatalog: (url: string) => A | undefined,
  make: (json: Json) => A | string
) => {
  const url = field(stored.json, "url")
  const version = field(stored.json, "version")
  const known = url === undefined ? undefined : fromCatalog(version === undefined ? url : `${url}|${version}`)
  const meta = known?.resource["meta"]
  if (known !== undefined && known.resource["id"] === stored.json["id"] && isObject(meta) && meta["versionId"] === String(stored.version)) return known
  return make(stored.json)
}

/** The url a resource given without one is known by in messages and expansions. */
export const givenUrl = (type: Definition): string => `urn:svc:given:${type}`

const withUrl = (json: Json, type: Definition): Json => (typeof json["url"] === "string" && json["url"] !== "" ? json : { ...json, url: givenUrl(type) })

/** A CodeSystem given as a resource, compiled as the catalog compiles it; a message when it cannot be. */
export const codeSystemOf = (given: Json): CodeSystemDef | string => {
  const json = withUrl(given, "CodeSystem")
  const data = readCodeSystem(json)
  return typeof data === "string" ? data : codeSystemDef(data, heldSource(json))
}

export const valueSetOf = (given: Json): ValueSetDef | string => {
  const json = withUrl(given, "ValueSet")
  const data = readValueSet(json)
  return typeof data === "string" ? data : valueSetDef(data, heldSource(json))
}

export const conceptMapOf = (given: Json): ConceptMapDef | string => {
  const json = withUrl(given, "ConceptMap")
  const data = readConceptMap(json)
  return typeof data === "string" ? data : conceptMapDef(data, heldSource(json))
}

/** A resource parameter of a Parameters body, of `type`; a 400 when it is another type. */
export const resourceArgument = (args: Arguments, name: string, type: Definition, operation: string) =>
  Effect.gen(function*() {
    const resource = args.resources.get(name)?.[0]
    if (resource === undefined) return undefined
    if (resource["resourceType"] !== type) {
      return yield* fail("invalid", `The parameter '${name}' of ${operation} is a ${type}, not ${String(resource["resourceType"] ?? "a resource without resourceType")}`)
    }
    return resource
  })

/** A definition made from given JSON, or the 400 saying why it cannot be used. */
export const compiled = <A>(made: A | string, what: string) =>
  typeof made === "string" ? Effect.fail(fail("invalid", `${what} cannot be used: ${made}`)) : Effect.succeed(made)
