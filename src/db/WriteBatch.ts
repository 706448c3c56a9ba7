/**
 * Rows a Writer command inserts, held back and written a table at a time in multi-row INSERTs: the
 * versions and search index rows of a transaction Bundle's resources cost a few statements instead of
 * several per resource. A command flushes the batch before it reads what the batch may hold, and the
 * Writer's transaction flushes it before it ends, so nothing is read or committed without it.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import { Pacer, workPerYield } from "./EventLoop.ts"
import { insertUnnestedParts, isPostgres, type TableRows, unnestedRowsPerStatement } from "./unnest.ts"

/** The most values one statement may bind: SQLite's SQLITE_MAX_VARIABLE_NUMBER (since 3.32) and Postgres's protocol limit. */
export const parameterLimit = { sqlite: 32766, pg: 65535 } as const

/**
 * The most values svc binds in one statement. On SQLite every statement text is prepared once and kept in
 * the writer's cache of prepared statements (up to 200), where it holds about 85 bytes per value (its
 * program and a slot per parameter): with statements up to the parameter limit, the sizes the index tables
 * had used held some 50 MB after a Synthea ingest. At 1,024 values a statement holds under 100 KB and a
 * Bundle takes a few more statements, for the same CPU per resource. Postgres keeps no statement: its
 * limit is the protocol's.
 */
export const valuesPerStatement = { sqlite: 1024, pg: parameterLimit.pg } as const

/** How many rows of `columns` values fit one statement. */
export const rowsPerStatement = (sql: SqlClient.SqlClient, columns: number): number =>
  Math.max(1, Math.floor(sql.onDialectOrElse({ pg: () => valuesPerStatement.pg, orElse: () => valuesPerStatement.sqlite }) / Math.max(1, columns)))

/**
 * The sizes of the statements that insert `count` rows, `max` at most each. On SQLite a statement's text
 * is prepared once and kept (the client's cache of prepared statements), and preparing one with a thousand
 * values costs some 0.2 to 0.4 ms: its sizes are powers of two, so that a few texts serve every count.
 */
export const chunkSizes = (sql: SqlClient.SqlClient, count: number, max: number): ReadonlyArray<number> => {
  const sizes: Array<number> = []
  const powers = sql.onDialectOrElse({ pg: () => false, orElse: () => true })
  let left = count
  while (left > 0) {
    let size = Math.min(left, max)
    if (powers) size = 2 ** Math.floor(Math.log2(size))
    sizes.push(size)
    left -= size
  }
  return sizes
}

/**
 * Inserts `rows` (all with the same columns, in the same order) into `table` in as few statements as
 * the parameter limit allows (see `chunkSizes`), in their order; on Postgres as arrays, one per column
 * (`insertTogether`).
 */
export const insertMany = (
  sql: SqlClient.SqlClient,
  table: string,
  rows: ReadonlyArray<Record<string, unknown>>
): Effect.Effect<void, SqlError> => {
  if (rows.length === 0) return Effect.void
  if (isPostgres(sql)) return insertTogether(sql, new Map([[table, rows]]))
  let start = 0
  const chunks = chunkSizes(sql, rows.length, rowsPerStatement(sql, Object.keys(rows[0]!).length)).map((size) => {
    const chunk = rows.slice(start, start + size)
    start += size
    return chunk
  })
  // Many rows (a large Bundle, a resource with thousands of index values) let other requests in between statements.
  const pacer = new Pacer(workPerYield)
  return Effect.forEach(chunks, (chunk) => Effect.zipRight(sql`INSERT INTO ${sql(table)} ${sql.insert(chunk)}`, pacer.step(chunk.length)), { discard: true })
}

/**
 * Postgres: the rows of every table in as few statements as `unnestedRowsPerStatement` rows a statement allows
 * (`insertUnnestedParts`): a table's rows in pieces of at most that many, pieces gathered into a statement while
 * they fit. A commit of a few resources is one round trip; a large Bundle's rows still let other requests in
 * between statements.
 */
