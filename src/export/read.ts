/**
 * What an export reads (docs/export.md, "The manifest"): the resources of one type as they were at the job's
 * transaction commit, a batch at a time in id order (the `(type, id)` key every resource table has), so that a
 * job can stop after any batch and resume after the last id it wrote.
 *
 * The version read is the resource's current one when it was written at or before the transaction commit, and
 * otherwise the last version written by then (from `resource_versions`): resources created after it are not
 * read, and one deleted by then (a version without content) is left out. `_since` keeps the versions written
 * after it. The job's conditions (its patients, `_typeFilter`, the caller's grants) are conditions on `r`, the
 * resources table, as search plans them: they are judged on the current index.
 */
import type { Statement } from "@effect/sql"
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import { accessOf } from "../auth/access/Access.ts"
import { accessCondition } from "../auth/access/conditions.ts"
import type { Catalog } from "../catalog/Catalog.ts"
import type { Principal } from "../http/Principal.ts"
import { parseSearch } from "../search/parse/parseSearch.ts"
import { whereCondition } from "../search/plan/query.ts"
import type { Caller, ExportSpec } from "./jobs.ts"

/** The most resources read per statement (and written per checkpoint). */
export const batchRows = 1000

/** The resources a type's first statement reads, before their size is known. */
export const firstBatchRows = 100

/** What a batch should hold at most, in bytes: the next batch's rows are chosen from the sizes of the last one. */
export const batchBytes = 4 * 1024 * 1024

/** The rows of the next batch, after one of `rows` resources and `bytes` bytes: about `batchBytes`, 1 to `batchRows`. */
export const nextBatchRows = (rows: number, bytes: number): number =>
  rows === 0 ? firstBatchRows : Math.max(1, Math.min(batchRows, Math.floor(batchBytes / Math.max(1, bytes / rows))))

/** Patients named in one statement's list: a long list of a Group is read in segments of this many. */
export const patientsPerSegment = 500

/** The compartment a patient- or group-level export reads. */
const patientCompartment = "Patient"

export interface ExportRow {
  readonly id: string
  /**
   * The stored JSON: its UTF-8 bytes on SQLite (read as a blob, so that a batch never becomes strings on the
   * JavaScript heap, whose large objects wait for a full collection), its text on Postgres.
   */
  readonly content: string | Uint8Array
}

/** The principal a job's caller stands for, to read with the same grants as the kick-off. */
export const principalOf = (caller: Caller): Principal =>
  caller._tag === "Anonymous"
    ? { _tag: "Anonymous", address: "" }
    : { _tag: "Authorized", address: "", clientId: caller.clientId, user: caller.user, scopes: caller.scopes, patient: caller.patient }

/** How many segments a type's reading has: one, or one per `patientsPerSegment` patients of the job. */
export const segmentsOf = (spec: ExportSpec): number =>
  spec.patients === undefined ? 1 : Math.max(1, Math.ceil(spec.patients.length / patientsPerSegment))

/** The patients of a segment (undefined: every patient). */
const segmentPatients = (spec: ExportSpec, segment: number): ReadonlyArray<string> | undefined =>
  spec.patients?.slice(segment * patientsPerSegment, (segment + 1) * patientsPerSegment)

/** The condition of the job's level on `r`, a resource of `type`: in the patients' compartments (or any patient's). */
const levelCondition = (sql: SqlClient.SqlClient, spec: ExportSpec, type: string, segment: number): Statement.Fragment | undefined => {
  if (spec.level === "system") return undefined
  const patients = segmentPatients(spec, segment)
  if (type === patientCompartment) return patients === undefined ? undefined : patients.length === 0 ? sql`1 = 0` : sql.in("r.id", patients)
  if (patients === undefined) {
    return sql`EXISTS (SELECT 1 FROM search_compartment c WHERE c.rkey = r.rkey AND c.compartment = ${patientCompartment})`
  }
  if (patients.length === 0) return sql`1 = 0`
  return sql`r.rkey IN (SELECT c.rkey FROM search_compartment c WHERE c.compartment = ${patientCompartment} AND c.type = ${type} AND ${sql.in("c.target_id", patients)})`
}

/** `_typeFilter` on `type` as a condition: any of its queries (each already read at kick-off). */
const filterCondition = (sql: SqlClient.SqlClient, catalog: Catalog, spec: ExportSpec, type: string, now: number): Statement.Fragment | undefined => {
  const queries = spec.filters[type]
  if (queries === undefined || queries.length === 0) return undefined
  const conditions = queries.map((query) => {
    const parsed = parseSearch(type, query, catalog, { lenient: false })
    // Read at kick-off; a catalog that changed since may no longer read it: then it matches nothing.
    return parsed._tag === "Right" ? whereCondition(sql, parsed.right, now) : sql`1 = 0`
  })
  return conditions.length === 1 ? conditions[0]! : sql.or(conditions)
}

/**
 * The next batch of `type` after the id `after` (null: from the start), in segment `segment`: at most `rows`
 * resources as of the commit `transactionTs`. Memory holds one batch: about `batchBytes`, or one resource larger.
 */
export const readBatch = (
  sql: SqlClient.SqlClient,
  catalog: Catalog,
  input: {
    readonly spec: ExportSpec
    readonly caller: Caller
    readonly transactionTs: number
    readonly type: string
    readonly segment: number
    readonly after: string | null
    readonly now: number
    /** At most this many (`nextBatchRows`). */
    readonly rows: number
  }
): Effect.Effect<ReadonlyArray<ExportRow>, SqlError> => {
  const { spec, type, transactionTs: at } = input
  const conditions: Array<Statement.Fragment> = [sql`r.type = ${type}`, sql`v.content IS NOT NULL`]
  if (input.after !== null) conditions.push(sql`r.id > ${input.after}`)
  if (spec.since !== undefined) conditions.push(sql`v.commit_ts > ${spec.since}`)
  for (
    const condition of [
      levelCondition(sql, spec, type, input.segment),
      filterCondition(sql, catalog, spec, type, input.now),
      accessCondition(sql, accessOf(principalOf(input.caller)), catalog, [type], "r", input.now)
    ]
  ) if (condition !== undefined) conditions.push(condition)
  const version = sql`CASE WHEN r.commit_ts <= ${at} THEN r.version
    ELSE (SELECT MAX(w.version) FROM resource_versions w WHERE w.rkey = r.rkey AND w.commit_ts <= ${at}) END`
  // Postgres plans the join on a CASE as a scan of every version for each batch (its cost grows with the table):
  // a lateral subquery (kept one by OFFSET 0) looks up each resource's version by its key instead.
  const versions = sql.onDialectOrElse({
    pg: () => sql`CROSS JOIN LATERAL (SELECT x.content, x.commit_ts FROM resource_versions x WHERE x.rkey = r.rkey AND x.version = ${version} OFFSET 0) v`,
    orElse: () => sql`JOIN resource_versions v ON v.rkey = r.rkey AND v.version = ${version}`
  })
  const content = sql.onDialectOrElse({ pg: () => sql`v.content`, orElse: () => sql`CAST(v.content AS BLOB) AS content` })
  return sql<ExportRow>`
    SELECT r.id, ${content} FROM resources r ${versions}
    WHERE ${sql.and(conditions)}
    ORDER BY r.id LIMIT ${sql.literal(String(Math.max(1, Math.min(batchRows, Math.trunc(input.rows)))))}`
}
