/**
 * The set `$everything` returns, as SQL (https://hl7.org/fhir/R4/patient-operation-everything.html and
 * https://hl7.org/fhir/R4/encounter-operation-everything.html): the members of the focal resource's
 * compartment (the focal resource among them, see extract/compartments.ts) read from the membership
 * index, and the resources those members refer to through a reference search parameter, one level, each
 * once. A page is one statement over that set in row-key order, its total with it.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Statement } from "@effect/sql"
import type { Catalog } from "../../catalog/Catalog.ts"
import { MAX_TIME, MIN_TIME } from "../extract/IndexRow.ts"
import { boundedPage } from "./page.ts"
import { limitOf } from "./query.ts"

type Fragment = Statement.Fragment

/**
 * The clinical date of each type, for `start` and `end`: when the care happened, not when it was recorded
 * (R4 asks for care dates). A type not listed uses its `date` parameter if it has one; a type with neither,
 * or a resource without a value for it, is always in range.
 */
export const clinicalDates: Readonly<Record<string, string>> = {
  AdverseEvent: "date", AllergyIntolerance: "date", Appointment: "date", AuditEvent: "date", Basic: "created",
  CarePlan: "date", CareTeam: "date", ChargeItem: "occurrence", Claim: "created", ClaimResponse: "created",
  ClinicalImpression: "date", Communication: "sent", CommunicationRequest: "authored", Composition: "date",
  Condition: "onset-date", Consent: "date", CoverageEligibilityRequest: "created", CoverageEligibilityResponse: "created",
  DetectedIssue: "identified", DeviceRequest: "event-date", DiagnosticReport: "date", DocumentManifest: "created",
  DocumentReference: "period", Encounter: "date", EpisodeOfCare: "date", ExplanationOfBenefit: "created",
  FamilyMemberHistory: "date", Flag: "date", Goal: "start-date", ImagingStudy: "started", Immunization: "date",
  ImmunizationEvaluation: "date", ImmunizationRecommendation: "date", Invoice: "date", List: "date", MeasureReport: "date",
  Media: "created", MedicationAdministration: "effective-time", MedicationDispense: "whenhandedover",
  MedicationRequest: "authoredon", MedicationStatement: "effective", NutritionOrder: "datetime", Observation: "date",
  Procedure: "date", Provenance: "recorded", QuestionnaireResponse: "authored", RequestGroup: "authored",
  ResearchSubject: "date", RiskAssessment: "date", ServiceRequest: "authored", Specimen: "collected",
  SupplyRequest: "date", VisionPrescription: "datewritten"
}

/** The date parameter `start`/`end` read on `type`, if the catalog defines it as a date parameter. */
export const clinicalDateOf = (catalog: Catalog, type: string): string | undefined => {
  for (const code of [clinicalDates[type], "date"]) {
    if (code !== undefined && catalog.searchParameter(type, code)?.type === "date") return code
  }
  return undefined
}

export interface EverythingQuery {
  readonly compartment: string
  readonly id: string
  /** The focal resource's row key: it is returned whatever its dates. */
  readonly focal: number
  /** The compartment's types, to name each one's clinical date. */
  readonly memberTypes: ReadonlyArray<string>
  /** `start`/`end` as epoch ms; undefined for an open end. */
  readonly start: number | undefined
  readonly end: number | undefined
  /** `_since`, in the commit timestamps' microseconds. */
  readonly sinceMicros: number | undefined
  readonly types: ReadonlyArray<string> | undefined
  /** A condition on `r` every resource of the set meets: the caller's restriction (src/auth/access/). */
  readonly restrict?: Fragment | undefined
}

/** Members whose clinical date overlaps `[start, end)`, or that have none; the focal resource always. */
const inRange = (sql: SqlClient.SqlClient, catalog: Catalog, query: EverythingQuery): Fragment | undefined => {
  if (query.start === undefined && query.end === undefined) return undefined
  const dated = query.memberTypes.flatMap((type) => {
    const code = clinicalDateOf(catalog, type)
    return code === undefined ? [] : [sql`WHEN ${type} THEN ${code}`]
  })
  if (dated.length === 0) return undefined
  const param = sql`CASE c.type ${sql.join(" ", false)(dated)} END`
  const low = query.start ?? MIN_TIME
  const high = query.end ?? MAX_TIME
  return sql`(c.rkey = ${query.focal}
    OR NOT EXISTS (SELECT 1 FROM search_date d WHERE d.rkey = c.rkey AND d.param = ${param})
    OR EXISTS (SELECT 1 FROM search_date d WHERE d.rkey = c.rkey AND d.param = ${param} AND d.high > ${low} AND d.low < ${high}))`
}