const insertTogether = (sql: SqlClient.SqlClient, tables: ReadonlyMap<string, ReadonlyArray<Record<string, unknown>>>): Effect.Effect<void, SqlError> => {
  const statements: Array<Array<TableRows>> = []
  let current: Array<TableRows> = []
  let held = 0
  for (const [table, rows] of tables) {
    if (rows.length === 0) continue
    const columns = Object.keys(rows[0]!)
    for (let start = 0; start < rows.length; start += unnestedRowsPerStatement) {
      const count = Math.min(rows.length - start, unnestedRowsPerStatement)
      if (held + count > unnestedRowsPerStatement && current.length > 0) {
        statements.push(current)
        current = []
        held = 0
      }
      current.push({ table, columns, count, valueAt: (row, column) => rows[start + row]![columns[column]!] })
      held += count
    }
  }
  if (current.length > 0) statements.push(current)
  const pacer = new Pacer(workPerYield)
  return Effect.forEach(statements, (parts) =>
    Effect.zipRight(insertUnnestedParts(sql, parts), pacer.step(parts.reduce((sum, part) => sum + part.count, 0))), { discard: true })
}

/** A batch's rows at a point (`WriteBatch.mark`). */
export interface BatchMark {
  readonly tables: ReadonlyMap<string, Array<Record<string, unknown>>>
  readonly lengths: ReadonlyMap<string, number>
}

export class WriteBatch {
  private tables = new Map<string, Array<Record<string, unknown>>>()

  /** The resources (`type/id`) whose rows the batch holds, or held since its last flush. */
  private resources = new Set<string>()

  /** Notes that the rows added next are those of the resource `type/id` (`holds`). */
  about(type: string, id: string): void {
    this.resources.add(`${type}/${id}`)
  }

  /**
   * Whether the batch may hold rows of `type/id`: a command that reads or replaces that resource's rows flushes
   * the batch first (`settleFor` in src/store/commands.ts); one that reads no other needs no flush.
   */
  holds(type: string, id: string): boolean {
    return this.resources.has(`${type}/${id}`)
  }

  /** Notes a row for `table`; rows of a table are inserted in the order they were added. */
  add(table: string, row: Record<string, unknown>): void {
    const rows = this.tables.get(table)
    if (rows) rows.push(row)
    else this.tables.set(table, [row])
  }

  /**
   * What the batch holds now, to `restore` if what comes next is rolled back: a savepoint's rollback also undoes
   * an insert of these rows made after the mark (a flush), so they are held again rather than lost. Rows are
   * only ever appended to a table's array until a flush lets go of all of them, so a mark is the arrays and
   * their lengths, not a copy.
   */
  mark(): BatchMark {
    const lengths = new Map<string, number>()
    for (const [table, rows] of this.tables) lengths.set(table, rows.length)
    return { tables: this.tables, lengths }
  }

  /** Back to `mark`: the rows added since are dropped, and those held then are held again if flushed since. */
  restore(mark: BatchMark): void {
    const held = new Map<string, Array<Record<string, unknown>>>()
    for (const [table, length] of mark.lengths) {
      const rows = mark.tables.get(table)!
      if (length > 0) held.set(table, rows.length === length ? rows : rows.slice(0, length))
    }
    this.tables = held
  }

  /** Whether rows of `table` wait to be inserted. */
  holdsRowsOf(table: string): boolean {
    return (this.tables.get(table)?.length ?? 0) > 0
  }

  get isEmpty(): boolean {
    return this.tables.size === 0
  }

  /** Rows waiting to be inserted, of every table. */
  get size(): number {
    let rows = 0
    for (const table of this.tables.values()) rows += table.length
    return rows
  }

  /** Inserts what was added since the last flush. */
  flush(sql: SqlClient.SqlClient): Effect.Effect<void, SqlError> {
    if (this.tables.size === 0) return Effect.void
    const tables = this.tables
    this.tables = new Map()
    this.resources = new Set()
    if (isPostgres(sql)) return insertTogether(sql, tables)
    // The resources' own rows first (a create's, in a group commit): the rows about them follow.
    const ordered = [...tables].sort(([a], [b]) => (a === "resources" ? -1 : b === "resources" ? 1 : 0))
    return Effect.forEach(ordered, ([table, rows]) => insertMany(sql, table, rows), { discard: true })
  }
}
