/**
 * `$export` (Bulk Data Access IG 2.0.0, https://hl7.org/fhir/uv/bulkdata/STU2/export.html; docs/export.md): the
 * kick-off at `[base]/$export`, `[base]/Patient/$export` and `[base]/Group/{id}/$export`, by GET or POST (a
 * Parameters body). It needs `Prefer: respond-async`; what it asks is read (src/export/kickOff.ts), recorded as a
 * job (src/export/Exports.ts), and answered `202 Accepted` with `Content-Location` at the job's status,
 * `/export/{job}` at the server's root.
 *
 * Access: the module's own: read access to every type exported (kickOff.ts), and to the Group read at group level.
 */
import type { HttpServerResponse } from "@effect/platform"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import { granted, seen } from "../auth/access/enforce.ts"
import { Database } from "../db/Database.ts"
import type { LeaseLost } from "../db/WriterLease.ts"
import type { Caller } from "../export/jobs.ts"
import { Exports } from "../export/Exports.ts"
import { type KickOffValues, patientId, readKickOff } from "../export/kickOff.ts"
import { fail, type FhirError } from "../http/FhirError.ts"
import type { FhirRequest } from "../rest/FhirRequest.ts"
import { readResource } from "../rest/RequestBody.ts"
import { basePath } from "../rest/Rest.ts"
import { prefersAsync, prefersLenient } from "../rest/prefer.ts"
import { resourceBody } from "../rest/respond.ts"
import { readCurrent } from "../store/reads.ts"
import { type InputParameter, readArguments } from "./arguments.ts"
import type { OperationModule } from "./Operation.ts"

/** The OperationDefinitions of the Bulk Data IG, by level. */
export const exportDefinitions = {
  system: "http://hl7.org/fhir/uv/bulkdata/OperationDefinition/export",
  Patient: "http://hl7.org/fhir/uv/bulkdata/OperationDefinition/patient-export",
  Group: "http://hl7.org/fhir/uv/bulkdata/OperationDefinition/group-export"
} as const

/** The IG's parameters (the R4 packages hold no definition of them). */
const exportInputs: ReadonlyArray<InputParameter> = [
  { name: "_outputFormat", type: "string", min: 0, max: "1" },
  { name: "_since", type: undefined, min: 0, max: "1" },
  { name: "_type", type: "string", min: 0, max: "*" },
  { name: "_elements", type: "string", min: 0, max: "*" },
  { name: "patient", type: "Reference", min: 0, max: "*" },
  { name: "includeAssociatedData", type: "code", min: 0, max: "*" },
  { name: "_typeFilter", type: "string", min: 0, max: "*" }
]


const information = (diagnostics: string) => ({
  resourceType: "OperationOutcome",
  issue: [{ severity: "information", code: "informational", diagnostics }]
})

/** The Parameters body of a POST, or undefined. */
const bodyOf = (request: FhirRequest) =>
  Effect.gen(function*() {
    if (request.http.method !== "POST") return undefined
    const length = Number(request.http.headers["content-length"] ?? "0")
    if (length === 0 && request.http.headers["transfer-encoding"] === undefined) return undefined
    const body = yield* readResource(request.http, request.maxBodyBytes, request.catalog)
    if (body["resourceType"] !== "Parameters") return yield* fail("invalid", `$export takes a Parameters body, not ${String(body["resourceType"])}`)
    return body
  })

/** The names given, in the query and the body. */
const givenNames = (request: FhirRequest, body: Record<string, unknown> | undefined): ReadonlySet<string> => {
  const names = new Set(request.params.keys())
  for (const parameter of Array.isArray(body?.["parameter"]) ? body["parameter"] : []) {
    if (typeof parameter === "object" && parameter !== null && typeof parameter.name === "string") names.add(parameter.name)
  }
  for (const name of ["_format", "_pretty"]) names.delete(name)
  return names
}

/** The Group's active member patients, read as they are now. */
const groupMembers = (request: FhirRequest, id: string) =>
  Effect.gen(function*() {
    const db = yield* Database
    const rule = yield* granted(request.access, request.catalog, "Group", "r")
    return yield* db.withReader((sql) =>
      Effect.gen(function*() {
        yield* seen(sql, request.catalog, "Group", id, rule)
        const current = yield* readCurrent(sql, "Group", id)
        if (current === undefined) return yield* fail("not-found", `Group/${id} is not known`)
        if (current.content === null) return yield* fail("deleted", `Group/${id} was deleted`)
        const group = JSON.parse(current.content) as { readonly member?: ReadonlyArray<{ readonly entity?: { readonly reference?: unknown }; readonly inactive?: unknown }> }
        const members: Array<string> = []
        for (const member of group.member ?? []) {
          if (member.inactive === true || typeof member.entity?.reference !== "string") continue
          const patient = patientId(member.entity.reference, request.base)
          if (patient !== undefined && !members.includes(patient)) members.push(patient)
        }
        return members
      })
    )
  })

