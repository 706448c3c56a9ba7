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
import { Database } from "../db/Database.ts"
import { readDate } from "../search/parse/dates.ts"
import { countExpected, defaultCount, offsetExpected, readCount, readOffset } from "../search/parse/result.ts"
import { compartmentTypes } from "../search/plan/compartment.ts"
import { everythingPage, type EverythingQuery } from "../search/plan/everything.ts"
import { isKept } from "../search/plan/page.ts"
import { bundleText } from "./bundleText.ts"
import { fail } from "./FhirError.ts"
import type { FhirRequest } from "./FhirRequest.ts"
import { readResource } from "./RequestBody.ts"
import { largeBody } from "./largeBody.ts"

/** The types `$everything` is defined on, with the OperationDefinition of each. */
export const everythingOperations: Readonly<Record<string, string>> = {
  Patient: "http://hl7.org/fhir/OperationDefinition/Patient-everything",
  Encounter: "http://hl7.org/fhir/OperationDefinition/Encounter-everything"
}

const parameterNames = new Set(["start", "end", "_since", "_type", "_count", "_offset"])
const formatNames = new Set(["_format", "_pretty"])

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** The operation's parameters from a Parameters body: each `value[x]` that is a string or number, as text. */
const bodyParameters = (body: Record<string, unknown>) =>
  Effect.gen(function*() {
    if (body["resourceType"] !== "Parameters") return yield* fail("invalid", `$everything takes a Parameters body, not ${String(body["resourceType"])}`)
    const out: Array<[string, string]> = []
    for (const parameter of Array.isArray(body["parameter"]) ? body["parameter"] : []) {
      if (!isRecord(parameter) || typeof parameter["name"] !== "string") continue
      const value = Object.entries(parameter).find(([key, v]) => key.startsWith("value") && (typeof v === "string" || typeof v === "number"))
      if (value === undefined) return yield* fail("invalid", `The parameter '${parameter["name"]}' of $everything has no value`)
      out.push([parameter["name"], String(value[1])])
    }
    return out
  })

/** The query and, on POST, the body's parameters, as one query string (what page links repeat). */
const parametersOf = (request: FhirRequest) =>
  Effect.gen(function*() {
    const params = new URLSearchParams()
    for (const [name, value] of request.params) if (!formatNames.has(name)) params.append(name, value)
    const contentLength = Number(request.http.headers["content-length"] ?? "0")
    const hasBody = request.http.method === "POST" && (contentLength > 0 || request.http.headers["transfer-encoding"] !== undefined)
    if (hasBody) {
      const body = yield* readResource(request.http, request.maxBodyBytes, request.catalog)
      for (const [name, value] of yield* bodyParameters(body)) params.append(name, value)
    }
    return params
  })

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
    for (const name of new Set(params.keys())) {
      if (!parameterNames.has(name)) return yield* fail("invalid", `Unknown parameter '${name}' for $everything; it takes ${[...parameterNames].join(", ")}`)
      if (name !== "_type" && params.getAll(name).length > 1) return yield* fail("invalid", `The parameter '${name}' of $everything is given more than once`)
    }
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
    const params = yield* parametersOf(request)
    const input = yield* readInput(request, params)
    const db = yield* Database
    const now = yield* Clock.currentTimeMillis
    const text = yield* db.withReader((sql) =>
      Effect.gen(function*() {
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
          types: input.types
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
