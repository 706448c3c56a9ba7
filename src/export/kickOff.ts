/**
 * A kick-off's parameters read into what the job exports (docs/export.md, "Kick-off"; Bulk Data Access IG 2.0.0,
 * https://hl7.org/fhir/uv/bulkdata/STU2/export.html#query-parameters): the types (`_type`, else what the level
 * holds and the caller may read), `_since`, `_typeFilter` read by search's parser (never leniently: a filter that
 * cannot be read is a 400), `patient`, and what is not supported, refused, or with `Prefer: handling=lenient`
 * left out and said in the manifest's `error` file.
 */
import { Effect, Either } from "effect"
import type { Access } from "../auth/access/Access.ts"
import { forbidden } from "../auth/access/enforce.ts"
import type { Catalog } from "../catalog/Catalog.ts"
import { fail, type FhirError } from "../http/FhirError.ts"
import { readDate } from "../search/parse/dates.ts"
import { parseSearch } from "../search/parse/parseSearch.ts"
import { resultCodes } from "../search/parse/result.ts"
import { compartmentTypes } from "../search/plan/compartment.ts"
import { localReference } from "../rest/localReference.ts"
import { urlTextProblem } from "../validation/fhirText.ts"
import type { ExportSpec } from "./jobs.ts"

/** `_outputFormat` values taken as NDJSON (the IG's aliases; `+` read from a query as a space too). */
export const ndjsonFormats: ReadonlySet<string> = new Set(["application/fhir+ndjson", "application/ndjson", "ndjson", "application/fhir ndjson"])

/** What the kick-off gave, as text, before it is read. */
export interface KickOffValues {
  readonly level: ExportSpec["level"]
  readonly group?: string
  readonly outputFormat: string | undefined
  readonly types: ReadonlyArray<string>
  readonly since: string | undefined
  readonly typeFilters: ReadonlyArray<string>
  /** `patient` references, as given. */
  readonly patients: ReadonlyArray<string> | undefined
  /** The Group's member patients (group level). */
  readonly members?: ReadonlyArray<string>
  /** What is not supported: unknown parameters, `_elements`, `includeAssociatedData` values. */
  readonly unsupported: ReadonlyArray<string>
  readonly lenient: boolean
}

const invalid = (message: string): FhirError => fail("invalid", `$export: ${message}`, 400)

/** The types a level can export: every resource type, or those of the Patient compartment. */
export const levelTypes = (catalog: Catalog, level: ExportSpec["level"]): ReadonlyArray<string> => {
  if (level === "system") return [...catalog.resourceTypes].sort()
  const definition = catalog.compartment("Patient")
  return definition === undefined ? ["Patient"] : compartmentTypes(catalog, definition)
}

/** Whether the caller can read `type` at all, and whether only as a patient (a `patient/` scope). */
const readable = (access: Access, catalog: Catalog, type: string): "all" | "some" | "patient" | "none" => {
  const rule = access.rule(catalog, type, "r")
  if (rule._tag === "All") return "all"
  if (rule._tag === "None") return "none"
  return rule.grants.some((grant) => grant.patient !== undefined) ? "patient" : "some"
}

const patientOnly = (type: string): FhirError =>
  fail("forbidden", `$export: the token reads ${type} in a patient's compartment (a patient/ scope); Bulk Data export needs system/ or user/ scopes and no patient/ scope`, 403)

/** The patient id of a reference `Patient/{id}` (relative, or absolute on this server's base). */
export const patientId = (reference: string, base: string): string | undefined => {
  const local = localReference(reference, base)
  return local?.type === "Patient" ? local.id : undefined
}

