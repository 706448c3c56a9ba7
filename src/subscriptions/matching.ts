/**
 * The exact test of a Subscription's criteria against the resources a commit changed: the criteria planned as a
 * search's WHERE condition (src/search/plan/query.ts, the same one a search of the criteria runs), limited to the
 * changed ids, so that chains, `_has` and every modifier mean what they mean in a search. It runs on a reader
 * after the commit, against the resources as they then stand (docs/subscriptions.md, "Matching").
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Effect } from "effect"
import { type MatchRestriction, whereCondition } from "../search/plan/query.ts"
import type { Criteria } from "./criteria.ts"

/** At most this many ids in one statement (a search value lists at most 1000 alternatives too). */
const idsPerStatement = 500

/**
 * The current versions (id → version) of those of `ids` (all of `criteria.type`) the criteria match; with a
 * `restriction` (a Subscription written under a token), only those its grant may read, chains and `_has`
 * reaching only what it may read too.
 */
export const matchingVersions = (
  sql: SqlClient.SqlClient,
  criteria: Criteria,
  ids: ReadonlyArray<string>,
  restriction?: MatchRestriction
): Effect.Effect<ReadonlyMap<string, number>, SqlError> =>
  Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const found = new Map<string, number>()
    for (let start = 0; start < ids.length; start += idsPerStatement) {
      const some = ids.slice(start, start + idsPerStatement)
      const rows = yield* sql<{ readonly id: string; readonly version: number | string }>`
        SELECT r.id, r.version FROM resources r
        WHERE r.type = ${criteria.type} AND ${sql.in("r.id", some)} AND ${
        restriction === undefined
          ? whereCondition(sql, criteria.search, now)
          : sql.and([whereCondition(sql, criteria.search, now, undefined, restriction.reach), ...(restriction.matches === undefined ? [] : [restriction.matches])])
      }`
      for (const row of rows) found.set(row.id, Number(row.version))
    }
    return found
  })