/**
 * `x IN (subquery)` on SQLite; `x = ANY (ARRAY(subquery))` on Postgres, whose planner otherwise estimates
 * the subquery's few hundred rows too low and hashes whole tables (every reference, every resource) where
 * an index lookup per row is what the set needs.
 */
const inSet = (sql: SqlClient.SqlClient, column: Fragment, subquery: Fragment): Fragment =>
  sql.onDialectOrElse({ pg: () => sql`${column} = ANY (ARRAY(${subquery}))`, orElse: () => sql`${column} IN (${subquery})` })

/**
 * `WITH everything_members, everything_set, everything_matched`: the compartment's members in range; with
 * what they refer to (one index lookup per reference); the current ones of those the query keeps.
 */
const withSet = (sql: SqlClient.SqlClient, catalog: Catalog, query: EverythingQuery): Fragment => {
  const range = inRange(sql, catalog, query)
  const members = sql.and([sql`c.compartment = ${query.compartment}`, sql`c.target_id = ${query.id}`, ...(range === undefined ? [] : [range])])
  return sql`WITH everything_members AS (SELECT c.rkey FROM search_compartment c WHERE ${members}),
    everything_set AS (
      SELECT rkey FROM everything_members
      UNION
      SELECT (SELECT t.rkey FROM resources t WHERE t.type = i.target_type AND t.id = i.target_id) FROM search_reference i
      WHERE ${inSet(sql, sql`i.rkey`, sql`SELECT rkey FROM everything_members`)}
    ),
    everything_matched AS (SELECT r.rkey FROM resources r WHERE ${where(sql, query)})`
}

const where = (sql: SqlClient.SqlClient, query: EverythingQuery): Fragment =>
  sql.and([
    inSet(sql, sql`r.rkey`, sql`SELECT rkey FROM everything_set`),
    sql`NOT r.deleted`,
    ...(query.sinceMicros === undefined ? [] : [sql`r.commit_ts >= ${query.sinceMicros}`]),
    ...(query.types === undefined ? [] : [query.types.length === 0 ? sql`1 = 0` : sql.in("r.type", query.types)]),
    ...(query.restrict === undefined ? [] : [query.restrict])
  ])

export interface EverythingRow {
  /** How many resources the whole set holds. */
  readonly total: number | string
  /** Null on the one row of a page past the end of the set, which only carries `total` (and so is the rest). */
  readonly type: string | null
  readonly id: string
  /** Whether the page holds the row (its content fits the page's bytes, src/search/plan/page.ts); the row after the page is read too, unkept. */
  readonly kept: number | string | boolean
  readonly content: string | null
  /** 1 for a compartment member (the focal resource included), 0 for a resource only referred to. */
  readonly member: number | string | boolean
}

/**
 * One page of the set, in row-key order, each row with the size of the whole set: one statement, so that
 * the set is gathered once (a page past the end is one row with the total alone). Of `count` rows and the one
 * after them, those whose contents fit `maxBytes` are kept and read (the first always).
 */
export const everythingPage = (sql: SqlClient.SqlClient, catalog: Catalog, query: EverythingQuery, count: number, offset: number, maxBytes: number) => {
  const rows = sql`SELECT r.rkey, r.type, r.id, r.version
    FROM (SELECT rkey FROM everything_matched ORDER BY rkey LIMIT ${limitOf(sql, count + 1)} OFFSET ${offset}) p JOIN resources r ON r.rkey = p.rkey`
  const keys = (alias: string) => [{ column: sql.literal(`${alias}.rkey`), descending: false, nullable: false, text: false }]
  return sql<EverythingRow>`${withSet(sql, catalog, query)}
    SELECT n.total, e.type, e.id, e.kept, e.content, e.member
    FROM (SELECT count(*) AS total FROM everything_matched) n LEFT JOIN (
      SELECT b.*, CASE WHEN b.rkey IN (SELECT rkey FROM everything_members) THEN 1 ELSE 0 END AS member
      FROM (${boundedPage(sql, rows, keys, count, maxBytes)}) b
    ) e ON 1 = 1
    ORDER BY e.n`
}
