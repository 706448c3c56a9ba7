/**
 * `Search.run`: a search (https://hl7.org/fhir/R4/search.html) on one type, across types or in a compartment,
 * as rows (src/search/SearchRows.ts): the page's matches, the total, what `_include`/`_revinclude` add and the
 * warnings, with the stored JSON text of each resource as it is. It renders nothing: the REST searchset Bundle
 * (src/rest/search.ts), GraphQL, `$export`, subscriptions and `/sync` each render the rows their own way.
 * docs/search.md, "Search.run", says what it takes and returns.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Effect, Option } from "effect"
import { Backfill } from "./Backfill.ts"
import { pageIncludes } from "./pageIncludes.ts"
import type { SearchScope } from "./parse/parseScope.ts"
import { keptRows, pageStatement, planSearch, type SearchInput, type SearchPlan } from "./plan/searchset.ts"
import type { SearchError, SearchRows } from "./SearchRows.ts"

export { defaultMaxPageBytes, type SearchInput } from "./plan/searchset.ts"
export { SearchError, type SearchIssue, type SearchPaging, type SearchRow, type SearchRows } from "./SearchRows.ts"

/** Runs a planned search with `sql`: the page (after a chain's targets), the total, then the included resources that fit the page. */
export const execute = (sql: SqlClient.SqlClient, plan: SearchPlan): Effect.Effect<SearchRows, SearchError | SqlError> =>
  Effect.gen(function*() {
    const [rows, total] = yield* Effect.all([
      plan.chained === undefined
        ? plan.page ?? Effect.succeed([])
        : Effect.flatMap(plan.chained.targets, (targets) => pageStatement(plan, targets.map((target) => target.id)) ?? Effect.succeed([])),
      plan.total === undefined ? Effect.succeed(undefined) : Effect.map(plan.total, (r) => Number(r[0]?.n ?? 0))
    ])
    const { included, keep } = yield* pageIncludes(sql, plan, keptRows(rows))
    return plan.rows(rows, total, included, keep)
  })

/**
 * The search of `type?params` (or of `scope`: several types, every type, a compartment's types) read with
 * `sql`: a reader, or the Writer's connection for a search inside a batch or transaction (it sees the Bundle's
 * own writes). A request that cannot be searched fails with a `SearchError`.
 */
export const run = (sql: SqlClient.SqlClient, input: SearchInput, scope: string | SearchScope): Effect.Effect<SearchRows, SearchError | SqlError> =>
  Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const plan = yield* planSearch(sql, input, scope, now)
    return yield* execute(sql, plan)
  })

/**
 * While the backfill rebuilds the index of a type, a search on it may miss resources written before the
 * change: a warning for each type searched that is being rebuilt (`undefined`: every type), for `SearchInput.warnings`.
 */
export const indexWarnings = (searched: string | ReadonlyArray<string> | undefined): Effect.Effect<ReadonlyArray<string>> =>
  Effect.gen(function*() {
    const backfill = yield* Effect.serviceOption(Backfill)
    if (Option.isNone(backfill)) return []
    const progress = yield* backfill.value.progress
    if (!progress.running) return []
    const types = searched === undefined ? progress.types : progress.types.filter((type) => typeof searched === "string" ? type === searched : searched.includes(type))
    const which = types.length === 1 ? types[0]! : types.length <= 6 ? types.join(", ") : `${types.slice(0, 6).join(", ")} and ${types.length - 6} more types`
    return types.length === 0 ? [] : [`The search index of ${which} is being rebuilt for changed search parameters (${progress.done} of ${progress.total} resources done): resources written before the change may be missing from these results`]
  })
