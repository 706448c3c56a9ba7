/**
 * A page bounded in bytes (docs/search.md, "Paging"): of the rows a page statement reads, in its order,
 * the contents of those that fit `server.max_page_bytes` are read, and only those. The sizes come first,
 * from `octet_length`, which SQLite answers from the record header and Postgres from the TOAST pointer,
 * without reading the text; a row whose content would take the page past the bound has its content left
 * unread (`kept` 0), and so has every row after it. The first row is always kept, however large: a
 * resource bigger than the bound comes back alone on its page.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Statement } from "@effect/sql"
import { limitOf } from "./query.ts"
import { type OrderKey, orderByKeys } from "./cursor.ts"

type Fragment = Statement.Fragment

/** The columns a bounded page adds to those of its rows. */
export interface BoundedColumns {
  /** 1 (or true) for the rows of the page, which carry their content; 0 for the rest. */
  readonly kept: number | string | boolean
  /** The text of version `version` of `rkey`, for kept rows; null otherwise (and for a delete). */
  readonly content: string | null
}

export const isKept = (row: BoundedColumns): boolean => row.kept === 1 || row.kept === "1" || row.kept === true

/**
 * `rows` (a statement whose columns include `rkey` and `version`, ordered and limited) with `kept` and
 * `content`: the first `count` rows in the order of `keys` (given on an alias) while their contents add up
 * to at most `maxBytes`. `keys` are read backwards when the rows are (a `previous` page).
 */
export const boundedPage = (
  sql: SqlClient.SqlClient,
  rows: Fragment,
  keys: (alias: string) => ReadonlyArray<OrderKey>,
  count: number,
  maxBytes: number,
  backwards = false
): Fragment => {
  const order = orderByKeys(sql, keys("k"), backwards)
  const kept = sql`p.n <= ${limitOf(sql, count)} AND (p.n = 1 OR p.running <= ${limitOf(sql, maxBytes)})`
  // Postgres pulls the sizes' subquery up into the windows' and then looks each size up twice (once for `size`,
  // once for `running`): `OFFSET 0` keeps it a subquery of its own, read once.
  const once = sql.onDialectOrElse({ pg: () => sql` OFFSET 0`, orElse: () => sql`` })
  return sql`SELECT p.*, CASE WHEN ${kept} THEN 1 ELSE 0 END AS kept,
      CASE WHEN ${kept} THEN (SELECT v.content FROM resource_versions v WHERE v.rkey = p.rkey AND v.version = p.version) END AS content
    FROM (
      SELECT k.*, row_number() OVER (ORDER BY ${order}) AS n, sum(k.size) OVER (ORDER BY ${order} ROWS UNBOUNDED PRECEDING) AS running
      FROM (
        SELECT c.*, coalesce((SELECT octet_length(v.content) FROM resource_versions v WHERE v.rkey = c.rkey AND v.version = c.version), 0) AS size
        FROM (${rows}) c${once}
      ) k
    ) p
    ORDER BY p.n`
}
