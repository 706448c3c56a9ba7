/**
 * Resource versions in the database (ARCHITECTURE.md, Storage): `resources` points at each
 * resource's current version, `resource_versions` keeps every version as the JSON text served.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import { outsideTransaction } from "../db/Writer.ts"
import { stringifyJson } from "../json/Json.ts"
import { carryLexical } from "../json/lexical.ts"
import type { Operation } from "../db/ChangeFeed.ts"
import { rowsPerStatement, type WriteBatch } from "../db/WriteBatch.ts"
import { isPostgres } from "../db/unnest.ts"

export type { Operation } from "../db/ChangeFeed.ts"

export interface StoredVersion {
  readonly rkey: number
  readonly version: number
  /** The resource as stored, with the server's id and meta. */
  readonly resource: Record<string, unknown>
  /** Its JSON text, as served (decimals as written: docs/formats.md). */
  readonly content: string
}

/** FHIR `instant` of a commit timestamp (microseconds), to the millisecond. */
export const instantOf = (commitTs: number): string => new Date(Math.floor(commitTs / 1000)).toISOString()

/** The resource as stored: `id` and `meta.versionId` / `meta.lastUpdated` are the server's. */
export const withServerMeta = (
  resource: Record<string, unknown>,
  id: string,
  version: number,
  commitTs: number
): Record<string, unknown> => {
  const { id: _ignored, meta, resourceType, ...rest } = resource
  const given = typeof meta === "object" && meta !== null && !Array.isArray(meta) ? meta : {}
  return carryLexical(resource, {
    resourceType,
    id,
    ...rest,
    meta: { ...given, versionId: String(version), lastUpdated: instantOf(commitTs) }
  })
}

/**
 * Writes a new version of `type/id` (creating the resource when it is new). Runs inside the
 * Writer's transaction, which gives `commitTs`. With a `batch`, the version row joins it. `patched`
 * records the version as a patch of the last rather than an update.
 */
export const putVersion = (
  sql: SqlClient.SqlClient,
  input: {
    readonly type: string
    readonly id: string
    readonly resource: Record<string, unknown>
    readonly commitTs: number
    readonly patched?: boolean
    /**
     * The id is new (chosen by the server, a random UUID): on Postgres, with a `batch`, the resource's own row
     * joins the batch too, under a row key taken ahead (`nextRowKey`), and the create costs no statement of its own.
     */
    readonly fresh?: boolean
  },
  batch?: WriteBatch
): Effect.Effect<StoredVersion, SqlError> =>
  Effect.gen(function*() {
    if (input.fresh === true && batch !== undefined && isPostgres(sql)) {
      const [rkey] = yield* nextRowKeys(sql, 1)
      return freshVersion(batch, input, rkey!, input.commitTs)
    }
    const rows = yield* sql<{ readonly rkey: number | string; readonly version: number}>`
      INSERT INTO resources (type, id, version, commit_ts, deleted)
      VALUES (${input.type}, ${input.id}, 1, ${input.commitTs}, ${sql.onDialectOrElse({ pg: () => false, orElse: () => 0 })})
      ON CONFLICT (type, id) DO UPDATE SET
        version = resources.version + 1,
        commit_ts = excluded.commit_ts,
        deleted = excluded.deleted
      RETURNING rkey, version`
    const row = rows[0]!
    const op: Operation = row.version === 1 ? "create" : input.patched === true ? "patch" : "update"
    if (batch !== undefined) {
      batch.about(input.type, input.id)
      return batchVersion(batch, input, Number(row.rkey), row.version, input.commitTs, op)
    }
    const resource = withServerMeta(input.resource, input.id, row.version, input.commitTs)
    const content = stringifyJson(resource)
    yield* sql`
      INSERT INTO resource_versions (rkey, version, commit_ts, op, content)
      VALUES (${row.rkey}, ${row.version}, ${input.commitTs}, ${op}, ${content})`
    return { rkey: Number(row.rkey), version: row.version, resource, content }
  })

/** The stored form of `input` as version `version` of the resource `rkey`, its version row added to `batch`. */
const batchVersion = (
  batch: WriteBatch,
  input: { readonly id: string; readonly resource: Record<string, unknown> },
  rkey: number,
  version: number,
  commitTs: number,
  op: Operation
): StoredVersion => {
  const resource = withServerMeta(input.resource, input.id, version, commitTs)
  const content = stringifyJson(resource)
  batch.add("resource_versions", { rkey, version, commit_ts: commitTs, op, content })
  return { rkey, version, resource, content }
}

/** A new resource (`fresh`) as version 1 under the row key `rkey`: its row and its version's join `batch`. */
const freshVersion = (batch: WriteBatch, input: { readonly type: string; readonly id: string; readonly resource: Record<string, unknown> }, rkey: number, commitTs: number): StoredVersion => {
  batch.about(input.type, input.id)
  batch.add("resources", { rkey, type: input.type, id: input.id, version: 1, commit_ts: commitTs, deleted: false })
  return batchVersion(batch, input, rkey, 1, commitTs, "create")
}

/** Row keys taken from the `resources` sequence at a time (at least), for creates whose rows are batched. */
const rowKeysAtATime = 64

/** Row keys taken and not yet used, per client (only the Writer's connection writes resources). */
const rowKeys = new WeakMap<SqlClient.SqlClient, Array<number>>()

