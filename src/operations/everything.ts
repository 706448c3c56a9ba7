/**
 * `$everything` on Patient and Encounter (https://hl7.org/fhir/R4/patient-operation-everything.html,
 * https://hl7.org/fhir/R4/encounter-operation-everything.html): `GET|POST [base]/Patient/{id}/$everything`
 * and `[base]/Encounter/{id}/$everything`. A searchset of the focal resource, every member of its
 * compartment and what those refer to, each once, in a stable order, paged with `_count` and `_offset`.
 * `start`/`end` keep the members whose clinical date falls in the range (see search/plan/everything.ts),
 * `_since` what changed since an instant, `_type` the types named. Parameters come from the query and, on
 * POST, from a Parameters body. Anything unreadable is a 400; an unknown focal resource a 404.
 */
import { Clock, Effect } from "effect"
import { accessCondition } from "../auth/access/conditions.ts"
import { granted, seen } from "../auth/access/enforce.ts"
import { Database } from "../db/Database.ts"
import { readDate } from "../search/parse/dates.ts"
import { countExpected, defaultCount, offsetExpected, readCount, readOffset } from "../search/parse/result.ts"
import { compartmentTypes } from "../search/plan/compartment.ts"
import { everythingPage, type EverythingQuery } from "../search/plan/everything.ts"
import { isKept } from "../search/plan/page.ts"
import { bundleText } from "../rest/bundleText.ts"
import { fail } from "../http/FhirError.ts"
import type { FhirRequest } from "../rest/FhirRequest.ts"
import type { Catalog } from "../catalog/Catalog.ts"
import { definedInputs, type InputParameter, readArguments, withExtras } from "./arguments.ts"
import type { OperationModule } from "./Operation.ts"
import { largeBody } from "../rest/largeBody.ts"

/** The types `$everything` is defined on, with the OperationDefinition of each. */
export const everythingOperations: Readonly<Record<string, string>> = {
  Patient: "http://hl7.org/fhir/OperationDefinition/Patient-everything",
  Encounter: "http://hl7.org/fhir/OperationDefinition/Encounter-everything"
}

/**
 * What is read beyond the OperationDefinitions: `start` and `end` on Encounter too (R4 defines them on
 * Patient only), dates of any precision (search's date reader), and `_offset` for the page links.
 */
const extras: ReadonlyArray<InputParameter> = [
  { name: "start", type: undefined, min: 0, max: "1" },
  { name: "end", type: undefined, min: 0, max: "1" },
  { name: "_since", type: undefined, min: 0, max: "1" },
  { name: "_count", type: undefined, min: 0, max: "1" },
  { name: "_offset", type: undefined, min: 0, max: "1" }
]

/** The parameters `$everything` takes on `type`, in the order of its OperationDefinition. */
const inputsOf = (catalog: Catalog, type: string): ReadonlyArray<InputParameter> => {
  const defined = definedInputs(catalog, everythingOperations[type])
  const names = new Set(defined.map((input) => input.name))
  return [...withExtras(defined, extras.filter((extra) => names.has(extra.name))), ...extras.filter((extra) => !names.has(extra.name))]
    .sort((a, b) => order(a.name) - order(b.name))
}

const order = (name: string): number => ["start", "end", "_since", "_type", "_count", "_offset"].indexOf(name)

const unreadable = (name: string, value: string, expected: string) =>
  fail("invalid", `The value '${value}' of parameter '${name}' of $everything cannot be read: expected ${expected}`)

const dateExpected = "a date, dateTime or instant (YYYY, YYYY-MM, YYYY-MM-DD or YYYY-MM-DDThh:mm[:ss[.fff]][Z|+hh:mm|-hh:mm])"

interface Input {
  readonly start: number | undefined
  readonly end: number | undefined
  readonly sinceMicros: number | undefined
  readonly types: ReadonlyArray<string> | undefined
  readonly count: number
  readonly offset: number
}

