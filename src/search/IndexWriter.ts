/**
 * Writes a resource version's search index rows (migrations 0003 and 0005) inside the Writer's transaction:
 * a new resource only inserts; an update replaces its rows; a delete removes them.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import type { IndexRow } from "./extract/IndexRow.ts"
import { words } from "./extract/values.ts"

export const indexTables = [
  "search_token", "search_string", "search_date", "search_number", "search_quantity",
  "search_reference", "search_uri", "search_composite", "search_near", "search_compartment"
] as const

type Table = (typeof indexTables)[number]

/** The table and column values of one index row. */
const rowOf = (rkey: number, type: string, row: IndexRow): readonly [Table, Record<string, unknown>] => {
  const base = { rkey, type, param: row.code }
  switch (row.kind) {
    case "token":
      return ["search_token", {
        ...base,
        system: row.system,
        value: row.value,
        // Normalised like strings: what `:text` compares.
        display: row.display == null ? null : words(row.display),
        type_system: row.identifierType?.system ?? null,
        type_code: row.identifierType?.code ?? null
      }]
    case "string":
      return ["search_string", { ...base, normalized: row.normalized, exact: row.exact }]
    case "date":
      return ["search_date", { ...base, low: row.low, high: row.high }]
    case "number":
      return ["search_number", { ...base, value: row.value, low: row.low, high: row.high }]
    case "quantity":
      return ["search_quantity", {
        ...base,
        value: row.value,
        system: row.system,
        unit: row.unit,
        canonical_value: row.canonicalValue ?? null,
        canonical_unit: row.canonicalUnit ?? null
      }]
    case "reference":
      return ["search_reference", {
        ...base,
        target_type: row.targetType,
        target_id: row.targetId,
        url: row.url,
        version: row.version ?? null,
        identifier_system: row.identifier?.system ?? null,
        identifier_value: row.identifier?.value ?? null
      }]
    case "uri":
      return ["search_uri", { ...base, value: row.value }]
    case "composite":
      return ["search_composite", { ...base, parts: JSON.stringify(row.parts) }]
    case "near":
      return ["search_near", { ...base, latitude: row.latitude, longitude: row.longitude }]
    case "compartment":
      return ["search_compartment", { rkey, type, compartment: row.code, target_id: row.targetId }]
  }
}

// Several rows per statement, well under SQLite's limit on bound values.
const chunkSize = 200

export const removeIndex = (sql: SqlClient.SqlClient, rkey: number): Effect.Effect<void, SqlError> =>
  Effect.forEach(indexTables, (table) => sql`DELETE FROM ${sql(table)} WHERE rkey = ${rkey}`, { discard: true })

const insertRows = (sql: SqlClient.SqlClient, rows: ReadonlyArray<readonly [Table, Record<string, unknown>]>): Effect.Effect<void, SqlError> => {
  const byTable = new Map<Table, Array<Record<string, unknown>>>()
  for (const [table, values] of rows) {
    const list = byTable.get(table)
    if (list) list.push(values)
    else byTable.set(table, [values])
  }
  return Effect.forEach([...byTable], ([table, values]) =>
    Effect.forEach(
      Array.from({ length: Math.ceil(values.length / chunkSize) }, (_, i) => values.slice(i * chunkSize, (i + 1) * chunkSize)),
      (chunk) => sql`INSERT INTO ${sql(table)} ${sql.insert(chunk)}`,
      { discard: true }
    ), { discard: true })
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

/** The index of a new version: a resource's first version only inserts. */
export const writeIndex = (sql: SqlClient.SqlClient, rkey: number, type: string, version: number, rows: ReadonlyArray<IndexRow>) =>
  version === 1 ? insertIndex(sql, rkey, type, rows) : Effect.zipRight(removeIndex(sql, rkey), insertIndex(sql, rkey, type, rows))
