/**
 * The backfill's record in the database (migration 0004) and the job it implies: which resources a
 * catalog needs indexed again, and how far the job under way has got.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import { fingerprintOf } from "./fingerprint.ts"

export interface StoredState {
  /** The fingerprint each resource type's index rows were written for. */
  readonly types: ReadonlyMap<string, string>
  /** Resources installed by packages committed up to this are indexed. */
  readonly packagesTs: number
  readonly job: string | null
  readonly lastRkey: number
  /** The commit of the latest installed package. */
  readonly latestPackageTs: number
}

export interface Job {
  readonly key: string
  /** Every current resource of these types is indexed again (a type no longer known loses its rows). */
  readonly types: ReadonlyArray<string>
  /** So is every resource whose current version a package committed in (from, to]. */
  readonly packages: { readonly from: number; readonly to: number } | undefined
  /** The fingerprints to record when the job is done; types not listed here are forgotten. */
  readonly fingerprints: ReadonlyMap<string, string>
  /** The last resource already done: 0 for a new job. */
  readonly after: number
}

export interface Candidate {
  readonly rkey: number
  readonly type: string
  readonly id: string
  readonly content: string
}

export const readState = (sql: SqlClient.SqlClient): Effect.Effect<StoredState, SqlError> =>
  Effect.gen(function*() {
    const types = yield* sql<{ type: string; fingerprint: string }>`SELECT type, fingerprint FROM search_index_types`
    const rows = yield* sql<{ packages_ts: number | string; job: string | null; last_rkey: number | string }>`
      SELECT packages_ts, job, last_rkey FROM search_backfill WHERE id = 1`
    const latest = yield* sql<{ ts: number | string | null }>`SELECT max(commit_ts) AS ts FROM svc_packages`
    const row = rows[0]
    return {
      types: new Map(types.map((t) => [t.type, t.fingerprint])),
      packagesTs: Number(row?.packages_ts ?? 0),
      job: row?.job ?? null,
      lastRkey: Number(row?.last_rkey ?? 0),
      latestPackageTs: Number(latest[0]?.ts ?? 0)
    }
  })

/** The job that brings the index from `state` to the catalog of `fingerprints`; undefined when it is there. */
export const planJob = (fingerprints: ReadonlyMap<string, string>, state: StoredState): Job | undefined => {
  const types = new Set<string>()
  for (const [type, fingerprint] of fingerprints) if (state.types.get(type) !== fingerprint) types.add(type)
  for (const type of state.types.keys()) if (!fingerprints.has(type)) types.add(type)
  const packages = state.latestPackageTs > state.packagesTs ? { from: state.packagesTs, to: state.latestPackageTs } : undefined
  if (types.size === 0 && packages === undefined) return undefined
  const sorted = [...types].sort()
  const key = fingerprintOf([sorted.map((type) => [type, fingerprints.get(type) ?? null]), packages ?? null])
  return { key, types: sorted, packages, fingerprints, after: state.job === key ? state.lastRkey : 0 }
}

const scope = (sql: SqlClient.SqlClient, job: Job) => {
  const parts = []
  if (job.types.length > 0) parts.push(sql.in("r.type", job.types))
  if (job.packages !== undefined) {
    parts.push(sql`r.commit_ts IN (SELECT commit_ts FROM svc_packages
      WHERE commit_ts > ${job.packages.from} AND commit_ts <= ${job.packages.to})`)
  }
  return sql.and([sql`NOT r.deleted`, sql.or(parts)])
}

/** How many resources the job covers, and how many of them lie at or before `after`. */
export const countJob = (sql: SqlClient.SqlClient, job: Job) =>
  Effect.map(
    sql<{ total: number | string; done: number | string | null }>`
      SELECT count(*) AS total, sum(CASE WHEN r.rkey <= ${job.after} THEN 1 ELSE 0 END) AS done
      FROM resources r WHERE ${scope(sql, job)}`,
    (rows) => ({ total: Number(rows[0]?.total ?? 0), done: Number(rows[0]?.done ?? 0) })
  )

/** The next resources of the job after `after`, in row-key order, with their current text. */
export const nextCandidates = (sql: SqlClient.SqlClient, job: Job, after: number, limit: number) =>
  Effect.map(
    sql<{ rkey: number | string; type: string; id: string; content: string }>`
      SELECT r.rkey, r.type, r.id, v.content
      FROM resources r JOIN resource_versions v ON v.rkey = r.rkey AND v.version = r.version
      WHERE r.rkey > ${after} AND ${scope(sql, job)}
      ORDER BY r.rkey LIMIT ${limit}`,
    (rows): ReadonlyArray<Candidate> => rows.map((row) => ({ rkey: Number(row.rkey), type: row.type, id: row.id, content: row.content }))
  )

/** Notes that the job has done every resource up to `lastRkey`. */
export const saveCursor = (sql: SqlClient.SqlClient, job: Job, lastRkey: number) =>
  sql`UPDATE search_backfill SET job = ${job.key}, last_rkey = ${lastRkey} WHERE id = 1`

/** Records what the index now holds and clears the job. */
export const finishJob = (sql: SqlClient.SqlClient, job: Job): Effect.Effect<void, SqlError> =>
  Effect.gen(function*() {
    const forgotten = job.types.filter((type) => !job.fingerprints.has(type))
    if (forgotten.length > 0) yield* sql`DELETE FROM search_index_types WHERE ${sql.in("type", forgotten)}`
    const known = job.types.flatMap((type) => {
      const fingerprint = job.fingerprints.get(type)
      return fingerprint === undefined ? [] : [{ type, fingerprint }]
    })
    for (let i = 0; i < known.length; i += 200) {
      yield* sql`INSERT INTO search_index_types ${sql.insert(known.slice(i, i + 200))}
        ON CONFLICT (type) DO UPDATE SET fingerprint = excluded.fingerprint`
    }
    const packagesTs = job.packages?.to
    yield* packagesTs === undefined
      ? sql`UPDATE search_backfill SET job = NULL, last_rkey = 0 WHERE id = 1`
      : sql`UPDATE search_backfill SET job = NULL, last_rkey = 0, packages_ts = ${packagesTs} WHERE id = 1`
  })