/** The job's spec from the kick-off's values, or the 400 / 403 that refuses it. */
export const readKickOff = (catalog: Catalog, access: Access, values: KickOffValues, base: string): Effect.Effect<ExportSpec, FhirError> =>
  Effect.gen(function*() {
    const warnings: Array<string> = []
    const unsupported = (what: string) =>
      values.lenient ? Effect.sync(() => void warnings.push(`${what}: not supported by this server, left out (Prefer: handling=lenient)`)) : Effect.fail(invalid(`${what} is not supported by this server (send Prefer: handling=lenient to have it left out)`))
    for (const what of values.unsupported) yield* unsupported(what)

    if (values.outputFormat !== undefined && !ndjsonFormats.has(values.outputFormat.trim().toLowerCase())) {
      return yield* invalid(`_outputFormat ${JSON.stringify(values.outputFormat)} is not supported: this server writes application/fhir+ndjson (also named application/ndjson and ndjson)`)
    }
    // A patient/ scope reads one patient's record ($everything); it never starts a population export, even of
    // the types it reads whole (those no patient compartment holds).
    const principal = access.principal
    if (principal._tag === "Authorized" && principal.scopes.some((scope) => scope.startsWith("patient/"))) return yield* Effect.fail(patientOnly("its types"))
    const possible = levelTypes(catalog, values.level)
    const named: Array<string> = []
    for (const type of values.types.flatMap((value) => value.split(",")).map((type) => type.trim()).filter((type) => type !== "")) {
      if (!catalog.isResourceType(type)) return yield* invalid(`_type names ${JSON.stringify(type)}, which is not a resource type this server knows`)
      if (!possible.includes(type)) return yield* invalid(`_type names ${type}, which is never in a Patient compartment: a ${values.level}-level export holds only the patients' data`)
      if (!named.includes(type)) named.push(type)
    }
    let types: Array<string>
    if (named.length > 0) {
      for (const type of named) {
        const can = readable(access, catalog, type)
        if (can === "none") return yield* Effect.fail(forbidden(access, catalog, type, "r"))
        if (can === "patient") return yield* Effect.fail(patientOnly(type))
      }
      types = named
    } else {
      types = possible.filter((type) => {
        const can = readable(access, catalog, type)
        return can === "all" || can === "some"
      })
      if (types.length === 0) {
        const patientScoped = possible.some((type) => readable(access, catalog, type) === "patient")
        return yield* Effect.fail(patientScoped ? patientOnly("any type") : fail("forbidden", "$export: the token reads none of the types this export holds", 403))
      }
    }

    let since: number | undefined
    if (values.since !== undefined) {
      const range = readDate(values.since)
      if (range === undefined) {
        return yield* invalid(`_since ${JSON.stringify(values.since)} cannot be read: expected an instant such as 2026-01-02T03:04:05Z`)
      }
      // Microseconds too, as the manifest's transactionTime gives them: the next export starts where that one ended.
      const fraction = /T[\d:]+\.(\d+)/.exec(values.since)?.[1] ?? ""
      since = range.low * 1000 + Number(fraction.slice(3, 6).padEnd(3, "0"))
    }

    const filters: Record<string, Array<string>> = {}
    for (const text of values.typeFilters) {
      const form = /^\/?([A-Z][A-Za-z0-9]*)\?(.+)$/s.exec(text.trim())
      if (form === null) return yield* invalid(`_typeFilter ${JSON.stringify(text)} is not a search on a resource type (Type?name=value&...)`)
      const type = form[1]!
      const query = form[2]!
      if (!catalog.isResourceType(type)) return yield* invalid(`_typeFilter ${JSON.stringify(text)} names ${type}, which is not a resource type this server knows`)
      if (!types.includes(type)) {
        return yield* invalid(`_typeFilter ${JSON.stringify(text)} is on ${type}, which this export does not hold${named.length > 0 ? " (it is not in _type)" : ""}`)
      }
      const unreadable = urlTextProblem(query)
      if (unreadable !== undefined) return yield* invalid(`_typeFilter ${JSON.stringify(text)} cannot be used: ${unreadable}`)
      const params = new URLSearchParams(query)
      const result = [...new Set([...params.keys()].filter((key) => resultCodes.has(key.split(":")[0]!)))]
      if (result.length > 0) return yield* invalid(`_typeFilter ${JSON.stringify(text)} holds ${result.join(", ")}: result parameters have no place in a filter`)
      const parsed = parseSearch(type, params, catalog, { lenient: false })
      if (Either.isLeft(parsed)) return yield* invalid(`_typeFilter ${JSON.stringify(text)} cannot be used: ${parsed.left.map((problem) => problem.message).join("; ")}`)
      filters[type] = [...(filters[type] ?? []), query]
    }

    let patients: ReadonlyArray<string> | undefined = values.members
    if (values.patients !== undefined) {
      if (values.level === "system") return yield* invalid("'patient' is taken at Patient and Group level ([base]/Patient/$export, [base]/Group/{id}/$export), not by a system-level export")
      const ids: Array<string> = []
      for (const reference of values.patients) {
        const id = patientId(reference, base)
        if (id === undefined) return yield* invalid(`'patient' ${JSON.stringify(reference)} is not a reference to a Patient (Patient/{id})`)
        if (!ids.includes(id)) ids.push(id)
      }
      patients = values.members === undefined ? ids : ids.filter((id) => values.members!.includes(id))
    }
    return {
      level: values.level,
      ...(values.group === undefined ? {} : { group: values.group }),
      types,
      ...(since === undefined ? {} : { since }),
      filters,
      ...(patients === undefined ? {} : { patients }),
      warnings
    } satisfies ExportSpec
  })
