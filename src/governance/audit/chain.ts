/**
 * The audit trail's hash chain (spec: Limits, "Audit hash-chain key"; Events, "Audit events"). One chain per
 * database, however many servers append: each row's `hash` is HMAC-SHA256(key, prev_hash + "\n" + seq + "\n" +
 * event), where `prev_hash` is the hash of the row before it ("" for the first) and `event` the AuditEvent's
 * JSON text; without `SVC_AUDIT_KEY` a plain SHA-256 of the same text, which catches mistakes but not a forger.
 *
 * An append runs inside a transaction of the Writer: it locks the head row (Postgres `FOR UPDATE`; SQLite has
 * one writer), reads the last seq and hash, inserts the rows and moves the head. Retention deletes the oldest
 * rows and keeps the seq and hash of the last one deleted in the head (the cut), so verification starts from
 * there and what remains still verifies.
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Redacted } from "effect"
import { createHash, createHmac } from "node:crypto"
import type { Dialect } from "../../db/Database.ts"
import { type AuditEvent, type Columns, columnsOf, packEvent, unpackEvent } from "./events.ts"

/** The key of the chain's HMAC; undefined: a plain SHA-256. */
export type ChainKey = Redacted.Redacted<string> | undefined

export const hashOf = (key: ChainKey, prevHash: string, seq: number, event: string): string => {
  const text = `${prevHash}\n${seq}\n${event}`
  return key === undefined
    ? createHash("sha256").update(text).digest("hex")
    : createHmac("sha256", Redacted.value(key)).update(text).digest("hex")
}

interface HeadRow {
  readonly last_seq: number | string
  readonly last_hash: string
  readonly cut_seq: number | string
  readonly cut_hash: string
}

/** Rows inserted by one statement; a larger batch takes several. */
const insertRows = 200

/**
 * Appends `events` to the chain, in order, on `sql`, which must be inside a transaction (the Writer's): the
 * head row stays locked until it ends, so appends by several servers queue one behind the other.
 */
export const append = (
  sql: SqlClient,
  dialect: Dialect,
  key: ChainKey,
  events: ReadonlyArray<AuditEvent>
): Effect.Effect<void, SqlError> =>
  Effect.gen(function*() {
    if (events.length === 0) return
    const heads = yield* (dialect === "pg"
      ? sql<HeadRow>`SELECT last_seq, last_hash, cut_seq, cut_hash FROM svc_audit_head WHERE id = 1 FOR UPDATE`
      : sql<HeadRow>`SELECT last_seq, last_hash, cut_seq, cut_hash FROM svc_audit_head WHERE id = 1`)
    const head = heads[0]
    let seq = Number(head?.last_seq ?? 0)
    let prev = head?.last_hash ?? ""
    const rows: Array<Record<string, unknown>> = []
    for (const event of events) {
      seq += 1
      const text = packEvent(event)
      const hash = hashOf(key, prev, seq, text)
      rows.push({ seq, ...columnsOf(event), event: text, prev_hash: prev, hash })
      prev = hash
    }
    for (let i = 0; i < rows.length; i += insertRows) {
      yield* sql`INSERT INTO svc_audit ${sql.insert(rows.slice(i, i + insertRows))}`
    }
    yield* sql`UPDATE svc_audit_head SET last_seq = ${seq}, last_hash = ${prev} WHERE id = 1`
  })

/** How verification tells tampering apart; see `verify`. */
export type Problem = "altered" | "removed" | "inserted" | "reordered"

export interface Verification {
  readonly rows_checked: number
  readonly ok: boolean
  readonly first_problem: { readonly seq: number; readonly kind: Problem } | null
  /** Where verification started: the retention cut (0 when nothing was cut). */
  readonly from_seq: number
  /** Whether the chain is keyed (HMAC) or a plain hash. */
  readonly keyed: boolean
}

/** A row as the database gives it back: its filter columns (`Columns`), with numbers that may come as text. */
interface StoredRow extends Omit<Columns, "time"> {
  readonly seq: number | string
  readonly time: number | string
  readonly event: string
  readonly prev_hash: string
  readonly hash: string
}

/** Rows read at a time. */
export const verifyPageRows = 1000

/** Whether a row's hash is right for its own prev_hash, seq and event, and its columns say what its event says. */
const intact = (key: ChainKey, row: StoredRow): boolean => {
  if (hashOf(key, row.prev_hash, Number(row.seq), row.event) !== row.hash) return false
  let event: AuditEvent
  try {
    event = unpackEvent(row.event)
  } catch {
    return false
  }
  const columns = columnsOf(event)
  return Number(row.time) === columns.time && row.kind === columns.kind && row.action === columns.action &&
    row.outcome === columns.outcome && row.agent === columns.agent && (row.client ?? null) === columns.client &&
    (row.entity ?? null) === columns.entity
}