/** The kick-off URL the manifest repeats: the request's, with a POST's parameters in its query. */
const requestUrl = (request: FhirRequest, path: string, values: URLSearchParams, patients: ReadonlyArray<string> | undefined): string => {
  const query = new URLSearchParams(values)
  for (const patient of patients ?? []) query.append("patient", patient)
  const text = query.toString()
  return `${request.base}/${path}${text === "" ? "" : `?${text}`}`
}

const callerOf = (request: FhirRequest): Caller => {
  const principal = request.access.principal
  return principal._tag === "Authorized"
    ? { _tag: "Authorized", clientId: principal.clientId, user: principal.user, scopes: principal.scopes, patient: principal.patient }
    : { _tag: "Anonymous" }
}

/** The kick-off of `$export` at the level of `type`/`id`. */
export const kickOff = (
  request: FhirRequest,
  type: string | undefined,
  id: string | undefined
): Effect.Effect<HttpServerResponse.HttpServerResponse, FhirError | SqlError | LeaseLost, Exports | Database> =>
  Effect.gen(function*() {
    const level = type === undefined ? "system" : type === "Patient" && id === undefined ? "patient" : type === "Group" && id !== undefined ? "group" : undefined
    if (level === undefined) {
      return yield* fail("not-found", `$export is served at [base]/$export, [base]/Patient/$export and [base]/Group/{id}/$export, not on ${type}${id === undefined ? "" : "/{id}"}`)
    }
    if (!prefersAsync(request.http.headers["prefer"])) {
      return yield* fail("invalid", "$export runs asynchronously: send the kick-off with the header Prefer: respond-async (Bulk Data Access IG, Export kick-off request)", 400)
    }
    const body = yield* bodyOf(request)
    const handling = prefersLenient(request.http.headers["prefer"])
    const known = new Set(exportInputs.map((input) => input.name))
    const unknown = [...givenNames(request, body)].filter((name) => !known.has(name))
    // Unknown parameters are read too: refused below by name (or, lenient, left out), as the IG says.
    const accepted = [...exportInputs, ...unknown.map((name) => ({ name, type: undefined, min: 0, max: "*" }))]
    const args = yield* readArguments(request, "$export", accepted, body ?? (request.http.method === "POST" ? { resourceType: "Parameters" } : undefined))
    const values = args.values
    const patients = args.complex.get("patient")?.map((value) => String(value.value["reference"] ?? ""))
    const members = level === "group" ? yield* groupMembers(request, id!) : undefined
    const unsupported = [
      ...unknown.map((name) => `the parameter '${name}'`),
      ...(request.params.has("_elements") || values.has("_elements") ? ["_elements"] : []),
      ...values.getAll("includeAssociatedData").map((value) => `includeAssociatedData=${value}`)
    ]
    const given: KickOffValues = {
      level,
      ...(level === "group" ? { group: id! } : {}),
      outputFormat: values.get("_outputFormat") ?? undefined,
      types: values.getAll("_type"),
      since: values.get("_since") ?? undefined,
      typeFilters: values.getAll("_typeFilter"),
      patients,
      ...(members === undefined ? {} : { members }),
      unsupported,
      lenient: handling
    }
    const spec = yield* readKickOff(request.catalog, request.access, given, request.base)
    const known2 = new URLSearchParams([...values].filter(([name]) => known.has(name)))
    const path = level === "system" ? "$export" : level === "patient" ? "Patient/$export" : `Group/${encodeURIComponent(id!)}/$export`
    const caller = callerOf(request)
    const exports = yield* Exports
    const job = yield* exports.kickOff({
      owner: caller._tag === "Authorized" ? `client:${caller.clientId}` : "",
      caller,
      request: requestUrl(request, path, known2, patients),
      spec
    })
    const root = request.base.endsWith(basePath) ? request.base.slice(0, -basePath.length) : request.base
    const location = `${root}/export/${job}`
    return resourceBody(information(`export job ${job} accepted: its status is at ${location}`), request.negotiated, request.catalog, {
      status: 202,
      headers: { "content-location": location, "preference-applied": handling ? "respond-async, handling=lenient" : "respond-async" }
    })
  })

export const exportModule = {
  name: "export",
  levels: ["system", "type", "instance"],
  types: ["Patient", "Group"],
  definition: (type: string | undefined) => (type === "Patient" ? exportDefinitions.Patient : type === "Group" ? exportDefinitions.Group : exportDefinitions.system),
  methods: ["GET", "POST"],
  checksAccess: true,
  run: (call) => kickOff(call.request, call.type, call.id)
} satisfies OperationModule<ReturnType<typeof kickOff>>
