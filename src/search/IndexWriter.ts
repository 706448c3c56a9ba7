/**
 * Writes a resource version's search index rows (migrations 0003 and 0005) inside the Writer's transaction:
 * a new resource only inserts; an update replaces its rows; a delete removes them.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import { insertMany, type WriteBatch } from "../db/WriteBatch.ts"
import type { IndexRow } from "./extract/IndexRow.ts"
import { words } from "./extract/values.ts"
import { fullText, keyOf } from "./indexKey.ts"

export const indexTables = [
  "search_token", "search_string", "search_date", "search_number", "search_quantity",
  "search_reference", "search_uri", "search_composite", "search_near", "search_compartment"
] as const

type Table = (typeof indexTables)[number]

const ascii = /^[\x00-\x7f]*$/

/**
 * `words` (what token `:text` compares), without its Unicode passes for ASCII text, where they change
 * nothing: letters and digits are [A-Za-z0-9], there are no marks, and runs of anything else become one space.
 */
const displayWords = (value: string): string =>
  ascii.test(value) ? value.replace(/[^A-Za-z0-9]+/g, " ").toLowerCase().trim() : words(value)

/** The table and column values of one index row (object literals of one shape per table: the columns are the first row's keys). */
const rowOf = (rkey: number, type: string, row: IndexRow): readonly [Table, Record<string, unknown>] => {
  const param = row.code
  switch (row.kind) {
    case "token":
      return ["search_token", {
        rkey,
        type,
        param,
        // Bounded keys where the lookup index reads them, the whole text beside a cut key (indexKey.ts).
        system: keyOf(row.system),
        value: keyOf(row.value),
        system_full: fullText(row.system),
        value_full: fullText(row.value),
        // Normalised like strings: what `:text` compares.
        display: row.display == null ? null : displayWords(row.display),
        type_system: row.identifierType?.system ?? null,
        type_code: row.identifierType?.code ?? null
      }]
    case "string":
      return ["search_string", { rkey, type, param, normalized: keyOf(row.normalized), normalized_full: fullText(row.normalized), exact: row.exact }]
    case "date":
      return ["search_date", { rkey, type, param, low: row.low, high: row.high }]
    case "number":
      return ["search_number", { rkey, type, param, value: row.value, low: row.low, high: row.high }]
    case "quantity":
      return ["search_quantity", {
        rkey,
        type,
        param,
        value: row.value,
        system: row.system,
        unit: row.unit,
        canonical_value: row.canonicalValue ?? null,
        canonical_unit: row.canonicalUnit ?? null
      }]
    case "reference":
      return ["search_reference", {
        rkey,
        type,
        param,
        target_type: row.targetType,
        target_id: row.targetId,
        url: row.url,
        version: row.version ?? null,
        identifier_system: row.identifier?.system ?? null,
        identifier_value: row.identifier?.value ?? null
      }]
    case "uri":
      return ["search_uri", { rkey, type, param, value: keyOf(row.value), value_full: fullText(row.value) }]
    case "composite":
      return ["search_composite", { rkey, type, param, parts: JSON.stringify(row.parts) }]
    case "near":
      return ["search_near", { rkey, type, param, latitude: row.latitude, longitude: row.longitude }]
    case "compartment":
      return ["search_compartment", { rkey, type, compartment: row.code, target_id: row.targetId }]
  }
}

/**
 * On Postgres the DELETEs of every index table as one statement (data-modifying WITH queries all run): one round
 * trip where an update had ten.
 */
const removeAllText = `WITH ${indexTables.map((table, i) => `d${i} AS (DELETE FROM ${table} WHERE rkey = $1)`).join(", ")} SELECT 1`

/** Removes the index rows of the resource `rkey` (before its new version's are inserted). */
export const removeIndex = (sql: SqlClient.SqlClient, rkey: number): Effect.Effect<void, SqlError> =>
  sql.onDialectOrElse({
    pg: () => Effect.asVoid(sql.unsafe(removeAllText, [rkey])),
    orElse: () => Effect.forEach(indexTables, (table) => sql`DELETE FROM ${sql(table)} WHERE rkey = ${rkey}`, { discard: true })
  })

/** Rows by table, each table's in their order: as many rows per statement as the parameter limit allows. */
const insertRows = (sql: SqlClient.SqlClient, rows: ReadonlyArray<readonly [Table, Record<string, unknown>]>): Effect.Effect<void, SqlError> => {
  const byTable = new Map<Table, Array<Record<string, unknown>>>()
  for (const [table, values] of rows) {
    const list = byTable.get(table)
    if (list) list.push(values)
    else byTable.set(table, [values])
  }
  return Effect.forEach(byTable, ([table, values]) => insertMany(sql, table, values), { discard: true })
}

export const insertIndex = (sql: SqlClient.SqlClient, rkey: number, type: string, rows: ReadonlyArray<IndexRow>): Effect.Effect<void, SqlError> =>
  insertRows(sql, rows.map((row) => rowOf(rkey, type, row)))

export interface ResourceIndex {
  readonly rkey: number
  readonly type: string
  readonly rows: ReadonlyArray<IndexRow>
}

/** Replaces the index rows of many resources at once: one DELETE per table, then the inserts in chunks. */
export const replaceIndexes = (sql: SqlClient.SqlClient, resources: ReadonlyArray<ResourceIndex>): Effect.Effect<void, SqlError> => {
  if (resources.length === 0) return Effect.void
  const rkeys = resources.map((resource) => resource.rkey)
  return Effect.zipRight(
    Effect.forEach(indexTables, (table) => sql`DELETE FROM ${sql(table)} WHERE ${sql.in("rkey", rkeys)}`, { discard: true }),
    insertRows(sql, resources.flatMap((resource) => resource.rows.map((row) => rowOf(resource.rkey, resource.type, row))))
  )
}

/** Notes the index rows of a resource in `batch`, to be inserted with the batch. */
export const batchIndex = (batch: WriteBatch, rkey: number, type: string, rows: ReadonlyArray<IndexRow>): void => {
  for (const row of rows) {
    const [table, values] = rowOf(rkey, type, row)
    batch.add(table, values)
  }
}

/**
 * The index of a new version: a resource's first version only inserts. With a `batch`, the new rows
 * join it (an update's old rows are removed at once: the batch holds none of them, since a command
 * flushes it before it reads a resource it updates).
 */
export const writeIndex = (sql: SqlClient.SqlClient, rkey: number, type: string, version: number, rows: ReadonlyArray<IndexRow>, batch?: WriteBatch) => {
  const insert = batch === undefined ? insertIndex(sql, rkey, type, rows) : Effect.sync(() => batchIndex(batch, rkey, type, rows))
  return version === 1 ? insert : Effect.zipRight(removeIndex(sql, rkey), insert)
}
