/** Reading resources and their versions (ARCHITECTURE.md, Storage). */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import type { Operation } from "./ResourceStore.ts"

export interface VersionRow {
  readonly type: string
  readonly id: string
  readonly version: number
  readonly commitTs: number
  readonly op: Operation
  /** The JSON text as served; null for a delete. */
  readonly content: string | null
}

interface RawVersion {
  readonly type: string
  readonly id: string
  readonly version: number
  readonly commit_ts: number | string
  readonly op: string
  readonly content: string | null
}

const toVersion = (row: RawVersion): VersionRow => ({
  type: row.type,
  id: row.id,
  version: Number(row.version),
  commitTs: Number(row.commit_ts),
  op: row.op === "delete" ? "delete" : row.op === "create" ? "create" : "update",
  content: row.content
})

/** The current, not deleted, version's text of every resource of the given types. */
export const currentOfTypes = (sql: SqlClient.SqlClient, types: ReadonlyArray<string>) =>
  sql<{ readonly type: string; readonly content: string }>`
    SELECT r.type, v.content
    FROM resources r JOIN resource_versions v ON v.rkey = r.rkey AND v.version = r.version
    WHERE ${sql.in("r.type", types)} AND NOT r.deleted`

/** The current version of `type/id` (a delete has `content` null), or undefined when it never existed. */
export const readCurrent = (sql: SqlClient.SqlClient, type: string, id: string): Effect.Effect<VersionRow | undefined, SqlError> =>
  Effect.map(
    sql<RawVersion>`
      SELECT r.type, r.id, v.version, v.commit_ts, v.op, v.content
      FROM resources r JOIN resource_versions v ON v.rkey = r.rkey AND v.version = r.version
      WHERE r.type = ${type} AND r.id = ${id}`,
    (rows) => (rows[0] === undefined ? undefined : toVersion(rows[0]))
  )

/** One version of `type/id`, or undefined. */
export const readVersion = (sql: SqlClient.SqlClient, type: string, id: string, version: number) =>
  Effect.map(
    sql<RawVersion>`
      SELECT r.type, r.id, v.version, v.commit_ts, v.op, v.content
      FROM resources r JOIN resource_versions v ON v.rkey = r.rkey
      WHERE r.type = ${type} AND r.id = ${id} AND v.version = ${version}`,
    (rows) => (rows[0] === undefined ? undefined : toVersion(rows[0]))
  )

export interface HistoryQuery {
  /** Instance level: both set; type level: `type` only; system level: neither. */
  readonly type?: string | undefined
  readonly id?: string | undefined
  /** Versions committed at or after this, from `_since`. */
  readonly since?: number | undefined
  /** Versions committed at or before this: the first page's snapshot. */
  readonly until: number
  /** `_at`: only the versions that were current at some time in `[from, to)`, as of `until`. */
  readonly currentDuring?: { readonly from: number; readonly to: number } | undefined
  readonly count: number
  readonly offset: number
}

const conditionsOf = (sql: SqlClient.SqlClient, query: Omit<HistoryQuery, "count" | "offset">) => {
  const conditions = [sql`v.commit_ts <= ${query.until}`]
  if (query.since !== undefined) conditions.push(sql`v.commit_ts >= ${query.since}`)
  if (query.type !== undefined) conditions.push(sql`r.type = ${query.type}`)
  if (query.id !== undefined) conditions.push(sql`r.id = ${query.id}`)
  if (query.currentDuring !== undefined) {
    // A version is current from its commit until the next version's; a next version past the snapshot does not count.
    const { from, to } = query.currentDuring
    conditions.push(sql`v.commit_ts < ${to}`)
    conditions.push(sql`NOT EXISTS (SELECT 1 FROM resource_versions later
      WHERE later.rkey = v.rkey AND later.version > v.version AND later.commit_ts <= ${Math.min(from, query.until)})`)
  }
  return sql.and(conditions)
}

/** Versions newest first (commit order, then resource, then version), a page at a time. */
export const history = (sql: SqlClient.SqlClient, query: HistoryQuery) =>
  Effect.map(
    sql<RawVersion>`
      SELECT r.type, r.id, v.version, v.commit_ts, v.op, v.content
      FROM resource_versions v JOIN resources r ON r.rkey = v.rkey
      WHERE ${conditionsOf(sql, query)}
      ORDER BY v.commit_ts DESC, v.rkey DESC, v.version DESC
      LIMIT ${query.count} OFFSET ${query.offset}`,
    (rows) => rows.map(toVersion)
  )

/** How many versions `history` would page through. */
export const historyTotal = (sql: SqlClient.SqlClient, query: Omit<HistoryQuery, "count" | "offset">) =>
  Effect.map(
    sql<{ readonly n: number | string }>`
      SELECT count(*) AS n FROM resource_versions v JOIN resources r ON r.rkey = v.rkey WHERE ${conditionsOf(sql, query)}`,
    (rows) => Number(rows[0]?.n ?? 0)
  )
