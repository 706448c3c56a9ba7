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
import * as Crypto from "node:crypto"
import { createHash, createHmac, createSecretKey } from "node:crypto"
import type { Dialect } from "../../db/Database.ts"
import { Pacer, paced, workPerYield } from "../../db/EventLoop.ts"
import { flatInsert, type FlatValue } from "../../db/multiRowInsert.ts"
import { withoutNul } from "../../db/text.ts"
import { type AuditEvent, type Columns, columnsOf, pack, type Packed, unpackEvent } from "./events.ts"

/** The key of the chain's HMAC; undefined: a plain SHA-256. */
export type ChainKey = Redacted.Redacted<string> | undefined

/** HMAC-SHA256 (or SHA-256 without a key) of a text, as hex. */
type Hasher = (text: string) => string

/** Node's one-shot digest (Node 20.12 and later): no Hash object per row. */
const oneShot = (Crypto as { readonly hash?: (algorithm: string, data: string | Buffer, encoding: string) => string | Buffer }).hash

const sha256Hex: Hasher = oneShot === undefined
  ? (text) => createHash("sha256").update(text).digest("hex")
  : (text) => oneShot("sha256", text, "hex") as string

/**
 * The HMAC of a text, made of two one-shot SHA-256 digests (RFC 2104) when the key is ASCII of at most 64 bytes:
 * the padded inner key is then a text of its own and the outer block a buffer kept for the next call, which
 * takes about a third less time than an `Hmac` object per row. Other keys take `createHmac`.
 */
const hmacHasher = (secret: string): Hasher => {
  const bytes = Buffer.from(secret, "utf8")
  if (oneShot === undefined || bytes.length > 64 || bytes.some((byte) => byte >= 0x80)) {
    const key = createSecretKey(bytes)
    return (text) => createHmac("sha256", key).update(text).digest("hex")
  }
  const padded = Buffer.alloc(64)
  bytes.copy(padded)
  const inner = String.fromCharCode(...padded.map((byte) => byte ^ 0x36))
  const outer = Buffer.alloc(96)
  for (let i = 0; i < 64; i++) outer[i] = padded[i]! ^ 0x5c
  const digest = oneShot
  return (text) => {
    ;(digest("sha256", inner + text, "buffer") as Buffer).copy(outer, 64)
    return digest("sha256", outer, "hex") as string
  }
}

const hashers = new WeakMap<Redacted.Redacted<string>, Hasher>()

const hasherOf = (key: ChainKey): Hasher => {
  if (key === undefined) return sha256Hex
  let hasher = hashers.get(key)
  if (hasher === undefined) {
    hasher = hmacHasher(Redacted.value(key))
    hashers.set(key, hasher)
  }
  return hasher
}

export const hashOf = (key: ChainKey, prevHash: string, seq: number, event: string): string =>
  hasherOf(key)(`${prevHash}\n${seq}\n${event}`)

interface HeadRow {
  readonly last_seq: number | string
  readonly last_hash: string
  readonly cut_seq: number | string
  readonly cut_hash: string
}

/** Inserts an append's rows; `append` gives their values in this column order. */
const insertRows = flatInsert("svc_audit", ["seq", "time", "kind", "action", "outcome", "agent", "client", "entity", "event", "prev_hash", "hash"])

/** Appends of this many rows or more are chained in the order of the resource each is about; see `append`. */
export const sortedFrom = 256

/** Orders rows by the resource they are about (those about none first), keeping their order otherwise. */
const byEntity = (a: Packed, b: Packed): number => {
  const x = a.columns.entity
  const y = b.columns.entity
  return x === y ? 0 : x === null ? -1 : y === null ? 1 : x < y ? -1 : 1
}

/**
 * Appends `events` to the chain on `sql`, which must be inside a transaction (the Writer's): the head row stays
 * locked until it ends, so appends by several servers queue one behind the other. An event may come already
 * packed (events.ts, `packRequest`, `packChange`).
 *
 * The rows are chained in the order they came, except in an append of `sortedFrom` rows or more (a busy
 * second's reads, a large transaction), which are chained in the order of the resource each is about
 * (`Type/id`; in the order they came among those about the same one, or none): the index by resource then
 * takes them in its own order, a few neighbouring pages at a time, where rows in the order they came land all
 * over it. For a second of reads that takes some 40% off what the rows cost the database; the time of each is
 * in its `recorded`.
 */
export const append = (
  sql: SqlClient,
  dialect: Dialect,
  key: ChainKey,
  events: ReadonlyArray<AuditEvent | Packed>
): Effect.Effect<void, SqlError> =>
  Effect.gen(function*() {
    if (events.length === 0) return
    const heads = yield* (dialect === "pg"
      ? sql<HeadRow>`SELECT last_seq, last_hash, cut_seq, cut_hash FROM svc_audit_head WHERE id = 1 FOR UPDATE`
      : sql<HeadRow>`SELECT last_seq, last_hash, cut_seq, cut_hash FROM svc_audit_head WHERE id = 1`)
    const head = heads[0]
    const hasher = hasherOf(key)
    const rows = events.map((event) => ("resourceType" in event ? pack(event) : event))
    if (rows.length >= sortedFrom) rows.sort(byEntity)
    let seq = Number(head?.last_seq ?? 0)
    let prev = head?.last_hash ?? ""
    // A busy second's thousands of hashes let requests in between, as the Writer's other work does.
    const values = yield* paced(new Pacer(workPerYield), function*() {
      const values: Array<FlatValue> = []
      for (const { text, columns } of rows) {
        seq += 1
        const hash = hasher(`${prev}\n${seq}\n${text}`)
        values.push(seq, columns.time, columns.kind, columns.action, columns.outcome, columns.agent, columns.client, columns.entity, text, prev, hash)
        prev = hash
        yield 1
      }
      return values
    }())
    // The head moves with the rows, in the rows' statement on Postgres (one round trip).
    yield* insertRows(sql, dialect, values, {
      text: (parameter) => `UPDATE svc_audit_head SET last_seq = ${parameter(0)}, last_hash = ${parameter(1)} WHERE id = 1`,
      values: [seq, prev]
    })
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
  return Number(row.time) === columns.time && sameText(row.kind, columns.kind) && sameText(row.action, columns.action) &&
    sameText(row.outcome, columns.outcome) && sameText(row.agent, columns.agent) && sameText(row.client ?? null, columns.client) &&
    sameText(row.entity ?? null, columns.entity)
}

/**
 * Whether a column holds the text its event says, where Postgres keeps U+0000 (which its text cannot hold) as
 * U+FFFD (src/db/unnest.ts): an entity read from a request's path may hold it.
 */
const sameText = (stored: string | null, expected: string | null): boolean =>
  stored === expected || (stored !== null && expected !== null && stored === withoutNul(expected))

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