/**
 * The next `count` row keys of `resources` on Postgres, one statement for `rowKeysAtATime` keys or as many as asked,
 * outside the transaction (a sequence is not transactional: keys of a transaction that rolls back are skipped, as
 * the identity column's own would be).
 */
const nextRowKeys = (sql: SqlClient.SqlClient, count: number): Effect.Effect<Array<number>, SqlError> => {
  const held = rowKeys.get(sql) ?? []
  if (held.length >= count) return Effect.succeed(held.splice(0, count))
  return Effect.map(
    outsideTransaction(sql<{ readonly k: string | number }>`
      SELECT nextval(pg_get_serial_sequence('resources', 'rkey')) AS k FROM generate_series(1, ${Math.max(rowKeysAtATime, count)})`),
    (rows) => {
      const keys = (rowKeys.get(sql) ?? []).concat(rows.map((row) => Number(row.k)))
      const taken = keys.splice(0, count)
      rowKeys.set(sql, keys)
      return taken
    }
  )
}

export interface NewVersion {
  readonly type: string
  readonly id: string
  readonly resource: Record<string, unknown>
}

/**
 * `putVersion` for many resources of one transaction (distinct `type/id`s), with one multi-row upsert of
 * `resources` per parameter limit; their version rows join `batch`. In the order given. `fresh`: every id is new
 * (chosen by the server), and on Postgres their rows join the batch too, under row keys taken ahead, as
 * `putVersion`'s do: the creates send no statement of their own.
 */
export const putVersions = (
  sql: SqlClient.SqlClient,
  inputs: ReadonlyArray<NewVersion>,
  commitTs: number,
  batch: WriteBatch,
  fresh = false
): Effect.Effect<ReadonlyArray<StoredVersion>, SqlError> =>
  Effect.gen(function*() {
    if (fresh && isPostgres(sql)) {
      const keys = yield* nextRowKeys(sql, inputs.length)
      return inputs.map((input, n) => freshVersion(batch, input, keys[n]!, commitTs))
    }
    const deleted = sql.onDialectOrElse({ pg: () => false, orElse: () => 0 })
    const size = rowsPerStatement(sql, 5)
    const keys = new Map<string, { readonly rkey: number; readonly version: number }>()
    for (let start = 0; start < inputs.length; start += size) {
      const rows = inputs.slice(start, start + size).map((input) => ({ type: input.type, id: input.id, version: 1, commit_ts: commitTs, deleted }))
      const returned = yield* sql<{ readonly rkey: number | string; readonly type: string; readonly id: string; readonly version: number }>`
        INSERT INTO resources ${sql.insert(rows)}
        ON CONFLICT (type, id) DO UPDATE SET
          version = resources.version + 1,
          commit_ts = excluded.commit_ts,
          deleted = excluded.deleted
        RETURNING rkey, type, id, version`
      for (const row of returned) keys.set(`${row.type}/${row.id}`, { rkey: Number(row.rkey), version: Number(row.version) })
    }
    return inputs.map((input) => {
      const row = keys.get(`${input.type}/${input.id}`)!
      batch.about(input.type, input.id)
      return batchVersion(batch, input, row.rkey, row.version, commitTs, row.version === 1 ? "create" : "update")
    })
  })

/**
 * Marks `type/id` deleted with a new version that has no content. Undefined when the resource never
 * existed; the current version unchanged when it is deleted already (deleting twice adds nothing).
 */
export const deleteResource = (
  sql: SqlClient.SqlClient,
  input: { readonly type: string; readonly id: string; readonly commitTs: number }
): Effect.Effect<{ readonly rkey: number; readonly version: number; readonly changed: boolean } | undefined, SqlError> =>
  Effect.gen(function*() {
    const rows = yield* sql<{ readonly rkey: number | string; readonly version: number; readonly deleted: number | boolean }>`
      SELECT rkey, version, deleted FROM resources WHERE type = ${input.type} AND id = ${input.id}`
    const row = rows[0]
    if (row === undefined) return undefined
    if (row.deleted === true || row.deleted === 1) return { rkey: Number(row.rkey), version: row.version, changed: false }
    const version = row.version + 1
    yield* sql`
      UPDATE resources SET version = ${version}, commit_ts = ${input.commitTs},
        deleted = ${sql.onDialectOrElse({ pg: () => true, orElse: () => 1 })}
      WHERE rkey = ${row.rkey}`
    yield* sql`
      INSERT INTO resource_versions (rkey, version, commit_ts, op, content)
      VALUES (${row.rkey}, ${version}, ${input.commitTs}, ${"delete"}, ${null})`
    return { rkey: Number(row.rkey), version, changed: true }
  })

/**
 * Rewrites the stored text of version `version` of the resource `rkey` in place, without a new version (its
 * versionId, lastUpdated and commit timestamp stay): what `$meta-add` and `$meta-delete` do. The change is
 * noted in `resource_edits` at `commitTs`, where the change log shows it (src/db/ChangeFeed.ts).
 */
export const rewriteVersion = (
  sql: SqlClient.SqlClient,
  input: { readonly rkey: number; readonly version: number; readonly content: string; readonly commitTs: number }
): Effect.Effect<void, SqlError> =>
  Effect.zipRight(
    sql`UPDATE resource_versions SET content = ${input.content} WHERE rkey = ${input.rkey} AND version = ${input.version}`,
    sql`INSERT INTO resource_edits (commit_ts, rkey, version) VALUES (${input.commitTs}, ${input.rkey}, ${input.version})`
  )