const readInput = (request: FhirRequest, params: URLSearchParams) =>
  Effect.gen(function*() {
    const date = (name: string) =>
      Effect.gen(function*() {
        const value = params.get(name)
        if (value === null) return undefined
        const range = readDate(value)
        return range === undefined ? yield* unreadable(name, value, dateExpected) : range
      })
    const start = yield* date("start")
    const end = yield* date("end")
    const since = yield* date("_since")
    let types: Array<string> | undefined
    for (const value of params.getAll("_type")) {
      for (const type of value.split(",").map((t) => t.trim()).filter((t) => t !== "")) {
        if (!request.catalog.isResourceType(type)) return yield* unreadable("_type", value, "a comma-separated list of resource types")
        types = [...(types ?? []), type]
      }
    }
    const integer = (name: string, read: (value: string) => number | undefined, expected: string) =>
      Effect.gen(function*() {
        const value = params.get(name)
        if (value === null) return undefined
        return read(value) ?? (yield* unreadable(name, value, expected))
      })
    const count = (yield* integer("_count", readCount, countExpected)) ?? defaultCount
    const offset = (yield* integer("_offset", readOffset, offsetExpected)) ?? 0
    return {
      start: start?.low,
      end: end?.high,
      sinceMicros: since === undefined ? undefined : since.low * 1000,
      types,
      count,
      offset
    } satisfies Input
  })

/** `$everything` on `type/id`. */
export const everything = (request: FhirRequest, type: string, id: string) =>
  Effect.gen(function*() {
    const { catalog } = request
    const definition = catalog.compartment(type)
    if (definition === undefined || everythingOperations[type] === undefined) {
      return yield* fail("not-found", `$everything is not defined on ${type}`)
    }
    // The caller reads the focal resource and, of the set, only what it may read (docs/smart.md, "Scopes"): a
    // patient-scoped token its own patient's record, and what that refers to of the types it may read.
    const rule = yield* granted(request.access, catalog, type, "r")
    const params = (yield* readArguments(request, "$everything", inputsOf(catalog, type))).values
    const input = yield* readInput(request, params)
    const db = yield* Database
    const now = yield* Clock.currentTimeMillis
    const text = yield* db.withReader((sql) =>
      Effect.gen(function*() {
        yield* seen(sql, catalog, type, id, rule)
        const [focal] = yield* sql<{ readonly rkey: number | string; readonly deleted: number | boolean }>`
          SELECT rkey, deleted FROM resources WHERE type = ${type} AND id = ${id}`
        if (focal === undefined) return yield* fail("not-found", `${type}/${id} is not known`)
        if (focal.deleted === true || focal.deleted === 1) return yield* fail("deleted", `${type}/${id} was deleted`)
        const query: EverythingQuery = {
          compartment: type,
          id,
          focal: Number(focal.rkey),
          memberTypes: compartmentTypes(catalog, definition),
          start: input.start,
          end: input.end,
          sinceMicros: input.sinceMicros,
          types: input.types,
          restrict: accessCondition(sql, request.access, catalog, undefined, "r", now)
        }
        const found = yield* everythingPage(sql, catalog, query, input.count, input.offset, request.maxPageBytes)
        const total = Number(found[0]?.total ?? 0)
        const rows = found.flatMap((row) => (row.type === null ? [] : [row]))
        // The page is the rows whose contents fit server.max_page_bytes (the first always); the next page starts after them.
        const page = rows.filter(isKept)
        const path = `${request.base}/${type}/${encodeURIComponent(id)}/$everything`
        const link = (relation: string, at: number) => {
          const query = new URLSearchParams(params)
          query.delete("_offset")
          query.set("_offset", String(at))
          return { relation, url: `${path}?${query.toString()}` }
        }
        const links = [link("self", input.offset), link("first", 0)]
        if (rows.length > page.length && page.length > 0) links.push(link("next", input.offset + page.length))
        if (input.offset > 0) links.push(link("previous", Math.max(0, input.offset - input.count)))
        const entries = page.map((row) => {
          const mode = row.member === 1 || row.member === "1" || row.member === true ? "match" : "include"
          return `{"fullUrl":${JSON.stringify(`${request.base}/${row.type}/${row.id}`)},"resource":${row.content},"search":{"mode":"${mode}"}}`
        })
        return bundleText({ type: "searchset", total, link: links }, entries, now)
      })
    )
    return yield* largeBody(text, request.negotiated, request.catalog)
  })

export const everythingModule = {
  name: "everything",
  levels: ["instance"],
  types: Object.keys(everythingOperations),
  definition: (type) => everythingOperations[type ?? ""] ?? everythingOperations["Patient"]!,
  methods: ["GET", "POST"],
  checksAccess: true,
  run: (call) => everything(call.request, call.type!, call.id!)
} satisfies OperationModule<ReturnType<typeof everything>>
