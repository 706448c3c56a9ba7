/** Reading resources and their versions (ARCHITECTURE.md, Storage). */
import type { Statement } from "@effect/sql"
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import { type Cursor, type OrderKey, orderByKeys, pastCursor } from "../search/plan/cursor.ts"
import { boundedPage, type BoundedColumns, isKept } from "../search/plan/page.ts"
import { limitOf } from "../search/plan/query.ts"
import type { Operation } from "./versions.ts"

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
  op: row.op === "delete" || row.op === "create" || row.op === "patch" ? row.op : "update",
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

/** Ids per statement: well under SQLite's and Postgres's limits on bound parameters. */
const idsPerRead = 500

export interface CurrentRow extends VersionRow {
  /** Whether the resource meets the condition `currentOf` was given (true without one). */
  readonly allowed: boolean
}

/**
 * The current version of each resource of `type` among `ids` that ever existed (a delete has `content` null),
 * one statement per 500 ids, with whether it meets `condition` (a condition on `r`, such as a caller's
 * restriction: src/auth/access/conditions.ts). Ids never written are not in the answer.
 */
export const currentOf = (
  sql: SqlClient.SqlClient,
  type: string,
  ids: ReadonlyArray<string>,
  condition?: Statement.Fragment
): Effect.Effect<ReadonlyArray<CurrentRow>, SqlError> => {
  const chunks: Array<ReadonlyArray<string>> = []
  for (let i = 0; i < ids.length; i += idsPerRead) chunks.push(ids.slice(i, i + idsPerRead))
  const allowed = condition === undefined ? sql`1` : sql`CASE WHEN ${condition} THEN 1 ELSE 0 END`
  return Effect.map(
    Effect.forEach(chunks, (chunk) =>
      sql<RawVersion & { readonly allowed: number | string | boolean }>`
        SELECT r.type, r.id, v.version, v.commit_ts, v.op, v.content, ${allowed} AS allowed
        FROM resources r JOIN resource_versions v ON v.rkey = r.rkey AND v.version = r.version
        WHERE r.type = ${type} AND ${sql.in("r.id", chunk)}`),
    (read) => read.flat().map((row) => ({ ...toVersion(row), allowed: row.allowed === 1 || row.allowed === "1" || row.allowed === true }))
  )
}

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
  /** Where the page starts instead of `offset`: after (or, read backwards, before) the version it names. */
  readonly cursor?: Cursor | undefined
  /** The most bytes of versions the page holds (the first always). */
  readonly maxBytes: number
  /** A further condition on `r`, the resource of a version: a caller's restriction (src/auth/access/). */
  readonly restrict?: Statement.Fragment | undefined
}

type Paging = "count" | "offset" | "cursor" | "maxBytes"

const conditionsOf = (sql: SqlClient.SqlClient, query: Omit<HistoryQuery, Paging>) => {
  const conditions: Array<Statement.Fragment> = [sql`v.commit_ts <= ${query.until}`]
  if (query.since !== undefined) conditions.push(sql`v.commit_ts >= ${query.since}`)
  if (query.type !== undefined) conditions.push(sql`r.type = ${query.type}`)
  if (query.id !== undefined) conditions.push(sql`r.id = ${query.id}`)
  if (query.restrict !== undefined) conditions.push(query.restrict)
  if (query.currentDuring !== undefined) {
    // A version is current from its commit until the next version's; a next version past the snapshot does not count.
    const { from, to } = query.currentDuring
    conditions.push(sql`v.commit_ts < ${to}`)
    conditions.push(sql`NOT EXISTS (SELECT 1 FROM resource_versions later
      WHERE later.rkey = v.rkey AND later.version > v.version AND later.commit_ts <= ${Math.min(from, query.until)})`)
  }
  return sql.and(conditions)
}

export interface HistoryRow extends VersionRow {
  readonly rkey: number
}

/**
 * Versions newest first (commit order, then resource, then version), a page at a time: `count` at most,
 * within `maxBytes`, from `offset` or from the cursor. `more` says whether versions follow the page in the
 * direction it was read (a cursor `before` reads it backwards, from its end: `rows` are in that order).
 */
export const history = (sql: SqlClient.SqlClient, query: HistoryQuery) => {
  // Newest first: commit time, then row key, then version; what the history's cursors hold.
  const keys = (alias: string): ReadonlyArray<OrderKey> =>
    ["commit_ts", "rkey", "version"].map((column) => ({ column: sql.literal(`${alias}.${column}`), descending: true, nullable: false, text: false }))
  const backwards = query.cursor?.direction === "before"
  const where = sql.and([conditionsOf(sql, query), ...(query.cursor === undefined ? [] : [pastCursor(sql, keys("v"), query.cursor)])])
  const rows = sql`SELECT r.type, r.id, v.rkey, v.version, v.commit_ts, v.op
    FROM resource_versions v JOIN resources r ON r.rkey = v.rkey
    WHERE ${where}
    ORDER BY ${orderByKeys(sql, keys("v"), backwards)}
    LIMIT ${limitOf(sql, query.count + 1)} OFFSET ${query.offset}`
  return Effect.map(
    sql<RawVersion & BoundedColumns & { readonly rkey: number | string }>`${boundedPage(sql, rows, keys, query.count, query.maxBytes, backwards)}`,
    (read) => {
      const kept = read.filter(isKept)
      return { rows: kept.map((row): HistoryRow => ({ ...toVersion(row), rkey: Number(row.rkey) })), more: read.length > kept.length }
    }
  )
}

/** How many versions `history` would page through. */
export const historyTotal = (sql: SqlClient.SqlClient, query: Omit<HistoryQuery, Paging>) =>
  Effect.map(
    sql<{ readonly n: number | string }>`
      SELECT count(*) AS n FROM resource_versions v JOIN resources r ON r.rkey = v.rkey WHERE ${conditionsOf(sql, query)}`,
    (rows) => Number(rows[0]?.n ?? 0)
  )