/**
 * Recomputes the chain from the cut (or the start) in seq order, `verifyPageRows` at a time, up to the head
 * as it was when verification began (rows appended meanwhile are left for the next run). The first problem
 * found is named, at the seq where it shows, by these rules, for a row R where seq S and previous hash P were
 * expected, N being the row after R:
 *
 * - R's seq is past S: the rows from S were deleted: `removed` at S.
 * - R is intact (its hash is right for its prev_hash, seq and event, and its columns agree with its event)
 *   and R.prev_hash = P: fine.
 * - R.prev_hash is the hash of a row later in the page (the rows' places were exchanged): `reordered` at S.
 * - N.prev_hash = P (the chain goes on as though R were not there): `inserted` at S.
 * - R is not intact: `altered` at S (its event, seq, hash or a column was edited).
 * - R is intact but follows a row that is not there: `removed` at S.
 * - After the last row: rows end before the head's last seq (`removed` at the first missing seq), the last
 *   hash is not the head's (`altered`), or rows lie past the head (`inserted` at the first of them).
 *
 * Changing the head row itself, or deleting a prefix of the rows and moving the cut over them, is what
 * retention does and is not caught; the chain's key protects every row after the cut.
 */
export const verify = (sql: SqlClient, key: ChainKey): Effect.Effect<Verification, SqlError> =>
  Effect.gen(function*() {
    const heads = yield* sql<HeadRow & { readonly max_seq: number | string | null }>`
      SELECT last_seq, last_hash, cut_seq, cut_hash, (SELECT max(seq) FROM svc_audit) AS max_seq
      FROM svc_audit_head WHERE id = 1`
    const head = heads[0]
    const lastSeq = Number(head?.last_seq ?? 0)
    const cutSeq = Number(head?.cut_seq ?? 0)
    const maxSeq = head?.max_seq === null || head?.max_seq === undefined ? 0 : Number(head.max_seq)
    let expected = cutSeq + 1
    let prev = head?.cut_hash ?? ""
    let checked = 0
    const done = (problem: Verification["first_problem"]): Verification => ({
      rows_checked: checked,
      ok: problem === null,
      first_problem: problem,
      from_seq: cutSeq,
      keyed: key !== undefined
    })
    // The last row of the previous page, looked at again as the first of this one.
    let after = cutSeq
    while (after < lastSeq) {
      const page = yield* sql<StoredRow>`
        SELECT seq, time, kind, action, outcome, agent, client, entity, event, prev_hash, hash
        FROM svc_audit WHERE seq > ${after} AND seq <= ${lastSeq} ORDER BY seq LIMIT ${verifyPageRows + 1}`
      if (page.length === 0) break
      const upTo = page.length > verifyPageRows ? verifyPageRows : page.length
      for (let i = 0; i < upTo; i++) {
        const row = page[i]!
        const next = page[i + 1]
        const seq = Number(row.seq)
        if (seq > expected) return done({ seq: expected, kind: "removed" })
        const whole = intact(key, row)
        if (whole && row.prev_hash === prev) {
          checked += 1
          prev = row.hash
          expected = seq + 1
          continue
        }
        if (page.slice(i + 1).some((later) => later.hash === row.prev_hash)) return done({ seq, kind: "reordered" })
        if (next !== undefined && next.prev_hash === prev) return done({ seq, kind: "inserted" })
        return done({ seq, kind: whole ? "removed" : "altered" })
      }
      after = Number(page[upTo - 1]!.seq)
    }
    if (expected <= lastSeq) return done({ seq: expected, kind: "removed" })
    if (lastSeq > cutSeq && prev !== head?.last_hash) return done({ seq: lastSeq, kind: "altered" })
    if (maxSeq > lastSeq) return done({ seq: lastSeq + 1, kind: "inserted" })
    return done(null)
  })

/** Rows deleted by one retention step. */
export const retentionBatchRows = 1000

/**
 * Deletes up to `retentionBatchRows` of the oldest rows recorded before `beforeMillis`, in seq order and only
 * a run from the start, and moves the cut to the last one deleted. Runs inside a Writer transaction; returns
 * how many rows it deleted (0: nothing older is left).
 */
export const cutOlder = (sql: SqlClient, dialect: Dialect, beforeMillis: number): Effect.Effect<number, SqlError> =>
  Effect.gen(function*() {
    if (dialect === "pg") yield* sql`SELECT cut_seq FROM svc_audit_head WHERE id = 1 FOR UPDATE`
    const oldest = yield* sql<{ readonly seq: number | string; readonly time: number | string; readonly hash: string }>`
      SELECT seq, time, hash FROM svc_audit ORDER BY seq LIMIT ${retentionBatchRows}`
    let last: { readonly seq: number; readonly hash: string } | undefined
    for (const row of oldest) {
      if (Number(row.time) >= beforeMillis) break
      last = { seq: Number(row.seq), hash: row.hash }
    }
    if (last === undefined) return 0
    const deleted = oldest.findIndex((row) => Number(row.seq) === last!.seq) + 1
    yield* sql`DELETE FROM svc_audit WHERE seq <= ${last.seq}`
    yield* sql`UPDATE svc_audit_head SET cut_seq = ${last.seq}, cut_hash = ${last.hash} WHERE id = 1`
    return deleted
  })
